"""Runs `opwire` commands as separate processes, each under RLIMIT_AS and a time limit, paying torch's import once.

    python tests/support/hostile_driver.py JOBS.json RESULTS.json

JOBS.json is a list of {"argv": [...], "cwd": DIR, "out": PATH, "err": PATH}. The driver imports the CLI
once, then forks one child per job: the child sets its address-space limit (the driver's current size
plus `HEADROOM`), points stdout/stderr at the files and calls `opwire.cli.main(argv)`, exactly what the
`opwire` console script calls, exiting with its return code (an uncaught exception prints its traceback
and exits 1, as the script would). RESULTS.json gets, per job: the exit code or the signal that killed
it, whether it was killed for passing `TIME_LIMIT` seconds, and its CPU seconds.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import traceback

HEADROOM = 2 << 30  # bytes of address space a command may add to what the imported CLI already holds
TIME_LIMIT = 60.0  # wall seconds before a command counts as hung (CPU seconds are checked by the test)


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _child(job: dict[str, object], limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(str(job["cwd"]))
    out = os.open(str(job["out"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(str(job["err"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = os.fdopen(1, "w")
    sys.stderr = os.fdopen(2, "w")
    code = 1
    try:
        from opwire.cli import main

        code = main([str(a) for a in job["argv"]])  # type: ignore[attr-defined]
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(job: dict[str, object], limit: int) -> dict[str, object]:
    pid = os.fork()
    if pid == 0:
        _child(job, limit)
    start = time.monotonic()
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > TIME_LIMIT:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return {"hung": True, "cpu": usage.ru_utime + usage.ru_stime}
        time.sleep(0.02)
    result: dict[str, object] = {"hung": False, "cpu": usage.ru_utime + usage.ru_stime}
    if os.WIFSIGNALED(status):
        result["signal"] = os.WTERMSIG(status)
    else:
        result["exit"] = os.WEXITSTATUS(status)
    return result


def main() -> int:
    jobs = json.loads(open(sys.argv[1]).read())
    import torch  # noqa: F401  (imported once here, shared by every forked command)

    import opwire.cli

    for module in opwire.cli.COMMANDS.values():
        __import__(module)
    limit = _vm_size() + HEADROOM
    results = [_run(job, limit) for job in jobs]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
