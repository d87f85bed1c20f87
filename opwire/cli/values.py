"""Values `opwire run` and `opwire exec` print: one JSON shape for values, one help text for inputs files.

An inputs file is read by `opwire.program.read_inputs` (a Values file, a plain JSON object, or a torch.save'd
dict with `--allow-pickle`). Every value prints as `describe(v)`, a `ValueSummary` record: tensors with dtype,
shape, device, a few values and summary statistics.
"""

from __future__ import annotations

from typing import Any

from opwire.errors import first_line, printable
from opwire.schema import models as m

__all__ = ["INPUTS_HELP", "describe", "text"]

INPUTS_HELP = (
    'An inputs file is a plain JSON object of nested lists and numbers ({"x": [[1.0, 2.0]]}), a Values file '
    "(`opwire run --out` writes one; it keeps dtypes), or a torch.save'd dict of tensors (only with --allow-pickle)."
)
_SHOWN = 6  # values shown per tensor


def describe(v: Any) -> m.ValueSummary:
    """A value as its `ValueSummary` record: tensors with dtype, shape, device, first values and statistics.

    A tensor is read without materializing it: at most `_SAMPLE` elements (in index order) are gathered for
    the statistics, so a view, an `expand` to 2**30 elements or a huge output costs a few MB. Sparse,
    quantized, nested and meta tensors are described by their layout; what cannot be read is left out."""
    import torch

    if isinstance(v, torch.Tensor):
        return _tensor(v)
    kind = type(v).__name__
    if v is None:
        return m.ValueSummary(kind=kind, value=m.Value(as_none=True))
    if isinstance(v, bool):
        return m.ValueSummary(kind=kind, value=m.Value(as_bool=v))
    if isinstance(v, int):
        return m.ValueSummary(kind=kind, value=m.Value(as_int=v))
    if isinstance(v, float):
        return m.ValueSummary(kind=kind, value=m.Value(as_float=v))
    if isinstance(v, str):
        return m.ValueSummary(kind=kind, value=m.Value(as_string=v))
    if isinstance(v, (list, tuple)):
        return m.ValueSummary(kind=kind, items=[describe(x) for x in v[:_SHOWN_ITEMS]], length=len(v))
    return m.ValueSummary(kind=kind, value=m.Value(as_string=printable(repr(v)[:200])))


_SAMPLE = 1 << 20  # elements read for statistics at most
_GATHER = 1 << 16  # elements gathered from a non-contiguous tensor at most
_SHOWN_ITEMS = 64  # items of a list described at most
_INT64 = 1 << 63


def _tensor(v: Any) -> m.ValueSummary:
    import torch

    out: dict[str, Any] = {"kind": "Tensor", "dtype": str(v.dtype).removeprefix("torch."), "device": str(v.device)}
    if v.is_nested:
        return m.ValueSummary(**out, layout="nested", shape=[int(v.size(0))])
    out["shape"] = [int(s) for s in v.shape]
    if v.layout != torch.strided:
        out["layout"] = str(v.layout).removeprefix("torch.")
        if v.layout == torch.sparse_coo:
            out["nnz"] = int(v._nnz())
        return m.ValueSummary(**out)
    if v.device.type == "meta":
        return m.ValueSummary(**out)
    try:
        sample, total = _sample(v.detach())
        if v.is_quantized:
            out["quantized"] = True
            sample = sample.dequantize()
        first = sample[:_SHOWN].cpu()
        if first.is_complex():
            out["complex_values"] = [m.ComplexValue(real=x.real, imag=x.imag) for x in first.tolist()]
        else:
            out["values"] = [float(x) for x in first.tolist()]
        stats = _stats(sample)
        if stats is not None and total > sample.numel():
            stats = stats.model_copy(update={"of_first": int(sample.numel())})
        out["stats"] = stats
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
        out["note"] = f"values not shown: {printable(first_line(exc))[:200]}"
    return m.ValueSummary(**out)


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


def _stats(flat: Any) -> m.ValueStats | None:
    import torch

    if flat.numel() == 0 or flat.is_complex():
        return None
    f = flat.cpu().to(torch.float64)
    nonfinite = int(f.numel() - torch.isfinite(f).sum().item())
    std = f.std().item() if f.numel() > 1 else 0.0
    return m.ValueStats(
        min=f.min().item(), max=f.max().item(), mean=f.mean().item(), std=std, nonfinite=nonfinite or None
    )


def text(d: m.ValueSummary) -> str:
    """One line for a described value: `float32[5, 4] on cpu  min -1.2 max 0.9 mean 0.01 std 0.5  [0.1, ...]`."""
    if d.kind == "Tensor":
        head = f"{d.dtype}[{', '.join(str(s) for s in d.shape or ())}] on {d.device}"
        if d.layout is not None:
            head += f" ({d.layout}" + (f", {d.nnz} stored" if d.nnz is not None else "") + ")"
        if d.stats is not None:
            s = d.stats
            figures = {"min": s.min, "max": s.max, "mean": s.mean, "std": s.std, "nonfinite": s.nonfinite}
            head += "  " + " ".join(f"{k} {_num(x)}" for k, x in figures.items() if x is not None)
            head += f" (of the first {s.of_first} values)" if s.of_first else ""
        if d.note is not None:
            head += f"  ({d.note})"
        shown = _elements(d)
        if shown is not None:
            n = 1
            for size in d.shape or ():
                n *= size
            more = ", ..." if n > len(shown) else ""
            head += f"  [{', '.join(shown)}{more}]"
        return head
    if d.items is not None:
        length = d.length if d.length is not None else len(d.items)
        more = ", ..." if length > len(d.items) else ""
        return f"{d.kind} of {length}: [{', '.join(text(x) for x in d.items)}{more}]"
    if d.kind == "NoneType":
        return "None"
    return f"{d.kind} {d.value.value if d.value is not None else None!r}"


def _elements(d: m.ValueSummary) -> list[str] | None:
    """A tensor's first elements as text, each as its dtype shows it (ints exact, bools as True/False)."""
    if d.complex_values is not None:
        return [repr(complex(c.real, c.imag)) for c in d.complex_values]
    if d.values is None:
        return None
    if d.dtype == "bool" and not d.quantized:
        return [str(bool(x)) for x in d.values]
    if d.dtype is not None and ("int" in d.dtype) and not d.quantized:
        return [str(int(x)) if x == x and abs(x) <= _INT64 else _num(x) for x in d.values]
    return [_num(x) for x in d.values]


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)
