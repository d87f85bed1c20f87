"""Tensor payloads of a trace: full TensorValues or digests (checksum and summary statistics)."""

from __future__ import annotations

import hashlib
import math

import torch

from opwire.schema import models as m
from opwire.serde import tensors as _tensors

__all__ = ["digest_of", "tensor_value"]


def digest_of(t: torch.Tensor, data: bytes | None = None) -> m.TensorDigest:
    """SHA-256 of the row-major little-endian bytes, plus min/max/mean and NaN/inf counts."""
    if data is None:
        data = _tensors.from_tensor(t.detach(), "digest").data
    flat = t.detach().reshape(-1)
    stats: dict[str, float] = {}
    nan = inf = 0
    if flat.numel() and flat.dtype.is_floating_point:
        f = flat.to(torch.float64)
        finite = f[torch.isfinite(f)]
        nan = int(torch.isnan(f).sum())
        inf = int(torch.isinf(f).sum())
        if finite.numel():
            stats = {"min": float(finite.min()), "max": float(finite.max()), "mean": float(finite.mean())}
    elif flat.numel() and not flat.dtype.is_complex and flat.dtype != torch.bool:
        f = flat.to(torch.float64)
        stats = {"min": float(f.min()), "max": float(f.max()), "mean": float(f.mean())}
    stats = {k: v for k, v in stats.items() if math.isfinite(v)}
    return m.TensorDigest(sha256=hashlib.sha256(data).hexdigest(), nan_count=nan, inf_count=inf, **stats)


def tensor_value(t: torch.Tensor, full: bool, where: str = "tensor") -> m.TensorValue:
    """The TensorValue of `t`: with its bytes when `full`, else with a digest and empty data."""
    tv = _tensors.from_tensor(t.detach(), where)
    tv.requires_grad = bool(t.requires_grad)
    if full:
        return tv
    return tv.model_copy(update={"data": b"", "digest": digest_of(t, tv.data)})
