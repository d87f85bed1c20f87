"""One process of `opwire.replay(..., workers=N)`: `python -m opwire.recording.replay_worker SPEC_JSON`.

The parent starts each worker as a fresh interpreter (never re-running the caller's `__main__`), passes
the streamed trace, the record range and the options as JSON, and reads the partial report back as JSON
from stdout. Op libraries the parent loaded with `torch.ops.load_library` are loaded first.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import torch

from opwire.recording.report import ReplayReport

__all__ = ["main", "spec"]


def spec(path: str, start: int, stop: int, opts: dict[str, Any], threads: int) -> str:
    """The JSON a worker is started with."""
    libraries = sorted(getattr(torch.ops, "loaded_libraries", ()))
    return json.dumps(
        {"path": path, "start": start, "stop": stop, "opts": opts, "threads": threads, "libraries": libraries}
    )


def main(argv: list[str] | None = None) -> int:
    """Run one worker: replay the range and print the partial report as JSON."""
    from opwire.proxy_executor.default_policy import DefaultPolicy
    from opwire.proxy_executor.exec_policy import ExecPolicy
    from opwire.proxy_executor.run_budgets import MAX_MEMORY
    from opwire.recording.progress import Progress
    from opwire.recording.replay_engine import ReplayOptions, run_range
    from opwire.recording.source import StreamSource

    args = json.loads((argv if argv is not None else sys.argv[1:])[0])
    for lib in args["libraries"]:
        torch.ops.load_library(lib)  # type: ignore[no-untyped-call]
    torch.set_num_threads(int(args["threads"]))
    o = args["opts"]
    exec_policy = ExecPolicy(
        o.get("allow_ops", ()), timeout=o.get("timeout"), max_memory=o.get("max_memory", MAX_MEMORY)
    )
    opts = ReplayOptions(DefaultPolicy(o["policy"]), "isolated", o["rtol"], o["atol"], o["device"], exec_policy)
    src = StreamSource(args["path"], max_elements=o.get("max_elements"), max_bytes=o.get("max_bytes"))
    part = ReplayReport("isolated", len(src))
    if o.get("sandbox") is not None:
        from opwire.proxy_executor.sandbox import Limits, enter

        enter(Limits(max_memory=int(o["sandbox"]), timeout=o.get("timeout")))
    try:
        run_range(src, part, opts, int(args["start"]), int(args["stop"]), Progress("", enabled=False))
    finally:
        src.close()
    print(json.dumps(asdict(part)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
