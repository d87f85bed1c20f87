"""Where the recorder puts what it sees: in memory (a `CallTrace`) or a streamed file (`TraceWriter`)."""

from __future__ import annotations

from typing import Any, Protocol

import torch

from opwire.recording.payloads import tensor_value
from opwire.schema import models as m

__all__ = ["MemorySink", "Sink"]


class Sink(Protocol):
    """What the dispatch mode writes to."""

    def tensor(self, name: str, t: torch.Tensor, full: bool, version: Any = None) -> None:
        """Take the value of `t` now as tensor `name` (bytes when `full`, else a digest)."""

    def undefined(self, name: str, t: torch.Tensor) -> None:
        """Take `t` as tensor `name`, its content undefined (a streamed trace writes its layout, not its bytes)."""

    def record(self, rec: m.CallRecord) -> None:
        """Append one call record."""

    def op_schema(self, op: str, schema: str) -> None:
        """The schema string of an op, before its first record."""

    def freed(self, objects: list[str]) -> None:
        """Tensor objects that no later record names."""

    def group(self, group: m.TraceProcessGroup) -> None:
        """A process group that later records use."""

    def before_write(self, t: torch.Tensor | None) -> None:
        """A call is about to write to `t`'s storage (None: to some storage): finish reading it first."""


class MemorySink:
    """Builds the in-memory trace: records in a list, each value copied into a TensorValue when it is seen."""

    def __init__(self) -> None:
        self.records: list[m.CallRecord] = []
        self.tensors: dict[str, m.TensorValue] = {}
        self.op_schemas: dict[str, str] = {}
        self.groups: list[m.TraceProcessGroup] = []

    def tensor(self, name: str, t: torch.Tensor, full: bool, version: Any = None) -> None:
        """Copy `t` into the tensor table."""
        self.tensors[name] = tensor_value(t, full, name)

    def undefined(self, name: str, t: torch.Tensor) -> None:
        """Copy `t` as any value: the in-memory form (a `CallTrace`) has no undefined marker; the records say it."""
        self.tensors[name] = tensor_value(t, True, name)

    def record(self, rec: m.CallRecord) -> None:
        """Append a record."""
        self.records.append(rec)

    def op_schema(self, op: str, schema: str) -> None:
        """Keep an op's schema string for the header."""
        self.op_schemas[op] = schema

    def freed(self, objects: list[str]) -> None:
        """Nothing to do: an in-memory trace keeps every value."""

    def group(self, group: m.TraceProcessGroup) -> None:
        """Keep a process group for the header."""
        self.groups.append(group)

    def before_write(self, t: torch.Tensor | None) -> None:
        """Nothing to do: values were copied when seen."""
