"""Programs for the `opwire view` tests and benchmark beyond the corpus.

`Hops`: torch.cond, map and while_loop in one program. `Stack(n)`: n transformer encoder layers, module
groups big enough to start collapsed (the benchmark's 2,000-node program is `stack_program(28)`).
Benchmarks put tests/ on sys.path and import this module by name, as they do `corpus`.
"""

from __future__ import annotations

import warnings

import torch
from torch._export.serde.serialize import serialize
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.while_loop import while_loop

__all__ = ["Hops", "Stack", "hops_program", "stack_program"]


class Hops(torch.nn.Module):
    """torch.cond, map and while_loop in one program, a parameter used inside a branch."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mapped = hop_map(lambda row, w: torch.sin(row) * w, xs, x.sum())
        y = torch.cond(x.sum() > 0, lambda a: self.lin(a).relu(), lambda a: a.cos(), (x,))
        _, acc = while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc * 2), (torch.tensor(0), y))
        return mapped, acc


def hops_program() -> bytes:
    """torch's JSON of the exported `Hops` program (cond, map_impl, while_loop)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about how it serializes an empty list
        ep = torch.export.export(Hops(), (torch.randn(3, 4), torch.randn(2, 4)))
        return serialize(ep).exported_program


class Stack(torch.nn.Module):
    """`n` transformer encoder layers: module groups big enough to start collapsed."""

    def __init__(self, n: int, d: int = 16) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(d, 2, dim_feedforward=32, dropout=0.0, batch_first=True) for _ in range(n)
        )
        self.head = torch.nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def stack_program(n: int, decompose: bool = True) -> bytes:
    """torch's JSON of an exported `Stack(n)` (decomposed to core ATen unless told otherwise)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecation noise while exporting
        ep = torch.export.export(Stack(n).eval(), (torch.randn(2, 5, 16),))
        if decompose:
            ep = ep.run_decompositions()
        return serialize(ep).exported_program
