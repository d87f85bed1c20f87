"""Tell custom-op authors whether their ops survive export, serialization, AOTInductor and the next release.

`validate` (validate_op, OpReport), `findings` (the one catalog of finding codes), `dispatch_keys` (which
kernels an op has), `type_checks` (serializability and AOTInductor of a schema), `opcheck` (torch's
opcheck on sample inputs), `roundtrip_check` (record -> serialize -> replay), `snapshot` (an op library as
data), `bccheck` (two snapshots compared).
"""

from __future__ import annotations

from opwire.validation.bccheck import BcChange, BcReport, bc_check
from opwire.validation.catalog import CODES
from opwire.validation.findings import Finding, Severity
from opwire.validation.snapshot import load_snapshot, snapshot_ops
from opwire.validation.validate import OpReport, validate_op

__all__ = [
    "CODES",
    "BcChange",
    "BcReport",
    "Finding",
    "OpReport",
    "Severity",
    "bc_check",
    "load_snapshot",
    "snapshot_ops",
    "validate_op",
]
