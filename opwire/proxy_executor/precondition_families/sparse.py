"""Conversions to sparse layouts: the compressed tensors they make carry no dense dimensions."""

from __future__ import annotations

from typing import Any

from opwire.proxy_executor.precondition_families.common import Args, Builder, Check, is_tensor

__all__ = ["CHECKS"]

_COMPRESSED = ("csr", "csc", "bsr", "bsc")


def _sparse_conversion(op: str) -> Check:
    name = op.partition("::")[2].partition(".")[0]
    to_compressed = name.endswith(_COMPRESSED)

    def check(args: Args) -> str | None:
        x, layout = args.get("self"), args.get("layout")
        compressed = to_compressed or (layout is not None and str(layout).endswith(_COMPRESSED))
        if not is_tensor(x) or not compressed:
            return None
        dense_dim = args.get("dense_dim")
        if dense_dim not in (None, 0):  # add.Tensor of a strided tensor and a CSR with a dense dimension: SIGSEGV
            return f"dense_dim must be None or 0 (compressed sparse tensors with dense dimensions), got {dense_dim}"
        if _dense_dims(x):
            return f"self has {_dense_dims(x)} dense dimensions: its compressed form would carry them"
        return None

    return check


def _dense_dims(x: Any) -> int:
    return 0 if str(x.layout) == "torch.strided" else int(x.dense_dim())


CHECKS: dict[str, Builder] = {"sparse_conversion": _sparse_conversion}
"""Family -> its builder."""
