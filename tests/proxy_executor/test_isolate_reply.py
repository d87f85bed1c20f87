"""The one record a sandboxed child sends back (`IsolatedResult`, proxy_executor/isolate_result.py): a child's
output is untrusted, so a corrupt, truncated, oversized or hostile reply is one KernelError, never a crash."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from opwire.errors import BudgetError, DecodeError, KernelError
from opwire.proxy_executor import isolate, persistent
from opwire.proxy_executor.isolate import Child, run_in_child
from opwire.proxy_executor.isolate_result import decode_result, encode_result
from opwire.proxy_executor.sandbox import Limits
from opwire.schema import models as m
from opwire.serde import thrift
from opwire.serde.framing import write_header

pytestmark = pytest.mark.xdist_group("isolation_api")
LIMITS = Limits(max_memory=1 << 30, cpu_seconds=30, timeout=30, threads=1)
GOOD = encode_result({"a": bytes(range(256)) * 4, "b": b""})
_ERROR = m.IsolatedError(error_class="KernelError", message="x", budget="")
_HEAD = write_header("compact", "IsolatedResult")


def _two_members() -> bytes:
    """A union with both `blobs` and `error` set (spliced from two raw records: long-form field headers)."""
    blobs = thrift.encode(m.IsolatedResult(blobs={"a": b"1"}), framed=False)
    error = thrift.encode(m.IsolatedResult(error=_ERROR), framed=False)
    return _HEAD + blobs[:-1] + error


MALFORMED = {
    "truncated": (GOOD[: len(GOOD) // 2], "string length 1024 exceeds the"),
    "trailing bytes": (GOOD + b"x", "1 trailing bytes after the IsolatedResult value"),
    "no header": (b"\x00garbage", "it does not start with opwire's magic bytes"),
    "the old framing": (b"OK\x00\x00\x00\x00", "it does not start with opwire's magic bytes"),
    "another record": (thrift.encode(m.Values(values={})), "the file holds a Values, not a IsolatedResult"),
    "no member": (_HEAD + b"\x00", "union IsolatedResult needs exactly one member set, got 0 (none)"),
    "two members": (_two_members(), "union IsolatedResult needs exactly one member set, got 2 (blobs, error)"),
}


def _sending(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """The forked child sends `data` instead of its encoded result (the child is a fork: the patch is its code)."""
    monkeypatch.setattr(isolate, "encode_result", lambda reply: data)


def _work(body: Callable[[], dict[str, bytes]]) -> Callable[[Child], dict[str, bytes]]:
    def work(child: Child) -> dict[str, bytes]:
        child.ready()
        child.at("node 'n' (test)")
        return body()

    return work


def test_the_blobs_round_trip_through_one_record() -> None:
    sent = decode_result(GOOD, "node 'n'", running=True)
    assert sent.result() == {"a": bytes(range(256)) * 4, "b": b""} and sent.error is None
    assert sent.record is not None and sent.record.blobs is not None


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_reply_is_a_kernel_error_naming_the_node(kind: str) -> None:
    data, says = MALFORMED[kind]
    sent = decode_result(data, "node 'n' (test)", running=True)
    assert isinstance(sent.error, KernelError)
    assert str(sent.error).startswith(
        "the isolated child sent a malformed result while running node 'n' (test) (the isolated child's result: "
    ), str(sent.error)
    assert says in str(sent.error)
    with pytest.raises(KernelError):
        sent.result()


@pytest.mark.parametrize("kind", ["truncated", "the old framing", "two members"])
def test_a_child_sending_a_malformed_reply_is_one_kernel_error(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    data, says = MALFORMED[kind]
    _sending(monkeypatch, data)
    with pytest.raises(KernelError, match=r"^the isolated child sent a malformed result while running node 'n' ") as e:
        run_in_child(_work(lambda: {}), LIMITS).result()
    assert says in str(e.value)


def test_a_child_sending_nothing_is_one_kernel_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _sending(monkeypatch, b"")
    with pytest.raises(KernelError, match=r"^the isolated child sent no result while running node 'n' \(test\)$"):
        run_in_child(_work(lambda: {}), LIMITS).result()


def test_an_oversized_reply_stops_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent reads at most the memory budget and a MiB (`reply_budget`); past it the child is stopped."""
    monkeypatch.setattr(isolate, "reply_budget", lambda limits: 1 << 20)  # read by the parent only
    message = (
        "the isolated child sent a result of more than 1048576 bytes while running node 'n' (test), more than its "
        "execution-memory budget can have built; the child was stopped"
    )
    with pytest.raises(KernelError, match=f"^{re.escape(message)}$"):
        run_in_child(_work(lambda: {"big": b"x" * (4 << 20)}), LIMITS).result()


def test_a_hostile_error_record_is_an_opwire_error_with_its_message_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = m.IsolatedError(error_class="SystemExit", message="\x1b[2Jgone", budget="")
    _sending(monkeypatch, encode_result(hostile))
    with pytest.raises(KernelError, match=r"^\\x1b\[2Jgone$"):  # only opwire's classes: anything else a KernelError
        run_in_child(_work(lambda: {}), LIMITS).result()


def test_an_error_record_keeps_its_class_and_budget() -> None:
    sent = decode_result(
        encode_result(m.IsolatedError(error_class="BudgetError", message="too long", budget="timeout")), "n", True
    )
    assert isinstance(sent.error, BudgetError) and sent.error.budget == "timeout" and str(sent.error) == "too long"
    sent = decode_result(encode_result(m.IsolatedError(error_class="DecodeError", message="bad", budget="")), "n", True)
    assert isinstance(sent.error, DecodeError) and str(sent.error) == "bad"


def test_a_reply_of_another_member_than_asked_is_a_kernel_error() -> None:
    sent = decode_result(GOOD, "n", True)
    with pytest.raises(KernelError, match=r"^the isolated child sent blobs, not the values its work returns$"):
        sent.values()
    with pytest.raises(KernelError, match=r"^the isolated child sent blobs, not the report its work returns$"):
        sent.report()


def test_the_persistent_childs_error_is_read_strictly() -> None:
    got = persistent._error({"error_class": 3, "message": "m"})
    assert got.error_class == "KernelError" and got.message.startswith(
        "the isolated child sent a malformed error (the isolated child's error: "
    )
    good = {"error_class": "BudgetError", "message": "m", "budget": "max_memory"}
    assert persistent._error(good) == m.IsolatedError(**good)
