"""Codecs: models in, bytes out, and back. `dumps`/`loads` pick the codec by format name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from opwire._lazy import submodule_getattr
from opwire.errors import DecodeError, EncodeError

if TYPE_CHECKING:  # pydantic loads with the first codec, so `import opwire` (and `opwire --help`) stays light
    import torch.export
    from pydantic import BaseModel

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

M = TypeVar("M", bound="BaseModel")
Format = Literal["json", "binary", "compact"]
FORMATS: tuple[str, ...] = ("json", "binary", "compact")


__getattr__ = submodule_getattr(__name__, __path__)  # `opwire.serde.pt2.read(...)` without importing it first


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")


def dumps(obj: BaseModel, format: Format = "json") -> bytes:
    """Serialize a model: "json" (torch's export JSON), "binary" or "compact" (Thrift)."""
    _check_format(format)
    if format == "json":
        from opwire.serde import json

        return json.encode(obj)
    from opwire.serde import thrift

    return thrift.encode(obj, format)


@overload
def loads(
    data: bytes | str,
    cls: type[M],
    format: Format | None = None,
    *,
    max_depth: int | None = None,
    max_elements: int | None = None,
) -> M: ...


@overload
def loads(
    data: bytes | str,
    cls: None = None,
    format: Format | None = None,
    *,
    max_depth: int | None = None,
    max_elements: int | None = None,
) -> Any: ...


def loads(
    data: bytes | str,
    cls: type[M] | None = None,
    format: Format | None = None,
    *,
    max_depth: int | None = None,
    max_elements: int | None = None,
) -> Any:
    """Deserialize bytes into a validated model of type `cls` (None: the type the data holds).

    `format` None reads the codec from opwire's header (files opwire writes in Thrift form carry one) and
    takes JSON otherwise; a `format` the header contradicts is a DecodeError naming the file's format. With
    `cls` None the root type comes from the header, or for JSON from its top-level keys (as `opwire inspect`
    tells it); raw Thrift has neither, so it needs both `cls` and `format`. `max_depth` bounds nesting
    (structs, lists, maps; default `opwire.serde.framing.MAX_DEPTH`) and `max_elements` the number of
    values, containers and the leaves in them (default `opwire.serde.budgets.MAX_ELEMENTS`), in every codec.
    """
    if format is not None:
        _check_format(format)
    from opwire.serde import framing
    from opwire.serde.budgets import MAX_ELEMENTS

    depth = framing.MAX_DEPTH if max_depth is None else max_depth
    elements = MAX_ELEMENTS if max_elements is None else max_elements
    if isinstance(data, bytes | bytearray | memoryview) and (header := framing.sniff(data)) is not None:
        codec, root, _version = header
        if format is not None and format != codec:
            raise DecodeError(
                f"the data is Thrift {codec} with opwire's header (root type {root}), not {format}; read it "
                f"with format={codec!r}, or leave format out"
            )
        format = codec  # type: ignore[assignment]
    if cls is None:
        return _loads_any(data, format, depth, elements)
    if format in (None, "json"):
        from opwire.serde import json

        return json.decode(data, cls, max_depth=depth, max_elements=elements)
    from opwire.serde import thrift

    if isinstance(data, str):
        raise DecodeError(f"Expected bytes for format {format!r}, got str")
    try:
        return thrift.decode(data, cls, format, max_depth=depth, max_elements=elements)  # type: ignore[arg-type]
    except DecodeError as exc:
        raise _json_not_thrift(data, format) or exc from None


def _json_not_thrift(data: bytes | bytearray | memoryview, format: str) -> DecodeError | None:
    """For Thrift that failed to decode: a DecodeError saying the data is JSON, if it is."""
    import json as _stdlib_json

    from opwire.serde.json import looks_like_json

    if not looks_like_json(data):
        return None
    try:
        _stdlib_json.loads(bytes(data))
    except (ValueError, RecursionError):
        return None
    return DecodeError(f"the data is JSON, not Thrift {format}; read it with format='json', or leave format out")


def _loads_any(data: bytes | str, format: str | None, max_depth: int, max_elements: int) -> Any:
    """`loads` without a type: the header's root type, or the JSON root its keys show."""
    from opwire.serde import detect, framing

    if format in (None, "json") or (not isinstance(data, str) and framing.has_header(data)):
        return detect.decode_bytes(data, max_depth=max_depth, max_elements=max_elements)
    raise DecodeError(
        f"raw Thrift {format} (no opwire header) does not say what type it holds; pass the type: "
        f"opwire.loads(data, m.ExportedProgram, format={format!r}) (models: opwire.schema.models)"
    )


def values(mapping: Mapping[str, Any]) -> Any:
    """A `Values` record (the inputs file of `opwire run` / `opwire exec`) holding Python objects by name.

    Tensors, numbers, bools, strings, None, complex, devices, dtypes, layouts, memory formats, and
    lists/tuples/str-keyed dicts of these; anything else is an EncodeError naming its path.
    """
    from opwire.schema import models as m
    from opwire.serde import objects

    return m.Values(values={str(k): objects.from_python(v, str(k)) for k, v in mapping.items()})


def python_values(record: Any, device: Any = None) -> dict[str, Any]:
    """The Python objects of a `Values` record by name (tensors rebuilt, on `device` if given)."""
    from opwire.serde import objects

    return {k: objects.to_python(v, device, k) for k, v in record.values.items()}


def from_exported_program(ep: torch.export.ExportedProgram) -> Any:
    """An opwire model of a torch ExportedProgram (via torch's own serializer)."""
    from opwire.serde import torch_bridge

    return torch_bridge.from_exported_program(ep)


def to_exported_program(archive_or_program: Any, *args: Any, **kwargs: Any) -> torch.export.ExportedProgram:
    """A torch ExportedProgram from an opwire archive or program model."""
    from opwire.serde import torch_bridge

    return torch_bridge.to_exported_program(archive_or_program, *args, **kwargs)
