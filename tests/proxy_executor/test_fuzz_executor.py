"""Executor fuzz: random node sequences over allowed aten ops with hostile arguments, run in a child under RLIMIT_AS.

0 crashes (the child survives), 0 foreign exceptions (only opwire errors; kernels' own exceptions arrive
as KernelError), 0 hangs (each sequence answers within SECONDS_PER_PROGRAM). `make test` runs RUNS
sequences (~15 s); `OPWIRE_FUZZ_EXEC_RUNS=5000 OPWIRE_FUZZ_EXEC_SEED=1000 pytest -s
tests/proxy_executor/test_fuzz_executor.py` runs more. A failure names the seed:
`exec_fuzz_worker.program(seed)` rebuilds it.
"""

from __future__ import annotations

import json
import os
import select
import sys
from pathlib import Path

import pytest
from support.forked import Served

RUNS = int(os.environ.get("OPWIRE_FUZZ_EXEC_RUNS", "200"))
FIRST_SEED = int(os.environ.get("OPWIRE_FUZZ_EXEC_SEED", "0"))
HEADROOM_AS = 2 << 30  # the child's address space beyond this process's (a fresh child's 3 GiB cap left ~2.3 GiB)
SECONDS_PER_PROGRAM = 20.0  # generous: the machine is shared; a hang takes far longer


def test_random_node_sequences_end_in_opwire_errors_or_results() -> None:
    from proxy_executor import exec_fuzz_worker

    proc = Served(exec_fuzz_worker.main, HEADROOM_AS)  # forked: torch imported once, in this worker
    outcomes: dict[str, int] = {}
    try:
        assert proc.stdout.readline() == "ready\n", "executor fuzz worker did not start"
        for seed in range(FIRST_SEED, FIRST_SEED + RUNS):
            proc.stdin.write(f"{seed}\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], SECONDS_PER_PROGRAM)
            if not ready:
                pytest.fail(f"seed {seed}: the node sequence ran over {SECONDS_PER_PROGRAM}s (a hang)")
            line = proc.stdout.readline()
            if not line:
                pytest.fail(f"seed {seed}: the executor child died (exit {proc.wait()})")
            result = json.loads(line)
            assert result["status"] != "foreign", f"seed {seed}: foreign exception\n{result['detail']}"
            outcomes[result["status"]] = outcomes.get(result["status"], 0) + 1
    finally:
        proc.kill()
        proc.wait()
    print(f"\nexecutor fuzz: {RUNS} sequences from seed {FIRST_SEED}, outcomes {outcomes}")
    assert outcomes.get("ok", 0) > 0 and outcomes.get("opwire", 0) > 0  # the generator reaches both ends


def test_every_allowlisted_op_survives_hostile_index_and_size_arguments() -> None:
    """The short per-op fuzz: one hostile call of every allowlisted op (op_fuzz.py runs the long version)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import op_fuzz

    summary = op_fuzz.fuzz(op_fuzz.fuzzed_ops(), cases=1, first_seed=int(os.environ.get("OPWIRE_FUZZ_OP_SEED", "0")))
    print(f"\nper-op fuzz: {summary.ops} ops, {summary.cases} cases, outcomes {summary.outcomes}")
    assert summary.crashes == [] and summary.hangs == [] and summary.foreign == [], (
        f"crashes {summary.crashes}, hangs {summary.hangs}, foreign {summary.foreign}"
    )


@pytest.mark.slow
def test_hostile_companions_of_real_calls_never_crash() -> None:
    """companion_fuzz.py over the family ops: each real call with one tensor made hostile, in order, in children.

    Every case, not a sample: a kernel that corrupts the heap without crashing (mkldnn_rnn_layer_backward with a
    short workspace did) kills the child cases later, and only in some orders; the whole set (~900 cases, ~10 s)
    died on each run before the rnn family checked the workspace, a sixth of it in half the runs."""
    from proxy_executor.companion_fuzz import cases, real_calls, run

    result = run(cases(real_calls()))
    assert result["cases"] > 600
    assert result["crashes"] == []
