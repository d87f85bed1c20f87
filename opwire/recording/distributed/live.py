"""`torchrun --nproc-per-node N -m opwire replay RUN --collectives`: every rank replays chained, collectives for real.

Each launched process replays the trace of its RANK, chained (each call fed by the replayed outputs of the
calls before it), and runs the recorded collectives across a fresh gloo process group among the launched
ranks (groups the run created are created again with the same members), with `timeout` on every collective.
The execution policy admits the trace's c10d ops in this mode only, through its caller allowlist. Each rank's
report (or the call it stopped at and why) travels to rank 0 through torchrun's store (`live_exchange`), never
over the group, which a stopped rank leaves unusable; rank 0 prints the merged report and one line per run that
names the ranks that stopped, and carries the exit code. The group's timeout bounds any wait, so a failure
never hangs.

Each rank replays in a sandboxed fork of itself (`isolate.run_in_child`): the fork is confined as every isolated
child is (no terminal, its own descriptors only, Landlock reads limited to the installation, the run directory
and the resolver's files; TCP left to the group), connects the group, creating only the groups some recorded
call uses (at most `MAX_GROUPS`, each member a rank of the run, none twice), then loads the seccomp allowlist
with the collectives rules on every thread (gloo's included): the connected sockets stay usable, a new socket,
bind, connect or accept is refused, and so is everything `opwire replay TRACE` refuses. The rank's own process
prints the report the fork sends back, or one line naming the call a crash stopped (`--no-isolate`: in-process).
"""

from __future__ import annotations

import gc
import importlib
import json as _stdlib_json
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

import torch

from opwire.errors import DecodeError, OpwireError, printable
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.proxy_executor.isolate import Child, in_process, run_in_child
from opwire.proxy_executor.sandbox import Limits, default_max_memory
from opwire.recording.collectives import is_distributed_op
from opwire.recording.compare import Errors
from opwire.recording.distributed.ahead import Ahead
from opwire.recording.distributed.execute import run_collective
from opwire.recording.distributed.live_exchange import Exchange
from opwire.recording.distributed.ranks import check_ranks
from opwire.recording.distributed.run import Run
from opwire.recording.distributed.run_replay import RunReplay
from opwire.recording.distributed.sequence import CollectiveCall, collective_calls
from opwire.recording.launch import launch_info
from opwire.recording.origin import flat_names
from opwire.recording.replay_engine import Replayer, ReplayOptions
from opwire.recording.replay_worker import report_from_dict, worker_report
from opwire.recording.report import Mismatch, OpStats, ReplayReport, Span
from opwire.recording.source import TraceSource
from opwire.recording.tensor_names import object_of
from opwire.schema import models as m
from opwire.schema.refs import tensor_names
from opwire.serde import json
from opwire.serde.json import to_jsonable

__all__ = ["MAX_GROUPS", "replay_live"]

MAX_GROUPS = 64  # process groups a run may ask every rank to create (each holds a connection per member)
# what connecting the group reads beside the run directory: glibc's resolver (the launcher's address), and the
# network interfaces gloo enumerates (gloo/common/linux.cc)
_RESOLVER = (
    "/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf", "/etc/resolv.conf", "/etc/gai.conf", "/sys/class/net",
    "/sys/bus/pci/devices", "/sys/devices", "/proc/modules",
)  # fmt: skip


def replay_live(
    path: str,
    rtol: float | None,
    atol: float | None,
    timeout: float,
    allow_ops: Iterable[str],
    as_json: bool,
    findings: Callable[[ReplayReport], Sequence[m.Finding]] | None = None,
    isolate: bool = True,
    max_memory: int | None = None,
) -> int:
    """Replay this rank of run `path` with real collectives; rank 0 prints the merged report. Exit 0/1/2.

    With `as_json` rank 0 prints the `RunReplayOutput` record; `findings` gives each rank's Findings."""

    info = launch_info()
    if info is None:
        print(
            "opwire replay: error: --collectives runs under torchrun: `torchrun --nproc-per-node N -m opwire replay "
            f"{path} --collectives` (RANK/WORLD_SIZE are not set)",
            file=sys.stderr,
        )
        return 2
    try:
        run = Run(path)
    except OpwireError as exc:
        return _setup_error(info.rank, str(exc))
    if run.world_size != info.world_size:
        return _setup_error(
            info.rank,
            f"{path} holds {run.world_size} ranks, torchrun launched {info.world_size}; "
            f"launch with --nproc-per-node {run.world_size}",
        )

    def work(child: Child) -> dict[str, bytes]:
        return _replay_here(child, run, info.rank, rtol, atol, timeout, allow_ops)

    if not isolate:
        blobs = in_process(work)
    else:  # a fork of this rank connects the group, sandboxes itself, replays; this process reports its end
        limits = Limits(
            max_memory=default_max_memory() if max_memory is None else max_memory,
            collectives=True,
            reads=(str(run.path), *_RESOLVER),
        )
        outcome = run_in_child(work, limits)
        blobs = outcome.blobs if outcome.error is None else {"error": str(outcome.error).encode()}
    mine = _outcome(blobs)
    exchange = Exchange.connect(run.world_size, timeout)
    if info.rank != 0:
        if exchange is None or not exchange.publish(info.rank, mine):
            return _alone(info.rank, mine, isolate)
        # rank 0 reads the outcome from the agent's store and exits with the verdict; this rank leaves now, at
        # once (no interpreter teardown, no destroy_process_group, which would wait for ranks that will never
        # come), so torchrun has no running rank to stop (and list as failed) when rank 0 exits non-zero
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    others = exchange.collect(timeout + _MARGIN) if exchange is not None else {}
    code = _report(run, mine, others, as_json, findings)
    if code != 0 and exchange is not None:
        exchange.wait_gone(_MARGIN)  # the ranks beside this one leave first, so torchrun lists rank 0 alone
    if code == 2 and not isolate:
        sys.stdout.flush()
        os._exit(2)  # no destroy_process_group: it would wait for ranks that will never come
    return code


_GLOO_PLACE = re.compile(r"^\[[^\]\n]*\.(?:cc|cpp|h):\d+\] ")  # gloo's "[/path/file.cc:78] " before its message
_MARGIN = 30.0  # seconds beyond the collective timeout a rank waits for the others' outcomes (startup, teardown)


def _outcome(blobs: dict[str, bytes]) -> dict[str, Any]:
    """What this rank hands rank 0: its (partial) report, and the error and call that stopped it."""
    out: dict[str, Any] = {k: _stdlib_json.loads(blobs[k]) for k in ("report", "at") if k in blobs}
    if "error" in blobs:
        out["error"] = printable(blobs["error"].decode("utf-8", "replace"))
    return out


def _setup_error(rank: int, message: str) -> int:
    """Every rank reads the same run and finds the same fault: rank 0 says it and carries the exit code."""
    if rank != 0:
        return 0
    print(f"opwire replay: error: {message}", file=sys.stderr)
    return 2


def _alone(rank: int, mine: dict[str, Any], isolate: bool) -> int:
    """No store to hand the outcome to rank 0 through (another launcher): this rank's one line."""
    if "error" not in mine:
        return 0
    print(f"opwire replay: error: rank {rank}: {mine['error']}", file=sys.stderr, flush=True)
    if not isolate:
        os._exit(2)
    return 2


def _report(
    run: Run, mine: dict[str, Any], others: dict[int, dict[str, Any] | None], as_json: bool,
    findings: Callable[[ReplayReport], Sequence[m.Finding]] | None,
) -> int:  # fmt: skip
    """Rank 0: print the run's report from every rank's outcome, and one line for the ranks that stopped; exit code."""
    merged = RunReplay(str(run.path), "collectives", run.world_size)
    stopped: list[str] = []
    for r, got in [(0, mine), *sorted(others.items())]:
        if got is None:
            got = {"error": "no word from this rank (it was stopped before it could report)"}
        report = ReplayReport("chained", 0)
        if isinstance(got.get("report"), dict):
            report = report_from_dict(got["report"])
        if "error" in got:
            at = got.get("at")
            i, op = (int(at[0]), str(at[1])) if isinstance(at, list) and len(at) == 2 else (report.calls, "")
            stopped.append(f"rank {r}: {f'stopped at call {i} ({op}): ' if op else ''}{got['error']}")
            report.mismatches.append(Mismatch(i, op, "call", "error", f"the replay stopped here: {got['error']}"))
        merged.ranks.append(report)
    try:  # decoding only, as `opwire ranks` does; it also explains a rank that stopped waiting for a collective
        merged.collectives = check_ranks(run)
    except OpwireError as exc:
        stopped.append(f"the collectives check: {exc}")
    text = json.encode(merged.to_model(findings), indent=2).decode("ascii") if as_json else str(merged)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if stopped:
        print(f"opwire replay: error: {'; '.join(stopped)}", file=sys.stderr, flush=True)
        return 2
    return 0 if merged.ok else 1


def _replay_here(
    child: Child, run: Run, rank: int, rtol: float | None, atol: float | None, timeout: float,
    allow_ops: Iterable[str],
) -> dict[str, bytes]:  # fmt: skip
    """Connect the group, enter the sandbox (`child.ready()`), replay this rank; its report (and rank 0's check)."""
    # torch's Python meta kernels (the memory estimate runs matmuls and losses on `meta`) import torch._dynamo on
    # their first call (`torch._disable_dynamo`): seconds that would land on the first replayed call; the recorded
    # job paid it while setting up (its optimizer imports it), so the replay pays it here, before the clock starts
    importlib.import_module("torch._dynamo")
    # the ~300k objects of torch and dynamo are left out of collections while this rank replays (a full one costs
    # ~0.5 s, and the replay's own objects trigger several); this is opwire's own process (the CLI, or its fork)
    gc.freeze()
    try:
        return _connected(child, run, rank, rtol, atol, timeout, allow_ops)
    finally:
        gc.unfreeze()


def _connected(
    child: Child, run: Run, rank: int, rtol: float | None, atol: float | None, timeout: float,
    allow_ops: Iterable[str],
) -> dict[str, bytes]:  # fmt: skip
    """`_replay_here` once torch is ready: the group, the sandbox, the replay and a synchronized teardown."""
    import torch.distributed as dist

    # the default group waits out the ranks' uneven set-up (imports, the policy check's decoding), which a loaded
    # machine stretches by seconds; the recorded collectives run on groups of their own with `timeout`
    dist.init_process_group("gloo", timeout=timedelta(seconds=max(timeout, _SETUP_TIMEOUT)))
    progress: dict[str, Any] = {}
    # the teardown's own group: its barrier never pairs with a recorded collective another rank still waits in
    done = dist.new_group(list(range(run.world_size)), timeout=timedelta(seconds=timeout))
    try:
        groups, ranks = _groups(run, timeout)
        child.ready()  # sandboxed from here: the connected group's sockets only (syscalls.COLLECTIVES)
        with warnings.catch_warnings():  # torch's deprecation notes about the c10d calls the trace names
            warnings.simplefilter("ignore", FutureWarning)
            report = _replay_rank(run, rank, groups, ranks, rtol, atol, allow_ops, child, progress)
    except Exception as exc:  # this rank cannot go on: its partial report and the error go to rank 0
        blobs = {"error": f"{type(exc).__name__}: {_GLOO_PLACE.sub('', str(exc))}".encode()}
        if "at" in progress:
            blobs["at"] = _stdlib_json.dumps(progress["at"]).encode()
        if "report" in progress:
            blobs["report"] = _stdlib_json.dumps(to_jsonable(worker_report(progress["report"]))).encode()
        return blobs  # no teardown: the fork's exit closes its connections, so the ranks waiting on it stop now
    blobs = {"report": _stdlib_json.dumps(to_jsonable(worker_report(report))).encode()}
    # a synchronized teardown: no rank destroys its groups while another still works, and what the replay held
    # (tensors, async work) goes while the groups and the interpreter are alive; a gloo rank that tore down alone
    # once aborted at exit ("terminate called without an active exception")
    try:
        dist.barrier(group=done)
        gc.collect()
        dist.destroy_process_group()
    except RuntimeError:  # another rank stopped after this one finished: this rank's report stands
        pass
    return blobs


def _groups(run: Run, timeout: float) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """Recorded group name -> a fresh group with the same members (every rank creates them in the same order);
    only the groups a recorded call uses, at most `MAX_GROUPS`, members checked against the world size."""
    import torch.distributed as dist

    used = _used_groups(run)
    found = sorted((g for g in run.groups if g.name in used), key=lambda g: g.name)
    if len(found) > MAX_GROUPS:
        raise DecodeError(
            f"{run.path}: the run's calls use {len(found)} process groups, at most {MAX_GROUPS} are created for a "
            "replay (each holds a connection per member); replay it without --collectives"
        )
    groups: dict[str, Any] = {}
    ranks: dict[str, list[int]] = {}
    for g in found:
        members = [int(r) for r in g.ranks]
        if not members or len(set(members)) != len(members) or any(not 0 <= r < run.world_size for r in members):
            raise DecodeError(
                f"{run.path}: process group {printable(g.name)!r} lists ranks {members[:16]}; expected distinct "
                f"ranks of the run (0..{run.world_size - 1})"
            )
        ranks[g.name] = members
        groups[g.name] = dist.new_group(members, timeout=timedelta(seconds=timeout))
    return groups, ranks


def _used_groups(run: Run) -> set[str]:
    """The names of the process groups some recorded collective of some rank uses."""
    used: set[str] = set()
    for r in range(run.world_size):
        with run.open(r) as src:
            used |= {c.group for c in collective_calls(src, r)}
    return used


def _replay_rank(
    run: Run,
    rank: int,
    groups: dict[str, Any],
    ranks: dict[str, list[int]],
    rtol: float | None,
    atol: float | None,
    allow_ops: Iterable[str],
    child: Child,
    progress: dict[str, Any],
) -> ReplayReport:
    """Replay rank `rank` chained, collectives for real; `progress` holds the report and the call being replayed."""

    with run.open(rank) as src:
        targets = [src.target(i) for i in range(len(src))]  # no record decoded
        ops = {t for t in targets if is_distributed_op(t)}
        policy = ExecPolicy([*allow_ops, *ops])  # collectives admitted in this mode only
        ahead = Ahead(src)
        ahead.check(policy)  # the records it decodes are kept for the loop below (each decoded once)
        opts = ReplayOptions(DefaultPolicy.FROM_SCHEMA, "chained", rtol, atol, None, policy)
        runner = Replayer(src, ProxyExecutor(policy=DefaultPolicy.FROM_SCHEMA, exec_policy=policy), opts)
        report = progress["report"] = ReplayReport("chained", len(src), recorded_torch=src.header.torch_version)
        calls = {c.index: c for c in collective_calls(src, rank)} if ops else {}
        ahead.warm(runner)  # nodes bound, tensor entries and freed lists decoded: set-up, as the job's was
        labels = [f"call {i} ({printable(t)})" for i, t in enumerate(targets)]  # what a crash names, made ahead
        torch.distributed.barrier()  # every rank set up before the first recorded collective (`_SETUP_TIMEOUT`)
        start = mark = time.perf_counter()
        spans: list[Span] = []
        report.spans, first, stop = spans, 0, 0  # a span ends after each c10d call (`Span`)
        runner.free(-1)
        with torch.no_grad():
            for i, rec in enumerate(ahead.records()):
                child.at(labels[i])
                progress["at"] = (i, rec.target)
                stop = i + 1
                if "skipped" in rec.metadata:
                    report.skipped.append((i, rec.target, rec.metadata["skipped"]))
                    runner.free(i)
                    continue
                stats = report.ops.get(rec.target)
                if stats is None:
                    stats = report.ops[rec.target] = OpStats()
                c10d = is_distributed_op(rec.target)
                if c10d:
                    runner.errors = Errors()
                    found = _collective(runner, src, i, rec, calls, groups, ranks)
                else:
                    found = runner.run(i, rec, ahead.walk(i))  # (it starts its own `errors`)
                stats.calls += 1
                stats.mismatches += bool(found)
                stats.worst_abs = max(stats.worst_abs, runner.errors.abs)
                report.mismatches += found
                report.replayed += 1
                runner.free(i)
                if c10d:
                    now = time.perf_counter()
                    spans.append(Span(first, stop, now - mark))
                    first, mark = stop, now
        end = time.perf_counter()
        if stop > first or not spans:  # the calls after the last c10d call, or the loop's end added to its span
            spans.append(Span(first, stop, end - mark))
        else:
            spans[-1] = Span(spans[-1].start, stop, spans[-1].seconds + end - mark)
        report.seconds = end - start
        return report


_SETUP_TIMEOUT = 300.0  # seconds the ranks wait for each other to connect and set up, beyond any collective's


def _collective(
    runner: Any, src: TraceSource, i: int, rec: m.CallRecord, calls: dict[int, Any], groups: dict[str, Any],
    ranks: dict[str, list[int]],
) -> list[Mismatch]:  # fmt: skip
    """Run a c10d call for real and compare its results with the recorded ones (chained: results go live)."""

    call = calls.get(i)
    if call is None:  # an unwrapping op (wait_tensor, _wrap_tensor_autograd): its output is its input
        ins = [n for na in rec.inputs for n in _names(na.arg)]
        outs = [n for a in rec.outputs for n in _names(a)]
        for a, b in zip(ins, outs, strict=False):
            runner.live[object_of(b)] = runner._tensor(a, False)
        return []
    assert isinstance(call, CollectiveCall)
    runner.take_external(i, rec)
    got = run_collective(call, groups, ranks, lambda n: runner._tensor(n, False), src.meta)
    found: list[Mismatch] = []
    for k, (name, t) in enumerate(zip(flat_names(call.outputs), got, strict=False)):
        runner.live[object_of(name)] = t
        found += runner.check_value(i, rec, f"output [{k}]", t, name)
    return found


def _names(arg: m.Argument) -> list[str]:

    return tensor_names(arg)
