"""The CLI never trusts the file: names printed escaped (one error is one line), bounded output summaries,
and output paths that are never a symlink, a non-regular file, or an input. Each command runs in its own
process under RLIMIT_AS (4 GiB for the whole process; torch's import maps about 0.7 GiB).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch
from support.clirun import one_line, run_cli
from support.hostile_exec import node, program, t, write_values

import opwire
from opwire.schema import models as m

FORGED = "\x1b]0;pwned\x07\x1b[2J\nopwire run: error: forged second line\u202e"
LIMIT = 4 << 30  # address space of the whole CLI process (torch's import maps about 0.7 GiB)


def opw(d: Path, *args: object) -> subprocess.CompletedProcess[str]:
    """`opwire ARGS` in `d`, under RLIMIT_AS."""
    return run_cli(*args, cwd=d, timeout=300, limit_as=LIMIT)


# ------------------------------------------------------------------------------------------ names
def test_an_op_name_with_escape_sequences_is_one_escaped_line(tmp_path: Path) -> None:
    bad = node(f"aten::nope{FORGED}", {"self": t("x")}, "out")
    bad.name = f"node{FORGED}"
    (tmp_path / "p.opw").write_bytes(opwire.dumps(program([bad]), "compact"))
    write_values(tmp_path / "in.json", x=torch.ones(16))
    for isolate in ((), ("--no-isolate",)):
        line = one_line(opw(tmp_path, "run", "p.opw", "--inputs", "in.json", *isolate), "run")
        assert "\\x1b]0;pwned\\x07" in line and "\\nopwire run: error: forged" in line, line


def test_extern_node_names_print_escaped(tmp_path: Path) -> None:
    relu = m.ExternKernelNode(name=f"buf{FORGED}", node=node("aten::relu", {"self": t("x")}, f"r{FORGED}"))
    (tmp_path / "n.json").write_bytes(opwire.dumps(m.ExternKernelNodes(nodes=[relu])))
    write_values(tmp_path / "in.json", x=torch.ones(16))
    proc = opw(tmp_path, "exec", "n.json", "--inputs", "in.json")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout
    assert len(proc.stdout.splitlines()) == 2 and "buf\\x1b]0;pwned" in proc.stdout


def test_an_input_name_with_escape_sequences_is_one_escaped_line(tmp_path: Path) -> None:
    (tmp_path / "p.opw").write_bytes(opwire.dumps(program([node("aten::relu", {"self": t("x")}, "out")]), "compact"))
    write_values(tmp_path / "in.json", **{f"x{FORGED}": torch.ones(16)})
    line = one_line(opw(tmp_path, "run", "p.opw", "--inputs", "in.json"), "run")
    assert "\\x1b" in line, line


# -------------------------------------------------------------------------------------- summaries
def test_an_expand_to_2_30_elements_is_summarized_without_materializing(tmp_path: Path) -> None:
    nodes = [
        node("aten::sum", {"self": t("x")}, "one"),
        node("aten::view", {"self": t("one"), "size": m.Argument(as_ints=[1, 1])}, "col"),
        node("aten::expand", {"self": t("col"), "size": m.Argument(as_ints=[1 << 15, 1 << 15])}, "out"),
    ]
    (tmp_path / "p.opw").write_bytes(opwire.dumps(program(nodes), "compact"))
    write_values(tmp_path / "in.json", x=torch.ones(16))
    for isolate in ((), ("--no-isolate",)):
        proc = opw(tmp_path, "run", "p.opw", "--inputs", "in.json", *isolate)
        assert proc.returncode == 0, proc.stderr
        assert "float32[32768, 32768] on cpu  min 16 max 16" in proc.stdout and "of the first" in proc.stdout


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (torch.randn(4, 4).to_sparse(), "float32[4, 4] on cpu (sparse_coo, 16 stored)"),
        (torch.randn(4, 4).to_sparse_csr(), "(sparse_csr)"),
        (torch.empty(3, device="meta"), "float32[3] on meta"),
        (torch.arange(12.0).reshape(3, 4).t()[1:], "float32[3, 3] on cpu  min 1 max 11"),
        (torch.ones(1).expand(1 << 20, 1 << 20), "(of the first 65536 values)"),
    ],
)
def test_summaries_handle_every_layout(value: torch.Tensor, shown: str) -> None:
    from opwire.cli.values import describe, text

    assert shown in text(describe(value))


def test_quantized_and_nested_summaries() -> None:
    import warnings

    from opwire.cli.values import describe, text

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = torch.quantize_per_tensor(torch.tensor([0.1, 0.2]), 0.1, 0, torch.qint8)
        nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    assert text(describe(q)).startswith("qint8[2] on cpu  min 0.1 max 0.2")
    assert text(describe(nested)) == "float32[2] on cpu (nested)"


# ------------------------------------------------------------------------------------------ writes
@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "p.json").write_bytes(opwire.dumps(program([node("aten::relu", {"self": t("x")}, "out")]).program))
    write_values(tmp_path / "in.json", x=torch.ones(16))
    (tmp_path / "victim").write_text("keep")
    os.symlink(tmp_path / "victim", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "p.json", "{out}", "--to", "compact"],
        ["convert", "p.json", "{out}", "--to", "pt2"],
        ["view", "p.json", "--out", "{out}"],
        ["run", "p.json", "--inputs", "in.json", "--out", "{out}"],
        ["run", "p.json", "--inputs", "in.json", "--save-nodes", "{out}"],
        ["ops", "snapshot", "opwire_none_such", "--out", "{out}"],
        ["record", "--out", "{out}", "--", "-c", "pass"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
@pytest.mark.parametrize("target", ["link", "fifo"])
def test_writes_refuse_symlinks_and_non_regular_files(files: Path, argv: list[str], target: str) -> None:
    args = [a.replace("{out}", target) for a in argv]
    if args[0] == "record":
        (files / "s.py").write_text("pass\n")
        args = ["record", "--out", target, "--", "python", "s.py"]
    proc = opw(files, *args)
    assert proc.returncode in (1, 2), proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "refusing to write" in line and ("symbolic link" in line or "not a regular file" in line), line
    assert (files / "victim").read_text() == "keep"


def test_convert_never_writes_over_its_input(files: Path) -> None:
    before = (files / "p.json").read_bytes()
    line = one_line(opw(files, "convert", "p.json", "p.json", "--to", "json"), "convert")
    assert "it is the input" in line
    assert (files / "p.json").read_bytes() == before
