"""A rank's place in a distributed run, read from the launcher's environment (torchrun sets it)."""

from __future__ import annotations

import os
from pathlib import Path

from opwire.schema import models as m

__all__ = ["RANK_FILE", "launch_info", "rank_file", "rank_path"]

RANK_FILE = "rank{rank}.trace"
"""The name of rank N's trace in a run directory."""


def launch_info() -> m.TraceDistributed | None:
    """Rank, world size and run id from RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID (None outside a launcher)."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None:
        return None
    try:
        r, w = int(rank), int(world)
    except ValueError:
        raise ValueError(f"RANK={rank!r} and WORLD_SIZE={world!r} must be integers (set by the launcher)") from None
    if not 0 <= r < w:
        raise ValueError(f"RANK={r} is outside WORLD_SIZE={w}; check the launcher's environment")
    return m.TraceDistributed(rank=r, world_size=w, run_id=os.environ.get("TORCHELASTIC_RUN_ID", ""), groups=[])


def rank_file(run: str | Path, rank: int) -> Path:
    """The trace of `rank` in run directory `run`."""
    return Path(run) / RANK_FILE.format(rank=rank)


def rank_path(path: str | Path) -> str | Path:
    """`path` with `{rank}` replaced by this process's rank (ValueError when no launcher set RANK)."""
    text = str(path)
    if "{rank}" not in text:
        return path
    info = launch_info()
    if info is None:
        raise ValueError(
            f"path {text!r} names {{rank}} but RANK/WORLD_SIZE are not set; launch with torchrun or drop {{rank}}"
        )
    return text.replace("{rank}", str(info.rank))
