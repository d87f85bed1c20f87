"""Replay's findings in the one `Finding` shape: each mismatch, skipped call and drifted op schema of a report.

`opwire replay --json` lists them under `findings` (codes `replay_*` of the catalog, docs/errors.md).
"""

from __future__ import annotations

from opwire.recording.report import Mismatch, ReplayReport
from opwire.schema import models as m
from opwire.validation.catalog import finding

__all__ = ["replay_findings"]


def replay_findings(report: ReplayReport) -> list[m.Finding]:
    """Every mismatch (with how its output differs), then every skipped call, then every drifted op schema."""
    out = [_mismatch(x) for x in report.mismatches]
    out += [finding("replay_skipped", op, index=i, reason=why).to_model() for i, op, why in report.skipped]
    out += [finding("replay_schema_drift", d.op, drift=str(d)).to_model() for d in report.schema_drift]
    return out


def _mismatch(x: Mismatch) -> m.Finding:
    f = finding("replay_mismatch", x.op, index=x.index, output=x.output, kind=x.kind, detail=x.detail).to_model()
    where = list(x.where) if x.where is not None else None
    difference = m.NodeDifference(output=x.output, kind=x.kind, max_diff=x.max_diff, max_rel=x.max_rel, where=where)
    return f.model_copy(update={"differences": [difference]})
