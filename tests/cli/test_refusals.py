"""Refusals a user can act on (issue 25, item 5): a refused program or trace names every refused op at once, with
the one `--allow-op A,B` that admits them on the command line and the one `allow_ops=[...]` in the API; `opwire ops
policy --json` prints its verdicts as the `OpPolicyOutput` record."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.clirun import Cli
from support.hostile_exec import ISSUE_ATTACKS, run_case, trace_case

import opwire
from opwire.cli import main
from opwire.errors import BindError
from opwire.schema import models as m

_REFUSED = ("_reshape_alias past the storage, then fill_ (heap overflow write)", "_convert_indices_from_csr_to_coo")
_FLAG = "--allow-op aten::_reshape_alias,aten::_convert_indices_from_csr_to_coo"
_API = "allow_ops=['aten::_reshape_alias', 'aten::_convert_indices_from_csr_to_coo']"


def _nodes(_: Path | None = None) -> list[m.Node]:
    return [n.model_copy(deep=True) for name in _REFUSED for n in ISSUE_ATTACKS[name][1]]


@pytest.mark.parametrize(("command", "build", "code"), [("run", run_case, 1), ("replay", trace_case, 2)])
def test_the_cli_names_every_refused_op_with_one_allow_op_flag(
    command: str, build: object, code: int, cli: Cli, tmp_path: Path
) -> None:
    argv = build(_nodes)(tmp_path)  # type: ignore[operator]
    proc = cli(command, *argv)
    assert proc.returncode == code, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"opwire {command}: error: 2 ops are refused by opwire's execution policy (")
    assert "aten::_reshape_alias" in line and "aten::_convert_indices_from_csr_to_coo" in line
    assert line.endswith(f"unless you allow them: {_FLAG}")
    assert "allow_ops" not in line


def test_the_api_names_every_refused_op_of_a_trace_with_one_allow_ops(tmp_path: Path) -> None:
    trace = opwire.load_trace(trace_case(_nodes)(tmp_path)[0])
    with pytest.raises(BindError) as info:
        opwire.replay(trace, mode="chained", progress=False)
    text = str(info.value)
    assert text.startswith("2 ops are refused by opwire's execution policy (") and text.endswith(_API)


def test_ops_policy_json_is_the_record_with_one_allow_op_for_every_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    ops = ["aten::relu.default", "aten::_reshape_alias", "aten::set_.source_Tensor"]
    assert main(["ops", "policy", *ops, "--json"]) == 1
    record = opwire.loads(capsys.readouterr().out.encode(), m.OpPolicyOutput)
    assert record.refused == 2
    assert record.allow == "--allow-op aten::_reshape_alias,aten::set_.source_Tensor"
    assert [(v.op, v.verdict, v.allow) for v in record.verdicts] == [
        ("aten::relu", "admitted", None),
        ("aten::_reshape_alias", "refused", "aten::_reshape_alias"),
        ("aten::set_.source_Tensor", "refused", "aten::set_.source_Tensor"),
    ]
    assert main(["ops", "policy", *ops]) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"2 overloads are refused; to run them all anyway: {record.allow}"
    assert main(["ops", "policy", "aten::relu.default", "--json"]) == 0
    clean = opwire.loads(capsys.readouterr().out.encode(), m.OpPolicyOutput)
    assert (clean.refused, clean.allow) == (0, None)


def test_an_admitted_program_runs_with_the_advised_flag(cli: Cli, tmp_path: Path) -> None:
    """The advice works: allowed by the one flag, the ops are bound and run (the overflowing view is caught after)."""
    proc = cli("run", *run_case(_nodes)(tmp_path), *_FLAG.split())
    assert proc.returncode == 1
    assert "refused" not in proc.stderr
    assert "graph node 0 (aten::_reshape_alias) output 0: the kernel returned a view reaching element" in proc.stderr
