"""Runs the hostile tables' `opwire` commands, each as its own process under RLIMIT_AS and a time limit.

Each job is forked by this test worker's CLI fork server (tests/support/cli_forkserver.py, through
`clirun.serve`), which imported torch and the CLI once: the child sets its address-space limit (the server's
size plus `HEADROOM`), points stdout/stderr at the job's files and calls `opwire.cli.main(argv)`, exactly what
the `opwire` console script calls, exiting with its return code (an uncaught exception prints its traceback and
exits 1, as the script would).
"""

from __future__ import annotations

from typing import Any

from support.clirun import serve

__all__ = ["HEADROOM", "TIME_LIMIT", "run_jobs"]

HEADROOM = 2 << 30  # bytes of address space a command may add to what the imported CLI already holds
TIME_LIMIT = 60.0  # wall seconds before a command counts as hung (CPU seconds are checked by the test)


def run_jobs(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per job ({"argv": [...], "cwd": DIR, "out": PATH, "err": PATH}): the exit code or the signal that killed it,
    whether it was killed for passing `TIME_LIMIT` seconds ("hung"), and its CPU seconds."""
    results = []
    for job in jobs:
        done = serve({**job, "timeout": TIME_LIMIT, "headroom_as": HEADROOM})
        result: dict[str, Any] = {"hung": bool(done.get("timeout")), "cpu": done["cpu"]}
        if not done.get("timeout"):
            code = int(done["returncode"])
            result.update({"signal": -code} if code < 0 else {"exit": code})
        results.append(result)
    return results
