"""Runs `opwire` commands for the tests, each in its own process, paying torch's import once per test worker.

    python tests/cli_forkserver.py        (requests on stdin, one JSON line each; one JSON line back per request)

The server imports torch (Dynamo too, which torch itself loads lazily on a command's first custom-op call), the CLI
and every command module, with what the commands import lazily and the models' validators and codec specs a process
builds on first use (`_warm`), then forks one child per request: the child moves to the request's directory (under
the request's RLIMIT_AS, if any: "limit_as" bytes, or "headroom_as" bytes beyond the server's own size), reads stdin
from /dev/null, points stdout/stderr at the request's files, sets `sys.argv` and calls `opwire.cli.main(argv)`,
exactly what the `opwire` console script calls, then exits the way an interpreter does (a `SystemExit` code, or the
traceback of an uncaught exception and 1, then the atexit handlers), except that the `weakref.finalize` callbacks of
objects the server made before forking do not run at a child's exit: they are torch.library's deregistrations of the
libraries torch registered at import (174, ~30 ms of CPU at every exit), which undo nothing a process about to end
needs undone and print nothing. What a command itself creates is finalized at its exit as in a fresh interpreter.
The server never runs an op, so a child forks from a process without a thread pool, as a freshly started `opwire`
is. A request that passes its timeout is killed; the reply says so.

A request with "module" runs that module as `python -m MODULE ARGV` does instead (`torch.distributed.run`: a
`torchrun` line's launcher, whose ranks it starts as fresh interpreters of their own, or with "fork_ranks" as
forks of itself, tests/support/forked_ranks.py), in the request's "env" as its whole environment when given: the
launcher costs its run, not another import of torch.

A request with "code" runs it as `python -c CODE ARGV` does (`sys.argv` is ["-c", *ARGV], `sys.path[0]` the
request's directory, then the "env"'s PYTHONPATH entries, as a fresh interpreter would put them, "ignore_warnings"
as `-W ignore`), in a `__main__` namespace of its own: a child that needs a process of its own (torch's
once-per-process state: a warning shown once, a device renamed; a crash that must not take the worker down) without
paying torch's import again. What a fresh interpreter has not imported yet the server has: a test about what an
import loads starts `python` from scratch.
"""

from __future__ import annotations

import gc
import inspect
import json
import os
import resource
import runpy
import signal
import sys
import time
import warnings
import weakref

from forked_ranks import exit_as_interpreter, install


def _vm_size() -> int:
    """This process's address space in bytes (VmSize)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _child(request: dict[str, object]) -> None:
    os.setpgid(0, 0)  # its own process group: a timeout kills the command and what it started
    if request.get("limit_as") or request.get("headroom_as"):
        # an absolute limit, or the server's own size (the imported CLI, as this fresh fork holds it) plus headroom
        limit = int(request.get("limit_as") or _vm_size() + int(request["headroom_as"]))  # type: ignore[call-overload]
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(str(request["cwd"]))
    stdin = os.open(os.devnull, os.O_RDONLY)
    out = os.open(str(request["out"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(str(request["err"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    for fd, target in ((stdin, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    if request.get("env") is not None:
        os.environ.clear()
        os.environ.update(request["env"])  # type: ignore[arg-type]
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    module = request.get("module")
    source = request.get("code")
    sys.argv = ["-c" if source is not None else str(module) if module else "opwire", *argv]
    code = 1
    try:
        code = exit_as_interpreter(lambda: _command(request, argv))
    finally:
        os._exit(code & 0xFF)


def _command(request: dict[str, object], argv: list[str]) -> int | None:
    """The request's command, `python -c CODE`, `python -m MODULE` or `opwire`, with ARGV; opwire's exit code."""
    module = request.get("module")
    source = request.get("code")
    if source is not None:
        _as_python_c(str(source), request)
        return None
    if module:
        # runpy's frames are `<frozen runpy>`, no file: each `inspect.stack()` (torchrun's rendezvous and events
        # call it ~20 times) then scanned all of sys.modules per such frame, ~0.4 CPU-s a launch; a fresh
        # `torchrun` has no such frames. Named here, they are found at once (and still have no source).
        inspect.modulesbyfile.setdefault("<frozen runpy>", "runpy")  # type: ignore[attr-defined]
        if request.get("fork_ranks"):  # a torchrun launcher whose ranks are forks of it (forked_ranks.py)
            install()
        runpy.run_module(str(module), run_name="__main__", alter_sys=True)
        return None
    from opwire.cli import main

    return main(argv)


def _as_python_c(source: str, request: dict[str, object]) -> None:
    """Run `source` as `python -c` does: the current directory first on sys.path, then the environment's PYTHONPATH."""
    env = request.get("env")
    extra = str(env.get("PYTHONPATH", "")) if isinstance(env, dict) else ""
    sys.path[0:1] = ["", *(p for p in extra.split(os.pathsep) if p)]
    if request.get("ignore_warnings"):
        warnings.simplefilter("ignore")
    exec(compile(source, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})


def run_command(request: dict[str, object]) -> dict[str, object]:
    """Fork a child running `request`; its exit code (minus the signal that killed it) or that it timed out, and CPU."""
    pid = os.fork()
    if pid == 0:
        _child(request)
    deadline = time.monotonic() + float(request["timeout"])  # type: ignore[arg-type]
    delay = 0.001
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return {"timeout": True, "cpu": usage.ru_utime + usage.ru_stime}
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return {"returncode": code, "cpu": usage.ru_utime + usage.ru_stime}


def prepare() -> None:
    """Import torch (with Dynamo), the CLI and every command module, once, before any fork; the finalizers alive
    then are the server's, not run at a child's exit."""
    # torch once here for every forked command, with Dynamo, which torch loads on a custom op's first call or an
    # optimizer's creation (2.5 s a command)
    import torch._dynamo  # noqa: F401

    import opwire.cli

    for command in opwire.cli.COMMANDS.values():
        __import__(command.module)
    _warm()
    for obj in gc.get_objects():  # the server's own finalizers (torch.library's): not run again by every child
        if type(obj) is weakref.finalize:  # type(), not isinstance: some torch objects warn on __class__
            obj.atexit = False
    # the server's objects (torch's, pydantic's: ~400k) out of the collector's passes, in every child too: a
    # child's full pass scans what its command made, and does not write (copy) every page of the server's heap
    gc.freeze()


# What the commands import on their way (deferred in opwire.cli, so that `opwire --help` stays light): every child
# would import them again. A test about what a command imports starts `python` from scratch.
_DEFERRED = (
    "opwire.cli.output",
    "opwire.proxy_executor.runner",
    "opwire.recording.distributed",
    "opwire.serde.json",
    "opwire.validation",
    "opwire.view",
)


def _warm() -> None:
    """Import what commands import lazily (not the seccomp binding: tests/proxy_executor/test_isolate.py checks that
    a host that has not imported it locates libseccomp once, not in each child) and build the models'
    validators and the Thrift codecs' struct specs, which a process builds on first use: once here, not in every
    child (`isolate.spawn` builds the reply models in the parent before it forks the sandboxed child the same way).
    Nothing is decoded or run: the children still read every file themselves."""
    import importlib

    for name in _DEFERRED:
        importlib.import_module(name)
    from pydantic import BaseModel

    from opwire.schema import models as m
    from opwire.serde._thrift import fast

    for model in vars(m).values():
        if isinstance(model, type) and issubclass(model, BaseModel) and not model.__pydantic_complete__:
            model.model_rebuild()
    for specs in (fast._build_specs, fast._check_specs, fast._plain_specs, fast._count_specs):
        specs()


def main() -> int:
    """Serve requests until stdin closes."""
    prepare()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(run_command(json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
