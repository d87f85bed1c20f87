"""The inputs the per-op and companion fuzzes did not vary (issue 25, item 3), as cases of one op's call.

A case is one call of an admitted op with one thing made hostile, on one axis:

- `none`: None for every optional argument at once, then for each one alone;
- `companion`: one tensor argument replaced by a 1-element, a 0-d or a long (4096-element) tensor, or by
  indices far outside any table (2**40, -2**40);
- `dtype`: one tensor argument in another dtype a file can carry (float8, complex32, uint16/32/64, ...);
- `layout`: one tensor argument non-contiguous, overlapping (as_strided with strides of 1) or zero-stride;
- `file`: one tensor argument as the non-strided tensors a file can make through admitted ops: meta
  (`empty(device=meta)`, `_to_copy`), sparse COO (hybrid too: `to_sparse(sparse_dim)`), CSR and CSC
  (`to_sparse_csr`, `empty(layout=...)`; batched, never with dense dimensions: the sparse_conversion family
  refuses those). Quantized and oneDNN tensors are not among them: the export schema's ScalarType has no
  quantized member, and `to_mkldnn` and a `_mkldnn` layout argument are refused (test_input_fuzz.py checks both);
- `alias`: two tensor arguments the same tensor, or overlapping views of one storage;
- `threads`: the call and its layout and alias cases again with several intra-op threads.

Values come from a real call of the op when one was seen (companion_fuzz.real_calls), else from its schema
(`base_call`: benign values around one shape).
"""

from __future__ import annotations

import random
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

from opwire.schema.opschema import OpArg, OpSchema

__all__ = ["AXES", "FILE_DTYPES", "THREADS", "Case", "base_call", "cases", "variants"]

AXES = ("base", "none", "companion", "dtype", "layout", "file", "alias", "threads")
THREADS = 4
"""The intra-op threads of the `threads` axis (every other case runs on one)."""
FILE_DTYPES = (
    torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.float16,
    torch.bfloat16, torch.complex64, torch.complex32, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16,
    torch.uint32, torch.uint64,
)  # fmt: skip
"""Dtypes the export schema's ScalarType names (what a file's tensors and dtype arguments can be)."""
_INDEX = re.compile(r"ind|offset|length|target|perm|counts|batch_sizes|bag|argmax|mask|labels|positions")


class Case(NamedTuple):
    """One call of `op` with `values` by argument name; `label` says what was made hostile."""

    op: str
    axis: str
    label: str
    values: dict[str, Any]
    threads: int = 1


def _shaped(name: str, shape: tuple[int, ...], r: random.Random) -> torch.Tensor:
    if _INDEX.search(name):
        return torch.randint(0, 2, shape)
    return torch.randn(shape, generator=torch.Generator().manual_seed(r.randrange(1 << 30)))


def _int_list(name: str, shape: tuple[int, ...], n: int | None) -> list[int]:
    k = n or 2
    if "size" in name or "shape" in name:
        return list(shape) if n is None else [2] * k
    if "padding" in name:
        return [0] * k
    if name.startswith("dim") or name in ("dims", "axis"):
        return [len(shape) - 1] if n is None else list(range(k))
    return [1] * k


def _value(a: OpArg, shape: tuple[int, ...], r: random.Random) -> Any:
    base = a.type.rstrip("?")
    if base == "Tensor":
        return _shaped(a.name, shape, r)
    if base == "Tensor[]":
        return [_shaped(a.name, shape, r), _shaped(a.name, shape, r)]
    if base == "Tensor?[]":
        return [torch.randint(0, 2, (2,))]
    if base in ("int", "SymInt"):
        return len(shape) - 1 if "dim" in a.name else 1
    if base.startswith(("int[", "SymInt[")):
        return _int_list(a.name, shape, a.N)
    if base in ("float", "Scalar"):
        return 0.5
    if base == "bool":
        return False
    if base.startswith("bool["):
        return [True] * (a.N or 1)
    if base == "ScalarType":
        return torch.float32
    return ...  # a type the node builder does not spell: the schema's default, or missing


def base_call(schema: OpSchema, shape: tuple[int, ...], seed: int = 0) -> dict[str, Any]:
    """Benign values of `schema`'s arguments around `shape`: what an op with no real call is fuzzed from."""
    r = random.Random(f"{schema.qualname}/{seed}")
    values: dict[str, Any] = {}
    for a in schema.arguments:
        if a.has_default and a.type.rstrip("?") != "Tensor":
            continue
        v = _value(a, shape, r)
        if v is not ...:
            values[a.name] = v
        elif a.is_optional:
            values[a.name] = None
    return values


def _convert(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    try:
        return v.to(dtype)
    except (RuntimeError, TypeError):
        return torch.zeros(v.shape, dtype=dtype)


def _overlapping(v: torch.Tensor) -> torch.Tensor:
    """`v`'s shape laid over a storage with every stride 1: neighbouring elements share memory."""
    store = torch.randn(sum(v.shape) + 1).to(v.dtype)
    return store.as_strided(v.shape, [1] * v.dim())


def variants(v: torch.Tensor, r: random.Random) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """(axis, label, a maker of the hostile replacement) for one tensor argument `v`."""
    yield "companion", "1 element", lambda: torch.zeros(1, dtype=v.dtype)
    yield "companion", "0-d", lambda: torch.zeros((), dtype=v.dtype)
    yield "companion", "4096 elements", lambda: torch.zeros(4096, dtype=v.dtype)
    yield "companion", "index 2**40", lambda: torch.full(v.shape, 2**40, dtype=torch.int64)
    yield "companion", "index -2**40", lambda: torch.full(v.shape, -(2**40), dtype=torch.int64)
    for dtype in r.sample([d for d in FILE_DTYPES if d != v.dtype], 3):
        yield "dtype", str(dtype), lambda dtype=dtype: _convert(v, dtype)
    if v.dim():
        yield "layout", "non-contiguous", lambda: torch.stack([v, v], -1)[..., 0]
        yield "layout", "overlapping", lambda: _overlapping(v)
        yield "layout", "zero stride", lambda: v.reshape(-1)[:1].expand(v.shape) if v.numel() else v
        yield "file", "sparse_coo", lambda: v.to_sparse()
    if v.dim() >= 2:  # compressed layouts with batch dimensions, never dense ones (the sparse_conversion family)
        yield "file", "sparse_coo with a dense dimension", lambda: v.to_sparse(v.dim() - 1)
        yield "file", "sparse_csr", lambda: v.to_sparse_csr()
        yield "file", "sparse_csc", lambda: v.to_sparse_csc()
    yield "file", "meta", lambda: v.to("meta")


def _tensor_args(values: dict[str, Any]) -> list[str]:
    return [k for k, v in values.items() if isinstance(v, torch.Tensor) and v.layout == torch.strided]


def _aliases(values: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    names = _tensor_args(values)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            x, y = values[a], values[b]
            if x.shape == y.shape and x.dtype == y.dtype:
                yield f"{b} is {a}", {b: x}
                if x.numel():
                    store = torch.randn(x.numel() + 1).to(x.dtype)
                    yield f"{a}, {b} overlap by all but one", {a: store[:-1].view(x.shape), b: store[1:].view(x.shape)}
            else:
                yield f"{b} is {a}", {b: x}


def cases(op: str, schema: OpSchema, values: dict[str, Any], seed: int = 0) -> list[Case]:
    """Every case of one op's call (`values`: a real or `base_call` call), in axis order."""
    with warnings.catch_warnings():  # torch's beta warnings for sparse CSR and complex32
        warnings.simplefilter("ignore")
        return _cases(op, schema, values, random.Random(f"{op}/{seed}"))


def _cases(op: str, schema: OpSchema, values: dict[str, Any], r: random.Random) -> list[Case]:
    out = [Case(op, "base", "as given", values)]
    optional = [a.name for a in schema.arguments if a.is_optional]
    if optional:
        out.append(Case(op, "none", "every optional None", {**values, **dict.fromkeys(optional)}))
        out += [Case(op, "none", f"{n} None", {**values, n: None}) for n in optional if values.get(n) is not None]
    for name in _tensor_args(values):
        for axis, label, make in variants(values[name], r):
            try:
                out.append(Case(op, axis, f"{name}: {label}", {**values, name: make()}))
            except (RuntimeError, TypeError, ValueError):  # no such tensor of this dtype or rank
                continue
    for name, v in values.items():  # a tensor list's first element, on the companion and layout axes
        if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            for axis, label, make in variants(v[0], r):
                if axis in ("companion", "layout", "file"):
                    try:
                        out.append(Case(op, axis, f"{name}[0]: {label}", {**values, name: [make(), *v[1:]]}))
                    except (RuntimeError, TypeError, ValueError):
                        continue
    out += [Case(op, "alias", label, {**values, **change}) for label, change in _aliases(values)]
    again = [c for c in out if c.axis in ("base", "layout", "alias")]
    out += [Case(op, "threads", f"{c.label} ({THREADS} threads)", c.values, THREADS) for c in again]
    return out
