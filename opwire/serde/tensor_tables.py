"""The one vocabulary for an archive's two tensor tables, shared by every archive and `OpenedProgram`.

An `OpwireArchive` holds two tables, `weights` (parameters and persistent buffers) and `constants`. Every
object that reads them (`opw.OpwArchive`, `pt2.Pt2Archive`, `thrift_archive.ThriftArchive` and
`opwire.program.OpenedProgram`) says the same four words, after safetensors' `safe_open`:

- `names(table)`: the names in one table, nothing read;
- `tensor(table, name, device=None)`: one tensor (mapped from the file where it can be);
- `tensors(device=None)`: both tables as `(weights, constants)` dicts of tensors;
- `value(table, name)`: one tensor as a `TensorValue` (its bytes copied once).

`tests/serde/test_tensor_tables.py` checks that each class offers exactly these signatures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, get_args

from opwire.schema import models as m

if TYPE_CHECKING:
    import torch

__all__ = ["TABLES", "ProgramTables", "Table", "TensorTables", "check_table"]

Table = Literal["weights", "constants"]
TABLES: tuple[Table, ...] = get_args(Table)


def check_table(table: str) -> Table:
    """`table` itself when it names a tensor table, else a ValueError saying which names are."""
    if table not in TABLES:
        raise ValueError(f"table must be 'weights' or 'constants', got {table!r}")
    return table


class TensorTables(Protocol):
    """What reads an archive's tensor tables: the four words every archive and `OpenedProgram` offer."""

    def names(self, table: Table) -> list[str]:
        """Names of the weights or constants, without reading any of them."""
        ...

    def tensor(self, table: Table, name: str, device: str | torch.device | None = None) -> torch.Tensor:
        """Weight or constant `name` as a tensor on `device`."""
        ...

    def tensors(
        self, device: str | torch.device | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(weights, constants): every tensor of both tables."""
        ...

    def value(self, table: Table, name: str) -> m.TensorValue:
        """Weight or constant `name` as a TensorValue."""
        ...


class ProgramTables(TensorTables, Protocol):
    """A program with its tensor tables, opened: every archive and `OpenedProgram` (what `opw.write` copies)."""

    @property
    def program(self) -> m.ExportedProgram:
        """The exported program."""
        ...
