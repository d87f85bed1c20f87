"""The decoded-values budget (amplification): containers and leaves counted, refused before models are built,
named, and raisable; one budget across the frames of a streamed trace; a linear JSON pre-scan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.clirun import run_python

import opwire
from opwire.schema import models as m
from opwire.serde import DecodeError, budgets, thrift


def _node(outputs: int) -> m.Node:
    return m.Node(target="aten.x", inputs=[], outputs=[m.Argument(as_none=True)] * outputs, metadata={})


def test_more_containers_than_the_budget_are_refused_and_the_budget_raises(fmt: str) -> None:
    data = opwire.dumps(_node(3000), format=fmt)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match=r"exceeds the budget max_elements=1000.*pass a larger max_elements="):
        opwire.loads(data, m.Node, format=fmt, max_elements=1000)  # type: ignore[arg-type]
    assert len(opwire.loads(data, m.Node, format=fmt, max_elements=7000).outputs) == 3000  # type: ignore[arg-type]


@pytest.mark.parametrize("leaves", [["ab"] * 3000, list(range(3000)), [[1, 2]] * 1000])
def test_leaves_count_like_containers(fmt: str, leaves: list[object]) -> None:
    """A list of 3000 short strings or ints (or 1000 pairs) is one container but 3001 values."""
    if isinstance(leaves[0], list):
        arg = m.Argument(as_int_lists=leaves)
    else:
        arg = m.Argument(as_strings=leaves) if isinstance(leaves[0], str) else m.Argument(as_ints=leaves)
    data = opwire.dumps(arg, format=fmt)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match=r"exceeds the budget max_elements=2000.*--max-elements"):
        opwire.loads(data, m.Argument, format=fmt, max_elements=2000)  # type: ignore[arg-type]
    assert opwire.loads(data, m.Argument, format=fmt, max_elements=3100) == arg  # type: ignore[arg-type]


def test_every_engine_counts_leaves(codec: str, engine: str) -> None:
    """fastbinary's counter and the checking decoder's walk give one answer (and count before building)."""
    data = opwire.dumps(m.Argument(as_strings=["ab"] * 3000), format=codec)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match=r"exceeds the budget max_elements=2000"):
        thrift.decode(data, m.Argument, codec, max_elements=2000, engine=engine)  # type: ignore[arg-type]
    budget = budgets.Budget(3002)
    assert len(thrift.decode(data, m.Argument, codec, max_elements=budget, engine=engine).as_strings or []) == 3000  # type: ignore[arg-type]
    assert budget.spent == 3002


def test_a_budget_is_shared_by_the_decodes_it_is_passed_to() -> None:
    data = opwire.dumps(m.Argument(as_ints=[1, 2, 3]), format="compact")
    budget = budgets.Budget(10)
    for _ in range(2):  # 1 union + 1 list + 3 ints = 5 values each
        opwire.serde.thrift.decode(data, m.Argument, max_elements=budget)
    assert budget.spent == 10
    with pytest.raises(DecodeError, match=r"more than 10 exceeds the budget max_elements=10.*--max-elements"):
        opwire.serde.thrift.decode(data, m.Argument, max_elements=budget)


def _strings_argument(n: int) -> bytes:
    """A compact Argument whose `as_strings` holds n two-character strings: 3 bytes a string."""
    from support.hostile import _varint

    from opwire.serde import framing

    body = b"\x09\xca\x01" + b"\xf8" + _varint(n) + b"\x02ab" * n + b"\x00"  # field 101 (list), n strings, stop
    return framing.write_header("compact", "Argument") + body


def test_a_list_of_short_strings_is_refused_early_in_bounded_memory() -> None:
    """Issue 16: 60 MB of two-character strings passed max_elements=10 and cost 1.5 GB. Here 6 MB (2M strings)
    in a child with 200 MB of address space above its start: refused by the pre-count, nothing built."""
    code = (
        "import resource, sys\n"
        "import opwire\n"
        "from opwire.schema import models as m\n"
        "sys.path.insert(0, 'tests/serde'); sys.path.insert(0, 'tests')\n"
        "from test_budgets import _strings_argument\n"
        "data = _strings_argument(2_000_000)\n"
        "vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + (200 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "for limit in (10, 1_000_000):\n"
        "    try:\n        opwire.loads(data, m.Argument, format='compact', max_elements=limit)\n"
        "    except opwire.OpwireError as e:\n        print(e)\n"
    )
    out = run_python(code, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, out.stdout
    assert "exceeds the budget max_elements=10;" in lines[0]
    assert "exceeds the budget max_elements=1000000;" in lines[1]


def test_the_json_prescan_is_linear() -> None:
    """An unterminated string of escaped quotes made the old regex quadratic (2.4 MB: about 8 minutes).
    Run in a child with a time limit far above the linear cost (not a timed assertion)."""
    code = (
        "from opwire.serde.json import check_elements\n"
        "from opwire.errors import DecodeError\n"
        "data = b'[\"' + bytes([92, 34, 91]) * 800_000\n"  # `\"[` 800k times: 2.4 MB, never closed
        "try:\n    check_elements(data, 10)\nexcept DecodeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "exceeds the budget max_elements=10;" in out.stdout


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (b"[]", 1),
        (b"[[]]", 2),
        (b'{"a": [1, 2, "x,{\\"["], "b": { }}', 6),
        (b'[1, {"a": null, "b": {}}, "]"]', 6),
    ],
)
def test_json_values_are_counted_outside_strings(text: bytes, values: int) -> None:
    from opwire.serde.json import count_values

    assert count_values(text) == values


def test_braces_inside_strings_do_not_count() -> None:
    node = m.Node(target="{[" * 5000, inputs=[], outputs=[], metadata={})
    data = opwire.dumps(node)
    assert opwire.loads(data, m.Node, max_elements=10) == node


def test_the_million_as_none_node_is_refused_fast_in_bounded_memory(tmp_path: Path) -> None:
    """Issue 10's 2 MB compact Node with 1M `as_none` outputs (18.8 s, +1.1 GB before): refused, in a child
    under RLIMIT_AS, with the default budget."""
    from support.hostile import Work, _as_none_node

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
    out = run_python(code, path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    message, _seconds = out.stdout.strip().splitlines()
    assert f"exceeds the budget max_elements={budgets.MAX_ELEMENTS}" in message
    assert "(CLI: --max-elements)" in message


def test_the_default_fits_the_corpus(corpus_programs: list[object]) -> None:
    from opwire.serde.json import count_values

    for prog in corpus_programs:
        assert count_values(prog.json_bytes) < budgets.MAX_ELEMENTS // 100  # type: ignore[attr-defined]
