"""Files for the isolation tests: a user op library (`isolib.py`) whose ops crash, write, allocate or sleep,
and programs, extern-node files and traces that call them.

The library is trusted code the user imports (`--import isolib`); what it does inside a run of a file shows
what the sandboxed child contains. The ops are only ever called in a child process.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch

import opwire
from opwire.schema import models as m
from opwire.serde import torch_bridge
from opwire.serde.tensors import from_tensor

ISOLIB = r"""
import ctypes
import errno
import glob
import json
import os
import time

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_GOMP = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*.so*"))[0])
_TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _sys(nr, *args):
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, ctypes._SimpleCData) or a is None
                                            or isinstance(a, (bytes, ctypes.Array)) else ctypes.c_long(a) for a in args])
    if r >= 0:
        return r
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _forked(pid):
    if pid == 0:
        os._exit(0)
    return pid


def _shm():
    ident = _libc.shmget(0, 1 << 20, 0o1000 | 0o600)
    if ident < 0:
        raise OSError(ctypes.get_errno(), "shmget")
    _libc.shmctl(ident, 0, None)  # IPC_RMID: leave nothing behind if it ever works


def _mq():
    fd = _sys(240, b"/opwire-escape", os.O_CREAT | os.O_RDWR, 0o600, None)
    _sys(241, b"/opwire-escape")
    return fd


def _siginfo():
    buf = ctypes.create_string_buffer(128)
    ctypes.c_int.from_buffer(buf, 8).value = -1  # si_code SI_QUEUE: the kernel itself would allow it
    return buf


def _peek_parent():
    local = ctypes.create_string_buffer(8)
    iov = (ctypes.c_uint64 * 2)(ctypes.addressof(local), 8)
    return _sys(310, os.getppid(), iov, 1, iov, 1, 0)  # process_vm_readv: the same address in the parent


def _escapes(where):
    ppid = os.getppid()
    tries = {
        "create a file": lambda: os.open(f"pwned-{where}", os.O_WRONLY | os.O_CREAT, 0o644),
        "append to a file": lambda: os.open("victim", os.O_WRONLY | os.O_APPEND),
        "chmod": lambda: os.chmod("victim", 0o777),
        "fchmodat2": lambda: _sys(452, -100, b"victim", 0o777, 0),
        "utimensat": lambda: os.utime("victim", (0, 0)),
        "setxattr": lambda: os.setxattr("victim", "user.opwire", b"1"),
        "rename": lambda: os.rename("victim", f"victim-{where}"),
        "unlink": lambda: os.unlink("victim"),
        "symlink": lambda: os.symlink("victim", f"link-{where}"),
        "truncate": lambda: os.truncate("victim", 0),
        "open /dev/tty": lambda: os.open("/dev/tty", os.O_RDONLY),
        "ioctl TIOCSTI": lambda: _sys(16, 2, 0x5412, b"x"),
        "fcntl F_SETOWN parent": lambda: _sys(72, 2, 8, ppid),
        "kill parent": lambda: os.kill(ppid, 0),
        "rt_sigqueueinfo parent": lambda: _sys(129, ppid, 0, _siginfo()),
        "prlimit64 parent": lambda: _sys(302, ppid, 7, None, ctypes.create_string_buffer(16)),
        "setpriority parent": lambda: _sys(141, 0, ppid, 0),
        "sched_setaffinity parent": lambda: os.sched_setaffinity(ppid, os.sched_getaffinity(ppid)),
        "open /proc/PPID/mem": lambda: os.open(f"/proc/{ppid}/mem", os.O_RDONLY),
        "open /etc/passwd": lambda: os.open("/etc/passwd", os.O_RDONLY),
        "process_vm_readv parent": _peek_parent,
        "SysV shmget": _shm,
        "POSIX mq_open": _mq,
        "socket": lambda: _sys(41, 2, 1, 0),
        "socketpair": lambda: _sys(53, 1, 1, 0, ctypes.create_string_buffer(8)),
        "execve": lambda: os.execv("/bin/true", ["true"]),
        "fork": lambda: _forked(os.fork()),
        "clone a process": lambda: _forked(_sys(56, 17, 0, 0, 0, 0)),
        "mmap write+exec": lambda: _sys(9, 0, 4096, 7, 0x22, -1, 0),
        "io_uring_setup": lambda: _sys(425, 1, ctypes.create_string_buffer(120)),
        "bpf": lambda: _sys(321, 0, ctypes.create_string_buffer(128), 128),
        "userfaultfd": lambda: _sys(323, 0),
        "perf_event_open": lambda: _sys(298, ctypes.create_string_buffer(128), 0, -1, -1, 0),
        "keyctl": lambda: _sys(250, 0, -3, 1),
        "ptrace parent": lambda: _sys(101, 0x4206, ppid, 0, 0),
        "pidfd_open parent": lambda: _sys(434, ppid, 0),
        "mount": lambda: _sys(165, None, None, None, 0, None),
        "unshare": lambda: _sys(272, 0x10000000),
        "chroot": lambda: _sys(161, b"/"),
    }
    table = {}
    for name, attempt in tries.items():
        try:
            attempt()
            table[name] = "ALLOWED"
        except OSError as exc:
            table[name] = errno.errorcode.get(exc.errno, str(exc.errno))
    return table


def seccomp_modes():
    modes = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/status") as f:
            modes[tid] = next(line.split()[1] for line in f if line.startswith("Seccomp:"))
    return modes


_WORKER = {}


def _on_worker(_):
    if _GOMP.omp_get_thread_num() == 1:
        _WORKER["table"] = _escapes(_WORKER["label"])


_ON_WORKER = _TASK(_on_worker)  # made at import: a ctypes callback needs a writable+executable page


def attack(label="op"):
    # every escape from this thread and from an OpenMP worker; the table, with each thread's Seccomp mode
    tables = {"main": _escapes(f"{label}-main")}
    _WORKER["label"] = f"{label}-omp"
    _GOMP.GOMP_parallel(_ON_WORKER, None, 2, 0)
    tables["openmp"] = _WORKER.pop("table", "the worker did not run")
    tables["seccomp"] = seccomp_modes()
    return tables


@torch.library.custom_op("opwire_iso::escape", mutates_args=())
def escape(x: torch.Tensor) -> torch.Tensor:
    torch.set_num_threads(2)
    big = torch.randn(1 << 20)
    (big * 2).sum()  # a parallel kernel: torch's OpenMP pool runs
    raise RuntimeError("escape table " + json.dumps(attack()))


@torch.library.custom_op("opwire_iso::segv", mutates_args=())
def segv(x: torch.Tensor) -> torch.Tensor:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    return x.clone()


@torch.library.custom_op("opwire_iso::abort", mutates_args=())
def abort(x: torch.Tensor) -> torch.Tensor:
    os.abort()
    return x.clone()


@torch.library.custom_op("opwire_iso::write", mutates_args=())
def write(x: torch.Tensor) -> torch.Tensor:
    with open("pwned.txt", "w") as f:
        f.write("written from a run")
    return x.clone()


@torch.library.custom_op("opwire_iso::alloc", mutates_args=())
def alloc(x: torch.Tensor) -> torch.Tensor:
    big = torch.ones(3 << 28)  # 3 GiB: past any small budget plus the sandbox's 1 GiB of address-space headroom
    return x + big[0]


@torch.library.custom_op("opwire_iso::nap", mutates_args=())
def nap(x: torch.Tensor) -> torch.Tensor:
    time.sleep(60)
    return x.clone()


@torch.library.custom_op("opwire_iso::moody", mutates_args=())
def moody(x: torch.Tensor) -> torch.Tensor:
    if float(x.sum()) > 1e6:
        ctypes.string_at(0)  # a crash on very big inputs
    if float(x.sum()) > 1e3:
        open("pwned.txt", "w")  # a refused write on big ones
    return x * 2


@torch.library.custom_op("opwire_iso::ok", mutates_args=())
def ok(x: torch.Tensor) -> torch.Tensor:
    return x * 2


for op in (segv, abort, write, alloc, nap, ok, escape, moody):
    op.register_fake(lambda x: torch.empty_like(x))
"""

OPS = ("segv", "abort", "write", "alloc", "nap", "ok", "escape", "moody")


def write_isolib(d: Path) -> None:
    """Write isolib.py into `d` and import it here (registering its ops in this process too)."""
    (d / "isolib.py").write_text(ISOLIB)
    if "isolib" not in sys.modules:
        sys.path.insert(0, str(d))
        importlib.import_module("isolib")


class _Calls(torch.nn.Module):
    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x).relu()
        return getattr(torch.ops.opwire_iso, self.op)(y) + 1


def program_calling(op: str) -> m.OpwireArchive:
    """An archive whose program runs Linear + relu, then `opwire_iso::<op>`, then adds 1."""
    torch.manual_seed(0)
    return torch_bridge.archive_from_exported_program(torch.export.export(_Calls(op), (torch.randn(2, 4),)))


def nodes_calling(op: str) -> m.ExternKernelNodes:
    """An extern-node file: `aten::relu(x)` then `opwire_iso::<op>`."""

    def node(target: str, src: str, out: str) -> m.Node:
        arg = m.Argument(as_tensor=m.TensorArgument(name=src))
        return m.Node(
            target=target,
            inputs=[m.NamedArgument(name=k, arg=arg) for k in (("self",) if target.startswith("aten") else ("x",))],
            outputs=[m.Argument(as_tensor=m.TensorArgument(name=out))],
            metadata={},
        )

    return m.ExternKernelNodes(
        nodes=[
            m.ExternKernelNode(name="buf0", node=node("aten::relu", "x", "r")),
            m.ExternKernelNode(name="buf1", node=node(f"opwire_iso::{op}", "r", "out")),
        ]
    )


def write_values(path: Path, **values: torch.Tensor) -> Path:
    """A Values file holding `values` by name."""
    path.write_bytes(opwire.dumps(m.Values(values={k: m.Value(as_tensor=from_tensor(v)) for k, v in values.items()})))
    return path


def trace_calling(op: str) -> m.CallTrace:
    """A trace of `relu` then `opwire_iso::ok`, the second record's target changed to `opwire_iso::<op>`."""
    x = torch.randn(4)
    with opwire.record() as trace:
        torch.ops.opwire_iso.ok(torch.relu(x))
    model = trace.model.model_copy(deep=True)
    for rec in model.records:
        if rec.target.startswith("opwire_iso::"):
            rec.target = rec.target.replace("opwire_iso::ok", f"opwire_iso::{op}")
    schemas = dict(model.header.op_schemas)
    for name in list(schemas):
        if name.startswith("opwire_iso::ok"):
            schemas[name.replace("ok", op)] = schemas.pop(name).replace("ok", op)
    model.header.op_schemas = schemas
    return model


def write_run_calling(op: str, d: Path) -> Path:
    """A one-rank run directory `d` whose rank 0 traces `relu` then `opwire_iso::<op>` (what `opwire replay RUN`
    reads; torchrun is not needed to write one)."""
    model = trace_calling(op)
    model.header.distributed = m.TraceDistributed(rank=0, world_size=1, run_id="isolation", groups=[])
    d.mkdir(exist_ok=True)
    (d / "rank0.trace").write_bytes(opwire.dumps(model, "compact"))
    return d
