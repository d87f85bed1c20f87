"""opwire's own check in `ops validate --sample-inputs`: record the op, serialize the trace, replay it, compare.

For each sample: record the call with `opwire.record`, write the trace as JSON and as compact Thrift
and read it back (it must come back equal), then replay it under each default policy (it must match
what was recorded; equal traces replay alike, so one replay per policy covers both codecs).
Every failure is a finding with one of `CODES`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from opwire.errors import OpwireError, OpwireWarning, describe_exception
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.validation.catalog import CODES as CATALOG
from opwire.validation.catalog import finding
from opwire.validation.findings import Finding, samples_text

__all__ = ["CODES", "roundtrip_findings"]

CODES = tuple(c for c in CATALOG if c.startswith("roundtrip_"))
"""The finding codes of the round-trip check (their texts are in findings.py, docs/errors.md lists them)."""

_FORMATS = ("json", "compact")
# (code, what identifies the cause) -> (template fields of the first sample it failed, every such sample)
_Causes = dict[tuple[str, str], tuple[dict[str, Any], list[int]]]


def _add(causes: _Causes, code: str, sample: int, key: str | None = None, **fields: Any) -> None:
    entry = causes.setdefault((code, key if key is not None else repr(sorted(fields.items()))), (fields, []))
    entry[1].append(sample)


def roundtrip_findings(
    shown: str, op: Any, sample_inputs: Callable[[str], Iterable[Any]], *, types_reported: bool = False
) -> list[Finding]:
    """Findings of the record -> serialize -> replay round trip of `op`: one per cause, naming its samples.

    `types_reported`: an `unserializable_*`/`unrepresentable_default` finding already explains why a call
    cannot be recorded, so that cause is not reported again.
    """
    from opwire.recording.dispatch_mode import target_name  # deferred: imports torch
    from opwire.recording.recorder import record  # deferred: imports torch

    causes: _Causes = {}
    try:
        samples = list(sample_inputs(shown) or [])
    except Exception:  # opcheck_findings already reports a failing sample source
        return []
    target = target_name(op)
    for k, sample in enumerate(samples):
        if not (isinstance(sample, tuple | list) and len(sample) == 2 and isinstance(sample[1], dict)):
            continue  # opcheck_findings reports malformed samples
        args, kwargs = sample
        try:
            with warnings.catch_warnings(), record() as trace:
                warnings.simplefilter("ignore", OpwireWarning)  # a skipped call becomes a finding below
                op(*args, **kwargs)
        except Exception as exc:
            what = f"calling the op under opwire.record raised {describe_exception(exc)}"
            _add(causes, "roundtrip_record_failed", k, what=what, how=_CALLABLE)
            continue
        mine = [r for r in trace.records if r.target == target]
        skipped = [r.metadata["skipped"] for r in mine if "skipped" in r.metadata]
        if skipped:
            if not types_reported:
                _add(
                    causes, "roundtrip_record_failed", k, what=f"the call cannot be recorded: {skipped[0]}", how=_TYPES
                )
            continue
        if not mine:
            recorded = sorted({r.target for r in trace.records}) or "nothing"
            _add(causes, "roundtrip_not_recorded", k, target=target, recorded=recorded)
        _codec_and_replay(causes, k, trace, functools.partial(_random, op, args, kwargs))
    return [finding(code, shown, samples=samples_text(idx), **fields) for (code, _), (fields, idx) in causes.items()]


_CALLABLE = "make the op callable on its sample inputs outside of opwire first"
_TYPES = "use argument and return types an Argument member carries (see `unserializable_*` findings)"


_DETERMINISTIC = (
    "make the kernel deterministic for equal inputs and honour its schema (aliasing, in-place writes, output strides)"
)
_SEEDED = (
    "the op draws random numbers (two calls on equal inputs differ): tag it nondeterministic_seeded "
    "(tags=(torch.Tag.nondeterministic_seeded,) in torch.library.define or torch.library.custom_op) so replay "
    "and diff compare its outputs' dtype, shape and strides, not values"
)


def _random(op: Any, args: Any, kwargs: Any) -> bool:
    """Whether two calls on equal inputs, under different seeds, give different outputs (global RNG restored)."""
    import copy

    import torch

    outs = []
    try:
        with torch.random.fork_rng():
            for seed in (1, 2):
                torch.manual_seed(seed)
                outs.append(op(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
    except Exception:  # the replay finding stands without the hint
        return False
    flat = [torch.utils._pytree.tree_leaves(o) for o in outs]
    return any(
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and not torch.equal(a, b)
        for a, b in zip(*flat, strict=False)
    )


def _codec_and_replay(causes: _Causes, k: int, trace: Any, random: Callable[[], bool] = lambda: False) -> None:
    """Each codec must give the trace back equal; then (equal traces replay alike) replay once per policy."""
    from opwire.recording.recorder import Trace  # deferred: imports torch
    from opwire.recording.replayer import replay  # deferred: imports torch

    back = None
    broken = False
    for fmt in _FORMATS:
        try:
            back = Trace.loads(trace.dumps(fmt))
            detail = "" if back.model == trace.model else "the trace read back differs from the one written"
        except OpwireError as exc:
            detail = f"{type(exc).__name__}: {exc}"
        if detail:
            broken = True
            _add(causes, "roundtrip_serialize_failed", k, fmt=fmt, detail=detail)
    if broken or back is None:
        return
    failing = [(policy, replay(back, policy=policy, progress=False)) for policy in DefaultPolicy]
    failing = [(policy, report) for policy, report in failing if not report.ok]
    if failing:  # one cause (the kernel or the trace), however many policies show it
        policies = ", ".join(policy.name for policy, _ in failing)
        report = failing[0][1]
        first = str(report.mismatches[0]) if report.mismatches else "-"
        _add(
            causes,
            "roundtrip_replay_failed",
            k,
            policies,
            policies=policies,
            mismatches=f"{len(report.mismatches)} mismatch" + ("" if len(report.mismatches) == 1 else "es"),
            first=first,
            fix=_SEEDED if random() else _DETERMINISTIC,
        )
