"""Runs `opwire` commands as separate processes, each under RLIMIT_AS and a time limit, paying torch's import once.

    python tests/support/hostile_driver.py JOBS.json RESULTS.json

JOBS.json is a list of {"argv": [...], "cwd": DIR, "out": PATH, "err": PATH}. The driver imports the CLI
once, then forks one child per job with the CLI fork server's runner (cli_forkserver.run_command): the
child sets its address-space limit (the driver's current size plus `HEADROOM`), points stdout/stderr at the
files and calls `opwire.cli.main(argv)`, exactly what the `opwire` console script calls, exiting with its
return code (an uncaught exception prints its traceback and exits 1, as the script would). RESULTS.json gets, per job: the exit code or the signal that killed
it, whether it was killed for passing `TIME_LIMIT` seconds, and its CPU seconds.
"""

from __future__ import annotations

import json
import sys

from cli_forkserver import prepare, run_command  # the driver runs as a script beside it (tests/support/)

HEADROOM = 2 << 30  # bytes of address space a command may add to what the imported CLI already holds
TIME_LIMIT = 60.0  # wall seconds before a command counts as hung (CPU seconds are checked by the test)


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _run(job: dict[str, object], limit: int) -> dict[str, object]:
    """One job through the CLI fork server's runner, reported as the hostile tables read it."""
    done = run_command({**job, "timeout": TIME_LIMIT, "limit_as": limit})
    result: dict[str, object] = {"hung": bool(done.get("timeout")), "cpu": done["cpu"]}
    if not done.get("timeout"):
        code = int(done["returncode"])  # type: ignore[call-overload]
        result.update({"signal": -code} if code < 0 else {"exit": code})
    return result


def main() -> int:
    jobs = json.loads(open(sys.argv[1]).read())
    prepare()
    limit = _vm_size() + HEADROOM
    results = [_run(job, limit) for job in jobs]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
