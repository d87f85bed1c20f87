"""opwire's own check in `ops validate --sample-inputs`: record the op, serialize the trace, replay it, compare.

For each sample: record the call with `opwire.record`, write the trace as JSON and as compact Thrift
and read it back (it must come back equal), then replay it under each default policy (it must match
what was recorded; equal traces replay alike, so one replay per policy covers both codecs).
Every failure is a finding with one of `CODES`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

from opwire.errors import OpwireError, OpwireWarning
from opwire.proxy_executor.policy import DefaultPolicy
from opwire.validation.findings import CODES as FINDINGS
from opwire.validation.findings import Finding, Severity, finding

__all__ = ["CODES", "roundtrip_findings"]

ROUNDTRIP_CODES = (
    "roundtrip_not_recorded",
    "roundtrip_record_failed",
    "roundtrip_serialize_failed",
    "roundtrip_replay_failed",
)
CODES: dict[str, tuple[Severity, str]] = {c: (FINDINGS[c].severity, FINDINGS[c].summary) for c in ROUNDTRIP_CODES}
"""Finding codes of the round-trip check: severity and meaning, as the one catalog (findings.py) has them."""

_FORMATS = ("json", "compact")


def _finding(code: str, op: str, message: str, fix: str) -> Finding:
    return finding(code, op, message=message, fix=fix)


def roundtrip_findings(shown: str, op: Any, sample_inputs: Callable[[str], Iterable[Any]]) -> list[Finding]:
    """Findings of the record -> serialize -> replay round trip of `op` on each sample input."""
    from opwire.recording.mode import target_name
    from opwire.recording.recorder import record

    found: list[Finding] = []
    try:
        samples = list(sample_inputs(shown) or [])
    except Exception:  # opcheck_findings already reports a failing sample source
        return []
    target = target_name(op)
    for k, sample in enumerate(samples):
        if not (isinstance(sample, tuple | list) and len(sample) == 2 and isinstance(sample[1], dict)):
            continue  # opcheck_findings reports malformed samples
        args, kwargs = sample
        where = f"sample {k}"
        try:
            with warnings.catch_warnings(), record() as trace:
                warnings.simplefilter("ignore", OpwireWarning)  # a skipped call becomes a finding below
                op(*args, **kwargs)
        except Exception as exc:
            found.append(
                _finding(
                    "roundtrip_record_failed",
                    shown,
                    f"{where}: calling the op under opwire.record raised {type(exc).__name__}: {exc}",
                    "make the op callable on its sample inputs outside of opwire first",
                )
            )
            continue
        mine = [r for r in trace.records if r.target == target]
        skipped = [r.metadata["skipped"] for r in mine if "skipped" in r.metadata]
        if skipped:
            found.append(
                _finding(
                    "roundtrip_record_failed",
                    shown,
                    f"{where}: the call cannot be recorded: {skipped[0]}",
                    "use argument and return types an Argument member carries (see `unserializable_*` findings)",
                )
            )
            continue
        if not mine:
            found.append(
                _finding(
                    "roundtrip_not_recorded",
                    shown,
                    f"{where}: no call of {target} reached the recorder; "
                    f"recorded {sorted({r.target for r in trace.records}) or 'nothing'}",
                    "nothing to do if the decomposition is intended; register a backend kernel to record the op itself",
                )
            )
        found += _codec_and_replay(shown, where, trace)
    return found


def _codec_and_replay(shown: str, where: str, trace: Any) -> list[Finding]:
    """Each codec must give the trace back equal; then (equal traces replay alike) replay once per policy."""
    from opwire.recording.recorder import Trace
    from opwire.recording.replayer import replay

    found: list[Finding] = []
    back = None
    for fmt in _FORMATS:
        try:
            back = Trace.loads(trace.dumps(fmt))
            detail = "" if back.model == trace.model else "the trace read back differs from the one written"
        except OpwireError as exc:
            detail = f"{type(exc).__name__}: {exc}"
        if detail:
            found.append(
                _finding(
                    "roundtrip_serialize_failed",
                    shown,
                    f"{where}: {fmt}: {detail}",
                    "report it to opwire with the sample input: every recorded trace must survive every codec",
                )
            )
    if found or back is None:
        return found
    for policy in DefaultPolicy:
        report = replay(back, policy=policy, progress=False)
        if not report.ok:
            found.append(
                _finding(
                    "roundtrip_replay_failed",
                    shown,
                    f"{where}: replay under {policy.name}: {len(report.mismatches)} mismatch(es), "
                    f"first: {report.mismatches[0]}",
                    "make the kernel deterministic for equal inputs and honour its schema (aliasing, in-place "
                    "writes, output strides)",
                )
            )
    return found
