"""Inputs and outputs of `opwire run` and `opwire exec`: one reader for input files, one JSON shape for values.

An inputs file is one of
- a `Values` file (opwire's record; `opwire.serde.values({...})` makes one; JSON, binary or compact),
- a plain JSON object `{"x": [[1.0, 2.0]], "n": 3}` (nested lists become tensors, numbers stay numbers),
- a `torch.save`d dict of tensors, read only with `--allow-pickle` (it is a pickle).
Every value prints as `describe(v)`: tensors with dtype, shape, device, a few values and summary statistics.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from typing import Any

from opwire.errors import DecodeError, first_line, printable

__all__ = ["INPUTS_HELP", "describe", "read_inputs", "text"]

INPUTS_HELP = (
    'An inputs file is a plain JSON object of nested lists and numbers ({"x": [[1.0, 2.0]]}), a Values file '
    "(`opwire run --out` writes one; it keeps dtypes), or a torch.save'd dict of tensors (only with --allow-pickle)."
)
_SHOWN = 6  # values shown per tensor


def read_inputs(
    path: str,
    fmt: str | None,
    *,
    allow_pickle: bool = False,
    dtypes: Mapping[str, str] | None = None,
    max_elements: int | None = None,
) -> dict[str, Any]:
    """The Python values an inputs file holds, by name (`dtypes` gives plain-JSON tensors their dtype)."""
    import opwire
    from opwire.program import open as open_file
    from opwire.schema import models as m
    from opwire.serde import framing
    from opwire.serde.files import read_head, read_input

    try:
        head = read_head(path)  # the first bytes decide before the rest is read (/dev/zero is refused here)
        if head.startswith(b"PK\x03\x04"):
            return _torch_saved(path, allow_pickle)
        if fmt not in (None, "json") and not framing.has_header(head):  # raw Thrift: the caller named the codec
            raw = read_input(path, what="--inputs file")
            return opwire.serde.python_values(opwire.loads(raw, m.Values, format=fmt, max_elements=max_elements))  # type: ignore[call-overload]
        if not (framing.has_header(head) or head.lstrip()[:1] == b"{"):
            raise DecodeError(
                f"{path}: not a Values JSON object (it starts with {head[:8]!r}), a plain JSON object, a "
                "torch.save file nor a file opwire wrote in Thrift form; pass --inputs-format binary|compact "
                "for raw Thrift"
            )
        data = read_input(path, what="--inputs file")  # within the input-size budget
    except OSError as exc:
        raise DecodeError(f"cannot read --inputs {path}: {exc.strerror or exc}") from None
    if not framing.has_header(data) and not _is_values_json(data):
        return _plain_json(data, path, dtypes or {})
    values: m.Values = open_file(path, expect="values", max_elements=max_elements)  # sniffed and budgeted there
    return opwire.serde.python_values(values)


def _is_values_json(data: bytes) -> bool:
    """A `Values` JSON file has one top-level key, "values", holding an object."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return True  # let the Values decoder report where the JSON breaks
    return not isinstance(doc, dict) or (set(doc) == {"values"} and isinstance(doc["values"], dict))


def _plain_json(data: bytes, path: str, dtypes: Mapping[str, str]) -> dict[str, Any]:
    import torch

    doc = json.loads(data)  # _is_values_json parsed it already: an object that is not a Values record
    out: dict[str, Any] = {}
    for name, value in doc.items():
        if isinstance(value, list):
            try:
                t = torch.tensor(value)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise DecodeError(
                    f"{path}: input {name!r} is a list that is not a rectangular array of numbers ({exc}); "
                    "give a tensor as nested lists of equal length",
                    name,
                ) from None
            want = dtypes.get(name)
            if want is not None and (t.dtype != torch.bool or want == "bool"):
                target = getattr(torch, want, None)
                if isinstance(target, torch.dtype) and (target.is_floating_point or not t.is_floating_point()):
                    t = t.to(target)
            out[name] = t
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            raise DecodeError(
                f"{path}: input {name!r} is a JSON {type(value).__name__}; expected nested lists (a tensor) or a "
                "number (or a Values file, as `opwire run --out` writes)",
                name,
            )
    return out


def _torch_saved(path: str, allow_pickle: bool) -> dict[str, Any]:
    import torch

    if not allow_pickle:
        raise DecodeError(
            f"--inputs {path} is a zip (a torch.save pickle); pickles run code when loaded: pass --allow-pickle "
            'for a file you trust, or give the inputs as plain JSON ({"x": [[1.0, 2.0]]})'
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (zipfile.BadZipFile, RuntimeError, OSError, EOFError, ValueError) as exc:
        raise DecodeError(f"--inputs {path}: torch.load failed ({str(exc).splitlines()[0]})") from None
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        raise DecodeError(
            f"--inputs {path}: expected a torch.save'd dict of name -> tensor, got {type(obj).__name__}"
            + (" with other values" if isinstance(obj, dict) else "")
        )
    return dict(obj)


def describe(v: Any) -> dict[str, Any]:
    """A value as JSON: tensors as {kind, dtype, shape, device, values, stats}; scalars as {kind, value}.

    A tensor is read without materializing it: at most `_SAMPLE` elements (in index order) are gathered for
    the statistics, so a view, an `expand` to 2**30 elements or a huge output costs a few MB. Sparse,
    quantized, nested and meta tensors are described by their layout; what cannot be read is left out."""
    import torch

    if isinstance(v, torch.Tensor):
        return _tensor(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"kind": type(v).__name__, "value": v}
    if isinstance(v, (list, tuple)):
        return {"kind": type(v).__name__, "items": [describe(x) for x in v[:_SHOWN_ITEMS]], "length": len(v)}
    return {"kind": type(v).__name__, "value": printable(repr(v)[:200])}


_SAMPLE = 1 << 20  # elements read for statistics at most
_GATHER = 1 << 16  # elements gathered from a non-contiguous tensor at most
_SHOWN_ITEMS = 64  # items of a list described at most


def _tensor(v: Any) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"kind": "Tensor", "dtype": str(v.dtype).removeprefix("torch."), "device": str(v.device)}
    if v.is_nested:
        out["layout"] = "nested"
        out["shape"] = [int(v.size(0))]
        return out
    out["shape"] = [int(s) for s in v.shape]
    if v.layout != torch.strided:
        out["layout"] = str(v.layout).removeprefix("torch.")
        if v.layout == torch.sparse_coo:
            out["nnz"] = int(v._nnz())
        return out
    if v.device.type == "meta":
        return out
    try:
        sample, total = _sample(v.detach())
        if v.is_quantized:
            out["quantized"] = True
            sample = sample.dequantize()
        out["values"] = [_scalar(x) for x in sample[:_SHOWN].cpu().tolist()]
        out["stats"] = _stats(sample)
        if total > sample.numel() and out["stats"] is not None:
            out["stats"]["of_first"] = int(sample.numel())
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
        out["note"] = f"values not shown: {printable(first_line(exc))[:200]}"
    return out


def _sample(v: Any) -> tuple[Any, int]:
    """The first `_SAMPLE` elements of `v` in index order (gathered, never the whole tensor copied) and numel."""
    import torch

    total = v.numel()
    if total <= _SAMPLE:
        return v.reshape(-1) if v.is_contiguous() else v.clone().reshape(-1), total
    if v.is_contiguous():
        return v.reshape(-1)[:_SAMPLE], total
    index = torch.unravel_index(torch.arange(_GATHER), tuple(v.shape))
    return v[index], total


def _scalar(x: Any) -> Any:
    if isinstance(x, complex):
        return repr(x)
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)  # JSON has no NaN or Infinity
    return x


def _stats(flat: Any) -> dict[str, Any] | None:
    import torch

    if flat.numel() == 0 or flat.is_complex():
        return None
    f = flat.cpu().to(torch.float64)
    finite = f[torch.isfinite(f)]
    stats = {"min": f.min().item(), "max": f.max().item(), "mean": f.mean().item()}
    stats["std"] = f.std().item() if f.numel() > 1 else 0.0
    if finite.numel() != f.numel():
        stats["nonfinite"] = int(f.numel() - finite.numel())
    return {k: _scalar(v) for k, v in stats.items()}


def text(d: dict[str, Any]) -> str:
    """One line for a described value: `float32[5, 4] on cpu  min -1.2 max 0.9 mean 0.01 std 0.5  [0.1, ...]`."""
    if d["kind"] == "Tensor":
        head = f"{d['dtype']}[{', '.join(str(s) for s in d['shape'])}] on {d['device']}"
        if "layout" in d:
            head += f" ({d['layout']}" + (f", {d['nnz']} stored" if "nnz" in d else "") + ")"
        stats = d.get("stats")
        if stats:
            of = stats.get("of_first")
            head += "  " + " ".join(f"{k} {_num(v)}" for k, v in stats.items() if k != "of_first")
            head += f" (of the first {of} values)" if of else ""
        if "note" in d:
            head += f"  ({d['note']})"
        if "values" in d:
            n = 1
            for s in d["shape"]:
                n *= s
            more = ", ..." if n > len(d["values"]) else ""
            head += f"  [{', '.join(_num(x) for x in d['values'])}{more}]"
        return head
    if "items" in d:
        more = ", ..." if d.get("length", len(d["items"])) > len(d["items"]) else ""
        return f"{d['kind']} of {d.get('length', len(d['items']))}: [{', '.join(text(x) for x in d['items'])}{more}]"
    return f"{d['kind']} {d['value']!r}" if d["kind"] != "NoneType" else "None"


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)
