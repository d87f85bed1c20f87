"""The one record a sandboxed child sends its parent (`IsolatedResult`, opwire.thrift), and what the parent makes of it.

The child's work returns named byte strings, a program's `Values` or a replay's `ReplayWorkerReport`; what it
raises becomes an `IsolatedError` (class, message, budget). Either travels as one `IsolatedResult` in Thrift
compact with opwire's header (`encode_result`). The parent reads a reply no larger than the child's memory budget
and a MiB (`reply_budget`) and decodes it with opwire's strict decoder (`decode_result`): a child's output is
untrusted, so a reply that is not exactly one such record is one KernelError naming what the child was running,
and an error record is raised only as one of opwire's own error classes, its message escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar

from opwire.errors import (
    BindError,
    BudgetError,
    DecodeError,
    EncodeError,
    KernelError,
    OpwireError,
    UnknownTargetError,
    describe_exception,
    printable,
)
from opwire.proxy_executor.sandbox import Limits
from opwire.schema import models as m
from opwire.serde import thrift

__all__ = [
    "Outcome", "Reply", "build_reply_models", "decode_result", "encode_result", "error_record", "oversized_error",
    "rebuild", "reply_budget",
]  # fmt: skip

Reply = dict[str, bytes] | m.Values | m.ReplayWorkerReport
"""What a child's work returns: named byte strings, a program's values or a replay's partial report."""
T = TypeVar("T")

_ERRORS: dict[str, type[OpwireError]] = {
    c.__name__: c
    for c in (OpwireError, DecodeError, EncodeError, BindError, UnknownTargetError, KernelError, BudgetError)
}
_OUT_OF_MEMORY = ("can't allocate memory", "not enough memory", "cannot allocate memory", "std::bad_alloc")


@dataclass
class Outcome:
    """What came back: the named blobs (or the record the work returned), or the error; `running` is True when the
    child had entered the sandbox."""

    blobs: dict[str, bytes]
    error: OpwireError | None
    running: bool
    record: m.IsolatedResult | None = None  # the child's reply, when it sent a well-formed one

    def result(self) -> dict[str, bytes]:
        """The blobs, or raise the error."""
        return self._member("blobs", dict)

    def values(self) -> m.Values:
        """The program's values the work returned, or raise the error."""
        return self._member("values", m.Values)

    def report(self) -> m.ReplayWorkerReport:
        """The replay's partial report the work returned, or raise the error."""
        return self._member("report", m.ReplayWorkerReport)

    def _member(self, name: Literal["blobs", "values", "report"], kind: type[T]) -> T:
        if self.error is not None:
            raise self.error
        got = getattr(self.record, name, None) if self.record is not None else None
        if not isinstance(got, kind):
            sent = next((k for k, v in self.record or () if v is not None), "nothing")
            raise KernelError(f"the isolated child sent {sent}, not the {name} its work returns")
        return got


def reply_budget(limits: Limits) -> int:
    """The most bytes a child's reply may take: its memory budget, and a MiB for the record around the values."""
    return limits.max_memory + (1 << 20)


def error_record(exc: BaseException, label: str, limits: Limits | None) -> m.IsolatedError:
    """The class, message and budget of what the child raised while running `label` (memory exhaustion as the
    memory budget of `limits`)."""
    text = f"{exc} {exc.__cause__ or ''}".lower()
    refused = isinstance(exc, OSError) and exc.errno in (1, 13)  # EPERM: seccomp; EACCES: Landlock
    said = ("[errno 1] operation not permitted", "[errno 13] permission denied")
    refused = refused or (isinstance(exc, KernelError) and any(s in text for s in said))
    if isinstance(exc, MemoryError) or (not isinstance(exc, BudgetError) and any(s in text for s in _OUT_OF_MEMORY)):
        budget = f"{limits.max_memory / (1 << 30):.3g} GiB" if limits is not None else "the memory"
        return m.IsolatedError(
            error_class="BudgetError",
            budget="max_memory",
            message=f"{label} ran out of the execution-memory budget ({budget}; {describe_exception(exc)}); "
            "pass a larger max_memory= (CLI: --max-memory) if the file is trusted",
        )
    if refused:
        return _kernel_error(
            f"{label}: the sandbox refused a system call ({describe_exception(exc)}): an isolated "
            "run may not write files, read files outside the Python and torch installation, start programs or "
            "open sockets (run a trusted file with --no-isolate / isolate=False)"
        )
    if isinstance(exc, OpwireError):
        return m.IsolatedError(error_class=type(exc).__name__, message=str(exc), budget=getattr(exc, "budget", ""))
    return _kernel_error(f"{label} failed in the isolated child: {describe_exception(exc)}")


def _kernel_error(message: str) -> m.IsolatedError:
    return m.IsolatedError(error_class="KernelError", message=message, budget="")


def rebuild(rec: m.IsolatedError) -> OpwireError:
    """The opwire error an error record describes (only opwire's own classes; anything else a KernelError)."""
    cls = _ERRORS.get(rec.error_class, KernelError)
    message = printable(rec.message)
    return BudgetError(message, printable(rec.budget)) if cls is BudgetError else cls(message)


def build_reply_models() -> None:
    """Build the reply records' validators here, in the parent: models build on first use, and a child forked after
    inherits them, so reporting an error never builds one inside the sandbox, under its memory and CPU limits."""
    for model in (m.IsolatedError, m.IsolatedResult):
        if not model.__pydantic_complete__:
            model.model_rebuild()


def encode_result(reply: Reply | m.IsolatedError) -> bytes:
    """The bytes a child sends: `reply` (or the error) as one `IsolatedResult`, Thrift compact with opwire's header."""
    if isinstance(reply, m.IsolatedError):
        record = m.IsolatedResult(error=reply)
    elif isinstance(reply, m.Values):
        record = m.IsolatedResult(values=reply)
    elif isinstance(reply, m.ReplayWorkerReport):
        record = m.IsolatedResult(report=reply)
    else:
        record = m.IsolatedResult(blobs=reply)
    return thrift.encode(record, "compact")


def decode_result(data: bytes, label: str, running: bool) -> Outcome:
    """What the child's reply `data` says, read strictly (a child's output is untrusted): its results, the error it
    reports, or a KernelError naming `label` when it is not exactly one `IsolatedResult`."""
    if not data:
        return Outcome({}, KernelError(f"the isolated child sent no result while running {label}"), running)
    try:
        record = thrift.decode(data, m.IsolatedResult, "compact", framed=True, source="the isolated child's result")
    except DecodeError as exc:
        return Outcome(
            {}, KernelError(f"the isolated child sent a malformed result while running {label} ({exc})"), running
        )
    if record.error is not None:
        return Outcome({}, rebuild(record.error), running, record)
    return Outcome(record.blobs or {}, None, running, record)


def oversized_error(label: str, budget: int) -> OpwireError:
    """The error of a child whose reply ran past `budget` bytes (`reply_budget`) while running `label`."""
    return KernelError(
        f"the isolated child sent a result of more than {budget} bytes while running {label}, more "
        "than its execution-memory budget can have built; the child was stopped"
    )
