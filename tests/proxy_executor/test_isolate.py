"""`isolate=True` from Python, and the sandboxed child itself (opwire/proxy_executor/isolate.py, sandbox.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import torch
from support.clirun import run_python
from support.isolation_escapes import refused
from support.isolation_files import program_calling, trace_calling, write_isolib

import opwire
from opwire.errors import BudgetError, KernelError
from opwire.proxy_executor import ProgramRunner, landlock, run_program, shared_values, syscalls
from opwire.proxy_executor.isolate import Child, run_in_child
from opwire.proxy_executor.sandbox import Limits, parse_size
from opwire.recording import Trace

pytestmark = pytest.mark.xdist_group("isolation_api")
LIMITS = Limits(max_memory=1 << 30, cpu_seconds=30, timeout=30, threads=1)


@pytest.fixture(scope="module")
def isolib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("isolib")
    write_isolib(d)
    return d


def _work(body: object) -> object:
    def work(child: Child) -> dict[str, bytes]:
        child.ready()
        child.at("node 'n' (test)")
        return body()  # type: ignore[operator,no-any-return]

    return work


def test_blobs_come_back_intact() -> None:
    data = bytes(range(256)) * 5000
    assert run_in_child(_work(lambda: {"a": data, "b": b""}), LIMITS).result() == {"a": data, "b": b""}


def test_the_reply_records_are_built_before_the_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models build on first use: the records a child reports with (an error's too) are built in the parent, so the
    sandbox never builds a validator under its memory and CPU limits."""
    from opwire.schema import models as m

    for model in (m.IsolatedError, m.IsolatedResult):
        monkeypatch.setattr(model, "__pydantic_complete__", False)
    built = bytes([m.IsolatedError.__pydantic_complete__, m.IsolatedResult.__pydantic_complete__])
    assert built == b"\x00\x00"
    seen = run_in_child(
        _work(
            lambda: {"built": bytes([m.IsolatedError.__pydantic_complete__, m.IsolatedResult.__pydantic_complete__])}
        ),
        LIMITS,
    ).result()
    assert seen == {"built": b"\x01\x01"}


def test_the_childs_stderr_reaches_the_hosts_escaped_and_bounded(capfd: pytest.CaptureFixture[str]) -> None:
    said = b"a kernel warning \x1b[2J from the child\n" + b"x" * (100 << 10)

    def loud() -> dict[str, bytes]:
        os.write(2, said)
        return {}

    run_in_child(_work(loud), LIMITS).result()
    err = capfd.readouterr().err
    assert "a kernel warning \\x1b[2J from the child" in err and "\x1b" not in err
    assert f"wrote {len(said) - (64 << 10)} more bytes on stderr, not shown" in err, err[-300:]


def test_a_signal_is_one_error_naming_the_label() -> None:
    with pytest.raises(KernelError, match=r"SIGSEGV\) while running node 'n' \(test\)"):
        run_in_child(_work(lambda: os.kill(os.getpid(), signal.SIGSEGV)), LIMITS).result()


def _open_for_writing(path: Path) -> dict[str, bytes]:
    with open(path, "w") as f:
        f.write("x")
    return {}


@pytest.mark.parametrize(
    "what",
    [
        "write",
        "append",
        "socket",
        "exec",
        "subprocess",
        "kill parent",
        "unlink",
    ],
)
def test_the_filter_refuses(what: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    actions = {
        "write": lambda: _open_for_writing(tmp_path / "new"),
        "append": lambda: open(victim, "a").write("x"),
        "socket": lambda: socket.socket(),
        "exec": lambda: os.execv("/bin/true", ["true"]),
        "subprocess": lambda: subprocess.run(["true"]),
        "kill parent": lambda: os.kill(os.getppid(), signal.SIGTERM),
        "unlink": lambda: os.unlink(victim),
    }
    with pytest.raises(KernelError, match=r"the sandbox refused a system call .*Operation not permitted"):
        run_in_child(_work(actions[what]), LIMITS).result()
    assert victim.read_text() == "keep" and not (tmp_path / "new").exists()


@pytest.mark.skipif(not landlock.abi_version(), reason="the kernel has no Landlock (reads are not confined)")
def test_a_read_outside_the_installation_is_the_sandboxs_refusal() -> None:
    with pytest.raises(KernelError, match=r"node 'n' \(test\): the sandbox refused a system call .*Permission denied"):
        run_in_child(_work(lambda: open("/etc/passwd", "rb").read()), LIMITS).result()


def test_threads_and_torch_work_but_reading_outside_the_installation_does_not() -> None:
    def body() -> dict[str, bytes]:
        import threading

        read: list[str] = []

        def outside() -> None:
            try:
                read.append(open("/etc/hostname", "rb").read().decode())
            except OSError as exc:
                read.append(exc.strerror or "")

        reader = threading.Thread(target=outside)
        reader.start()  # threads may start inside the sandbox (torch's intra-op pool stays at one thread:
        reader.join()  # OpenMP cannot start a pool in a child forked after the parent ran parallel work)
        a = torch.randn(256, 256)
        return {"sum": str(float((a @ a).abs().sum() > 0)).encode(), "host": read[0].encode()}

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the parent runs parallel work first (the suite's processes default to one thread)
    try:
        a = torch.randn(512, 512)
        (a @ a).sum()
        out = run_in_child(_work(body), LIMITS).result()
    finally:
        torch.set_num_threads(before)
    assert out["sum"] == b"1.0"
    # Landlock confines reads to the Python and torch installation (a kernel without it: only writes are refused)
    assert out["host"] == (b"Permission denied" if landlock.abi_version() else open("/etc/hostname", "rb").read())


_BEFORE_THE_FILTER = """
import json, sys, threading
import torch
sys.path.insert(0, sys.argv[1])
import isolib
from opwire.proxy_executor.isolate import run_in_child
from opwire.proxy_executor.sandbox import Limits

def work(child):
    torch.set_num_threads(2)
    (torch.randn(1 << 20) * 2).sum()  # OpenMP's pool starts before the filter, as a copy of an input would start it
    go, out = threading.Event(), {}
    waiting = threading.Thread(target=lambda: (go.wait(), out.update(isolib._escapes("thread"))))
    waiting.start()  # a Python thread that exists before the filter, too
    child.ready()
    go.set()
    waiting.join()
    tables = isolib.attack("api")
    tables["thread"] = out
    return {"tables": json.dumps(tables).encode()}

print(run_in_child(work, Limits(max_memory=1 << 30, timeout=60)).result()["tables"].decode())
"""


def test_threads_started_before_the_filter_are_under_it(isolib: Path, tmp_path: Path) -> None:
    """TSYNC: OpenMP workers and a Python thread that exist when the child enters the sandbox are filtered too."""
    (tmp_path / "victim").write_text("keep")
    proc = run_python(_BEFORE_THE_FILTER, isolib, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tables = json.loads(proc.stdout)
    assert len(tables["seccomp"]) >= 3 and set(tables["seccomp"].values()) == {"2"}, tables["seccomp"]
    for where in ("main", "openmp", "thread"):
        for name, got in tables[where].items():
            assert got in refused(name), f"{where}: {name}: {got}"
    assert (tmp_path / "victim").read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["victim"]


def test_memory_and_wall_time_are_budgets() -> None:
    with pytest.raises(BudgetError, match=r"node 'n' \(test\) ran out of the execution-memory budget \(0\.25 GiB"):
        run_in_child(_work(lambda: torch.ones(3 << 28)), Limits(max_memory=256 << 20, timeout=120)).result()
    with pytest.raises(BudgetError, match=r"node 'n' \(test\) ran past the wall-time budget of 0\.5 s"):
        run_in_child(_work(lambda: __import__("time").sleep(30)), Limits(max_memory=1 << 30, timeout=0.5)).result()


def test_parse_size() -> None:
    assert parse_size("4G") == 4 << 30 and parse_size("512M") == 512 << 20 and parse_size("2GiB") == 2 << 30
    with pytest.raises(ValueError):
        parse_size("-1")


def test_run_program_isolated_matches_in_process(isolib: Path) -> None:
    archive = program_calling("ok")
    x = torch.randn(2, 4)
    assert torch.equal(run_program(archive, (x,), isolate=True), run_program(archive, (x,)))


def test_a_crashing_op_from_python_is_a_kernel_error_naming_the_node(isolib: Path) -> None:
    with pytest.raises(KernelError, match=r"SIGSEGV\) while running graph node 'segv' \(torch\.ops\.opwire_iso\.segv"):
        run_program(program_calling("segv"), (torch.randn(2, 4),), isolate=True)


def test_program_runner_isolated_keeps_its_buffers() -> None:
    class Count(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("n", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            self.n.add_(1)
            return (x * self.n, x.sum())

    archive = opwire.serde.torch_bridge.archive_from_exported_program(torch.export.export(Count(), (torch.ones(3),)))
    inside, outside = ProgramRunner(archive, isolate=True), ProgramRunner(archive)
    for _ in range(2):
        a, b = inside(torch.ones(3)), outside(torch.ones(3))
        assert isinstance(a, tuple) and all(torch.equal(p, q) for p, q in zip(a, b, strict=True))
    assert torch.equal(inside.state["n"], outside.state["n"]) and float(inside.state["n"]) == 2.0


def test_replay_isolated_matches_in_process(isolib: Path) -> None:
    trace = Trace(trace_calling("ok"))
    a, b = opwire.replay(trace, isolate=True), opwire.replay(trace)
    assert a.ok and b.ok and a.replayed == b.replayed == 2
    with pytest.raises(KernelError, match=r"SIGSEGV\) while running call 1 \(opwire_iso::segv"):
        opwire.replay(Trace(trace_calling("segv")), isolate=True)


def test_the_persistent_runner_serves_a_thousand_calls_from_one_child(isolib: Path) -> None:
    archive = program_calling("ok")
    inside, outside = ProgramRunner(archive, isolate=True), ProgramRunner(archive)
    torch.manual_seed(1)
    try:
        for _ in range(1000):
            x = torch.randn(2, 4)
            assert torch.equal(inside(x), outside(x))
        child = inside.__dict__["_isolated_children"]
        assert [c.started for c in child.values()] == [1]  # one child served every call
    finally:
        inside.close()


def test_the_persistent_runner_survives_errors_and_restarts_after_a_crash(isolib: Path) -> None:
    runner = ProgramRunner(program_calling("moody"), isolate=True)
    (child,) = [runner._isolated_child()]
    big, ok = torch.ones(2, 4) * 1e4, torch.randn(2, 4) * 0.1  # the op sees relu(linear(x)): big x, a big sum
    try:
        with pytest.raises(KernelError, match=r"graph node 'moody' .*the sandbox refused a system call"):
            runner(big)
        assert torch.equal(runner(ok), ProgramRunner(program_calling("moody"))(ok)) and child.started == 1
        with pytest.raises(KernelError, match=r"SIGSEGV\) while running graph node 'moody' \(torch\.ops\.opwire_iso"):
            runner(big * 1e4)
        assert torch.equal(runner(ok), ProgramRunner(program_calling("moody"))(ok)) and child.started == 2
    finally:
        runner.close()


def test_security_md_renders_the_allowlist() -> None:
    text = (Path(__file__).parents[2] / "SECURITY.md").read_text()
    begin, end = "<!-- syscalls.markdown() begin -->\n", "\n<!-- syscalls.markdown() end -->"
    shown = text[text.index(begin) + len(begin) : text.index(end)]
    assert shown == syscalls.markdown(), (
        "SECURITY.md's syscall table differs from opwire/proxy_executor/syscalls.py: paste the output of "
        "python -c 'from opwire.proxy_executor.syscalls import markdown; print(markdown())' between its markers"
    )


@pytest.mark.parametrize(
    ("layout", "says"),
    [
        ("not a list", "expected a list"),
        ([{"k": "x"}], "expected a value layout"),
        ([{"k": "v", "v": [1]}], "expected a number, a bool or None"),
        ([{"k": "t", "dtype": "object", "shape": [1], "off": 0, "n": 4}], "expected a dtype of"),
        ([{"k": "t", "dtype": "float32", "shape": [-1], "off": 0, "n": 4}], "expected a shape"),
        ([{"k": "t", "dtype": "float32", "shape": [2], "off": 0, "n": 4}], "takes 8 bytes; the layout says 4"),
        ([{"k": "t", "dtype": "float32", "shape": [1 << 20], "off": 0, "n": 4 << 20}], "of a 65536-byte region"),
        ([{"k": "t", "dtype": "float32", "shape": [1], "off": 65534, "n": 4}], "at offset 65534"),
    ],
)
def test_a_hostile_output_layout_is_a_kernel_error(layout: object, says: str) -> None:
    """The persistent child's outputs are data from a process assumed compromised: each layout entry is checked."""
    region = shared_values.Region("test")
    try:
        region.ensure(1)
        with pytest.raises(KernelError, match=re.escape(says)):
            shared_values.read(region.buf, layout, region.cap, "the isolated child's outputs")
        with pytest.raises(OSError):  # sealed: not even the parent's own descriptor can shrink it
            os.ftruncate(region.fd, 0)
    finally:
        region.close()


_LOCATED = """
import ctypes.util, json, mmap, os, sys
assert "pyseccomp" not in sys.modules
shared = mmap.mmap(-1, 1 << 16)  # MAP_SHARED: a child's calls land here too (its descriptors are closed)
find = ctypes.util.find_library
def counted(name):
    shared.write((json.dumps([os.getpid(), name]) + "\\n").encode())
    return find(name)
ctypes.util.find_library = counted
from opwire.proxy_executor.isolate import run_in_child
from opwire.proxy_executor.sandbox import Limits
for _ in range(3):
    run_in_child(lambda child: (child.ready(), {})[1], Limits(max_memory=1 << 30, timeout=60)).result()
calls = [json.loads(line) for line in shared[:].rstrip(b"\\0").decode().splitlines()]
print(json.dumps({"host": os.getpid(), "calls": calls}))
"""


def test_libseccomp_is_located_once_by_the_host_not_by_each_child() -> None:
    """pyseccomp's import runs `ldconfig -p` twice (find_library): the host imports it before forking."""
    proc = run_python(_LOCATED, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = json.loads(proc.stdout)
    assert said["calls"] == [[said["host"], "c"], [said["host"], "seccomp"]], said
