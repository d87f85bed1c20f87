"""The fuzz tests' decoding child: inputs are decoded in a separate process under RLIMIT_AS, so a segfault,
a hang or a runaway allocation fails the test instead of killing the suite (worker: fuzz_worker.py beside this file)."""

from __future__ import annotations

import json
import select
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

MEMORY_CAP = 1 << 30  # bytes of address space for the child
SECONDS_PER_INPUT = 10.0  # generous: the machine is shared; a hang or quadratic path takes far longer
_WORKER = Path(__file__).with_name("fuzz_worker.py")


class Child:
    """The decoding child process, restarted after it dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.count = 0
        self.outcomes: dict[str, int] = {}

    def start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, str(_WORKER), str(MEMORY_CAP)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert self.proc.stdout is not None
            assert self.proc.stdout.readline() == b"ready\n", "fuzz worker did not start"
        return self.proc

    def decode(self, codec: str, root: str, data: bytes, engine: str | None = None) -> dict[str, object]:
        """Decode in the child with every engine (None, as `opwire.loads`) or one Thrift engine alone."""
        proc = self.start()
        assert proc.stdin is not None and proc.stdout is not None
        msg = f"{codec} {root} {engine or '-'}\n".encode() + data
        proc.stdin.write(struct.pack(">I", len(msg)) + msg)
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], SECONDS_PER_INPUT)
        if not ready:
            proc.kill()
            pytest.fail(f"decoding took over {SECONDS_PER_INPUT}s: {codec} {root} {engine} {data[:200]!r}")
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            pytest.fail(
                f"decoder child died (exit {code}) on {codec} {root} {engine} input {data[:200]!r} ({len(data)} bytes)"
            )
        self.count += 1
        result: dict[str, object] = json.loads(line)
        self.outcomes[str(result["status"])] = self.outcomes.get(str(result["status"]), 0) + 1
        return result

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=30)


def child_fixture(label: str) -> Iterator[Child]:
    """Body of a module-scoped `child` fixture: one child per test module, its outcome counts printed."""
    c = Child()
    yield c
    c.close()
    print(f"\n{label} fuzz: {c.count} inputs decoded in the child, outcomes {c.outcomes}")
