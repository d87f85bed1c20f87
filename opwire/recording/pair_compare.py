"""One aligned pair of calls of two traces compared: arguments by value (tensors by dtype and shape), outputs
by dtype, shape, strides and values under the one rule (`compare.reproducible`), worded for A and B."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from opwire.errors import OpwireError
from opwire.recording.compare import Difference, Errors, compare_scalar, compare_tensor, reproducible
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.schema.refs import tensor_names
from opwire.serde import tensors

__all__ = ["Pair", "argument_differences", "output_differences"]

_SCALARS = {"as_int", "as_float", "as_bool", "as_sym_int", "as_sym_float", "as_sym_bool"}


@dataclass
class Pair:
    """The two traces' tensors and the tolerances a pair of calls is compared with."""

    a: TraceSource
    b: TraceSource
    rtol: float | None
    atol: float | None


_EXPECTED = re.compile(r"\bexpected\b")
_GOT = re.compile(r"\bgot\b")


def _ab(d: Difference) -> Difference:
    """A comparison worded for replay (expected = recorded, got = replayed) reworded for A (recorded in A) and B."""
    detail = _GOT.sub("B", _EXPECTED.sub("A", d.detail)).replace("the replay gave", "B has")
    detail = detail.replace("where the recording had none", "where A has none").replace("recorded ", "A's ")
    return Difference(d.kind, detail, d.max_diff, d.where, d.max_rel)


def argument_differences(pair: Pair, ra: m.CallRecord, rb: m.CallRecord) -> list[tuple[str, str]]:
    """Arguments that differ: by value for non-tensors, by dtype and shape for tensors."""
    out = []
    args_a = {na.name: na.arg for na in ra.inputs}
    args_b = {na.name: na.arg for na in rb.inputs}
    for name in [*args_a, *(n for n in args_b if n not in args_a)]:
        x, y = args_a.get(name), args_b.get(name)
        if x is None or y is None:
            out.append((f"argument {name}", f"passed only in {'A' if y is None else 'B'}"))
            continue
        names_x, names_y = tensor_names(x), tensor_names(y)
        if not names_x and not names_y:
            if x.type != y.type or not same_value(x.model_dump(), y.model_dump()):
                out.append((f"argument {name}", f"A {_shown(x)}, B {_shown(y)}"))
            continue
        if len(names_x) != len(names_y):
            out.append((f"argument {name}", f"A passes {len(names_x)} tensors, B {len(names_y)}"))
            continue
        for k, (nx, ny) in enumerate(zip(names_x, names_y, strict=True)):
            mx, my = pair.a.meta(nx), pair.b.meta(ny)
            if mx is not None and my is not None and (mx.dtype, list(mx.sizes)) != (my.dtype, list(my.sizes)):
                label = f"argument {name}" if len(names_x) == 1 else f"argument {name}[{k}]"
                out.append((label, f"A {_meta(mx)}, B {_meta(my)}"))
    return out


def same_value(x: Any, y: Any) -> bool:
    """Equal as recorded values: NaN equals NaN (a run passing `nan` twice passed the same argument), types exact."""
    if type(x) is not type(y):
        return False
    if isinstance(x, float):
        return x == y or (math.isnan(x) and math.isnan(y))
    if isinstance(x, list | tuple):
        return len(x) == len(y) and all(same_value(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(same_value(v, y[k]) for k, v in x.items())
    return bool(x == y)


def _shown(arg: m.Argument) -> str:
    return f"{arg.type}={arg.value!r}"


def _meta(tv: m.TensorValue) -> str:

    dtype = tensors.TORCH_DTYPES.get(m.ScalarType(tv.dtype))
    return f"{dtype} {list(tv.sizes)}"


def output_differences(pair: Pair, ra: m.CallRecord, rb: m.CallRecord, errors: Errors) -> list[tuple[str, Difference]]:
    """Outputs that differ; values only where both runs' values are defined and reproducible (one rule)."""
    out: list[tuple[str, Difference]] = []
    if len(ra.outputs) != len(rb.outputs):
        return [("outputs", Difference("missing", f"A returns {len(ra.outputs)} values, B {len(rb.outputs)}"))]
    for k, (x, y) in enumerate(zip(ra.outputs, rb.outputs, strict=True)):
        label = f"output {k}"
        values = reproducible(ra.target, ra.metadata, label) and reproducible(rb.target, rb.metadata, label)
        if x.type in _SCALARS or y.type in _SCALARS:
            diff = compare_scalar(y.value, x.value, pair.rtol, pair.atol) if x.type == y.type and values else None
            if x.type != y.type:
                diff = Difference("dtype", f"A returns {x.type}, B {y.type}")
            if diff is not None:
                out.append((label, diff))
            continue
        names_x, names_y = tensor_names(x), tensor_names(y)
        if len(names_x) != len(names_y):
            out.append((label, Difference("missing", f"A returns {len(names_x)} tensors, B {len(names_y)}")))
            continue
        for e, (nx, ny) in enumerate(zip(names_x, names_y, strict=True)):
            values = reproducible(ra.target, ra.metadata, nx) and reproducible(rb.target, rb.metadata, ny)
            diff = _tensor_diff(pair, nx, ny, errors, values)
            if diff is not None:
                diff = _ab(diff)
                out.append((label if len(names_x) == 1 and x.type == "as_tensor" else f"{label}[{e}]", diff))
    return out


def _layout_diff(mx: m.TensorValue, my: m.TensorValue) -> Difference | None:
    """What differs between two recorded tensors' dtype, shape and strides (their values are not compared)."""
    if mx.dtype != my.dtype:
        return Difference("dtype", f"expected {_meta(mx).split()[0]}, got {_meta(my).split()[0]}")
    if list(mx.sizes) != list(my.sizes):
        return Difference("shape", f"expected {list(mx.sizes)}, got {list(my.sizes)}")
    numel = math.prod(int(x) for x in mx.sizes)
    if numel and (list(mx.strides) != list(my.strides) or mx.storage_offset != my.storage_offset):
        return Difference(
            "stride",
            f"expected strides {list(mx.strides)} at offset {mx.storage_offset}, "
            f"got {list(my.strides)} at offset {my.storage_offset}",
        )
    return None


def _tensor_diff(pair: Pair, nx: str, ny: str, errors: Errors, values: bool = True) -> Difference | None:
    mx, my = pair.a.meta(nx), pair.b.meta(ny)
    if mx is None or my is None:
        return Difference("missing", f"no tensor entry for {nx if mx is None else ny!r}")
    try:
        if not values or pair.a.undefined(nx) or pair.b.undefined(ny):  # layout only, no payload read
            return _layout_diff(mx, my)
        if _same_bytes(pair, nx, ny, mx, my):
            return None
        if not pair.b.nbytes(ny) and my.digest is not None and not my.data:
            if mx.digest is not None and not pair.a.nbytes(nx) and not mx.data:
                same = mx.digest.sha256 == my.digest.sha256
                return None if same else Difference("value", "digests differ (both recorded with outputs='digest')")
            got_a = pair.a.load(nx)
            return compare_tensor(got_a, my, pair.rtol, pair.atol, True, None, errors)
        got = pair.b.load(ny)
        return compare_tensor(got, mx, pair.rtol, pair.atol, True, lambda: pair.a.load(nx), errors)
    except OpwireError as exc:
        return Difference("missing", f"a payload is unreadable: {exc}")


def _same_bytes(pair: Pair, nx: str, ny: str, mx: m.TensorValue, my: m.TensorValue) -> bool:
    """Whether both tensors have one layout and payloads of one SHA-256, each checked against its bytes: equal
    values (NaN payloads included) without rebuilding either tensor."""
    if (mx.dtype, list(mx.sizes), list(mx.strides), mx.storage_offset) != (
        my.dtype, list(my.sizes), list(my.strides), my.storage_offset
    ):  # fmt: skip
        return False
    db = pair.b.payload_digest(ny)  # B first: the side a comparison rebuilds first
    return db is not None and db == pair.a.payload_digest(nx)
