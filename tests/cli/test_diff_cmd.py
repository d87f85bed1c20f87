"""`opwire diff A B`: exit 0 when the traces agree, 1 when they differ, 2 for unreadable input; --json."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import torch
from support.clirun import run_cli

import opwire


def _trace(path: Path, op: str) -> str:
    x = torch.arange(6.0).reshape(2, 3)
    with opwire.record(path=path):
        getattr(torch, op)(x * 2)
    return str(path)


def _opwire(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=Path.cwd())


def test_diff_exit_codes_and_json(tmp_path: Path) -> None:
    a, b = _trace(tmp_path / "a.trace", "relu"), _trace(tmp_path / "b.trace", "relu")
    c = _trace(tmp_path / "c.trace", "tanh")
    same = _opwire("diff", a, b)
    assert same.returncode == 0 and "the traces agree" in same.stdout
    changed = _opwire("diff", a, c, "--json")
    assert changed.returncode == 1
    d = json.loads(changed.stdout)
    assert d["ok"] is False and [o["op"] for o in d["only_a"]] == ["aten::relu.default"]
    assert [o["op"] for o in d["only_b"]] == ["aten::tanh.default"]
    (tmp_path / "bad.trace").write_bytes(b"nonsense")
    bad = _opwire("diff", a, str(tmp_path / "bad.trace"))
    assert bad.returncode == 2 and bad.stderr.startswith("opwire diff: error:") and bad.stderr.count("\n") == 1
