"""JSON codec: byte-identical to torch's export JSON (`_to_json_bytes`), validated on the way in.

`encode(model) -> bytes` writes what torch's Python serializer writes: every field, unions as
single-key objects, enums as ints, `null` for None, non-finite doubles as "Infinity"/"-Infinity"/"NaN",
`", "`/`": "` separators and ASCII escapes. `decode(data, cls)` reads that JSON (and the C++
serializer's, whatever its whitespace and key order) into validated models.
"""

from __future__ import annotations

import json as _json
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from opwire.errors import DecodeError, EncodeError
from opwire.schema.base import binary_out, float_out
from opwire.schema.idl import TypeRef
from opwire.schema.models import MODELS, SCHEMA
from opwire.serde import _cplan, _padding, budgets
from opwire.serde._build import json_builders
from opwire.serde._depth import check_depth
from opwire.serde._json_write import json_writers
from opwire.serde._paths import decode_error_from_validation, format_path
from opwire.serde._walk import find_invalid
from opwire.serde.framing import MAX_DEPTH, has_header, schema_version_error

__all__ = [
    "JSON_PARSER_DEPTH",
    "JSON_ROOTS",
    "check_elements",
    "count_values",
    "decode",
    "detect_json_root",
    "encode",
    "is_document_head",
    "json_root",
    "json_top",
    "looks_like_json",
    "to_jsonable",
]

JSON_PARSER_DEPTH = 200
"""Deepest nesting pydantic's JSON parser reads (fixed in pydantic-core); deeper JSON is refused."""

M = TypeVar("M", bound=BaseModel)
_Conv = Callable[[Any], Any]
_ENCODERS: dict[str, _Conv] = {}
_IDENTITY_KINDS = {"bool", "i8", "i16", "i32", "i64", "string", "enum"}


# top-level JSON keys that identify each root type opwire reads as JSON (sniffing is this codec's knowledge)
JSON_ROOTS: tuple[tuple[str, frozenset[str]], ...] = (
    ("ExportedProgram", frozenset({"graph_module", "schema_version"})),
    ("ExternKernelNodes", frozenset({"nodes"})),
    ("OpwireArchive", frozenset({"program", "weights"})),
    ("CallTrace", frozenset({"header", "records"})),
    ("OpLibrarySnapshot", frozenset({"namespaces", "ops"})),
    ("Values", frozenset({"values"})),
)


def json_root(keys: Iterable[str]) -> str | None:
    """The root type a JSON object with these top-level keys holds (None: none opwire reads)."""
    have = set(keys)
    return next((name for name, need in JSON_ROOTS if need <= have), None)


def looks_like_json(data: bytes | bytearray | memoryview | str) -> bool:
    """Whether `data` starts (after whitespace) like a JSON object or array."""
    if isinstance(data, str):
        return data.lstrip()[:1] in ("{", "[")
    return bytes(data[:4096]).lstrip()[:1] in (b"{", b"[")


def is_document_head(head: bytes) -> bool:
    """Whether a file's first bytes start a document opwire reads: opwire's Thrift header, or a JSON object."""
    return has_header(head) or bytes(head[:4096]).lstrip()[:1] == b"{"


def json_top(data: bytes, source: str = "", *, object_only: bool = True) -> Any:
    """The parsed top of a JSON document (a dict unless `object_only` is False); a DecodeError saying where."""
    where = source or "input"
    try:
        top = _json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"{where}: not valid JSON ({exc})") from None
    except RecursionError:
        raise DecodeError(
            f"{where}: JSON nested too deeply for Python's parser; opwire's JSON nesting stops at {JSON_PARSER_DEPTH}"
        ) from None
    if object_only and not isinstance(top, dict):
        raise DecodeError(f"{where}: expected a JSON object at the top level, got {type(top).__name__}")
    return top


def detect_json_root(data: bytes, source: str = "") -> type[BaseModel]:
    """The model class a JSON document holds, judged by its top-level keys."""
    top = json_top(data, source)
    root = json_root(top)
    if root is not None:
        return MODELS[root]
    known = ", ".join(name for name, _ in JSON_ROOTS)
    raise DecodeError(
        f"{source or 'input'}: JSON object with keys {sorted(top)[:6]} is none of the types opwire reads ({known})"
    )


def _converter(t: TypeRef) -> _Conv | None:
    """The function turning a model value of type `t` into JSON-ready data; None means as-is."""
    if t.kind in _IDENTITY_KINDS:
        return None
    if t.kind == "double":
        return float_out
    if t.kind == "binary":
        return binary_out
    if t.kind == "struct":
        name = str(t.name)
        return lambda v: _ENCODERS[name](v)
    if t.kind in ("list", "set"):
        item = _converter(t.args[0])
        if item is None:
            return list
        return lambda v: [item(x) for x in v]
    if t.kind == "map":
        value = _converter(t.args[1])
        if value is None:
            return dict
        return lambda v: {k: value(x) for k, x in v.items()}
    raise AssertionError(f"unhandled IDL type {t}")


def _single_member(obj: Any) -> str:
    """Name of the one member set in a union instance; _Unencodable if zero or several."""
    fields_set = obj.__pydantic_fields_set__
    if len(fields_set) == 1:
        (key,) = fields_set
        if obj.__dict__[key] is not None:
            return str(key)
    members = [k for k, v in obj.__dict__.items() if v is not None]
    if len(members) != 1:
        raise _Unencodable(f"union {type(obj).__name__} has {len(members)} members set")
    return str(members[0])


def _struct_encoder(name: str) -> _Conv:
    sdef = SCHEMA.structs[name]
    convs = tuple((f.name, _converter(f.type)) for f in sdef.fields)
    if sdef.kind == "union":
        by_name = dict(convs)

        def enc_union(obj: Any) -> dict[str, Any]:
            k = _single_member(obj)
            v = obj.__dict__[k]
            conv = by_name[k]
            return {k: v if conv is None else conv(v)}

        return enc_union

    def enc_struct(obj: Any) -> dict[str, Any]:
        d = obj.__dict__
        return {n: d[n] if c is None or d[n] is None else c(d[n]) for n, c in convs}

    return enc_struct


for _name in SCHEMA.structs:
    _ENCODERS[_name] = _struct_encoder(_name)


class _Unencodable(Exception):
    pass


def to_jsonable(obj: BaseModel) -> Any:
    """The model as the dicts/lists/scalars torch's `_dataclass_to_dict` would produce."""
    name = type(obj).__name__
    if MODELS.get(name) is not type(obj):
        raise EncodeError(f"Expected an opwire model (opwire.schema.models), got {type(obj).__name__}")
    try:
        return _ENCODERS[name](obj)
    except (_Unencodable, AttributeError, KeyError, TypeError) as exc:
        raise _locate_encode_error(obj, exc) from None


def encode(obj: BaseModel, *, indent: int | None = None) -> bytes:
    """Serialize a model to JSON bytes, byte-identical to torch's export JSON (`indent`: for people, as the CLI)."""
    if MODELS.get(type(obj).__name__) is type(obj):
        _padding.check_written(obj)
    if indent is None:
        text = _written(obj)
        if text is not None:
            return text
    try:
        data = to_jsonable(obj)  # the collector runs as usual: pausing it saved ~3% here, not worth process-wide state
        return _json.dumps(data, allow_nan=False, indent=indent).encode("utf-8")
    except RecursionError:  # the process-wide limit is the caller's to set, never changed here (as Thrift's encoder)
        raise EncodeError(
            f"cannot encode {type(obj).__name__}: the model nests deeper than this Python stack allows "
            f"(sys.getrecursionlimit() is {sys.getrecursionlimit()}); raise the limit yourself to write a model this "
            "deep"
        ) from None
    except (ValueError, TypeError) as exc:
        raise _locate_encode_error(obj, exc) from None


def _written(obj: BaseModel) -> bytes | None:
    """The model's JSON bytes from the plan compiled from the IDL (the C writer, `_cplan.json_write`, or without it
    the Python writers of `_json_write`), or None when the writer does not take it (an invalid model, or a value of
    an unexpected type): the reference path decides then."""
    if MODELS.get(type(obj).__name__) is not type(obj):
        return None
    if _cplan.AVAILABLE:
        return _cplan.json_write(obj)
    writer = json_writers().get(type(obj).__name__)
    if writer is None:
        return None
    try:
        return writer(obj).encode("ascii")  # type: ignore[no-any-return]
    except Exception:  # anything unexpected: to_jsonable and json.dumps write it or word the error
        return None


def _locate_encode_error(obj: BaseModel, exc: Exception) -> EncodeError:
    """Walk the model to find the first value that cannot be written (slow path, errors only)."""
    found = find_invalid(obj)
    if found is None:
        return EncodeError(f"cannot encode {type(obj).__name__}: {exc}")
    path, problem = found
    return EncodeError(f"cannot encode {type(obj).__name__}: {problem} - at `{format_path(path)}`", format_path(path))


def decode(
    data: bytes | str,
    cls: type[M],
    *,
    source: str = "",
    max_depth: int = MAX_DEPTH,
    max_elements: int = budgets.MAX_ELEMENTS,
) -> M:
    """Parse JSON into a validated model of type `cls`; any problem is a DecodeError with its path.

    Nesting deeper than `max_depth` containers (objects and arrays, counted as the Thrift codecs count
    structs, lists and maps) is refused; JSON's parser itself stops at 200. More than `max_elements`
    containers in all is refused before any is built.
    """
    name = getattr(cls, "__name__", repr(cls))
    if MODELS.get(name) is not cls:
        raise DecodeError(f"Expected an opwire model class (opwire.schema.models), got {cls!r}")
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError(f"Expected bytes or str to decode, got {type(data).__name__}")
    raw = data if isinstance(data, bytes) else bytes(data)
    check_elements(raw, max_elements, source)
    obj: M | None = _built(raw, name)  # the C builder keeps what it builds from the collector (no pause here)
    if obj is None:
        obj = _validated(raw, cls, source, max_depth)
    check_depth(obj, max_depth, source, raw)
    _check_version(obj, source)
    return _padding.settle(obj, source)  # type: ignore[no-any-return]


def _built(data: bytes, name: str) -> Any:
    """The model built by the plan compiled from the IDL (the C parser and builder, `_cplan`, or without them
    pydantic-core's parser and the Python builders of `_build`), or None when it does not take the input."""
    if _cplan.AVAILABLE:
        return _cplan.json_build(name, data)
    try:
        return json_builders()[name](from_json(data))
    except Exception:  # invalid JSON, Fallback, or any input the plan does not take: pydantic decides
        return None


def _validated(data: bytes, cls: type[M], source: str, max_depth: int) -> M:
    """pydantic's validation of the JSON: the reference the builders agree with, and every error's wording."""
    try:
        return cls.model_validate_json(data)
    except ValidationError as exc:
        raise _decode_failure(data, cls, exc, source, max_depth) from None


_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_SPACE = b" \t\r\n"


def count_values(data: bytes) -> int:
    """JSON values in `data` (objects, arrays, strings, numbers, bools, nulls; a key is part of its member),
    counted in linear time: escapes dropped, then each string made one token, then `1 + commas + non-empty
    containers` (every container of k values holds k - 1 commas)."""
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)  # no `\"` is left to end a string early or to start one
    data = _STRING.sub(b"0", data).translate(None, _SPACE)
    containers = data.count(b"{") + data.count(b"[") - data.count(b"{}") - data.count(b"[]")
    return 1 + data.count(b",") + containers


def check_elements(data: bytes, max_elements: int, source: str = "") -> None:
    """DecodeError when the JSON holds more than `max_elements` values (`count_values`), before any is built."""
    if (len(data) + 1) // 2 <= max_elements:  # every value but the last takes two bytes at least (`0,`)
        return
    if 1 + data.count(b",") + data.count(b"{") + data.count(b"[") <= max_elements:  # an upper bound, strings included
        return
    count = count_values(data)
    if count > max_elements:
        raise budgets.exceeded(
            f"{source or 'input'}: JSON values (objects, arrays and the strings, numbers, bools and nulls in them)",
            count,
            "max_elements",
            max_elements,
            cli="--max-elements",
        )


def _decode_failure(
    data: bytes, cls: type[BaseModel], exc: ValidationError, source: str, max_depth: int
) -> DecodeError:
    """Prefer a version mismatch over the field error it caused; name a nesting overflow as such."""
    first = exc.errors(include_url=False)[0]
    if first["type"] == "json_invalid" and "recursion limit exceeded" in str(first.get("ctx", {}).get("error", "")):
        where = f"{source}: " if source else ""
        return DecodeError(
            f"{where}nesting deeper than max_depth={min(max_depth, JSON_PARSER_DEPTH)} "
            f"({first['ctx']['error']}); JSON nesting stops at {JSON_PARSER_DEPTH} in the parser, "
            "use the Thrift codecs with a larger max_depth for deeper trusted input"
        )
    if cls.__name__ == "ExportedProgram":
        version = _probe_version(data)
        if version is not None:
            mismatch = _version_problem(version, source)
            if mismatch is not None:
                return mismatch
    other, missing = _other_root(data, cls)
    if other is not None:
        where = f"{source}: " if source else ""
        return DecodeError(
            f"{where}the JSON's top-level keys are those of {other}, not {cls.__name__} (missing "
            f"{', '.join(missing)}); read it as {other}, or call opwire.loads(data) without a type"
        )
    return decode_error_from_validation(exc, cls.__name__, source)


def _other_root(data: bytes, cls: type[BaseModel]) -> tuple[str | None, list[str]]:
    """(root type the JSON's top-level keys show, fields of `cls` it lacks) when it lacks some, else (None, [])."""
    try:
        top = _json.loads(data)
    except (ValueError, RecursionError):  # invalid, or nested past the stdlib parser's stack: no root to suggest
        return None, []
    if not isinstance(top, dict):
        return None, []
    missing = [name for name, f in cls.model_fields.items() if f.is_required() and name not in top]
    if not missing:
        return None, []  # the JSON is a `cls` with a bad value: the field error says more
    other = next((name for name, keys in JSON_ROOTS if keys <= top.keys() and name != cls.__name__), None)
    return other, missing


def _probe_version(data: bytes) -> tuple[int, int] | None:
    try:
        raw = _json.loads(data)
        v = raw["schema_version"]
        return int(v["major"]), int(v["minor"])
    except Exception:
        return None


def _version_problem(version: tuple[int, int], source: str) -> DecodeError | None:
    return schema_version_error(version, source)


def _check_version(obj: BaseModel, source: str) -> None:
    version = getattr(obj, "schema_version", None)
    if type(obj).__name__ == "ExportedProgram" and version is not None:
        problem = _version_problem((version.major, version.minor), source)
        if problem is not None:
            raise problem
