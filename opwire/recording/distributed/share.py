"""Work on a run split over the processes torchrun launched: which ranks are whose, and JSON gathered over gloo.

Under `torchrun --nproc-per-node P -m opwire ranks|diff|replay RUN`, process p of P takes ranks p, p+P, ...
of the run and the pieces are gathered as JSON (nothing pickled) over a gloo group that every process joins;
process 0 prints. Outside a launcher (or with one process) the same code runs with a share of everything.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opwire.recording.launch import launch_info

__all__ = ["Share", "gather_json", "launched_share", "young_heap"]


def _alone(data: Any) -> list[Any]:
    return [data]


@dataclass(frozen=True)
class Share:
    """This process's place among `count` processes working on one run, and how they gather their results."""

    index: int = 0
    count: int = 1
    gather: Callable[[Any], list[Any]] = field(default=_alone, compare=False)

    def ranks(self, world_size: int) -> list[int]:
        """The ranks of a run of `world_size` ranks this process takes: index, index + count, ..."""
        return list(range(self.index, world_size, self.count))

    def mine(self, k: int) -> bool:
        """Whether item `k` of a list every process computes alike is this process's to work on."""
        return k % self.count == self.index

    def balanced(self, costs: Sequence[int]) -> set[int]:
        """The items of a list every process computes alike (`costs`, one each) this process works on: the
        costliest first, each to the process with the least cost so far (ties: the lowest index), so a run
        whose costly items recur with the process count's period is not all one process's."""
        loads = [0] * self.count
        taken: set[int] = set()
        for k in sorted(range(len(costs)), key=lambda k: -costs[k]):
            p = loads.index(min(loads))
            loads[p] += costs[k]
            if p == self.index:
                taken.add(k)
        return taken

    @property
    def prints(self) -> bool:
        """Whether this process prints the report (process 0)."""
        return self.index == 0


def gather_json(data: Any) -> list[Any]:
    """Every process's `data` (JSON-able), in process order, on every process (over the default group)."""
    import torch
    import torch.distributed as dist

    raw = torch.frombuffer(bytearray(json.dumps(data).encode()), dtype=torch.uint8)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([raw.numel()]))
    most = int(max(s.item() for s in sizes))
    padded = torch.zeros(max(most, 1), dtype=torch.uint8)
    padded[: raw.numel()] = raw
    bufs = [torch.zeros(max(most, 1), dtype=torch.uint8) for _ in sizes]
    dist.all_gather(bufs, padded)
    return [json.loads(bytes(b[: int(s.item())].numpy())) for b, s in zip(bufs, sizes, strict=True)]


@contextmanager
def young_heap() -> Iterator[None]:
    """The objects alive on entry (torch's and pydantic's, hundreds of thousands) left out of the cyclic garbage
    collector's passes until the block ends (`gc.freeze`), then put back in its oldest generation: a full pass
    the block's allocations trigger scans what the block made, not the whole heap (such a pass cost each process
    0.25 CPU-seconds, more than its share of a 300 MB run's checks with 4 processes). Nothing is kept alive.
    A host that froze objects itself (a forking server's `gc.freeze()`), or collects by hand with the collector
    disabled, is left exactly as it is: the block then changes nothing, since unfreezing would thaw its objects."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _Group:
    """The gloo group of the launched processes, joined at the first gather (work that forks a sandboxed child,
    a replay or a call run again, comes before it: no gloo thread is running when it forks)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.joined = False

    def gather(self, data: Any) -> list[Any]:
        import torch.distributed as dist

        if not dist.is_initialized():
            from datetime import timedelta

            dist.init_process_group("gloo", timeout=timedelta(seconds=self.timeout))
            self.joined = True
        return gather_json(data)

    def leave(self, ok: bool) -> None:
        import torch.distributed as dist

        if not self.joined:
            return
        if ok:
            dist.barrier()  # no process leaves while another still gathers
        dist.destroy_process_group()


@contextmanager
def launched_share(timeout: float = 1800.0) -> Iterator[Share]:
    """This process's share: under a launcher with WORLD_SIZE > 1 one of WORLD_SIZE, gathering over a gloo group
    joined at the first gather and left after the block; else one share of everything."""
    info = launch_info()
    if info is None or info.world_size < 2:
        yield Share()
        return
    group = _Group(timeout)
    ok = False
    try:
        yield Share(info.rank, info.world_size, group.gather)
        ok = True
    finally:
        group.leave(ok)
