"""Kernel warnings on the executor's fast paths (`call`, `call_function`, an AOTInductor extern-node file): collected
through torch's warning handler, re-issued as OpwireWarnings naming the node, never printed on fd 2; a subclass's
`__torch_function__` and a torch function mode still run, and the host's own warnings and stderr are untouched
(issue 25, item 2: "every call guarded")."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from support.clirun import run_python
from support.hostile_exec import node, t
from torch.overrides import TorchFunctionMode

import opwire
from opwire.errors import OpwireWarning
from opwire.proxy_executor import ProxyExecutor
from opwire.schema import models as m

VAR = "var(): degrees of freedom is <= 0"  # aten::var of one element: TORCH_WARN on every call
STD = "std(): degrees of freedom is <= 0"
UINT8 = "indexing with dtype torch.uint8 is now deprecated"


def _executor(*nodes: tuple[str, m.Node]) -> ProxyExecutor:
    return ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name=n, node=nd) for n, nd in nodes]))


def _var(name: str = "buf0") -> ProxyExecutor:
    return _executor((name, node("aten::var", {"self": t("x")}, "y")))


def _opwire_said(seen: list[warnings.WarningMessage]) -> list[str]:
    assert all(w.category is OpwireWarning for w in seen), [(w.category, str(w.message)) for w in seen]
    return [str(w.message) for w in seen]


def test_call_and_call_function_reissue_a_kernel_warning_and_leave_fd_2_alone(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Every fast path of an admitted, unseeded op: the index path of call and call_function (one tensor in), by name,
    the node-object path, and call_function with ints (std.dim)."""
    ex = _var()
    std = _executor(("s", node("aten::std.dim", {"self": t("x"), "dim": m.Argument(as_ints=[0])}, "y")))
    one = torch.ones(1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert ex.call(0, {"x": one})["y"].isnan()
        assert ex.call("buf0", {"x": one})["y"].isnan()
        assert ex.call(ex.nodes.nodes[0].node, {"x": one})["y"].isnan()
        (out,) = ex.call_function(0, [], [one, None])
        assert out.isnan()
        (out,) = std.call_function(0, [0], [torch.ones(1, 2), None])
        assert out.isnan().all()
    said = _opwire_said(seen)
    assert len(said) == 5
    assert all(said[i].startswith(f"extern node 0 'buf0' (aten::var): the kernel warned: {VAR}") for i in (0, 1, 3))
    assert said[2].startswith(f"node (aten::var): the kernel warned: {VAR}")  # a node object: its own plan
    assert said[4].startswith(f"extern node 0 's' (aten::std.dim): the kernel warned: {STD}")
    assert all(w.filename == __file__ for w in seen)  # said at the host's call, not inside opwire
    assert "degrees of freedom" not in capfd.readouterr().err


def test_the_general_paths_of_call_and_call_function_collect_too(capfd: pytest.CaptureFixture[str]) -> None:
    """`index.Tensor` takes a list of optional tensors: neither fast path applies."""
    ex = _executor(("idx", node("aten::index.Tensor", {"self": t("x"), "indices": _opt_tensors("i")}, "y")))
    x, i = torch.arange(3.0), torch.tensor([1, 0, 1], dtype=torch.uint8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert ex.call(0, {"x": x, "i": i})["y"].tolist() == [0.0, 2.0]
        assert ex.call_function(0, [], [x, i, None])[0].tolist() == [0.0, 2.0]
    said = _opwire_said(seen)
    assert len(said) == 2 and all(
        s.startswith(f"extern node 0 'idx' (aten::index.Tensor): the kernel warned: {UINT8}") for s in said
    )
    assert "uint8" not in capfd.readouterr().err


def _opt_tensors(name: str) -> m.Argument:
    return m.Argument(as_optional_tensors=[m.OptionalTensorArgument(as_tensor=m.TensorArgument(name=name))])


def test_an_aoti_extern_node_file_run_by_call_function_in_a_fresh_process(tmp_path: Path) -> None:
    """The host's fd 2 gets its own lines and its own warning only; the kernel's warning comes back as OpwireWarning."""
    nodes = m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=node("aten::var", {"self": t("x")}, "y"))])
    path = tmp_path / "abc.wrapper.json"
    path.write_bytes(opwire.dumps(nodes))
    code = (
        "import os, sys, warnings, torch\n"
        "from opwire.proxy_executor import ProxyExecutor\n"
        f"ex = ProxyExecutor({str(path)!r})\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(3):\n"
        "        ex.call_function(0, [], [torch.ones(1), None])\n"
        "print([(w.category.__name__, str(w.message)[:60]) for w in seen])\n"
        "os.write(2, b'host line\\n')\n"
        "warnings.warn('the host says so')\n"
        "ex.call_function(0, [], [torch.ones(1), None])\n"  # outside catch_warnings: the default filters show it
    )
    env = {**os.environ, "PYTHONPATH": str(Path(opwire.__file__).parents[1])}  # this opwire, whatever the cwd
    proc = run_python(code, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    opwire_said = ("OpwireWarning", "extern node 0 'buf0' (aten::var): the kernel warned: var(): ")
    assert proc.stdout.strip() == repr([opwire_said] * 3)
    lines = proc.stderr.splitlines()
    assert lines[0] == "host line"
    assert lines[1] == "<string>:10: UserWarning: the host says so"
    assert lines[2].startswith(
        f"<string>:11: OpwireWarning: extern node 0 'buf0' (aten::var): the kernel warned: {VAR}"
    )
    assert len(lines) == 3  # nothing from c10's handler ("[W... Warning: var(): ...")


class _Logged(torch.Tensor):
    """A subclass whose `__torch_function__` logs what it sees (and runs it as torch would)."""

    seen: ClassVar[list[str]] = []

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        cls.seen.append(str(func))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_subclass_torch_function_still_runs_and_its_kernel_warning_is_collected(
    capfd: pytest.CaptureFixture[str],
) -> None:
    ex = _var()
    x = torch.ones(1).as_subclass(_Logged)
    _Logged.seen.clear()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        y = ex.call(0, {"x": x})["y"]
        (z,) = ex.call_function(0, [], [x, None])
    assert type(y) is _Logged and type(z) is _Logged  # the subclass's handling made the results
    assert [f for f in _Logged.seen if f.startswith("aten.")] == ["aten.var.default", "aten.var.default"]
    assert not any("apply_" in f for f in _Logged.seen)  # (the checks' own numel() calls are seen too)
    assert [s[:60] for s in _opwire_said(seen)] == ["extern node 0 'buf0' (aten::var): the kernel warned: var(): "] * 2
    assert "degrees of freedom" not in capfd.readouterr().err


def test_a_torch_function_mode_sees_the_op_and_not_the_binding(capfd: pytest.CaptureFixture[str]) -> None:
    seen_by_mode: list[str] = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen_by_mode.append(str(func))
            return func(*args, **(kwargs or {}))

    ex = _var()
    with warnings.catch_warnings(record=True) as seen, Watch():
        warnings.simplefilter("always")
        ex.call(0, {"x": torch.ones(1)})
        ex.call_function(0, [], [torch.ones(1), None])
    assert [f for f in seen_by_mode if f.startswith("aten.")] == ["aten.var.default", "aten.var.default"]
    assert not any("apply_" in f for f in seen_by_mode)  # the carrier's own call is hidden from the mode
    assert len(_opwire_said(seen)) == 2
    assert "degrees of freedom" not in capfd.readouterr().err


def test_a_host_filter_put_in_front_decides_on_the_opwire_warning_not_on_the_raw_text() -> None:
    ex = _var()
    ex.call_function(0, [], [torch.ones(2), None])  # no warning: the entry is in place
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # in front of everything
        with pytest.raises(OpwireWarning, match=r"extern node 0 'buf0' \(aten::var\): the kernel warned: var\(\)"):
            ex.call(0, {"x": torch.ones(1)})
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()  # no filter at all
        warnings.simplefilter("ignore", OpwireWarning)
        assert ex.call(0, {"x": torch.ones(1)})["y"].isnan()
    assert seen == []


_THREADS = """
import json, os, sys, threading, warnings, torch
from support.hostile_exec import node, t
from opwire.proxy_executor import ProxyExecutor
from opwire.schema import models as m

nodes = [m.ExternKernelNode(name=n, node=node("aten::var", {"self": t("x")}, "y")) for n in ("a", "b")]
ex = ProxyExecutor(m.ExternKernelNodes(nodes=nodes))
start = threading.Barrier(3)

def work(index):
    start.wait()
    for _ in range(50):
        ex.call_function(index, [], [torch.ones(1), None])

def host():
    start.wait()
    for i in range(50):
        warnings.warn(f"host {i}", UserWarning, stacklevel=1)

with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    threads = [threading.Thread(target=work, args=(0,)), threading.Thread(target=work, args=(1,))]
    threads.append(threading.Thread(target=host))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
print(json.dumps([str(w.message) for w in seen]))
"""


def test_each_thread_gets_its_own_nodes_warnings_and_the_host_thread_keeps_its_own(tmp_path: Path) -> None:
    """Two threads call two nodes while a third warns for itself. In a process of its own: `catch_warnings` swaps the
    process-wide `showwarning`, so a thread an earlier test left running in this worker (whose own
    `catch_warnings` ends mid-test) could put it back under this one and take its warnings elsewhere."""
    tests = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(opwire.__file__).parents[1]), str(tests)])}
    proc = run_python(_THREADS, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said: list[str] = json.loads(proc.stdout)
    assert sum(s.startswith(f"extern node 0 'a' (aten::var): the kernel warned: {VAR}") for s in said) == 50
    assert sum(s.startswith(f"extern node 1 'b' (aten::var): the kernel warned: {VAR}") for s in said) == 50
    assert sorted(s for s in said if s.startswith("host ")) == sorted(f"host {i}" for i in range(50))
    assert len(said) == 150
    assert "degrees of freedom" not in proc.stderr


def test_a_dispatch_mode_runs_with_the_torch_function_state_a_direct_call_gives_it() -> None:
    """Under a dispatch mode the op takes the carrier (its Python code sees subclass handling on, as under
    `torch.ops`), and the kernel's warning is still collected."""
    from torch.utils._python_dispatch import TorchDispatchMode

    states: list[tuple[str, bool]] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            states.append((str(func), torch._C._is_torch_function_enabled()))
            return func(*args, **(kwargs or {}))

    ex = _var()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with Watch():
            torch.ops.aten.var.default(torch.ones(2))
            ex.call(0, {"x": torch.ones(1)})
            ex.call_function(0, [], [torch.ones(1), None])
    var_states = [s for s in states if s[0].startswith("aten.var")]  # var.default decomposes to var.correction
    assert var_states == [("aten.var.correction", True)] * 3
    assert len(_opwire_said(seen)) == 2


def test_a_kernel_that_warns_then_raises_keeps_its_own_error(capfd: pytest.CaptureFixture[str]) -> None:
    """torch hands the warnings of a failed call over with the error pending: the KernelError names the kernel's
    IndexError (not a SystemError from the warnings machinery), and nothing reaches fd 2. Through the carrier (a
    subclass input) the warning is said first; through the cheap binding it is dropped (SECURITY.md's limits)."""
    from opwire.errors import KernelError

    ex = _executor(("idx", node("aten::index.Tensor", {"self": t("x"), "indices": _opt_tensors("i")}, "y")))
    x, short = torch.arange(3.0), torch.tensor([1, 0], dtype=torch.uint8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ex.call(0, {"x": x, "i": torch.tensor([1, 0, 1], dtype=torch.uint8)})  # warns: Python's registry is made
        for inputs in ({"x": x, "i": short}, {"x": x.as_subclass(_Logged), "i": short}):
            with pytest.raises(KernelError, match=r"the kernel raised IndexError: The shape of the mask \[2\]") as err:
                ex.call(0, inputs)
            assert type(err.value.__cause__) is IndexError
    said = _opwire_said(seen)
    assert len(said) == 2 and all(UINT8 in s for s in said)  # the first call's, and the carrier's failed call's
    assert "uint8" not in capfd.readouterr().err
