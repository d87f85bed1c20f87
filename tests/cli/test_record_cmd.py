"""`opwire record`: records a script in-process; exit 0 / 1 (script failed, trace still written) / 2 (usage)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.clirun import Cli

import opwire
from opwire.cli import main

SCRIPT = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(3, 4)).pow(2).sum().backward()
opt.step()
print("argv", sys.argv[1:])
if "fail" in sys.argv:
    raise RuntimeError("boom")
"""


def _script(tmp_path: Path) -> Path:
    p = tmp_path / "train.py"
    p.write_text(SCRIPT)
    return p


def test_records_a_script_with_its_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "step.trace"
    argv = sys.argv[:]
    assert main(["record", "--out", str(out), "--", "python", str(_script(tmp_path)), "a", "b"]) == 0
    assert sys.argv == argv
    captured = capsys.readouterr()
    assert "argv ['a', 'b']" in captured.out and f"-> {out}" in captured.err
    trace = opwire.load_trace(out)
    assert "aten::addmm.default" in trace.header.op_schemas and any(r.target == "aten::add_.Tensor" for r in trace)
    assert opwire.replay(trace, policy="require_serialized").ok


def test_options_reach_the_recorder(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    args = ["record", "--out", str(out), "--format", "json", "--include", "aten::mm*", "--include", "aten::add*"]
    assert (
        main([*args, "--exclude", "aten::add_*", "--exclude", "aten::addmm*", "--digest", "--", str(_script(tmp_path))])
        == 0
    )
    trace = opwire.load_trace(out)
    assert out.read_bytes().startswith(b"{")
    assert "aten::mm.default" in {r.target for r in trace} <= {"aten::mm.default", "aten::add.Tensor"}
    assert trace.header.outputs_mode == "digest"


def test_a_failing_script_still_writes_its_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.trace"
    assert main(["record", "--out", str(out), "--", "python", str(_script(tmp_path)), "fail"]) == 1
    assert "RuntimeError: boom" in capsys.readouterr().err
    assert len(opwire.load_trace(out)) > 0


@pytest.mark.parametrize("command", [[], ["--", "ls", "-l"], ["--", "python", "missing.py"]])
def test_bad_usage_exits_2(tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--out", str(tmp_path / "t"), *command]) == 2
    assert capsys.readouterr().err.startswith("opwire record: error:")


def test_a_module_of_the_working_directory_runs_as_python_m_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "trainmod.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    path = sys.path[:]
    assert main(["record", "--out", "m.trace", "--", "python", "-m", "trainmod", "x"]) == 0
    assert sys.path == path and "argv ['x']" in capsys.readouterr().out
    assert any(r.target == "aten::add_.Tensor" for r in opwire.load_trace(tmp_path / "m.trace"))
    assert main(["record", "--out", "n.trace", "--", "python", "-m", "no_such_module_here"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire record: error: no module 'no_such_module_here' (searched as `python -m` does")
    assert not (tmp_path / "n.trace").exists()
    assert main(["record", "--out", "n.trace", "--", "python", "-m", "no_such_pkg.sub"]) == 2


def test_a_custom_op_not_loaded_at_replay_is_a_setup_error(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "vdlib_ops.py").write_text(
        "import torch\n"
        "lib = torch.library.Library('vdlib_unloaded', 'DEF')\n"
        "lib.define('twice(Tensor x) -> Tensor')\n"
        "lib.impl('twice', lambda x: x * 2, 'CompositeExplicitAutograd')\n"
    )
    (tmp_path / "job.py").write_text("import torch, vdlib_ops\ntorch.ops.vdlib_unloaded.twice(torch.ones(3)) + 1\n")
    assert cli("record", "--out", "t.trace", "--", "python", "job.py").returncode == 0
    done = cli("replay", "t.trace")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        "opwire replay: error: call 1 (vdlib_unloaded::twice.default): op vdlib_unloaded::twice.default is not loaded "
        "in this process; the recorded program had loaded the library that defines namespace 'vdlib_unloaded'. Load "
        "it before replaying: --import MODULE (its Python package) or --load-library PATH.so (opwire.replay: import "
        "it, or torch.ops.load_library(PATH), first)"
    )
    assert cli("replay", "t.trace", "--import", "vdlib_ops").returncode == 0
