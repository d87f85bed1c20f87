"""Tell custom-op authors whether their ops survive export, serialization, AOTInductor and the next release.

Modules:
    bccheck: `bc_check`: does a new version of an op library break callers and files written against the old?
    catalog: the catalog of finding codes (`CODES`), and findings made from it
    dispatch_keys: what the dispatcher holds for one op: kernels per key, the fake implementation, the vmap route
    findings: what a finding is: `Severity`, `Code`, `Finding`
    opcheck: `torch.library.opcheck` on the user's sample inputs, its results as findings
    replay_findings: replay's mismatches, skipped calls and drifted op schemas as findings
    roundtrip_check: record the op, serialize the trace, replay it, compare (`ops validate --sample-inputs`)
    snapshot: `snapshot_ops`: every op of some namespaces as a stable, diffable `OpLibrarySnapshot`
    type_checks: schema-type checks of one op: serializability and AOTInductor support
    validate: `validate_op` and `OpReport`: will a custom op survive export, serialization, AOTInductor and vmap?
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
