"""Thrift binary and compact codecs for every model type, driven by the IDL.

`encode(obj, "compact")` writes opwire's header (serde/framing.py) and the Thrift value;
`decode(data, cls, "compact")` reads it back, or raw Thrift without the header (`framed=False`, or
auto-detected: a raw Thrift value never starts with the magic). Two engines (`ENGINES`), one answer: the fast
path (`fastbinary`) reads canonical input fast: the strict C reader of opwire's C model builder
(`_cbuild_src/thrift_read.c`, taking only the bytes Apache Thrift's C codec writes), or where that module is not
built Apache Thrift's C codec with a re-encode check; it writes with Apache Thrift's C codec and holds the bytes
to the IDL's rules (the C module's one pass, `_cbuild_src/thrift_check.c`, or fastbinary's decode). opwire's checking
pure-Python reader and writer (`python`) decide everything else and name every error with its path. `engine=`
picks one of them alone (tests hold both to one answer).
"""

from __future__ import annotations

import typing
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from opwire.errors import DecodeError, EncodeError
from opwire.schema.models import MODELS, SCHEMA_VERSION, OpwireArchive
from opwire.serde import _cplan, _padding, budgets
from opwire.serde._paths import format_path
from opwire.serde._thrift import fast
from opwire.serde._thrift.decode import Located, budget_message, count_payload, decode_payload
from opwire.serde._thrift.encode import encode_payload
from opwire.serde._thrift.spec import FAST_STRUCT_DEPTH, container_depth_bound
from opwire.serde._walk import find_invalid
from opwire.serde.framing import CODECS, MAX_DEPTH, has_header, read_header, schema_version_error, write_header

__all__ = ["CODECS", "ENGINES", "MAX_DEPTH", "decode", "decode_plain", "encode"]

M = TypeVar("M", bound=BaseModel)
Codec = Literal["binary", "compact"]
Engine = Literal["fastbinary", "python"]
ENGINES: tuple[Engine, ...] = typing.get_args(Engine)
"""The engines, in the order `encode` and `decode` try them: Apache Thrift's C codec (canonical input, at most
64 nested structs), then opwire's checking pure-Python reader and writer (everything else, every error)."""


def _codec(format: str) -> str:
    if format not in CODECS:
        raise ValueError(f"unknown Thrift codec {format!r}: expected 'binary' or 'compact'")
    return format


def _engines(engine: str | None) -> tuple[str, ...]:
    if engine is None:
        return ENGINES
    if engine not in ENGINES:
        raise ValueError(f"unknown Thrift engine {engine!r}: expected one of {', '.join(map(repr, ENGINES))}")
    return (engine,)


def encode(obj: BaseModel, format: Codec = "compact", *, framed: bool = True, engine: Engine | None = None) -> bytes:
    """Serialize a model as Thrift `format` ("binary" or "compact"), with opwire's header unless framed=False.

    An OpwireArchive's payloads start at multiples of 64 in the framed bytes (each table tensor padded, records
    1.7); the bytes without the header are the same, so they are aligned once written after the header.
    `engine` writes with one engine only ("fastbinary" refuses values nested past 64 structs); None: both."""
    codec = _codec(format)
    engines = _engines(engine)
    name = type(obj).__name__
    if MODELS.get(name) is not type(obj):
        raise EncodeError(f"Expected an opwire model (opwire.schema.models), got {type(obj).__name__}")
    header = write_header(codec, name)
    if isinstance(obj, OpwireArchive):  # payloads aligned in the file (after the header): mapped in place
        payload = _encode_payload(_padding.placeholders(obj), name, codec, engines)
        return b"".join([header if framed else b"", *_padding.aligned(payload, codec, len(header))])
    _padding.check_written(obj)
    payload = _encode_payload(obj, name, codec, engines)  # the C codec allocates no containers: no collector pause
    return header + payload if framed else payload


def _encode_payload(obj: BaseModel, name: str, codec: str, engines: tuple[str, ...]) -> bytes:
    if "fastbinary" in engines:
        try:
            payload = fast.encode(obj, codec)
        except Exception as exc:  # fastbinary raises TypeError/OverflowError/..., or refuses >64 nested structs
            if "recursion depth" not in str(exc):
                raise _locate_encode_error(obj, exc) from None
            if "python" not in engines:
                raise _find_invalid(obj) or EncodeError(
                    f"cannot encode {name} with engine='fastbinary': Apache Thrift's C codec writes at most "
                    f"{FAST_STRUCT_DEPTH} nested structs; leave `engine` unset to write it"
                ) from None
        else:
            if not (_cplan.thrift_check(payload, name, codec) or fast.verify(payload, name, codec)):
                raise _locate_encode_error(obj, ValueError("the model breaks a rule of the IDL"))
            return payload
    problem = _find_invalid(obj)
    if problem is not None:
        raise problem from None
    try:
        return encode_payload(obj, codec)
    except Located as exc:
        raise EncodeError(f"cannot encode {name}: {exc.message}") from None
    except Exception as exc:  # struct.error, AttributeError, RecursionError
        raise _locate_encode_error(obj, exc) from None


def _find_invalid(obj: BaseModel) -> EncodeError | None:
    try:
        found = find_invalid(obj)
    except RecursionError:  # deeper than the stack: the encoder names that itself
        return None
    if found is None:
        return None
    loc, problem = found
    path = format_path(loc)
    return EncodeError(f"cannot encode {type(obj).__name__}: {problem} - at `{path}`", path)


def _locate_encode_error(obj: BaseModel, exc: Exception) -> EncodeError:
    """Walk the model to name the first value that cannot be written (slow path, errors only)."""
    found = _find_invalid(obj)
    if found is not None:
        return found
    return EncodeError(f"cannot encode {type(obj).__name__} as Thrift: {exc}")


def decode(
    data: bytes | bytearray | memoryview,
    cls: type[M],
    format: Codec = "compact",
    *,
    framed: bool | None = None,
    max_depth: int = MAX_DEPTH,
    source: str = "",
    max_elements: int | budgets.Budget = budgets.MAX_ELEMENTS,
    engine: Engine | None = None,
) -> M:
    """Read a `cls` model from Thrift `format` bytes: with opwire's header, or raw when framed=False (None: detect).

    More than `max_elements` values (structs, unions, lists, maps and the leaves in them) is refused: the fast
    path stops as soon as it has built one more than the budget, the checking decoder counts before building;
    a `budgets.Budget` is charged what the value holds, across the decodes it is passed to.
    `engine` reads with one engine only ("fastbinary" declines what is not canonical); None: both."""
    codec = _codec(format)
    engines = _engines(engine)
    name = getattr(cls, "__name__", repr(cls))
    if MODELS.get(name) is not cls:
        raise DecodeError(f"Expected an opwire model class (opwire.schema.models), got {cls!r}")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError(f"Expected bytes to decode, got {type(data).__name__}")
    data = bytes(data)
    where = f"{source}: " if source else ""
    start, newer = 0, f"a newer schema than this opwire reads ({SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]})"
    if framed or (framed is None and has_header(data)):
        h = read_header(data, source)
        if h.codec != codec:
            raise DecodeError(f"{where}the file holds Thrift {h.codec}, not {codec}; read it with format={h.codec!r}")
        if h.root != name:
            raise DecodeError(f"{where}the file holds a {h.root}, not a {name}; read it as {h.root}")
        start = h.offset
        newer = f"a newer schema (the file says {h.version[0]}.{h.version[1]})"
    fast_ok = "fastbinary" in engines and max_depth >= container_depth_bound()
    budget = max_elements if isinstance(max_elements, budgets.Budget) else None
    limit = max_elements.remaining if isinstance(max_elements, budgets.Budget) else max_elements
    spent = f"{source or name}: values decoded so far"
    try:  # the readers count what they build and stop past the limit (no collector pause: see _cbuild_src/gc.c)
        built = _fast_decode(data, start, name, codec, limit) if fast_ok else None
    except (fast.TooMany, _cplan.TooMany):
        if budget is not None:
            budget.spend(limit + 1, spent, "")
        raise DecodeError(f"{where}{name}: {budget_message(limit)}") from None
    if built is not None:
        obj: BaseModel | None = built[0]
        if budget is not None:
            budget.spend(built[1], spent, "")
    else:  # counted before anything is built, then read by the checking decoder
        obj = None
        if budget is not None:
            budget.spend(_count(data, start, name, codec, max_depth, limit, fast_ok), spent, "")
        elif len(data) - start > limit:  # every value takes a byte at least: only then can there be too many
            if _count(data, start, name, codec, max_depth, limit, fast_ok) > limit:
                raise DecodeError(f"{where}{name}: {budget_message(limit)}")
        if "python" in engines:
            try:
                obj = decode_payload(data, start, name, codec, max_depth, newer, limit)
            except Located as exc:
                path = format_path(exc.loc)
                raise DecodeError(f"{where}{exc.message} - at `{path}` in {name}", path) from None
    if obj is None:
        raise _declined(where, name, max_depth)
    _check_program_version(obj, where)
    return _padding.settle(obj, source)  # type: ignore[no-any-return]


def decode_plain(
    data: bytes,
    cls: type[BaseModel],
    format: Codec = "compact",
    *,
    source: str = "",
    max_elements: budgets.Budget | None = None,
) -> Any | None:
    """A `cls` value in raw Thrift `data` (no header) as plain objects, no model built: each struct an object whose
    attributes are the IDL's fields (the model's default where absent), enums as ints, a union's member the one key
    of its `__dict__`. Only where `decode` (at its default `max_depth`) would build a model of the same values by its
    fast path (canonical bytes, every byte read, unions single, required fields present, enums known, no
    expression); None otherwise, and
    `decode` decides and words the error. A `budgets.Budget` is charged the values it holds, as `decode` charges
    it (and refused alike past it); without one, bound `len(data)` (every value takes a byte at least)."""
    name = getattr(cls, "__name__", repr(cls))
    if MODELS.get(name) is not cls:
        raise DecodeError(f"Expected an opwire model class (opwire.schema.models), got {cls!r}")
    data, codec = bytes(data), _codec(format)
    read = _plain_read(data, name, codec, None if max_elements is None else max_elements.remaining)
    if read is None:
        return None
    obj, count = read
    if max_elements is not None:
        if count is None:  # a list or map longer than the budget: `decode` decides
            return None
        max_elements.spend(count, f"{source or name}: values decoded so far", "")
    return obj


def _plain_read(data: bytes, name: str, codec: str, limit: int | None) -> tuple[Any, int | None] | None:
    """(`decode_plain`'s value, its values counted against `limit` as `fast.count_values` counts them, when there
    is a limit), or None: the C module's one pass (`_cplan.thrift_plain`), or without it fastbinary's decode and
    re-encode, then its count."""
    if _cplan.AVAILABLE:
        return _cplan.thrift_plain(data, name, codec, len(data) if limit is None else limit)
    obj = fast.decode_plain(data, name, codec)
    if obj is None:
        return None
    return obj, None if limit is None else fast.count_values(data, 0, name, codec, limit)


def _fast_decode(data: bytes, start: int, name: str, codec: str, limit: int) -> tuple[Any, int] | None:
    """The fast path: the C module's strict reader of canonical Thrift (`_cplan`), or without it fastbinary and
    the builders compiled from the IDL; None when the input is not canonical (the checking decoder decides)."""
    if _cplan.AVAILABLE:
        return _cplan.thrift_build(data, start, name, codec, limit)
    return fast.decode(data, start, name, codec, limit)


def _declined(where: str, name: str, max_depth: int) -> DecodeError:
    """What `engine="fastbinary"` says of input its C codec does not take (the checking decoder would read it)."""
    bound = container_depth_bound()
    why = (
        f"it reads nesting only within max_depth >= {bound} (got {max_depth})"
        if max_depth < bound
        else f"it reads only canonical Thrift within {FAST_STRUCT_DEPTH} nested structs (every byte read, the same "
        "bytes written back)"
    )
    return DecodeError(
        f"{where}{name}: engine='fastbinary' declined the input: {why}; leave `engine` unset to have the checking "
        "decoder read it and name what is wrong"
    )


def _count(data: bytes, start: int, name: str, codec: str, max_depth: int, limit: int, fast_ok: bool) -> int:
    """Values the payload holds (`limit + 1` once past `limit`), found before any model is built: fastbinary
    counts (about a microsecond a struct), else the checking decoder walks without building. Malformed bytes
    count as what was read: the decoder reports them."""
    count = fast.count_values(data, start, name, codec, limit) if fast_ok else None
    if count is None:
        count = count_payload(data, start, codec, max_depth, limit)
    return 0 if count is None else count


def _check_program_version(obj: Any, where: str) -> None:
    """An ExportedProgram of another major schema version is refused, naming both versions."""
    if type(obj).__name__ != "ExportedProgram":
        return  # before the attribute: a missing one goes through pydantic's slow `__getattr__`
    version = getattr(obj, "schema_version", None)
    if version is None:
        return
    problem = schema_version_error((version.major, version.minor), where.removesuffix(": "))
    if problem is not None:
        raise problem
