"""Kernel warnings in a guarded in-process run: collected through torch's own Python warning handler and re-issued as
OpwireWarnings naming the node, with the host's stderr (fd 2) never redirected (issue 25, item 2)."""

from __future__ import annotations

import os
import threading
import warnings

import pytest
import torch
from support.hostile_exec import node, program, t

import opwire
from opwire.errors import OpwireWarning
from opwire.proxy_executor import ProxyExecutor
from opwire.proxy_executor.guard import RunGuard, active_guard
from opwire.schema import models as m


def _resizing_program() -> m.OpwireArchive:
    """`o = empty([3]); out = add.out(x, x, out=o)` with a 16-element x: the kernel warns that it resized `o`."""
    sizes = m.Argument(as_ints=[3])
    nodes = [
        node("aten::empty.memory_format", {"size": sizes}, "o"),
        node("aten::add.out", {"self": t("x"), "other": t("x"), "out": t("o")}, "out"),
    ]
    nodes[1].name = "resizing_add"
    return program(nodes)


def test_a_kernel_warning_in_a_program_is_an_opwire_warning_naming_its_node() -> None:
    archive = _resizing_program()
    for _ in range(2):  # the second run warns again: nothing is deduplicated across runs
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = opwire.run_program(archive, (torch.ones(16),))
        assert out.tolist() == [2.0] * 16
        said = [str(w.message) for w in seen if w.category is OpwireWarning]
        assert len(said) == 1 and len(seen) == 1, [str(w.message) for w in seen]
        assert said[0].startswith("graph node 'resizing_add' (aten::add.out): the kernel warned: An output with")


def test_repeated_and_many_warnings_are_counted_and_bounded() -> None:
    """The same warning from one node is said once with its count; past 8 distinct ones, the rest are counted."""

    def resize(size: int) -> torch.Tensor:
        return torch.ops.aten.add.out(torch.ones(4), torch.ones(4), out=torch.ones(size))

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with RunGuard("test") as guard:
            for _ in range(3):
                guard.call("node a", resize, 3)
            for i in range(20):
                guard.call(f"node {i}", resize, 2)
    said = [str(w.message) for w in seen]
    assert said[0].startswith("node a: the kernel warned (3 times): An output with")
    assert len(said) == 9 and said[-1] == "test: 13 more kernel warnings"


def test_an_error_filter_still_gets_the_work_done_and_raises_the_opwire_warning() -> None:
    ex = ProxyExecutor()
    n = node("aten::add.out", {"self": t("x"), "other": t("x"), "out": t("o")}, "r")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(OpwireWarning, match=r"node \(aten::add.out\): the kernel warned: An output"):
            ex.call(n, {"x": torch.ones(4), "o": torch.ones(3)})


def test_an_exception_inside_a_guarded_call_keeps_its_type_and_the_guard_unwinds() -> None:
    class Boom(Exception):
        pass

    def work() -> None:
        raise Boom("inside")

    with pytest.raises(Boom, match="inside"), RunGuard("test") as guard:
        assert active_guard() is guard
        guard.call("node", work)
    assert active_guard() is None


def test_a_host_thread_writing_to_stderr_during_guarded_runs_keeps_every_line(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No descriptor is duplicated onto fd 2 in-process; another thread's lines all arrive, in order."""
    redirected: list[tuple[int, int]] = []
    real_dup2 = os.dup2

    def watching_dup2(fd: int, fd2: int, inheritable: bool = True) -> int:
        if fd2 == 2:
            redirected.append((fd, fd2))
        return real_dup2(fd, fd2, inheritable)

    monkeypatch.setattr(os, "dup2", watching_dup2)
    archive = _resizing_program()
    started = threading.Event()

    def host() -> None:
        started.set()
        for i in range(300):
            os.write(2, f"host line {i}\n".encode())

    writer = threading.Thread(target=host)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpwireWarning)
        writer.start()
        started.wait()
        for _ in range(30):
            opwire.run_program(archive, (torch.ones(16),))
        writer.join()
    err = capfd.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("host line")] == [f"host line {i}" for i in range(300)]
    assert "Warning: An output" not in err  # the kernel's warning went to Python, not to fd 2
    assert redirected == []


def test_a_torch_function_mode_stays_active_inside_and_does_not_see_the_carrier() -> None:
    from torch.overrides import TorchFunctionMode

    seen: list[str] = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Watch(), RunGuard("test") as guard:
        guard.call("node", lambda: torch.ones(2).sum())
    assert seen == ["ones", "sum"]


def test_a_program_run_with_an_observer_names_the_node_too() -> None:
    """The observed (and budgeted) loop runs each node through the same handler as the fast loop."""
    from opwire.proxy_executor import ProgramRunner

    seen: list[str] = []
    runner = ProgramRunner(_resizing_program(), observer=lambda n, _: seen.append(n.target))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner(torch.ones(16))
    assert seen == ["aten::empty.memory_format", "aten::add.out"]
    assert [str(w.message)[:53] for w in caught] == ["graph node 'resizing_add' (aten::add.out): the kernel"]
