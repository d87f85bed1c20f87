"""How the ranks of a `--collectives` replay hand their outcome to rank 0: through torchrun's store, not the group.

A rank's replay can stop (a timeout, a crash, an unreadable payload) while the others wait in a collective:
the process group can then carry nothing more. Each rank's own process (outside the sandboxed fork, once the
fork has ended) puts its outcome in the key-value store torchrun's agent keeps for the job, under this job's
run id and restart count; rank 0 collects every rank's outcome and prints the run's report. A rank other than
0 leaves as soon as its outcome is in the store, with exit code 0 (rank 0's exit carries the verdict): torchrun
stops every running rank once one exits non-zero, and lists each as failed. So a rank also leaves its process id
beside its outcome, and rank 0, before it exits non-zero, waits (bounded) until each rank launched beside it by the
same agent (a sibling process) has exited: by then there is none left to stop.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

__all__ = ["Exchange"]

_POLL = 0.05  # seconds between looks at the store while waiting


class Exchange:
    """The outcomes of one `--collectives` replay in torchrun's store (`connect` gives None outside torchrun)."""

    def __init__(self, store: Any, prefix: str, world_size: int) -> None:
        self.store, self.prefix, self.world_size = store, prefix, world_size

    @classmethod
    def connect(cls, world_size: int, timeout: float) -> Exchange | None:
        """A client of the agent's store (MASTER_ADDR/MASTER_PORT); None when the launcher keeps none."""
        env = os.environ
        if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or not env.get("MASTER_ADDR"):
            return None
        import torch.distributed as dist  # deferred: torch.distributed on this path only

        try:
            store = dist.TCPStore(  # type: ignore[attr-defined]
                env["MASTER_ADDR"], int(env.get("MASTER_PORT", "0")), is_master=False,
                timeout=timedelta(seconds=max(timeout, 1.0)),
            )  # fmt: skip
        except (RuntimeError, ValueError, OSError):
            return None
        run = f"{env.get('TORCHELASTIC_RUN_ID', '')}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        return cls(store, f"opwire-replay/{run}/", world_size)

    def publish(self, rank: int, outcome: dict[str, Any]) -> bool:
        """Put this rank's outcome (JSON-ready: its report, its error) where rank 0 reads it; False if it failed."""
        try:
            self.store.set(f"{self.prefix}pid/{rank}", str(os.getpid()))
            self.store.set(f"{self.prefix}outcome/{rank}", json.dumps(outcome))
        except RuntimeError:  # the agent's store went away (torchrun is stopping the job)
            return False
        return True

    def collect(self, timeout: float) -> dict[int, dict[str, Any] | None]:
        """Every other rank's outcome, waiting at most `timeout` seconds in all (None: no word from that rank)."""
        deadline = time.monotonic() + timeout
        out: dict[int, dict[str, Any] | None] = {}
        for r in range(1, self.world_size):
            raw = self._wait(f"{self.prefix}outcome/{r}", deadline)
            out[r] = _outcome(raw)
        return out

    def wait_gone(self, timeout: float) -> None:
        """Rank 0: wait at most `timeout` seconds until every rank that published and runs beside it has exited."""
        deadline = time.monotonic() + timeout
        for r in range(1, self.world_size):
            try:
                raw = self.store.get(f"{self.prefix}pid/{r}") if self.store.check([f"{self.prefix}pid/{r}"]) else b""
            except RuntimeError:  # the agent's store went away (torchrun is stopping the job)
                return
            pid = int(raw) if bytes(raw).isdigit() else 0
            while pid and _running_sibling(pid) and time.monotonic() < deadline:
                time.sleep(_POLL / 5)

    def _wait(self, key: str, deadline: float) -> bytes | None:
        while True:
            try:
                if self.store.check([key]):
                    return bytes(self.store.get(key))
            except RuntimeError:  # the agent's store went away (torchrun is stopping the job)
                return None
            if time.monotonic() >= deadline:
                return None
            time.sleep(_POLL)


def _running_sibling(pid: int) -> bool:
    """Whether `pid` is a live (not yet exited) process with this process's parent: a rank of the same agent."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:  # gone (or another host's rank, or no /proc)
        return False
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
    return len(fields) > 1 and fields[0] not in (b"Z", b"X") and fields[1] == str(os.getppid()).encode()


def _outcome(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
