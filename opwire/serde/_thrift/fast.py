"""The fast path: Apache Thrift's C codec (`thrift.protocol.fastbinary`) driven by specs derived from the IDL.

fastbinary is bounded (string/container limits, 64 nested structs) but lenient: it skips fields of the
wrong wire type, replaces invalid UTF-8 with U+FFFD, reads any non-1 bool byte as false and ignores
trailing bytes. So a fast decode is accepted only if it consumed every byte and re-encoding the result
gives back exactly the input; anything else returns None and the checking decoder decides (and names
the error). Models are built by the builders compiled from the IDL (serde/_build.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache
from types import SimpleNamespace
from typing import Any

from thrift.protocol import fastbinary
from thrift.protocol.TBase import TFrozenBase
from thrift.transport.TTransport import TMemoryBuffer

from opwire.schema.models import MODELS
from opwire.serde._build import COUNT, EXPRESSIONS, TooMany, thrift_builders
from opwire.serde._padding import SETTLED
from opwire.serde._thrift.spec import build_specs, plan

__all__ = ["TooMany", "count_values", "decode", "decode_plain", "encode", "plain_classes", "verify"]

_DECODERS = {"binary": fastbinary.decode_binary, "compact": fastbinary.decode_compact}
_ENCODERS = {"binary": fastbinary.encode_binary, "compact": fastbinary.encode_compact}


class _Protocol:
    """What fastbinary reads from a protocol object: the transport and the length limits."""

    def __init__(self, trans: TMemoryBuffer, limit: int) -> None:
        self.trans = trans
        self.string_length_limit = limit
        self.container_length_limit = limit


class _Invalid(Exception):
    """A value the IDL rules out (raised inside fastbinary's callbacks)."""


def _builder(name: str) -> type:
    """A TFrozenBase subclass (so fastbinary passes fields as keywords) whose construction builds the model.

    fastbinary has typed every value by the IDL already (ints in range, nested models built by these classes):
    the builder compiled from the IDL (serde/_build.py) converts enums, checks the union's one member, required
    fields and expressions, and sets the model's fields directly. Anything it does not take raises, and the
    checking decoder decides."""
    return type(f"_Build{name}", (TFrozenBase,), {"__new__": thrift_builders()[name], "__slots__": ()})


def _check(name: str) -> Callable[[dict[str, Any]], None]:
    """Raises `_Invalid` for fields of `name` that break a union's one member, a required field or an enum."""
    p = plan(name)
    required, enums, is_union = p.required, p.enums, p.is_union
    enum_values = tuple((f, frozenset(int(e) for e in cls)) for f, cls in enums)

    def check(kw: dict[str, Any]) -> None:
        if is_union and len(kw) != 1:
            raise _Invalid(name)
        if not required.issubset(kw):
            raise _Invalid(name)
        for field, values in enum_values:
            v = kw.get(field)
            if v is not None and v not in values:
                raise _Invalid(name)

    return check


def _checker(name: str) -> type:
    """A TFrozenBase subclass whose construction checks unions, required fields and enum values, building nothing."""
    check = _check(name)

    def new(_cls: type, **kw: Any) -> None:
        check(kw)

    return type(f"_Check{name}", (TFrozenBase,), {"__new__": new, "__slots__": ()})


def _plain(name: str) -> type:
    """The class fastbinary builds a `name` value of, with its fields as keywords, for `decode_plain`: a
    `types.SimpleNamespace` (fastbinary wants a TFrozenBase) whose class answers each absent field with the
    model's default, checked as `_checker` checks; a struct whose strings go through opwire's expression grammar
    is declined (its builder checks them). A left-out field whose default is not None re-encodes to other bytes,
    so `decode_plain` declines that too: what it accepts holds the values the model would."""
    model = MODELS[name]
    ns: dict[str, Any] = {
        f: None if info.is_required() else info.get_default(call_default_factory=True)
        for f, info in model.model_fields.items()
    }
    if any(s == name for s, _ in EXPRESSIONS):
        ns["__new__"] = _decline
    elif name in SETTLED:  # checked and dropped after the build (serde/_padding.py): `decode` decides
        check, settled = _check(name), SETTLED[name]

        def new_settled(cls: type, **kw: Any) -> Any:
            if kw.get(settled) is not None:
                raise _Invalid(name)
            check(kw)
            return SimpleNamespace.__new__(cls)

        ns["__new__"] = new_settled
    else:
        p = plan(name)
        if p.is_union or p.required or p.enums:
            check = _check(name)

            def new(cls: type, **kw: Any) -> Any:
                check(kw)
                return SimpleNamespace.__new__(cls)

            ns["__new__"] = new
    return type(f"Plain{name}", (SimpleNamespace, TFrozenBase), ns)


def _decline(cls: type, **kw: Any) -> None:
    raise _Invalid(cls.__name__)


class _TooMany(Exception):
    """More values than the caller's budget (raised inside fastbinary's callbacks to stop early)."""


_COUNTING = threading.local()


def _values(v: Any) -> int:
    """Values a field's decoded value adds: structs count themselves (their counter returned None)."""
    if v is None:
        return 0
    kind = type(v)
    if kind is list or kind is set or kind is frozenset:
        if not v:
            return 1
        first = next(iter(v))
        if first is None or type(first) in _CONTAINER_TYPES:
            return 1 + sum(map(_values, v))
        return 1 + len(v)
    if kind is dict:
        return 1 + sum(map(_values, v.values()))
    return 1


_CONTAINER_TYPES = (list, set, frozenset, dict)


def _counter(name: str) -> type:
    """A TFrozenBase subclass whose construction only counts the struct and its leaves (against the budget of
    the current thread)."""
    del name

    def new(_cls: type, **kw: Any) -> None:
        state = _COUNTING.state
        state[0] += 1 + sum(map(_values, kw.values()))
        if state[0] > state[1]:
            raise _TooMany

    return type("_Count", (TFrozenBase,), {"__new__": new, "__slots__": ()})


@cache
def _count_specs() -> dict[str, list[Any]]:
    return build_specs(_counter)


@cache
def _build_specs() -> dict[str, list[Any]]:
    return build_specs(_builder)


@cache
def _check_specs() -> dict[str, list[Any]]:
    return build_specs(_checker)


@cache
def _plain_specs() -> dict[str, list[Any]]:
    return build_specs(_plain)


def plain_classes() -> dict[str, type]:
    """The `_plain` class of each struct and union (what `decode_plain` builds; the C reader builds the same)."""
    return {name: holder[0] for name, holder in _plain_specs().items()}


def encode(obj: Any, codec: str) -> bytes:
    """fastbinary's encoding of model `obj` (fields in id order, None fields left out); raises as fastbinary does.

    fastbinary's encoder reads a struct's `thrift_spec` and never its class, so the specs of the cheap `_checker`
    classes serve: the builders' specs would compile a Python builder per struct (~30 ms) that no encode runs."""
    out: bytes = _ENCODERS[codec](obj, _check_specs()[type(obj).__name__])
    return out


def decode(data: bytes, start: int, root: str, codec: str, limit: int) -> tuple[Any, int] | None:
    """(the `root` model in `data[start:]`, the values it holds) if fastbinary reads it and it is canonical; None
    when the checking decoder must decide. `TooMany` as soon as more than `limit` values are built."""
    trans = TMemoryBuffer(data)
    buf = trans.cstringio_buf
    buf.seek(start)
    state = COUNT.state = [0, limit]
    try:
        obj = _DECODERS[codec](None, _Protocol(trans, len(data) - start), _build_specs()[root])
        if buf.tell() != len(data):
            return None
        again = encode(obj, codec)
    except TooMany:
        raise
    except Exception:  # fastbinary and the builders raise many types; the checking decoder names the problem
        return None
    finally:
        del COUNT.state
    if again != memoryview(data)[start:]:
        return None
    return obj, state[0]


def decode_plain(data: bytes, root: str, codec: str) -> Any | None:
    """The `root` value in all of `data` as plain objects (`_plain`) where `decode`'s fast path would build a model
    of the same values from it: fastbinary read every byte, the same bytes written back, unions single, required
    fields present, enums known, no expression. None otherwise: `decode` decides and words the error. Counts no
    values: the caller bounds `data` (every value takes a byte at least)."""
    specs = _plain_specs()[root]
    try:
        trans = TMemoryBuffer(data)
        obj = _DECODERS[codec](None, _Protocol(trans, len(data)), specs)
        if trans.cstringio_buf.tell() != len(data) or _ENCODERS[codec](obj, specs) != data:
            return None
    except Exception:  # fastbinary and the checks raise many types; `decode` names the problem
        return None
    return obj


def verify(payload: bytes, root: str, codec: str) -> bool:
    """Whether `payload` holds one `root` value with every union single, required field present, enum known."""
    trans = TMemoryBuffer(payload)
    try:
        _DECODERS[codec](None, _Protocol(trans, len(payload)), _check_specs()[root])
    except _Invalid:
        return False
    return bool(trans.cstringio_buf.tell() == len(payload))


def count_values(data: bytes, start: int, root: str, codec: str, limit: int) -> int | None:
    """Values (structs, unions, lists, maps and leaves) the `root` value in `data[start:]` holds, building no
    model: `limit + 1` as soon as the count passes `limit`; None when fastbinary cannot read the bytes (the
    checking decoder counts then). No list or map longer than `limit` is read (fastbinary's length limit)."""
    trans = TMemoryBuffer(data)
    trans.cstringio_buf.seek(start)
    protocol = _Protocol(trans, len(data) - start)
    protocol.container_length_limit = limit
    _COUNTING.state = [0, limit]
    try:
        _DECODERS[codec](None, protocol, _count_specs()[root])
    except _TooMany:
        return limit + 1
    except Exception:  # malformed, too deep for fastbinary, or a list longer than the limit
        return None
    finally:
        count: int = _COUNTING.state[0]
        del _COUNTING.state
    return count
