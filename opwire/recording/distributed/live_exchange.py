"""How the ranks of a `--collectives` replay hand their outcome to rank 0: through torchrun's store, not the group.

A rank's replay can stop (a timeout, a crash, an unreadable payload) while the others wait in a collective:
the process group can then carry nothing more. Each rank's own process (outside the sandboxed fork, once the
fork has ended) puts its outcome in the key-value store torchrun's agent keeps for the job, under this job's
run id and restart count; rank 0 collects every rank's outcome, prints the run's report, and acknowledges.
A rank whose outcome rank 0 acknowledged exits 0 (rank 0's exit carries the verdict), so torchrun, which
stops every rank once one exits non-zero, lets rank 0 finish its report first and names only rank 0.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

__all__ = ["Exchange"]

_POLL = 0.05  # seconds between looks at the store while waiting
_BYE_WAIT = 10.0  # seconds rank 0 waits for the others to exit once they have its acknowledgement


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

    def publish(self, rank: int, outcome: dict[str, Any]) -> None:
        """Put this rank's outcome (JSON-ready: its report, its error) where rank 0 reads it."""
        self.store.set(f"{self.prefix}outcome/{rank}", json.dumps(outcome))

    def collect(self, timeout: float) -> dict[int, dict[str, Any] | None]:
        """Every other rank's outcome, waiting at most `timeout` seconds in all (None: no word from that rank)."""
        deadline = time.monotonic() + timeout
        out: dict[int, dict[str, Any] | None] = {}
        for r in range(1, self.world_size):
            raw = self._wait(f"{self.prefix}outcome/{r}", deadline)
            out[r] = _outcome(raw)
        return out

    def acknowledge(self) -> None:
        """Rank 0 printed the report: the other ranks may go; wait (briefly) until they have gone."""
        self.store.set(f"{self.prefix}reported", "1")
        deadline = time.monotonic() + _BYE_WAIT
        for r in range(1, self.world_size):
            self._wait(f"{self.prefix}bye/{r}", deadline)

    def reported(self, rank: int, timeout: float) -> bool:
        """Whether rank 0 printed the report within `timeout` seconds (then say goodbye)."""
        if self._wait(f"{self.prefix}reported", time.monotonic() + timeout) is None:
            return False
        self.store.set(f"{self.prefix}bye/{rank}", "1")
        return True

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


def _outcome(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
