"""The library faces the CLI calls: `opwire.program.convert`/`convert_target` (what `opwire convert` does) and
`opwire.program.check_extern_inputs` (what `opwire exec` checks before it runs a node), used from Python."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import opwire
from opwire import program
from opwire.errors import BindError, DecodeError
from opwire.schema import models as m


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).relu()


@pytest.fixture(scope="module")
def pt2_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("conversion")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.export.save(torch.export.export(_Net(), (torch.randn(1, 3),)), d / "net.pt2")
    return d / "net.pt2"


@pytest.mark.parametrize(
    ("name", "to", "expected"),
    [("a.json", None, "json"), ("a.BIN", None, "binary"), ("a.compact", None, "compact"), ("a.opw", None, "opw"),
     ("a.pt2", None, "pt2"), ("a.dat", "compact", "compact")],
)  # fmt: skip
def test_convert_target_reads_the_suffix_unless_told(name: str, to: str | None, expected: str) -> None:
    assert program.convert_target(name, to) == expected


def test_convert_target_refuses_an_unknown_suffix_or_format() -> None:
    message = (
        "cannot tell the output format from the suffix of 'a.dat' (known: .bin, .compact, .json, .opw, .pt2): name "
        "it with to= (json|binary|compact|pt2|opw)"
    )
    with pytest.raises(DecodeError, match=f"^{re.escape(message)}$"):
        program.convert_target("a.dat")
    with pytest.raises(DecodeError, match=r"^unknown target format 'xml': expected one of json, binary, compact"):
        program.convert_target("a.json", "xml")


@pytest.mark.parametrize("to", program.CONVERT_TARGETS)
def test_convert_from_python_writes_what_runs_the_same(pt2_file: Path, tmp_path: Path, to: str) -> None:
    dst = tmp_path / f"out.{to}"
    kind, size = program.convert(pt2_file, dst, to)
    assert size == dst.stat().st_size > 0
    assert kind == ("ExportedProgram" if to == "json" else "OpwireArchive")
    if to != "json":  # the program alone binds no weights: nothing to run it with
        x = torch.randn(4, 3)
        assert torch.equal(opwire.run_program(dst, (x,)), opwire.run_program(pt2_file, (x,)))


def test_convert_never_writes_over_its_input(pt2_file: Path) -> None:
    before = pt2_file.read_bytes()
    with pytest.raises(opwire.OpwireError):
        program.convert(pt2_file, pt2_file, "pt2")
    assert pt2_file.read_bytes() == before


def _nodes() -> m.ExternKernelNodes:
    node = m.Node(
        target="aten::relu.default",
        inputs=[m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="a")), kind=1)],
        outputs=[m.Argument(as_tensor=m.TensorArgument(name="buf0"))],
        metadata={},
    )
    return m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=node)])


def test_check_extern_inputs_names_the_first_missing_read() -> None:
    nodes = _nodes()
    program.check_extern_inputs(nodes, {"a": torch.ones(2)})
    message = (
        "input 'a' is missing: node [0] buf0 (aten::relu.default) reads it and no earlier node produces it; the "
        "inputs give b (`opwire.program.extern_inputs(nodes)` lists every name the nodes read)"
    )
    with pytest.raises(BindError, match=f"^{re.escape(message)}$"):
        program.check_extern_inputs(nodes, {"b": torch.ones(2)})
