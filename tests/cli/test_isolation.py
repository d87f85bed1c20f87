"""`opwire run`/`exec`/`replay` execute in a sandboxed child: a crash, a limit or a forbidden write is one line
naming the node; results are the same as in-process.

The op library `isolib` (tests/support/isolation_files.py) is the user's trusted code; its ops stand for a kernel
that crashes or misbehaves on what a hostile file feeds it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support.clirun import one_line, run_cli, run_module
from support.isolation_escapes import refused
from support.isolation_files import (
    nodes_calling,
    program_calling,
    trace_calling,
    write_isolib,
    write_run_calling,
    write_values,
)

import opwire

pytestmark = pytest.mark.xdist_group("isolation_cli")


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with isolib.py, a program / extern-node file / trace per op, and their inputs."""
    root = tmp_path_factory.mktemp("iso")
    write_isolib(root)
    for op in ("segv", "abort", "write", "alloc", "nap", "ok", "escape"):
        (root / f"{op}.opw").write_bytes(opwire.dumps(program_calling(op), "compact"))
        (root / f"{op}.json").write_bytes(opwire.dumps(nodes_calling(op)))
    for op in ("segv", "ok"):
        (root / f"{op}.trace").write_bytes(opwire.dumps(trace_calling(op), "compact"))
        write_run_calling(op, root / f"{op}.run")
    write_values(root / "in.json", x=torch.randn(2, 4))
    return root


def opw(d: Path, *args: object) -> subprocess.CompletedProcess[str]:
    """`opwire ARGS --import isolib` in `d`, under RLIMIT_AS (the whole CLI, as the hostile tables run it)."""
    return run_cli(*args, "--import", "isolib", cwd=d, timeout=300, limit_as=4 << 30)


@pytest.mark.parametrize(("op", "signal"), [("segv", "SIGSEGV"), ("abort", "SIGABRT")])
def test_a_crash_in_the_child_is_one_line_naming_the_node(d: Path, op: str, signal: str) -> None:
    proc = opw(d, "run", f"{op}.opw", "--inputs", "in.json")
    line = one_line(proc, "run")
    assert proc.returncode == 1
    assert signal in line and f"opwire_iso.{op}" in line and "graph node" in line, line


def test_a_crash_in_exec_names_the_extern_node(d: Path) -> None:
    proc = opw(d, "exec", "segv.json", "--inputs", "in.json")
    line = one_line(proc, "exec")
    assert proc.returncode == 1
    assert re.search(r"SIGSEGV.*node \[1\] 'buf1' \(opwire_iso::segv", line), line


def test_a_crash_in_replay_names_the_call(d: Path) -> None:
    proc = opw(d, "replay", "segv.trace")
    line = one_line(proc, "replay")
    assert proc.returncode == 2
    assert re.search(r"SIGSEGV\) while running call 1 \(opwire_iso::segv", line), line


def test_a_crash_in_a_run_directory_names_the_rank_and_the_call(d: Path) -> None:
    proc = opw(d, "replay", "segv.run")
    line = one_line(proc, "replay")
    assert proc.returncode == 2
    assert re.search(r"rank 0: .*SIGSEGV\) while running call 1 \(opwire_iso::segv", line), line
    ok = opw(d, "replay", "ok.run")
    assert ok.returncode == 0 and "1 ranks replayed" in ok.stdout, ok.stderr


@pytest.mark.slow
def test_a_crash_under_collectives_is_one_line_naming_the_rank_and_the_call(d: Path) -> None:
    """`replay RUN --collectives` replays each rank in a sandboxed fork: a crash there is the rank's one error line."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = ["--standalone", "--nproc-per-node", "1", "-m", "opwire"]  # torchrun's launcher, forked; its rank too
    args = ["replay", "segv.run", "--collectives", "--collective-timeout", "30", "--import", "isolib"]
    done = run_module("torch.distributed.run", *cmd, *args, cwd=d, env=env, timeout=300, fork_ranks=True)
    assert done.returncode != 0
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("opwire replay: error:")]
    assert len(lines) == 1 and re.search(r"rank 0: .*SIGSEGV\) while running call 1 \(opwire_iso::segv", lines[0]), (
        done.stderr[-2000:]
    )


def test_a_user_op_may_not_write_a_file_from_the_child(d: Path) -> None:
    proc = opw(d, "run", "write.opw", "--inputs", "in.json")
    line = one_line(proc, "run")
    assert proc.returncode == 1
    assert "sandbox refused" in line and "Operation not permitted" in line and "opwire_iso::write" in line, line
    assert not (d / "pwned.txt").exists()


def test_every_escape_is_refused_from_the_main_thread_and_an_openmp_worker(d: Path, tmp_path: Path) -> None:
    """The compromised kernel (opwire_iso::escape) tries each way out after a parallel kernel ran; one line."""
    for name in ("isolib.py", "escape.opw", "in.json"):
        (tmp_path / name).write_bytes((d / name).read_bytes())
    victim = tmp_path / "victim"
    victim.write_text("keep")
    victim.chmod(0o600)
    before = victim.stat()
    proc = opw(tmp_path, "run", "escape.opw", "--inputs", "in.json")
    line = one_line(proc, "run")
    assert proc.returncode == 1 and "graph node 'escape'" in line, line
    tables, _ = json.JSONDecoder().raw_decode(line.split("escape table ", 1)[1])
    assert set(tables) == {"main", "openmp", "seccomp"}
    assert len(tables["seccomp"]) >= 2 and set(tables["seccomp"].values()) == {"2"}, tables["seccomp"]
    for where in ("main", "openmp"):
        for name, got in tables[where].items():
            assert got in refused(name), f"{where}: {name}: {got}"
    assert victim.read_text() == "keep" and victim.stat().st_mode == before.st_mode
    assert victim.stat().st_mtime == before.st_mtime and os.listxattr(victim) == []
    # besides what was there, at most Python's own bytecode cache of isolib.py, which the host imported
    cache = tmp_path / "__pycache__"
    assert not cache.exists() or [p.name for p in cache.iterdir()] == [f"isolib.{sys.implementation.cache_tag}.pyc"]
    listing = sorted(p.name for p in tmp_path.iterdir() if p != cache)
    assert listing == ["escape.opw", "in.json", "isolib.py", "victim"]


def test_no_isolate_runs_trusted_files_in_process(d: Path, tmp_path: Path) -> None:
    for name in ("isolib.py", "write.opw", "in.json"):
        (tmp_path / name).write_bytes((d / name).read_bytes())
    proc = opw(tmp_path, "run", "write.opw", "--inputs", "in.json", "--no-isolate")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pwned.txt").exists()


def test_the_memory_budget_is_one_line_naming_the_node(d: Path) -> None:
    proc = opw(d, "run", "alloc.opw", "--inputs", "in.json", "--max-memory", "256M")
    line = one_line(proc, "run")
    assert proc.returncode == 1
    assert re.search(r"graph node .*opwire_iso\.alloc.* execution-memory budget .*--max-memory", line), line


def test_the_wall_time_stops_a_running_kernel(d: Path) -> None:
    proc = opw(d, "run", "nap.opw", "--inputs", "in.json", "--timeout", "1")
    line = one_line(proc, "run")
    assert proc.returncode == 1
    assert re.search(r"opwire_iso\.nap.* wall-time budget of 1 s .*--timeout", line), line


def test_results_come_back_intact(d: Path, tmp_path: Path) -> None:
    a = opw(d, "run", "ok.opw", "--inputs", "in.json", "--out", tmp_path / "a.opv")
    b = opw(d, "run", "ok.opw", "--inputs", "in.json", "--out", tmp_path / "b.opv", "--no-isolate")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and "output[0]: float32[2, 4]" in a.stdout
    assert (tmp_path / "a.opv").read_bytes() == (tmp_path / "b.opv").read_bytes()
    e1 = opw(d, "exec", "ok.json", "--inputs", "in.json", "--json")
    e2 = opw(d, "exec", "ok.json", "--inputs", "in.json", "--json", "--no-isolate")
    assert e1.returncode == e2.returncode == 0 and e1.stdout == e2.stdout
    r1 = opw(d, "replay", "ok.trace", "--json")
    r2 = opw(d, "replay", "ok.trace", "--json", "--no-isolate")
    assert r1.returncode == r2.returncode == 0, r1.stderr
    strip = lambda s: re.sub(r'"seconds": [0-9.e-]+', "", s)  # noqa: E731
    assert strip(r1.stdout) == strip(r2.stdout)
