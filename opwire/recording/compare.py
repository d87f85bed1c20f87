"""Compare a replayed value with what a trace recorded: dtype, shape, strides, then values or digests."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

from opwire.errors import OpwireError
from opwire.proxy_executor.targets import resolve
from opwire.recording.definedness import UNDEFINED, metadata_names, uninitialised
from opwire.recording.payloads import digest_of
from opwire.schema import models as m
from opwire.serde import tensors

__all__ = [
    "DEFAULT_TOLERANCES",
    "GENERATOR_KEY",
    "Difference",
    "Errors",
    "compare_scalar",
    "compare_tensor",
    "reproducible",
    "tolerance",
]

GENERATOR_KEY = "generator"
"""CallRecord metadata key set when the call drew from a `torch.Generator` the trace does not carry."""

DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-6),
    torch.complex64: (1e-5, 1e-6),
    torch.float16: (1e-3, 1e-5),
    torch.complex32: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}
"""(rtol, atol) per floating dtype when the caller gives none; float8 types and unknown ones use (0.125, 1e-3)."""

_LOOSEST = (0.125, 1e-3)


def tolerance(dtype: torch.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    """The (rtol, atol) to compare values of `dtype`: the caller's, else the dtype's default."""
    d_rtol, d_atol = DEFAULT_TOLERANCES.get(dtype, _LOOSEST)
    return (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)


@dataclass(frozen=True)
class Difference:
    """One way a replayed value differs from the recorded one."""

    kind: str  # "shape" | "dtype" | "stride" | "value" | "missing"
    detail: str
    max_diff: float | None = None
    where: tuple[int, ...] | None = None
    max_rel: float | None = None


@dataclass
class Errors:
    """Largest absolute and relative differences seen, also where values agree within tolerance."""

    abs: float = 0.0
    rel: float = 0.0

    def add(self, a: float, r: float) -> None:
        """Keep the larger of each."""
        self.abs, self.rel = max(self.abs, a), max(self.rel, r)


def compare_tensor(
    got: Any,
    want: m.TensorValue,
    rtol: float | None,
    atol: float | None,
    values: bool = True,
    load: Callable[[], torch.Tensor] | None = None,
    errors: Errors | None = None,
    same: Callable[[torch.Tensor], bool] | None = None,
) -> Difference | None:
    """The first difference between replayed `got` and recorded `want` (None when they agree).

    `load` rebuilds the recorded tensor (e.g. from a cache); by default it is rebuilt from `want`.
    `same(got)`, asked before `load`, says whether `got` holds the recorded payload byte for byte (then they
    agree, as `torch.equal` would find, without rebuilding the recorded tensor).
    `rtol`/`atol` of None take the dtype's default (`tolerance`); `errors` collects the largest differences.
    """
    if not isinstance(got, torch.Tensor):
        return Difference("missing", f"expected a tensor, the replay gave {type(got).__name__}")
    st = tensors.TORCH_DTYPES.get(want.dtype)  # keyed by an IntEnum: the recorded int finds it (None: unknown)
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
    rtol, atol = tolerance(got.dtype, rtol, atol)
    if not want.data and want.digest is not None:
        return _compare_digest(got, want.digest, rtol, atol)
    if same is not None and same(got):
        return None
    if load is None:
        expected = tensors.to_tensor(want.model_copy(update={"requires_grad": False}), got.device, "recorded")
    else:
        expected = load()
    return _compare_values(got.detach(), expected.detach().to(got.device), rtol, atol, errors)


def _compare_values(
    got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, errors: Errors | None = None
) -> Difference | None:
    exact = not (got.dtype.is_floating_point or got.dtype.is_complex)
    if torch.equal(got, want):  # the usual case on the same build, and much cheaper than allclose
        return None
    wide = torch.complex128 if got.dtype.is_complex else torch.float64
    g64, w64 = got.to(wide), want.to(wide)
    diff = (g64 - w64).abs()
    if exact:
        bad = got != want
    else:
        bad = ~torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    finite = torch.isfinite(diff)
    # every |a - b| finite: neither side holds a NaN or an infinity (NaN - x, inf - x and inf - inf are not finite)
    all_finite = bool(finite.all())
    worst_abs = float(diff.max()) if all_finite else float(diff[finite].max()) if bool(finite.any()) else 0.0
    rel = diff / w64.abs()
    rel_ok = torch.isfinite(rel)
    worst_rel = float(rel[rel_ok].max()) if bool(rel_ok.any()) else 0.0
    if errors is not None:
        errors.add(worst_abs, worst_rel)
    count = int(bad.sum())
    if not count:
        return None
    diff = torch.where(bad, diff.nan_to_num(nan=math.inf), torch.zeros_like(diff))
    flat = int(diff.reshape(-1).argmax())
    where = _unravel(flat, tuple(got.shape))
    largest = float(diff.reshape(-1)[flat])
    rule = "exactly" if exact else f"beyond rtol={rtol:g}, atol={atol:g}"
    special = "" if exact or all_finite else _non_finite(got, want)
    expected, actual = (want[where].item(), got[where].item()) if got.dim() else (want.item(), got.item())
    return Difference(
        "value",
        f"{count} of {got.numel()} elements differ {rule}{special}; largest difference {largest:g} at "
        f"{list(where)}: expected {expected!r}, got {actual!r}",
        largest,
        where,
        worst_rel,
    )


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of element `flat` of a contiguous tensor of `shape` (`torch.unravel_index`, without building
    tensors for a handful of integers)."""
    where = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        where.append(i)
    return tuple(reversed(where))


def _non_finite(got: torch.Tensor, want: torch.Tensor) -> str:
    """Names NaN and infinity differences: ", 3 NaN where finite values were recorded" (empty when none)."""
    parts = []
    for label, test in (("NaN", torch.isnan), ("inf", torch.isinf)):
        g, w = test(got), test(want)
        new, lost = int((g & ~w).sum()), int((w & ~g).sum())
        if new:
            parts.append(f"{new} {label} where the recording had none")
        if lost:
            parts.append(f"{lost} recorded {label} replayed as other values")
    return f" ({'; '.join(parts)})" if parts else ""


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


def compare_scalar(got: Any, want: Any, rtol: float | None, atol: float | None) -> Difference | None:
    """Compare a replayed number (or None) with the recorded one (None tolerances: float64's defaults)."""
    rtol, atol = tolerance(torch.float64, rtol, atol)
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


@cache
def _seeded_or_uninitialised(target: str) -> bool:

    if uninitialised(target):
        return True
    try:
        tags = getattr(resolve(target).fn, "tags", ())
    except OpwireError:
        return False
    return torch.Tag.nondeterministic_seeded in tags


def reproducible(target: str, metadata: Mapping[str, str] | None = None, name: str | None = None) -> bool:
    """Whether a call's output values can be compared: not for random ops (tagged `nondeterministic_seeded`),
    `empty*` (uninitialised memory) or a call that drew from a caller's generator; with `name` (a tensor name,
    or `output N` for a scalar), not for a value the recording marked undefined (`definedness.UNDEFINED`).
    Replay, chained replay, `--collectives` replay and diff share this rule; for the others they compare dtype,
    shape and strides only."""
    if metadata is not None and GENERATOR_KEY in metadata:
        return False
    if _seeded_or_uninitialised(target):
        return False
    if name is None or metadata is None or UNDEFINED not in metadata:
        return True
    return name not in metadata_names(metadata, UNDEFINED, f"call {target}")
