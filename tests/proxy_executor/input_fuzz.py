"""Fuzz of issue 25's item 3: every admitted op with the inputs earlier fuzzes did not vary, one forked child per case.

The cases (tests/support/hostile_inputs.py) run through `ProxyExecutor.call`, as a file's node runs: the op
policy, its preconditions and the budgets apply, so a precondition or refusal that stops a case counts as
"refused first". An op's cases run in order in a child forked from this process (torch already loaded): a
crash is the child's signal, a hang its timeout; the case that killed the child runs again alone (when it
survives alone, the earlier case that damaged the heap is found by running pairs), and a new child goes on.

`nice -n 10 python tests/proxy_executor/input_fuzz.py [SECONDS] [--ops REGEX] [--skip N]` runs the long version
over every admitted op (those matching REGEX; after the first N), trusting families first, until SECONDS
(default 1800) have passed, then prints the figures
(ops, cases, outcomes and crashes per axis) as JSON. tests/proxy_executor/test_input_fuzz.py runs a sample.
"""

from __future__ import annotations

import json
import os
import re
import resource
import select
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the tests' support package
from support.hostile_inputs import AXES, Case, base_call, cases
from support.op_call import call_node

from opwire.errors import BindError, BudgetError, KernelError, OpwireError
from opwire.proxy_executor import ProxyExecutor
from opwire.proxy_executor.allowlist import policy_entry
from opwire.proxy_executor.targets import resolve

SECONDS_PER_CASE = 20.0  # generous: the machine is shared; a hang takes far longer
MAX_MEMORY = 256 << 20  # each case's execution-memory budget
HEADROOM = 2 << 30  # address space a child may map beyond its parent's
SHAPES = ((2, 3, 4, 4), (3, 3), (6,), (2, 3, 5))
"""The shapes an op with no real call is tried on, first to run wins."""
TRUSTING = re.compile(
    r"backward|norm|rnn|lstm|gru|embedding|pool|index|scatter|gather|put|take|sparse|quantiz|fft|upsample|grid_sampler"
    r"|linalg|cholesky|lu_|_lu|qr|svd|eig|solve|triangular|mkldnn|conv|ctc|loss|interp|segment|unfold|im2col|col2im"
    r"|bag|histc|bincount|searchsorted|bucketize|multinomial|topk|sort|unique|repeat_interleave|_foreach|_fused"
)
"""Op names of the kinds that trust their inputs: fuzzed right after the precondition families."""


def admitted_ops() -> list[str]:
    """Every admitted aten op (plain or with a precondition), those that trust their inputs first."""
    from opwire.proxy_executor.allowlist import allowlist

    ops = sorted(op for op in allowlist() if op.startswith("aten::"))

    def rank(op: str) -> int:
        entry = policy_entry(op)
        return 0 if entry is not None and entry[0] == "precondition" else 1 if TRUSTING.search(op) else 2

    return sorted(ops, key=rank)


def _execute(case: Case) -> tuple[str, str]:
    """(outcome, detail) of one case, in the child."""
    try:
        node, env = call_node(case.op, **case.values)
    except TypeError as exc:  # a value the node builder cannot spell: not a case
        return "unbuilt", str(exc)[:200]
    try:
        ProxyExecutor(max_memory=MAX_MEMORY).call(node, env)
        return "ok", ""
    except KernelError as exc:
        return ("refused" if "refused before the kernel ran" in str(exc) else "kernel"), str(exc)[:300]
    except (BindError, BudgetError) as exc:
        return "refused", f"{type(exc).__name__}: {str(exc)[:300]}"
    except OpwireError as exc:
        return "opwire", f"{type(exc).__name__}: {str(exc)[:300]}"
    except BaseException as exc:
        return "foreign", "".join(traceback.format_exception_only(exc))[-600:]


def _child(todo: list[Case], w: int) -> None:
    """The forked child: capped and quiet; runs `todo` in order, announcing each case before its outcome.

    Each case's tensors are freed before the outcome is sent: a kernel that wrote past a storage (softmax's
    out= into a zero-stride tensor) damaged the heap silently, and free() is where glibc notices."""
    status = 0
    try:
        cap = _mapped() + HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)  # kernels print warnings to fd 2
        for i in range(len(todo)):
            os.write(w, f"{i}\n".encode())
            torch.set_num_threads(todo[i].threads)
            outcome = _execute(todo[i])
            todo[i] = None  # type: ignore[call-overload]  # frees the case's own tensors: a write past one shows now
            os.write(w, (json.dumps([i, *outcome]) + "\n").encode())
    except BaseException:
        status = 3
    finally:
        os._exit(status)


def _mapped() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _forked(todo: list[Case], timeout: float) -> tuple[list[tuple[str, str]], int, str]:
    """Run `todo` in one forked child: the outcomes it gave, and how it ended (the case running, the outcome)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(todo, w)
    os.close(w)
    done: list[tuple[str, str]] = []
    buf, running, hung = b"", -1, False
    deadline = time.monotonic() + timeout
    try:
        while True:
            if not select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
                hung = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(r, 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(b"["):
                    _, outcome, detail = json.loads(line)
                    done.append((outcome, detail))
                    running = -1
                else:
                    running, deadline = int(line), time.monotonic() + timeout
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    if hung:
        return done, running, f"hang: no answer in {timeout:.0f}s"
    if running >= 0 or len(done) < len(todo):
        how = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        return done, max(running, len(done)), f"crash: {how}"
    return done, -1, ""


def run_case(case: Case, timeout: float = SECONDS_PER_CASE) -> tuple[str, str]:
    """(outcome, detail) of `case` alone in a forked child: ok, refused, kernel, opwire, foreign, crash or hang."""
    done, _, end = _forked([case], timeout)
    if done:
        return done[0]
    outcome, _, detail = end.partition(": ")
    return outcome, detail


def run_cases(todo: list[Case], timeout: float = SECONDS_PER_CASE) -> list[tuple[str, str]]:
    """The outcome of every case of `todo`, run in order in forked children (a new one after a crash or hang).

    A case that killed the child is run again alone: when it crashes alone it is the finding; when it does not,
    an earlier case damaged the heap, and the first earlier case that makes it crash when run before it is named."""
    results: list[tuple[str, str]] = []
    start = 0
    while start < len(todo):
        done, failed, end = _forked(todo[start:], timeout)
        results += done
        if failed < 0:
            break
        culprit = todo[start + failed]
        outcome, detail = run_case(culprit, timeout)
        if outcome not in ("crash", "hang"):
            outcome, detail = _blame(todo[start : start + failed], culprit, end, timeout)
        results.append((outcome, detail))
        start += failed + 1
    return results


def _blame(before: list[Case], victim: Case, end: str, timeout: float) -> tuple[str, str]:
    for case in before:
        _, failed, how = _forked([case, victim], timeout)
        if failed >= 0:
            return how.partition(": ")[0], f"{how.partition(': ')[2]} after [{case.label}] ran first"
    outcome, _, detail = end.partition(": ")
    return outcome, f"{detail} (after earlier cases; not reproduced alone)"


def op_cases(op: str, real: dict[str, dict[str, Any]]) -> list[Case]:
    """The cases of `op`: from its real call when one was seen, else from the first schema-made call that runs."""
    schema = resolve(op).schema
    if schema is None:
        return []
    if op in real:
        return cases(op, schema, real[op])
    first: dict[str, Any] | None = None
    found: list[Case] = []  # a probe that crashed is a finding of the base axis: run again and counted
    for shape in SHAPES:
        values = base_call(schema, shape)
        first = values if first is None else first
        probe = Case(op, "base", f"schema-made call on {shape}", values)
        outcome = run_case(probe)[0]
        if outcome == "ok":
            return found + cases(op, schema, values)
        if outcome in ("crash", "hang", "foreign"):
            found.append(probe)
    return found + (cases(op, schema, first) if first is not None else [])


class Figures:
    """What a run found: ops, cases, outcomes per axis, and each crash, hang and foreign exception."""

    def __init__(self) -> None:
        self.ops = 0
        self.cases = 0
        self.by_axis: dict[str, Counter[str]] = {axis: Counter() for axis in AXES}
        self.findings: list[dict[str, str]] = []

    def add(self, case: Case, outcome: str, detail: str) -> None:
        """Count one case's outcome; keep it when it is a finding."""
        self.cases += 1
        self.by_axis[case.axis][outcome] += 1
        if outcome in ("crash", "hang", "foreign"):
            self.findings.append({"op": case.op, "case": case.label, "outcome": outcome, "detail": detail[-300:]})
            print(f"{outcome}: {case.op} [{case.label}] {detail[-200:]}", file=sys.stderr, flush=True)

    def report(self) -> dict[str, Any]:
        """The figures as plain data."""
        axes = {axis: dict(c) for axis, c in self.by_axis.items() if c}
        return {"ops": self.ops, "cases": self.cases, "by_axis": axes, "findings": self.findings}


# a few ops the suite fuzzes on every axis (test_input_fuzz.py), each with a real call of a (2, 3, 4, 4) input
SAMPLE = {
    "aten::native_batch_norm_backward": lambda x: {
        "grad_out": x, "input": x, "weight": torch.ones(3), "running_mean": torch.zeros(3),
        "running_var": torch.ones(3), "save_mean": None, "save_invstd": None, "train": False, "eps": 1e-5,
        "output_mask": [True, True, True],
    },
    "aten::max_pool2d_with_indices_backward": lambda x: {
        "grad_output": torch.randn(2, 3, 2, 2), "self": x, "kernel_size": [2, 2], "stride": [2, 2],
        "padding": [0, 0], "dilation": [1, 1], "ceil_mode": False,
        "indices": torch.nn.functional.max_pool2d(x, 2, return_indices=True)[1],
    },
    "aten::_embedding_bag": lambda x: {
        "weight": torch.randn(10, 4), "indices": torch.tensor([1, 2, 4, 5]), "offsets": torch.tensor([0, 2]),
        "scale_grad_by_freq": False, "mode": 0, "sparse": False, "per_sample_weights": None,
        "include_last_offset": False, "padding_idx": -1,
    },
    "aten::to_sparse_csr": lambda x: {"self": x[0, 0], "dense_dim": None},
    "aten::index_add": lambda x: {"self": x, "dim": 1, "index": torch.tensor([0, 2]), "source": x[:, :2]},
}  # fmt: skip


def warm_up() -> None:
    """Load in this process what the first case would load in every child (a slow import is no hang)."""
    import torch._dynamo  # meta kernels of foreach ops import it: 5-8 s on a loaded machine

    _execute(Case("aten::add.Tensor", "base", "warm-up", {"self": torch.ones(2), "other": torch.ones(2)}))


def fuzz(
    ops: list[str],
    real: dict[str, dict[str, Any]],
    seconds: float,
    per_op: int | None = None,
    progress: Path | None = None,
) -> Figures:
    """Run every case of each op in `ops` (at most `per_op` of each) until `seconds` have passed.

    `progress`: a file the figures so far are written to every 25 ops (a long run stopped early keeps them)."""
    figures, stop = Figures(), time.monotonic() + seconds
    warm_up()
    for k, op in enumerate(ops):
        if time.monotonic() > stop:
            break
        if k % 25 == 0:
            print(f"[{k}/{len(ops)}] {op} ({figures.cases} cases)", file=sys.stderr, flush=True)
            if progress is not None:
                progress.write_text(json.dumps(figures.report(), indent=1))
        todo = op_cases(op, real)[:per_op]
        figures.ops += 1
        for case, (outcome, detail) in zip(todo, run_cases(todo), strict=True):
            figures.add(case, outcome, detail)
    return figures


def real_call_values(cache: Path | None = None) -> dict[str, dict[str, Any]]:
    """The real calls of companion_fuzz (the coverage corpus's forward and backward), by op; cached in `cache`."""
    if cache is not None and cache.exists():
        loaded: dict[str, dict[str, Any]] = torch.load(cache, weights_only=False)
        return loaded
    from proxy_executor.companion_fuzz import real_calls

    found = dict(real_calls(broad=True))
    if cache is not None:
        torch.save(found, cache)
    return found


def sample_outcomes() -> dict[str, list[list[str]]]:
    """Every case of each op of `SAMPLE` on every axis: op -> [label, axis, outcome, detail] per case."""
    warm_up()
    found: dict[str, list[list[str]]] = {}
    for op, make in SAMPLE.items():
        schema = resolve(op).schema
        assert schema is not None
        todo = cases(op, schema, make(torch.randn(2, 3, 4, 4)))
        found[op] = [[c.label, c.axis, *outcome] for c, outcome in zip(todo, run_cases(todo), strict=True)]
    return found


def main(argv: list[str]) -> int:
    """The long run: every admitted op (or those matching --ops REGEX) until the time is up; JSON figures.
    `--sample`: the suite's sample (`SAMPLE`), its outcomes as JSON."""
    if "--sample" in argv:
        print(json.dumps(sample_outcomes()))
        return 0
    seconds = float(argv[0]) if argv and not argv[0].startswith("-") else 1800.0
    pattern = re.compile(argv[argv.index("--ops") + 1]) if "--ops" in argv else None
    skip = int(argv[argv.index("--skip") + 1]) if "--skip" in argv else 0
    ops = [op for op in admitted_ops() if pattern is None or pattern.search(op)][skip:]
    real = real_call_values(Path(os.environ.get("OPWIRE_FUZZ_CALLS", "/tmp/opwire-input-fuzz-calls.pt")))
    progress = os.environ.get("OPWIRE_FUZZ_PROGRESS")
    figures = fuzz(ops, real, seconds, progress=Path(progress) if progress else None)
    print(json.dumps(figures.report(), indent=1))
    return 1 if figures.findings else 0


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    raise SystemExit(main(sys.argv[1:]))
