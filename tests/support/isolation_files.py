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

ISOLIB = """
import ctypes
import os
import time

import torch


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


@torch.library.custom_op("opwire_iso::ok", mutates_args=())
def ok(x: torch.Tensor) -> torch.Tensor:
    return x * 2


for op in (segv, abort, write, alloc, nap, ok):
    op.register_fake(lambda x: torch.empty_like(x))
"""

OPS = ("segv", "abort", "write", "alloc", "nap", "ok")


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
