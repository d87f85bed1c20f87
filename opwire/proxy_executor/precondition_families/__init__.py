"""One checked precondition per family of kernels that trust their indices, offsets or companion tensors.

Each check reads the call's arguments by name (`Args`, a mapping of the schema's argument names to
values) and returns what is wrong, or None. `policy_rules.FAMILIES` says which ops each family covers;
every check is cheap next to its kernel (shapes, and one min/max pass over index tensors). One module per
kind of kernel.

Modules:
    common: what every family's check reads: the call's arguments by name, small shape and value tests
    indices: kernels that trust index and offset tensors: embedding bags, pooling indices, CTC targets, segments
    norms: norm kernels: per-channel and per-row companion tensors of batch, layer and group norm
    rnn: recurrent kernels: weights that match hx, packed batch sizes, oneDNN's buffers and workspace
    shapes: kernels that trust companion shapes or views: attention and pad backwards, views, FFT dims, optimizers
    sparse: conversions to sparse layouts: the compressed tensors they make carry no dense dimensions
"""

from __future__ import annotations

from opwire.proxy_executor.precondition_families import indices, norms, rnn, shapes, sparse
from opwire.proxy_executor.precondition_families.common import Args, Builder

__all__ = ["CHECKS", "Args"]

CHECKS: dict[str, Builder] = {**norms.CHECKS, **rnn.CHECKS, **indices.CHECKS, **shapes.CHECKS, **sparse.CHECKS}
"""Family -> a builder taking the op ("aten::lstm.input") and giving its check of the call's named arguments."""
