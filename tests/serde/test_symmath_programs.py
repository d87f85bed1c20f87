"""Programs whose dynamic sizes go through sym_sqrt, bitwise ops, shifts, sym_max/sym_min, % and float pow.

torch's export writes them with `OpaqueUnaryFn_*`, `BitwiseFn_*`, `FloatPow`, `PythonMod`...: opwire must
decode them, write back torch's bytes exactly, keep them lossless through binary and compact, run them
through `run_program` and `to_exported_program` as torch does, and handle them on the command line.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
import torch
from support.clirun import Cli
from torch._export.serde.serialize import serialize
from torch.export import Dim, export

import opwire
from opwire.schema import models as m
from opwire.serde import to_exported_program

pytestmark = pytest.mark.xdist_group("symmath")


class SymMath(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        y = x * torch.sym_sqrt(n) + (n & 6) + (n | 1) + (n << 1) + (n >> 1)
        return y + torch.sym_max(n, 4) + torch.sym_min(n, 2) + n % 3 + torch.sym_float(n) ** 0.5 + n / 3


@pytest.fixture(scope="module")
def exported() -> tuple[torch.export.ExportedProgram, bytes]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = export(SymMath(), (torch.randn(8, 3),), dynamic_shapes={"x": {0: Dim("n", min=2, max=64)}})
    return ep, serialize(ep).exported_program


def test_torch_writes_the_functions_under_test(exported: tuple[torch.export.ExportedProgram, bytes]) -> None:
    text = exported[1].decode()
    for name in ("OpaqueUnaryFn_sqrt", "BitwiseFn_bitwise_and", "BitwiseFn_bitwise_or", "Max(", "Min(", "Mod(",
                 "FloatPow", "FloorDiv", "IntTrueDiv"):  # fmt: skip
        assert name in text, name


def test_byte_identical_and_lossless(exported: tuple[torch.export.ExportedProgram, bytes], codec: str) -> None:
    _, data = exported
    program = opwire.loads(data, m.ExportedProgram)
    assert opwire.dumps(program) == data
    back = opwire.loads(opwire.dumps(program, format=codec), m.ExportedProgram, format=codec)  # type: ignore[arg-type]
    assert back == program
    assert opwire.dumps(back) == data


@pytest.mark.parametrize("rows", [2, 5, 17])
def test_runs_as_torch_does(exported: tuple[torch.export.ExportedProgram, bytes], rows: int) -> None:
    ep, data = exported
    program = opwire.loads(data, m.ExportedProgram)
    x = torch.randn(rows, 3)
    want = ep.module()(x)
    got = opwire.run_program(program, (x,))
    got_t = got[0] if isinstance(got, (list, tuple)) else got
    torch.testing.assert_close(got_t, want)
    back = to_exported_program(program, example_inputs=((x,), {}))
    torch.testing.assert_close(back.module()(x), want)


@pytest.mark.slow
def test_cli_inspects_converts_and_runs(
    exported: tuple[torch.export.ExportedProgram, bytes], cli: Cli, tmp_path: Path
) -> None:
    _, data = exported
    (tmp_path / "prog.json").write_bytes(data)
    done = cli("inspect", "prog.json")
    assert done.returncode == 0, done.stderr
    done = cli("convert", "prog.json", "prog.bin", "--to", "compact")
    assert done.returncode == 0, done.stderr
    done = cli("convert", "prog.bin", "back.json", "--to", "json")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "back.json").read_bytes() == data
    (tmp_path / "in.json").write_text(json.dumps({"x": [[1.0, 2.0, 3.0]] * 5}))
    done = cli("run", "prog.json", "--inputs", "in.json", "--json")
    assert done.returncode == 0, done.stderr


def test_cli_refuses_an_unbounded_float_precision(
    exported: tuple[torch.export.ExportedProgram, bytes], cli: Cli, tmp_path: Path
) -> None:
    _, data = exported
    evil = re.sub(rb"precision=53", b"precision=100000000", data, count=1)
    assert evil != data
    (tmp_path / "evil.json").write_bytes(evil)
    done = cli("inspect", "evil.json")
    assert done.returncode == 2
    assert "precision=100000000" in done.stderr and "from 1 to 1024" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
