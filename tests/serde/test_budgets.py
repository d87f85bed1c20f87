"""The decoded-elements budget (amplification): refused before models are built, named, and raisable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import opwire
from opwire.schema import models as m
from opwire.serde import DecodeError, budgets


def _node(outputs: int) -> m.Node:
    return m.Node(target="aten.x", inputs=[], outputs=[m.Argument(as_none=True)] * outputs, metadata={})


def test_more_containers_than_the_budget_are_refused_and_the_budget_raises(fmt: str) -> None:
    data = opwire.dumps(_node(3000), format=fmt)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match=r"exceeds the budget max_elements=1000.*pass a larger max_elements="):
        opwire.loads(data, m.Node, format=fmt, max_elements=1000)  # type: ignore[arg-type]
    assert len(opwire.loads(data, m.Node, format=fmt, max_elements=5000).outputs) == 3000  # type: ignore[arg-type]


def test_braces_inside_strings_do_not_count() -> None:
    node = m.Node(target="{[" * 5000, inputs=[], outputs=[], metadata={})
    data = opwire.dumps(node)
    assert opwire.loads(data, m.Node, max_elements=10) == node


def test_the_million_as_none_node_is_refused_fast_in_bounded_memory(tmp_path: Path) -> None:
    """Issue 10's 2 MB compact Node with 1M `as_none` outputs (18.8 s, +1.1 GB before): refused, in a child
    under RLIMIT_AS, with the default budget."""
    from hostile import Work, _as_none_node

    path = _as_none_node(Work(tmp_path))
    code = (
        "import resource, sys, time\n"
        "import opwire\n"
        "from opwire.schema import models as m\n"
        "cap = 1 << 30\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "import os; vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), hard))\n"
        "t = time.process_time()\n"
        "try:\n    opwire.loads(data, m.Node, format='compact')\nexcept opwire.OpwireError as e:\n    print(e)\n"
        "print(time.process_time() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    message, _seconds = out.stdout.strip().splitlines()
    assert f"exceeds the budget max_elements={budgets.MAX_ELEMENTS}" in message
    assert "(CLI: --max-elements)" in message


def test_the_default_fits_the_corpus(corpus_programs: list[object]) -> None:
    for prog in corpus_programs:
        data = prog.json_bytes  # type: ignore[attr-defined]
        assert data.count(b"{") + data.count(b"[") < budgets.MAX_ELEMENTS // 100
