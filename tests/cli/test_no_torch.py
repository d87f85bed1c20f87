"""Commands that execute nothing never import torch, and print and write what they did with torch loaded.

Each command runs as the `opwire` console script runs it (`opwire.cli.main(argv)`), in a fork of one fresh
interpreter per test module (which imported the torch-free modules the commands share), and then reports whether
`torch` is in `sys.modules`. The same command run through the `cli` fork server (torch preloaded) must print the same and
write the same bytes: the committed tables that stand in for torch's name the same dtypes torch does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support import corpus
from support.clirun import run_cli
from torch._export.serde.serialize import deserialize

import opwire
from opwire.schema import models as m
from opwire.serde import objects

pytestmark = pytest.mark.xdist_group("no_torch")  # one worker builds the files and runs the fresh interpreter

_IDL = Path(opwire.__file__).parent / "schema" / "opwire.thrift"

# argv (files named from the fixture's directory; outputs are relative, written in the command's own directory)
COMMANDS: dict[str, list[str]] = {
    "help": ["--help"],
    "version": ["--version"],
    "inspect-help": ["inspect", "--help"],
    "run-help": ["run", "--help"],
    "replay-help": ["replay", "--help"],
    "ops-validate-help": ["ops", "validate", "--help"],
    "inspect-json": ["inspect", "{d}/model.json"],
    "inspect-json-json": ["inspect", "{d}/model.json", "--json"],
    "inspect-pt2": ["inspect", "{d}/model.pt2"],
    "inspect-pt2-verify": ["inspect", "{d}/model.pt2", "--verify"],
    "inspect-opw": ["inspect", "{d}/model.opw", "--verify"],
    "inspect-binary": ["inspect", "{d}/model.bin"],
    "inspect-compact": ["inspect", "{d}/model.compact", "--json"],
    "inspect-nodes": ["inspect", "{d}/abc.wrapper.json"],
    "inspect-trace": ["inspect", "{d}/calls.trace"],
    "inspect-trace-json": ["inspect", "{d}/calls_json.trace", "--json"],
    "inspect-streamed-trace": ["inspect", "{d}/streamed.trace"],
    "inspect-snapshot": ["inspect", "{d}/ops.snapshot"],
    "inspect-values": ["inspect", "{d}/values.json"],
    "inspect-bad": ["inspect", "{d}/bad.json"],
    "convert-pt2-json": ["convert", "{d}/model.pt2", "out.json"],
    "convert-pt2-binary": ["convert", "{d}/model.pt2", "out.bin"],
    "convert-pt2-compact": ["convert", "{d}/model.pt2", "out.compact"],
    "convert-json-compact": ["convert", "{d}/model.json", "out.compact"],
    "convert-binary-json": ["convert", "{d}/model.bin", "out.json"],
    "convert-opw-json": ["convert", "{d}/model.opw", "out.json"],
    "convert-compact-binary": ["convert", "{d}/model.compact", "out.bin", "--to", "binary"],
    "schema-diff": ["schema", "diff", str(_IDL), str(_IDL)],
    "view-pt2": ["view", "{d}/model.pt2", "--out", "page.html"],
    "view-json": ["view", "{d}/model.json", "--out", "page.html"],
    "view-nodes": ["view", "{d}/abc.wrapper.json", "--out", "page.html", "--json"],
}

# The parent imports what these commands share (none of it may import torch: it asserts so), so that each fork
# pays for its command's work and not again for the models; whatever imports torch, parent or child, is caught.
_FORKED = """
import json, os, sys
from opwire.cli import main
import opwire.cli.inspect_cmd, opwire.cli.convert_cmd, opwire.cli.view_cmd, opwire.view, opwire.serde.thrift
assert "torch" not in sys.modules
found = {}
for key, (argv, cwd) in json.loads(sys.argv[1]).items():
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        os.chdir(cwd)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, fd)
            os.close(out)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code or 0
        sys.stdout.flush()
        sys.stderr.flush()
        with os.fdopen(w, "w") as f:
            f.write(json.dumps({"code": code, "torch": "torch" in sys.modules}))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        found[key] = json.loads(f.read() or "null")
    os.wait()
print(json.dumps(found))
"""


def _files(root: Path) -> None:
    """Every kind of file the commands read, made with torch here (the commands themselves must not need it).

    The program is the corpus's bytes (exported once per run, tests/support/corpus.py), loaded by torch's own
    deserializer to be saved as torch saves a .pt2: no export of its own in this worker."""
    prog = corpus.get_serialized("mlp/decomposed")
    (root / "model.json").write_bytes(prog.json_bytes)
    torch.export.save(deserialize(prog.artifact()), root / "model.pt2")
    archive = opwire.serde.pt2.read(root / "model.pt2")
    (root / "model.bin").write_bytes(opwire.dumps(archive, format="binary"))
    (root / "model.compact").write_bytes(opwire.dumps(archive, format="compact"))
    opwire.serde.opw.write(archive, root / "model.opw")
    t = lambda n: m.Argument(as_tensor=m.TensorArgument(name=n))  # noqa: E731
    node = m.Node(
        target="aten::relu", inputs=[m.NamedArgument(name="self", arg=t("x"))], outputs=[t("buf0")], metadata={}
    )
    nodes = m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=node)])
    (root / "abc.wrapper.json").write_bytes(opwire.dumps(nodes))
    x = torch.arange(6.0).reshape(2, 3) - 2
    with opwire.record() as trace:
        torch.relu(x) * 2
    trace.save(root / "calls.trace", format="compact")
    trace.save(root / "calls_json.trace", format="json")
    with opwire.record(path=root / "streamed.trace"):
        torch.tanh(x) + 1
    snapshot = m.OpLibrarySnapshot(namespaces=["mylib"], ops=[], torch_version="2.13.0")
    (root / "ops.snapshot").write_bytes(opwire.dumps(snapshot, format="compact"))
    values = m.Values(values={"x": objects.from_python(x), "n": objects.from_python(3)})
    (root / "values.json").write_bytes(opwire.dumps(values))
    (root / "bad.json").write_bytes(b'{"a": 1}')


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, dict[str, object]]]:
    """Per command: its directory in the fresh process, its directory in the fork server, and what the first said."""
    root = tmp_path_factory.mktemp("no_torch")
    _files(root)
    requests, out = {}, {}
    for key, argv in COMMANDS.items():
        fresh, forked = root / "fresh" / key, root / "forked" / key
        fresh.mkdir(parents=True)
        forked.mkdir(parents=True)
        requests[key] = ([a.format(d=root) for a in argv], str(fresh))
        out[key] = (fresh, forked)
    done = subprocess.run(
        [sys.executable, "-c", _FORKED, json.dumps(requests)], check=True, capture_output=True, text=True
    )
    reports = json.loads(done.stdout)
    return {key: (*out[key], reports[key]) for key in COMMANDS}


@pytest.mark.parametrize("key", COMMANDS)
def test_command_imports_no_torch(key: str, runs: dict[str, tuple[Path, Path, dict[str, object]]]) -> None:
    fresh, _, report = runs[key]
    assert report is not None, f"opwire {' '.join(COMMANDS[key])} died"
    assert report["torch"] is False, f"opwire {' '.join(COMMANDS[key])} imported torch"
    expected = 2 if key == "inspect-bad" else 0
    assert report["code"] == expected, (fresh / "stderr").read_text()


@pytest.mark.parametrize("key", COMMANDS)
def test_command_says_and_writes_what_it_does_with_torch_loaded(
    key: str, runs: dict[str, tuple[Path, Path, dict[str, object]]]
) -> None:
    fresh, forked, report = runs[key]
    argv = [a.format(d=fresh.parent.parent) for a in COMMANDS[key]]
    with_torch = run_cli(*argv, cwd=forked)
    assert with_torch.returncode == report["code"]
    assert (fresh / "stdout").read_text() == with_torch.stdout
    assert (fresh / "stderr").read_text() == with_torch.stderr
    written = sorted(p.name for p in fresh.iterdir() if p.name not in ("stdout", "stderr"))
    assert written == sorted(p.name for p in forked.iterdir())
    for name in written:
        assert (fresh / name).read_bytes() == (forked / name).read_bytes(), name
