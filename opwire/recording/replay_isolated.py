"""`opwire.replay(..., isolate=True)`: the replay runs in a sandboxed child (`opwire.proxy_executor.isolate`).

The child is a fork of the caller with the trace already open. Before each call it says which one runs, so
a crash or a limit names the call and its op; the report comes back as the `report` member of the one
`IsolatedResult` record a child sends (a `ReplayWorkerReport`, what `replay_worker` sends too), read with
opwire's strict decoder and rebuilt here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from opwire.errors import printable
from opwire.proxy_executor.isolate import Child, run_in_child
from opwire.proxy_executor.sandbox import Limits
from opwire.recording.replay_worker import report_from_model, worker_report
from opwire.recording.report import ReplayReport
from opwire.recording.source import TraceSource
from opwire.schema import models as m

__all__ = ["replay_in_child"]


class _Announcing:
    """A trace source whose records() tells the child which call runs next; everything else is the source's."""

    def __init__(self, src: TraceSource, child: Child) -> None:
        self._src, self._child = src, child

    def records(self, start: int, stop: int) -> Iterator[m.CallRecord]:
        for i, rec in enumerate(self._src.records(start, stop), start):
            self._child.at(f"call {i} ({printable(rec.target)})")
            yield rec

    def __getattr__(self, name: str) -> Any:
        return getattr(self._src, name)

    def __len__(self) -> int:
        return len(self._src)


def replay_in_child(
    src: TraceSource, report: ReplayReport, run: Callable[[Any, ReplayReport], None], limits: Limits
) -> None:
    """Run `run(source, part)` in a sandboxed child and merge the part it reports into `report`."""

    def work(child: Child) -> m.ReplayWorkerReport:
        child.ready()
        part = ReplayReport(report.mode, report.calls)
        run(_Announcing(src, child), part)
        return worker_report(part)

    report.merge(report_from_model(run_in_child(work, limits, keep=src.descriptors()).report()))
