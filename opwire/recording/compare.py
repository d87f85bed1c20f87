"""Compare a replayed value with what a trace recorded: dtype, shape, strides, then values or digests."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from opwire.recording.payloads import digest_of
from opwire.schema import models as m
from opwire.serde import tensors as _tensors

__all__ = ["Difference", "compare_scalar", "compare_tensor"]


@dataclass(frozen=True)
class Difference:
    """One way a replayed value differs from the recorded one."""

    kind: str  # "shape" | "dtype" | "stride" | "value" | "missing"
    detail: str
    max_diff: float | None = None
    where: tuple[int, ...] | None = None


def compare_tensor(
    got: Any,
    want: m.TensorValue,
    rtol: float,
    atol: float,
    values: bool = True,
    load: Callable[[], torch.Tensor] | None = None,
) -> Difference | None:
    """The first difference between replayed `got` and recorded `want` (None when they agree).

    `load` rebuilds the recorded tensor (e.g. from a cache); by default it is rebuilt from `want`.
    """
    if not isinstance(got, torch.Tensor):
        return Difference("missing", f"expected a tensor, the replay gave {type(got).__name__}")
    st = _tensors.TORCH_DTYPES.get(m.ScalarType(want.dtype)) if want.dtype in m.ScalarType._value2member_map_ else None
    if got.dtype != st:
        return Difference("dtype", f"expected {st}, got {got.dtype}")
    if list(got.shape) != list(want.sizes):
        return Difference("shape", f"expected {list(want.sizes)}, got {list(got.shape)}")
    if got.numel() and (list(got.stride()) != list(want.strides) or got.storage_offset() != want.storage_offset):
        return Difference(
            "stride",
            f"expected strides {list(want.strides)} at offset {want.storage_offset}, "
            f"got {list(got.stride())} at offset {got.storage_offset()}",
        )
    if not values or got.numel() == 0:
        return None
    if not want.data and want.digest is not None:
        return _compare_digest(got, want.digest, rtol, atol)
    if load is None:
        expected = _tensors.to_tensor(want.model_copy(update={"requires_grad": False}), got.device, "recorded")
    else:
        expected = load()
    return _compare_values(got.detach(), expected.detach().to(got.device), rtol, atol)


def _compare_values(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float) -> Difference | None:
    exact = not (got.dtype.is_floating_point or got.dtype.is_complex)
    if torch.equal(got, want):  # the usual case on the same build, and much cheaper than allclose
        return None
    if exact:
        bad = got != want
    else:
        if torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            return None
        bad = ~torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    diff = (
        got.to(torch.float64 if not got.dtype.is_complex else torch.complex128)
        - want.to(torch.float64 if not want.dtype.is_complex else torch.complex128)
    ).abs()
    diff = torch.where(bad, diff.nan_to_num(nan=math.inf), torch.zeros_like(diff))
    flat = int(diff.reshape(-1).argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)) if got.dim() else ()
    largest = float(diff.reshape(-1)[flat])
    count = int(bad.sum())
    rule = "exactly" if exact else f"within rtol={rtol}, atol={atol}"
    return Difference(
        "value",
        f"{count} of {got.numel()} elements differ ({rule}); largest difference {largest:g} at {list(where)}: "
        f"expected {want[where].item() if got.dim() else want.item()!r}, "
        f"got {got[where].item() if got.dim() else got.item()!r}",
        largest,
        where,
    )


def _compare_digest(got: torch.Tensor, want: m.TensorDigest, rtol: float, atol: float) -> Difference | None:
    mine = digest_of(got)
    if mine.sha256 == want.sha256:
        return None
    exact = not (got.dtype.is_floating_point or got.dtype.is_complex)
    if not exact and (mine.nan_count, mine.inf_count) == (want.nan_count, want.inf_count):
        pairs = [(getattr(mine, k), getattr(want, k)) for k in ("min", "max", "mean")]
        if all(
            a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=rtol, abs_tol=atol))
            for a, b in pairs
        ):
            return None
    stats = ", ".join(f"{k} {getattr(want, k)!r} -> {getattr(mine, k)!r}" for k in ("min", "max", "mean", "nan_count"))
    largest = max(
        (
            abs(a - b)
            for k in ("min", "max", "mean")
            if (a := getattr(mine, k)) is not None and (b := getattr(want, k)) is not None
        ),
        default=None,
    )
    return Difference("value", f"digest differs (recorded with outputs='digest'): {stats}", largest)


def compare_scalar(got: Any, want: Any, rtol: float, atol: float) -> Difference | None:
    """Compare a replayed number (or None) with the recorded one."""
    if isinstance(got, torch.Tensor) and got.dim() == 0:
        got = got.item()
    if isinstance(want, float) and isinstance(got, int | float) and not isinstance(got, bool):
        if math.isclose(got, want, rel_tol=rtol, abs_tol=atol) or (math.isnan(got) and math.isnan(want)):
            return None
        return Difference("value", f"expected {want!r}, got {got!r}", abs(got - want), ())
    if got == want and type(got) is type(want):
        return None
    if type(got) is not type(want) and not (isinstance(got, int) and isinstance(want, int) and got == want):
        return Difference("dtype", f"expected {type(want).__name__} {want!r}, got {type(got).__name__} {got!r}")
    diff = float(abs(got - want)) if isinstance(got, int | float) and isinstance(want, int | float) else None
    return Difference("value", f"expected {want!r}, got {got!r}", diff, ())
