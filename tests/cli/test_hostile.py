"""Every subcommand over the shared table of hostile inputs (tests/support/hostile.py), each run as its own process.

For every command of every case: the documented exit code, exactly one line on stderr naming the
command and matching the case's pattern, no traceback, nothing on stdout, no file created or changed
beside the inputs (the side effect an attack is after), no signal, no hang, and under 10 s of CPU,
all under RLIMIT_AS (tests/support/hostile_driver.py: each command forked by the CLI fork server, which imported
torch once).
"""

from __future__ import annotations

import random
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from support.hostile import CASES, Case, Work, _crc32_combine
from support.hostile_driver import run_jobs

pytestmark = pytest.mark.xdist_group("hostile_cli")  # the module-scoped fixture is built once, on one worker

CPU_SECONDS = 10.0

JOBS = [(case, command) for case in CASES for command in case.commands]


def _snapshot(d: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*")}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """Build every case, run every command in the driver once, and collect what each left behind."""
    root = tmp_path_factory.mktemp("hostile")
    jobs: list[dict[str, Any]] = []
    meta: list[tuple[Case, str, Path, dict[str, tuple[int, int]]]] = []
    for case in CASES:
        for j, command in enumerate(case.commands):
            d = root / f"{case.name}-{j}"
            d.mkdir()
            work = Work(d)
            hostile = case.build(work)
            fill = {
                "file": hostile,
                "out": d / "out",
                **{
                    name: getattr(work, name)()
                    for name in ("inputs", "program", "nodes", "trace")
                    if "{" + name + "}" in command
                },
            }
            argv = command.format(**fill).split()
            (d / "_stdout").touch()
            (d / "_stderr").touch()
            meta.append((case, command, d, _snapshot(d)))
            jobs.append({"argv": argv, "cwd": str(d), "out": str(d / "_stdout"), "err": str(d / "_stderr")})
    results = run_jobs(jobs)
    out = {}
    for (case, command, d, before), result in zip(meta, results, strict=True):
        after = _snapshot(d)
        for name in ("_stdout", "_stderr"):
            before.pop(name)
            after.pop(name)
        result.update(
            stdout=(d / "_stdout").read_text(errors="replace"),
            stderr=(d / "_stderr").read_text(errors="replace"),
            changed=sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)),
        )
        out[(case.name, command)] = result
    return out


@pytest.mark.parametrize(("case", "command"), JOBS, ids=[f"{c.name}:{cmd.split()[0]}" for c, cmd in JOBS])
def test_hostile_input_is_one_line_error(
    case: Case, command: str, outcomes: dict[tuple[str, str], dict[str, Any]]
) -> None:
    got = outcomes[(case.name, command)]
    sub = command.split()[0]
    assert not got["hung"], f"{case.name}: `opwire {command}` hung"
    assert "signal" not in got, f"{case.name}: `opwire {command}` died of signal {got.get('signal')}"
    assert "Traceback" not in got["stderr"], got["stderr"][-2000:]
    assert got["exit"] == case.exit_code, got["stderr"]
    lines = got["stderr"].splitlines()
    assert len(lines) == 1, got["stderr"]
    assert lines[0].startswith(f"opwire {sub}: error: "), lines[0]
    assert re.search(case.message, lines[0]), lines[0]
    assert got["stdout"] == ""
    assert got["changed"] == [], f"{case.name}: files created or changed: {got['changed']}"
    assert got["cpu"] < CPU_SECONDS, f"{case.name}: {got['cpu']:.1f}s of CPU"


def test_every_attack_class_of_the_decode_side_has_cases() -> None:
    assert {2, 3, 5, 6, 7, 9} <= {c.attack for c in CASES}


def test_the_crc_of_a_concatenation_is_combined_as_zlib_computes_it() -> None:
    """The deflate bomb's CRC-32 of 1 GiB is its 16 MiB piece's combined with itself (tests/support/hostile.py)."""
    rng = random.Random(0)
    for _ in range(200):
        a, b = rng.randbytes(rng.randrange(40)), rng.randbytes(rng.randrange(40))
        assert _crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    crc, size = zlib.crc32(b"\0" * 4096), 4096
    for _ in range(6):
        crc, size = _crc32_combine(crc, crc, size), 2 * size
    assert crc == zlib.crc32(b"\0" * size)
