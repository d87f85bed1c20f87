"""Tell custom-op authors whether their ops survive export, serialization, AOTInductor and the next release.

Modules:
    bccheck: `bc_check`: does a new version of an op library break callers and files written against the old?
    catalog: the catalog of finding codes (`CODES`), and findings made from it
    dispatch_keys: what the dispatcher holds for one op: kernels per key, the fake implementation, the vmap route
    findings: what a finding is: `Severity`, `Code`, `Finding`
    from_replay: `replay_findings`: replay's mismatches, skipped calls and drifted op schemas as findings
    opcheck: `torch.library.opcheck` on the user's sample inputs, its results as findings
    roundtrip_check: record the op, serialize the trace, replay it, compare (`ops validate --sample-inputs`)
    snapshot: `snapshot_ops`: every op of some namespaces as a stable, diffable `OpLibrarySnapshot`
    type_checks: schema-type checks of one op: serializability and AOTInductor support
    validate: `validate_op` and `OpReport`: will a custom op survive export, serialization, AOTInductor and vmap?
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opwire._lazy import lazy_getattr, lazy_names

# public name -> module that defines it, imported on first use: validating ops imports torch, `opwire --help` needs none
_LAZY = {
    "BcChange": "opwire.validation.bccheck",
    "BcReport": "opwire.validation.bccheck",
    "bc_check": "opwire.validation.bccheck",
    "CODES": "opwire.validation.catalog",
    "Finding": "opwire.validation.findings",
    "Severity": "opwire.validation.findings",
    "load_sample_inputs": "opwire.validation.opcheck",
    "replay_findings": "opwire.validation.from_replay",
    "load_snapshot": "opwire.validation.snapshot",
    "snapshot_ops": "opwire.validation.snapshot",
    "OpReport": "opwire.validation.validate",
    "checks_run": "opwire.validation.validate",
    "format_reports": "opwire.validation.validate",
    "validate_op": "opwire.validation.validate",
    "validation_output": "opwire.validation.validate",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names
    from opwire.validation.bccheck import BcChange as BcChange
    from opwire.validation.bccheck import BcReport as BcReport
    from opwire.validation.bccheck import bc_check as bc_check
    from opwire.validation.catalog import CODES as CODES
    from opwire.validation.findings import Finding as Finding
    from opwire.validation.findings import Severity as Severity
    from opwire.validation.from_replay import replay_findings as replay_findings
    from opwire.validation.opcheck import load_sample_inputs as load_sample_inputs
    from opwire.validation.snapshot import load_snapshot as load_snapshot
    from opwire.validation.snapshot import snapshot_ops as snapshot_ops
    from opwire.validation.validate import OpReport as OpReport
    from opwire.validation.validate import checks_run as checks_run
    from opwire.validation.validate import format_reports as format_reports
    from opwire.validation.validate import validate_op as validate_op
    from opwire.validation.validate import validation_output as validation_output

__all__ = lazy_names(_LAZY, ())

__getattr__ = lazy_getattr(__name__, __path__, _LAZY)  # also `opwire.validation.<submodule>` without importing it first
