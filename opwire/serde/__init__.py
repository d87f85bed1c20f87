"""Codecs: models in, bytes out, and back. `dumps`/`loads` pick the codec by format name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel

from opwire.errors import DecodeError, EncodeError

if TYPE_CHECKING:
    import torch.export

__all__ = [
    "FORMATS",
    "DecodeError",
    "EncodeError",
    "dumps",
    "from_exported_program",
    "loads",
    "python_values",
    "to_exported_program",
    "values",
]

M = TypeVar("M", bound=BaseModel)
Format = Literal["json", "binary", "compact"]
FORMATS: tuple[str, ...] = ("json", "binary", "compact")


_SUBMODULES = ("json", "thrift", "framing", "pt2", "torch_bridge", "detect", "archive", "budgets", "pytree_spec")


def __getattr__(name: str) -> Any:
    """Load codec submodules on first use (`opwire.serde.pt2.read(...)` without importing it first)."""
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"opwire.serde.{name}")
    raise AttributeError(f"module 'opwire.serde' has no attribute {name!r}")


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")


def dumps(obj: BaseModel, format: Format = "json") -> bytes:
    """Serialize a model: "json" (torch's export JSON), "binary" or "compact" (Thrift)."""
    _check_format(format)
    if format == "json":
        from opwire.serde import json as _json

        return _json.encode(obj)
    from opwire.serde import thrift as _thrift

    return _thrift.encode(obj, format)


def loads(
    data: bytes | str,
    cls: type[M],
    format: Format = "json",
    *,
    max_depth: int | None = None,
    max_elements: int | None = None,
) -> M:
    """Deserialize bytes written in `format` into a validated model of type `cls`.

    `max_depth` bounds nesting (structs, lists, maps; default `opwire.serde.framing.MAX_DEPTH`) and
    `max_elements` the number of containers (default `opwire.serde.budgets.MAX_ELEMENTS`), the same way
    in every codec.
    """
    _check_format(format)
    from opwire.serde.budgets import MAX_ELEMENTS
    from opwire.serde.framing import MAX_DEPTH

    depth = MAX_DEPTH if max_depth is None else max_depth
    elements = MAX_ELEMENTS if max_elements is None else max_elements
    if format == "json":
        from opwire.serde import json as _json

        return _json.decode(data, cls, max_depth=depth, max_elements=elements)
    from opwire.serde import thrift as _thrift

    if isinstance(data, str):
        raise DecodeError(f"Expected bytes for format {format!r}, got str")
    return _thrift.decode(data, cls, format, max_depth=depth, max_elements=elements)


def values(mapping: Mapping[str, Any]) -> Any:
    """A `Values` record (the inputs file of `opwire run` / `opwire exec`) holding Python objects by name.

    Tensors, numbers, bools, strings, None, complex, devices, dtypes, layouts, memory formats, and
    lists/tuples/str-keyed dicts of these; anything else is an EncodeError naming its path.
    """
    from opwire.schema import models as m
    from opwire.serde import objects as _values

    return m.Values(values={str(k): _values.from_python(v, str(k)) for k, v in mapping.items()})


def python_values(record: Any, device: Any = None) -> dict[str, Any]:
    """The Python objects of a `Values` record by name (tensors rebuilt, on `device` if given)."""
    from opwire.serde import objects as _values

    return {k: _values.to_python(v, device, k) for k, v in record.values.items()}


def from_exported_program(ep: torch.export.ExportedProgram) -> Any:
    """An opwire model of a torch ExportedProgram (via torch's own serializer)."""
    from opwire.serde import torch_bridge

    return torch_bridge.from_exported_program(ep)


def to_exported_program(archive_or_program: Any, *args: Any, **kwargs: Any) -> torch.export.ExportedProgram:
    """A torch ExportedProgram from an opwire archive or program model."""
    from opwire.serde import torch_bridge

    return torch_bridge.to_exported_program(archive_or_program, *args, **kwargs)
