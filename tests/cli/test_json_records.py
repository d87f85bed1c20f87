"""Every `--json` of the CLI prints an IDL record: each subcommand offering `--json`, found in the CLI's own
argparse parser, runs through the CLI's entry point (`opwire.cli.main`, as the console script runs it; a child
process per command would pay torch's import each time) on a small real input, and what it prints is read
back by `opwire.loads(..., m.<Record>)` and written again to the same JSON."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import opwire
from opwire.cli import build_parser, main
from opwire.schema import models as m
from opwire.serde import json as json_codec
from opwire.serde.tensors import from_tensor

pytestmark = pytest.mark.xdist_group("json_records")


def json_commands() -> list[str]:
    """Every (sub)command whose parser offers `--json`, as the user types it ("diff", "ops validate")."""
    found: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        if "--json" in parser._option_string_actions:
            found.append(" ".join(path))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, [*path, name])

    walk(build_parser(), [])
    return sorted(found)


@dataclass(frozen=True)
class Inputs:
    """The small real files every case reads (built once for the module)."""

    root: Path

    def __getattr__(self, name: str) -> str:
        return str(self.root / _FILES[name])


_FILES = {
    "program": "prog.json",
    "program_inputs": "prog_inputs.json",
    "nodes": "nodes.json",
    "values": "values.json",
    "trace_a": "a.trace",
    "trace_b": "b.trace",
    "run_a": "run_a",
    "run_b": "run_b",
    "idl_old": "old.thrift",
    "idl_new": "new.thrift",
    "snap_old": "snap_old.json",
    "snap_new": "snap_new.json",
    "page": "page.html",
}

# command -> [(what, argv after the command, record)]: several rows where a command reads several kinds of input
CASES: dict[str, list[tuple[str, Callable[[Inputs], list[str]], type]]] = {
    "diff": [
        ("traces", lambda i: [i.trace_a, i.trace_b], m.TraceDiffOutput),
        ("run directories", lambda i: [i.run_a, i.run_b], m.RunDiffOutput),
    ],
    "exec": [("extern nodes", lambda i: [i.nodes, "--inputs", i.values], m.ExecOutput)],
    "inspect": [
        ("program", lambda i: [i.program], m.InspectOutput),
        ("trace", lambda i: [i.trace_a], m.InspectOutput),
    ],
    "ops bc-check": [("snapshots", lambda i: [i.snap_old, i.snap_new], m.BcCheckReport)],
    "ops policy": [
        ("admitted and refused ops", lambda i: ["aten::relu", "aten::set_.source_Tensor"], m.OpPolicyOutput)
    ],
    "ops validate": [("aten op", lambda i: ["aten::relu.default"], m.OpValidationOutput)],
    "ranks": [("run directory", lambda i: [i.run_a], m.RanksReport)],
    "replay": [
        ("trace", lambda i: [i.trace_a], m.ReplayOutput),
        ("run directory", lambda i: [i.run_a], m.RunReplayOutput),
    ],
    "run": [("program", lambda i: [i.program, "--inputs", i.program_inputs], m.RunOutput)],
    "schema diff": [("IDL files", lambda i: [i.idl_old, i.idl_new], m.SchemaDiffOutput)],
    "view": [("program", lambda i: [i.program, "--out", i.page], m.ViewOutput)],
}


class _Net(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(x) * 2, x.sum()


def _record(path: Path, op: str) -> None:
    x = torch.arange(6.0).reshape(2, 3) - 2
    with opwire.record(path=path):
        getattr(torch, op)(x * 2)


def _nodes(root: Path) -> None:
    t = lambda n: m.Argument(as_tensor=m.TensorArgument(name=n))  # noqa: E731
    add = m.Node(
        target="aten::add.Tensor",
        inputs=[m.NamedArgument(name="self", arg=t("x")), m.NamedArgument(name="other", arg=t("y"))],
        outputs=[t("buf1")],
        metadata={},
    )
    nodes = m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=add)])
    (root / _FILES["nodes"]).write_bytes(opwire.dumps(nodes))
    ones = m.Value(as_tensor=from_tensor(torch.ones(2, 2)))
    (root / _FILES["values"]).write_bytes(opwire.dumps(m.Values(values={"x": ones, "y": ones})))


def _runs(root: Path) -> None:
    """Two run directories of two ranks each (the launcher's environment set by hand: no process group)."""
    for run, op in (("run_a", "relu"), ("run_b", "tanh")):
        (root / run).mkdir()
        for rank in range(2):
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("RANK", str(rank))
                mp.setenv("WORLD_SIZE", "2")
                mp.setenv("TORCHELASTIC_RUN_ID", run)
                _record(root / run / f"rank{rank}.trace", op)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    """Every input file, built once: a program, extern nodes, traces, run directories, IDLs, snapshots."""
    from opwire.validation.snapshot import snapshot_from_schemas

    root = tmp_path_factory.mktemp("json_records")
    ep = torch.export.export(_Net(), (torch.randn(2, 3),))
    (root / _FILES["program"]).write_bytes(opwire.dumps(opwire.serde.from_exported_program(ep)))
    (root / _FILES["program_inputs"]).write_text(json.dumps({"x": [[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]]}))
    _nodes(root)
    _record(root / _FILES["trace_a"], "relu")
    _record(root / _FILES["trace_b"], "tanh")
    _runs(root)
    (root / _FILES["idl_old"]).write_text("struct S {\n  10: i64 a;\n}\n")
    (root / _FILES["idl_new"]).write_text("struct S {\n  10: i64 a;\n  20: optional string b;\n}\n")
    old = snapshot_from_schemas(["opwire_js::f(Tensor x) -> Tensor", "opwire_js::g(Tensor x) -> Tensor"])
    new = snapshot_from_schemas(["opwire_js::f(Tensor x, int n) -> Tensor"])
    (root / _FILES["snap_old"]).write_bytes(opwire.dumps(old))
    (root / _FILES["snap_new"]).write_bytes(opwire.dumps(new))
    return Inputs(root)


def test_every_json_command_has_a_case() -> None:
    """A command that gains `--json` needs a record and a row here (the parser is the list, not this file)."""
    assert set(json_commands()) == set(CASES)


@pytest.mark.parametrize("command", json_commands())
def test_json_output_is_its_idl_record(command: str, inputs: Inputs, capsys: pytest.CaptureFixture[str]) -> None:
    assert command in CASES, f"`opwire {command} --json` has no case: add its record and input to CASES"
    for what, argv, record in CASES[command]:
        code = main([*command.split(), *argv(inputs), "--json"])
        out, err = capsys.readouterr()
        assert code in (0, 1), f"opwire {command} ({what}): exit {code}: {err}"
        parsed = opwire.loads(out.encode(), record, format="json")
        assert json.loads(out) == json_codec.to_jsonable(parsed), f"opwire {command} ({what})"
        assert opwire.loads(opwire.dumps(parsed), record) == parsed


@pytest.mark.parametrize("blob", [b"[]", b'{"ok": true}', b'{"ok": true, "outputs": {}, "labels": ["out"]}', b"\xff"])
def test_a_run_summary_that_is_not_its_record_is_refused(blob: bytes) -> None:
    """The sandboxed run hands its summary back as a `RunOutput` record; anything else is an error, not output."""
    from opwire.cli.run_cmd import _summary
    from opwire.errors import OpwireError

    with pytest.raises(OpwireError, match=r"^the run sent back a malformed summary \("):
        _summary(blob)


def test_the_dataclasses_records_are_built_from_have_the_records_fields() -> None:
    """Records built with `**asdict(x)` would drop a field the dataclass gained and the IDL lacks: none may differ."""
    from dataclasses import fields

    from opwire.recording.report import OpStats
    from opwire.recording.trace_diff import CallDifference, OnlyIn, OpDiff

    pairs = [
        (CallDifference, m.TraceCallDifference),
        (OnlyIn, m.TraceOnlyIn),
        (OpDiff, m.TraceDiffOpStats),
        (OpStats, m.ReplayOpStats),
    ]
    for cls, record in pairs:
        assert {f.name for f in fields(cls)} == set(record.model_fields), cls.__name__
