"""Distributed runs under torch.distributed: one streamed trace per rank, checked and replayed rank by rank.

A client of the recording core, never called by it: what recording a rank needs (`recording.launch`,
`recording.collective_capture`, the `recording.collectives` table) lives in `opwire.recording`, and an
import-linter contract keeps every arrow pointing from here into the core.

Modules:
    ahead: what a `--collectives` rank decodes and binds before its replay starts
    collective_rules: one row per collective kind: how a replay under torchrun runs it, what it must produce
    diff_run: `opwire diff RUN_A RUN_B`: two runs rank by rank, the first local divergence first
    execute: one recorded collective run for real on live tensors, in a replay under torchrun
    live: `opwire replay RUN --collectives` under torchrun: every rank replays chained, collectives for real
    live_exchange: how the ranks of a `--collectives` replay hand their outcome to rank 0 (through the store)
    numerics: where a rank's recorded outputs differ from what the collective's rule says they must be
    ranks: `opwire ranks RUN`: collective order per group, then every collective's numbers
    run: a run directory: one trace per rank, checked to belong together
    run_replay: `opwire replay RUN`: every rank replayed in a sandboxed child, collectives checked across ranks
    scan: one pass over a rank's trace for `opwire ranks`: its process groups and collectives, summarized
    sequence: each rank's collectives, read one record at a time
    share: work on a run split over the processes torchrun launched, and JSON gathered over gloo
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opwire._lazy import lazy_getattr, lazy_names

# public name -> module that defines it, imported on first use: most import torch, and `opwire --help` needs none
_LAZY = {
    "diff_runs": "opwire.recording.distributed.diff_run",
    "replay_live": "opwire.recording.distributed.live",
    "check_ranks": "opwire.recording.distributed.ranks",
    "format_ranks": "opwire.recording.distributed.ranks",
    "is_run": "opwire.recording.distributed.run",
    "replay_run": "opwire.recording.distributed.run_replay",
    "launched_share": "opwire.recording.distributed.share",
    "young_heap": "opwire.recording.distributed.share",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names
    from opwire.recording.distributed.diff_run import diff_runs as diff_runs
    from opwire.recording.distributed.live import replay_live as replay_live
    from opwire.recording.distributed.ranks import check_ranks as check_ranks
    from opwire.recording.distributed.ranks import format_ranks as format_ranks
    from opwire.recording.distributed.run import is_run as is_run
    from opwire.recording.distributed.run_replay import replay_run as replay_run
    from opwire.recording.distributed.share import launched_share as launched_share
    from opwire.recording.distributed.share import young_heap as young_heap

__all__ = lazy_names(_LAZY, ())

__getattr__ = lazy_getattr(__name__, __path__, _LAZY)  # also `opwire.recording.distributed.<submodule>`
