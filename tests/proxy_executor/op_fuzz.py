"""Per-op fuzz of the allowlist: every allowlisted op's index-like and size-like arguments, in a child under RLIMIT_AS.

`python tests/proxy_executor/op_fuzz.py [CASES_PER_OP] [FIRST_SEED]` runs the long version (prints a JSON
summary: ops fuzzed, cases, outcomes, crashes and hangs with op and seed); the test suite runs a short one
(tests/proxy_executor/test_fuzz_executor.py). A crash is a child killed by a signal, a hang a case with
no answer within SECONDS_PER_CASE; the parent forks a new child and goes on. Rebuild a finding with
`op_fuzz_worker.case(op, seed)`.
"""

from __future__ import annotations

import json
import select
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: tests/ on the path, as pytest puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.forked import Served

HEADROOM_AS = 2 << 30  # the child's address space beyond its parent's (a fresh child's 3 GiB cap left ~2.3 GiB)
SECONDS_PER_CASE = 10.0


@dataclass
class Summary:
    """What one fuzz run found."""

    ops: int = 0
    cases: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    crashes: list[tuple[str, int, int]] = field(default_factory=list)
    """(op, seed, signal or exit code) of every case that killed the child."""
    hangs: list[tuple[str, int]] = field(default_factory=list)
    foreign: list[tuple[str, int, str]] = field(default_factory=list)


class _Child:
    def __init__(self) -> None:
        # forked, torch and Dynamo imported once in this process (op_fuzz_worker.main's warm-up imports Dynamo: ~2
        # CPU-s a fresh child, and again after each crash); the worker's protocol and the case's cap are the same
        import op_fuzz_worker
        import torch._dynamo  # noqa: F401

        self.proc = Served(op_fuzz_worker.main, HEADROOM_AS)
        ready, _, _ = select.select([self.proc.stdout], [], [], 300)
        if not ready or self.proc.stdout.readline() != "ready\n":
            raise RuntimeError("op fuzz worker did not start")

    def ask(self, op: str, seed: int) -> dict[str, str] | int | None:
        """The case's JSON answer, the child's exit status when it died, or None on a hang."""
        try:
            self.proc.stdin.write(f"{op} {seed}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self.proc.wait()
        ready, _, _ = select.select([self.proc.stdout], [], [], SECONDS_PER_CASE)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            return self.proc.wait()
        answer: dict[str, str] = json.loads(line)
        return answer

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def fuzzed_ops() -> list[str]:
    """The allowlisted ops of torch namespaces, sorted (what a file may run without allow_ops)."""
    from opwire.proxy_executor.allowlist import allowlist

    return sorted(allowlist())


def fuzz(ops: list[str], cases: int, first_seed: int = 0) -> Summary:
    """Run `cases` fuzzed calls of each op in `ops`; returns the summary."""
    s = Summary(ops=len(ops))
    child = _Child()
    try:
        for k, op in enumerate(ops):
            if k % 50 == 0:
                print(f"[{k}/{len(ops)}] {op}", file=sys.stderr, flush=True)
            for seed in range(first_seed, first_seed + cases):
                s.cases += 1
                got = child.ask(op, seed)
                if isinstance(got, dict):
                    s.outcomes[got["status"]] = s.outcomes.get(got["status"], 0) + 1
                    if got["status"] == "foreign":
                        s.foreign.append((op, seed, got["detail"]))
                    continue
                if got is None:
                    s.hangs.append((op, seed))
                else:
                    s.crashes.append((op, seed, got))
                print(f"{op} seed {seed}: {'hang' if got is None else f'crash {got}'}", file=sys.stderr, flush=True)
                child.close()
                child = _Child()
    finally:
        child.close()
    return s


def main(argv: list[str]) -> None:
    """Fuzz every allowlisted op and print the summary as JSON."""
    cases = int(argv[0]) if argv else 40
    first = int(argv[1]) if len(argv) > 1 else 0
    s = fuzz(fuzzed_ops(), cases, first)
    print(json.dumps(s.__dict__, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
