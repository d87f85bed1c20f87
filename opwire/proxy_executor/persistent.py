"""The persistent isolated runner: one sandboxed child per `ProgramRunner(..., isolate=True)`, serving every call.

A service that runs uploaded files should not pay a fork per call, nor choose between speed and safety. The first
call forks the child (`isolate.spawn`: confined, then the seccomp allowlist once the runner's copy is ready); each
call then writes its inputs into a memfd the parent sized (`shared_values`), sends their layout on a pipe, and
reads the outputs' layout back and copies them out of a second memfd, checked entry by entry. A call that fails
in the child (an opwire error, a refused system call) is raised here and the child serves on; a crash or the wall
time ends the child, is one opwire error naming the node, and the next call starts a fresh child.

The child's CPU-time limit would add up over calls, so the persistent child is bounded per call by wall time
(`timeout`) and memory, not RLIMIT_CPU.
"""

from __future__ import annotations

import json
import os
import select
import struct
import threading
import time
import weakref
from dataclasses import replace
from typing import Any

import torch
import torch.utils._pytree as pytree

from opwire.errors import DecodeError, KernelError
from opwire.proxy_executor.child_stderr import ChildStderr
from opwire.proxy_executor.isolate import Child, Spawned, kill, signal_error, spawn, timeout_error
from opwire.proxy_executor.isolate_program import (
    IsolatedRunner,
    mutated_names,
    node_label,
    progress_observer,
    shape_outputs,
    write_back,
)
from opwire.proxy_executor.isolate_result import rebuild
from opwire.proxy_executor.sandbox import Limits
from opwire.proxy_executor.shared_values import Region, layout, read, store
from opwire.schema import models as m
from opwire.serde.json import decode as decode_json
from opwire.serde.json import to_jsonable

__all__ = ["IsolatedChild", "child_for"]

_HEAD = struct.Struct("<I")
_MAX_MESSAGE = 64 << 20


class IsolatedChild:
    """The sandboxed child that runs `runner`'s calls; started on the first call, again after a crash."""

    def __init__(self, runner: IsolatedRunner, limits: Limits) -> None:
        self._runner = runner
        self.limits = replace(limits, cpu_seconds=None)
        self._lock = threading.Lock()
        self._inputs, self._outputs = Region("opwire-inputs"), Region("opwire-outputs")
        self._live: _Live | None = None
        self._spec: tuple[Any, str] | None = None  # the last input structure and its serialized form
        self.started = 0  # children started so far (a crash starts a new one)
        self._holder: list[_Live] = []  # what the finalizer ends (it must not hold self)
        self._owner = os.getpid()
        weakref.finalize(self, _shut, self._owner, self._holder, self._inputs, self._outputs)

    def call(self, fresh: bool, args: Any, kwargs: Any) -> Any:
        """Run the program on `args`/`kwargs` in the child; `fresh`: on fresh buffers (else the runner's own, which
        the child's mutations update)."""
        leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        entries, size = layout(leaves, "input")
        with self._lock:
            if os.getpid() != self._owner:  # a fork of the process that started the child: start its own
                self._owner, self._live, self._holder = os.getpid(), None, []
                self._inputs, self._outputs = Region("opwire-inputs"), Region("opwire-outputs")
                weakref.finalize(self, _shut, self._owner, self._holder, self._inputs, self._outputs)
            live = self._live or self._start()
            self._inputs.ensure(size)
            assert self._inputs.buf is not None
            store(self._inputs.buf, leaves, entries)
            if self._spec is None or self._spec[0] != spec:
                self._spec = (spec, pytree.treespec_dumps(spec))
            request = {"fresh": fresh, "spec": self._spec[1], "entries": entries,
                       "in_cap": self._inputs.cap, "out_cap": self._outputs.cap}  # fmt: skip
            reply = self._ask(live, request)
            if "need" in reply:
                need = reply["need"]
                if not isinstance(need, int) or not 0 <= need <= self.limits.max_memory + (1 << 20):
                    self._end(live)
                    raise KernelError(f"the isolated child asked for {str(need)[:40]} bytes of outputs, more than its "
                                      "execution-memory budget")  # fmt: skip
                self._outputs.ensure(need)
                reply = self._ask(live, {"out_cap": self._outputs.cap})
            if "error" in reply:
                raise rebuild(_error(reply["error"]))
            values = read(self._outputs.buf, reply.get("entries"), self._outputs.cap, "the isolated child's outputs")
        names = reply.get("state", [])
        outputs = values[: len(values) - len(names)]
        for name, value in zip(names, values[len(outputs) :], strict=True):
            table = self._runner.state if name in self._runner.state else self._runner.constants
            write_back(table, str(name), value)
        return shape_outputs(self._runner, outputs)

    def close(self) -> None:
        """End the child (it exits when its request pipe closes)."""
        with self._lock:
            if self._live is not None:
                self._end(self._live, gently=True)

    def _start(self) -> _Live:
        requests, to_child = os.pipe()
        runner, inputs, outputs = self._runner, self._inputs, self._outputs

        def work(child: Child) -> dict[str, bytes]:
            _serve(runner, child, requests, replies_w, inputs, outputs)
            return {}

        replies, replies_w = os.pipe()
        spawned = spawn(work, self.limits, keep=(requests, replies_w, inputs.fd, outputs.fd))
        os.close(requests)
        os.close(replies_w)
        self._live = _Live(spawned, to_child, replies, ChildStderr())
        self._holder[:] = [self._live]
        self.started += 1
        return self._live

    def _ask(self, live: _Live, message: dict[str, Any]) -> dict[str, Any]:
        try:
            _send(live.requests, message)
        except OSError:  # the child is gone: its exit says why
            pass
        deadline = None if self.limits.timeout is None else time.monotonic() + self.limits.timeout + 1.0
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            watch = [live.replies] + ([live.spawned.stderr] if live.err_open else [])
            ready, _, _ = select.select(watch, [], [], wait)
            if not ready:
                label = live.spawned.label()
                self._end(live)
                raise timeout_error(label, self.limits)
            if live.spawned.stderr in ready and not live.err.feed(os.read(live.spawned.stderr, 1 << 16)):
                live.err_open = False
            if live.replies in ready:
                try:
                    reply = _recv(live.replies)
                except (ValueError, UnicodeDecodeError) as exc:  # a child that talks nonsense is not trusted again
                    label = live.spawned.label()
                    self._end(live)
                    raise KernelError(
                        f"the isolated child sent a malformed reply ({exc}) while running {label}"
                    ) from None
                if reply is None:
                    raise self._died(live)
                return reply

    def _died(self, live: _Live) -> KernelError:
        label = live.spawned.label()
        _, status = os.waitpid(live.spawned.pid, 0)
        live.reaped = True
        self._end(live)
        if os.WIFSIGNALED(status):
            err = signal_error(os.WTERMSIG(status), label, self.limits)
            return err if isinstance(err, KernelError) else KernelError(str(err))
        return KernelError(f"the isolated child exited (status {os.WEXITSTATUS(status)}) while running {label}")

    def _end(self, live: _Live, gently: bool = False) -> None:
        live.stop(gently)
        self._live = None
        self._holder.clear()


def child_for(runner: IsolatedRunner, limits: Limits) -> IsolatedChild:
    """The persistent isolated child of `runner` for `limits` (one per runner and limits, started on first use)."""
    children: dict[Limits, IsolatedChild] = runner.__dict__.setdefault("_isolated_children", {})
    if limits not in children:
        children[limits] = IsolatedChild(runner, limits)
    return children[limits]


class _Live:
    """A running child and the parent's ends of its pipes."""

    def __init__(self, spawned: Spawned, requests: int, replies: int, err: ChildStderr) -> None:
        self.spawned, self.requests, self.replies, self.err = spawned, requests, replies, err
        self.err_open, self.reaped, self.stopped = True, False, False

    def stop(self, gently: bool) -> None:
        """Close the pipes, let the child go (or kill it), reap it, print what is left of its stderr."""
        if self.stopped:
            return
        self.stopped = True
        os.close(self.requests)
        if not self.reaped:
            if not gently or not _exits_within(self.spawned.pid, 2.0):
                kill(self.spawned.pid)
                os.waitpid(self.spawned.pid, 0)
        self.err.drain(self.spawned.stderr)
        for fd in (self.replies, self.spawned.stderr, self.spawned.result):
            os.close(fd)
        self.spawned.page.close()


def _exits_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
        time.sleep(0.01)
    return False


def _shut(owner: int, holder: list[_Live], inputs: Region, outputs: Region) -> None:
    """At collection or exit: end the child, free the shared memory (in the process that started it only)."""
    if os.getpid() != owner:
        return
    for live in holder:
        live.stop(gently=False)
    inputs.close()
    outputs.close()


def _serve(runner: IsolatedRunner, child: Child, requests: int, replies: int, inputs: Region, outputs: Region) -> None:
    """The child's loop: read a request, run, place the outputs, reply; until the parent closes the pipe."""
    runner.isolate = False  # the child's own copy of the runner runs in-process
    runner.observer = progress_observer(runner.graph, child, runner.observer)
    mutated = mutated_names(runner)
    specs: dict[str, Any] = {}
    child.ready()
    while (request := _recv(requests)) is not None:
        try:
            if request["in_cap"] != inputs.cap:
                inputs.map(request["in_cap"])
            if request["out_cap"] != outputs.cap and request["out_cap"]:
                outputs.map(request["out_cap"])
            child.at(node_label(runner.graph.nodes[0], 0) if runner.graph.nodes else "the program's outputs")
            leaves = read(inputs.buf, request["entries"], inputs.cap, "the inputs", copy=False)
            if request["spec"] not in specs:
                specs[request["spec"]] = pytree.treespec_loads(request["spec"])
            args, kwargs = pytree.tree_unflatten(leaves, specs[request["spec"]])
            state, constants = runner.fresh_tables() if request["fresh"] else (runner.state, runner.constants)
            result = runner.run_with(state, constants, args, kwargs)
            values = [v.detach() if isinstance(v, torch.Tensor) else v for v in pytree.tree_leaves(result)]
            names = [] if request["fresh"] else [n for n in mutated if n in state or n in constants]
            values += [(state if n in state else constants)[n] for n in names]
            entries, size = layout(values, "output")
            if size > outputs.cap:
                _send(replies, {"need": size})
                grown = _recv(requests)
                if grown is None:
                    return
                outputs.map(grown["out_cap"])
            assert outputs.buf is not None or size == 0
            if outputs.buf is not None:
                store(outputs.buf, values, entries)
            _send(replies, {"entries": entries, "state": names})
        except Exception as exc:  # the file's work failed: say so, and serve the next call
            _send(replies, {"error": to_jsonable(child.error(exc))})


def _error(sent: object) -> m.IsolatedError:
    """The `IsolatedError` record a reply holds, read strictly (a malformed one is the parent's KernelError)."""
    try:
        return decode_json(json.dumps(sent), m.IsolatedError, source="the isolated child's error")
    except DecodeError as exc:
        message = f"the isolated child sent a malformed error ({exc})"
        return m.IsolatedError(error_class="KernelError", message=message, budget="")


def _send(fd: int, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    view = memoryview(_HEAD.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _recv(fd: int) -> dict[str, Any] | None:
    """The next message (None: the pipe closed); ValueError for anything but a JSON object of a bounded size."""
    head = _read_exactly(fd, _HEAD.size)
    if head is None:
        return None
    (n,) = _HEAD.unpack(head)
    if n > _MAX_MESSAGE:
        raise ValueError(f"a {n}-byte message (at most {_MAX_MESSAGE})")
    body = _read_exactly(fd, n)
    if body is None:
        return None
    message = json.loads(body)
    if not isinstance(message, dict):
        raise ValueError(f"a JSON {type(message).__name__}, not an object")
    return message


def _read_exactly(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
