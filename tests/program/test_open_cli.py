"""The CLI reads through the opener: `inspect` and `view` of a .pt2 touch only its program; the import graph is a DAG."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest
import torch
from support.clirun import Cli

import opwire


def _corrupt_weights(src: Path, dst: Path) -> list[str]:
    """A copy of `src` whose stored weight entries are overwritten with 0xFF (zip directory left intact)."""
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as z:
        infos = [i for i in z.infolist() if "/data/weights/" in i.filename and not i.filename.endswith(".json")]
    for info in infos:
        name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
        start = info.header_offset + 30 + name_len + extra_len
        data[start : start + info.compress_size] = b"\xff" * info.compress_size
    dst.write_bytes(bytes(data))
    return [i.filename for i in infos]


@pytest.fixture(scope="module")
def broken_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("broken")
    torch.manual_seed(0)
    ep = torch.export.export(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), (torch.randn(2, 8),))
    torch.export.save(ep, d / "good.pt2")
    assert _corrupt_weights(d / "good.pt2", d / "broken.pt2")
    return d / "broken.pt2"


def test_inspect_and_view_of_a_pt2_whose_weights_are_corrupt_read_only_the_program(broken_pt2: Path, cli: Cli) -> None:
    inspected = cli("inspect", broken_pt2, "--json")
    assert inspected.returncode == 0, inspected.stderr
    assert '"kind": "pt2 archive"' in inspected.stdout and '"weights": 2' in inspected.stdout
    page = broken_pt2.with_suffix(".html")
    viewed = cli("view", broken_pt2, "--out", page)
    assert viewed.returncode == 0, viewed.stderr
    assert page.stat().st_size > 0
    run = opwire.open(broken_pt2)
    assert run.program.graph_module.graph.nodes  # and so does the Python API


# no import cycle anywhere in opwire: tests/test_import_cycles.py (every module, imports inside functions too)


def test_serde_never_reaches_the_opener_or_the_executor() -> None:
    import grimp

    graph = grimp.build_graph("opwire")
    for upper in ("opwire.program", "opwire.proxy_executor"):
        chains = graph.find_shortest_chains(importer="opwire.serde", imported=upper, as_packages=True)
        assert chains == set(), chains
