"""opwire's reader of pytree spec strings: the TreeSpec torch would build, for registered types only, and
never an import, an attribute of a module the file names, or a factory outside the fixed table."""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
from typing import Any, NamedTuple

import pytest
import torch
import torch.utils._pytree as pytree
from support.clirun import run_python

from opwire.serde import DecodeError
from opwire.serde.pytree_spec import loads_spec


class Point(NamedTuple):
    x: Any
    y: Any


@dataclasses.dataclass
class Pair:
    a: Any
    b: Any


class Color(enum.Enum):
    RED = 1


pytree._register_namedtuple(Point, serialized_type_name="tests.test_pytree_spec.Point")
torch.export.register_dataclass(Pair, serialized_type_name="tests.test_pytree_spec.Pair")

TREES = [
    (1, [2, 3], {"a": 4}),
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.defaultdict(list, {"k": 1}),
    collections.deque([1, 2], maxlen=3),
    Point(1, (2, 3)),
    Pair(1, [2]),
    {Color.RED: 1, 2: 3},
    [],
    5,
]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: type(t).__name__)
def test_same_spec_as_torch(tree: Any) -> None:
    spec = pytree.tree_structure(tree)
    text = pytree.treespec_dumps(spec)
    ours = loads_spec(text)
    assert ours == pytree.treespec_loads(text) == spec
    assert pytree.tree_unflatten(list(range(spec.num_leaves)), ours) == pytree.tree_unflatten(
        list(range(spec.num_leaves)), spec
    )


def _node(type_: str | None, context: Any, children: list[Any] | None = None) -> dict[str, Any]:
    return {"type": type_, "context": context, "children_spec": children or []}


def _spec(node: dict[str, Any]) -> str:
    return json.dumps([1, node])


LEAF = _node(None, None)


def test_an_enum_key_of_a_module_not_imported_is_refused_without_importing_it() -> None:
    """`{"__enum__": true, "fqn": "this:s"}` made torch import `this`; opwire looks in sys.modules only."""
    code = (
        "import sys, json; from opwire.serde.pytree_spec import loads_spec\n"
        "key = {'__enum__': True, 'fqn': 'this:s', 'name': 'x'}\n"
        "spec = json.dumps([1, {'type': 'builtins.dict', 'context': json.dumps([key]),"
        " 'children_spec': [{'type': None, 'context': None, 'children_spec': []}]}])\n"
        "try:\n    loads_spec(spec)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
        "print('this' in sys.modules)\n"
    )
    proc = run_python(code)  # a process of its own that has not imported `this` (nor has the server it forks from)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "Beautiful is better" not in out
    assert "DecodeError the enum this:s.x is not a member of an enum class of an imported module" in out
    assert "(CLI: --import this)" in out
    assert out.strip().endswith("False")


def test_a_defaultdict_factory_outside_the_table_is_refused() -> None:
    ctx = {"default_factory_module": "os", "default_factory_name": "abort", "dict_context": ["a"]}
    with pytest.raises(
        DecodeError, match=r"defaultdict factory os\.abort is not one opwire builds .* - at `out\.context`"
    ):
        loads_spec(_spec(_node("collections.defaultdict", ctx, [LEAF])), "out")


def test_an_unregistered_class_is_named_with_the_fix() -> None:
    with pytest.raises(
        DecodeError,
        match=r"the pytree type 'mylib\.Output' is not registered .* import the module that registers it first "
        r"\(CLI: --import mylib\) - at `spec\.type`",
    ):
        loads_spec(_spec(_node("mylib.Output", "null")))
    with pytest.raises(DecodeError, match=r"namedtuple class 'mylib\.NT' is not registered"):
        loads_spec(_spec(_node("collections.namedtuple", "mylib.NT")))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "unreadable text"),
        ("[2, {}]", "protocol 1, got 2"),
        ("{}", r"\[protocol, tree\]"),
        (_spec({"type": None}), "keys type, context, children_spec"),
        (_spec(_node("builtins.tuple", "null", [_node(None, "x")])), "a leaf .* with a context"),
        (_spec(_node("builtins.dict", "[1", [LEAF])), "Expected a JSON context"),
        ("[1, " * 2000 + "0" + "]" * 2000, "unreadable text|Expected"),
    ],
)
def test_malformed_specs(text: str, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        loads_spec(text)


def test_the_graph_runner_uses_it() -> None:
    """run_program reads the program's specs with opwire's reader (a refused spec is a DecodeError at load)."""
    from support import corpus

    import opwire
    from opwire.proxy_executor.runner import ProgramRunner
    from opwire.schema import models as m

    program = opwire.loads(corpus.get_serialized("pytree/training").json_bytes, m.ExportedProgram)
    sig = program.graph_module.module_call_graph[0].signature
    assert sig is not None
    sig.out_spec = _spec(_node("evil.Thing", "null"))
    with pytest.raises(
        DecodeError,
        match=r"names the pytree class 'evil\.Thing', which no imported module has registered.*--import evil.* - at "
        r"`graph_module\.module_call_graph\[0\]\.signature\.out_spec`",
    ):
        ProgramRunner(program)


def test_check_spec_allows_unregistered_types_but_nothing_that_imports() -> None:
    from opwire.serde.pytree_spec import check_spec

    check_spec(_spec(_node("mylib.Output", "null", [LEAF])))  # torch's loader would refuse it, importing nothing
    ctx = {"default_factory_module": "os", "default_factory_name": "abort", "dict_context": []}
    with pytest.raises(DecodeError, match=r"defaultdict factory os\.abort"):
        check_spec(_spec(_node("mylib.Output", "null", [_node("collections.defaultdict", ctx)])))
    key = json.dumps([{"__enum__": True, "fqn": "not_imported_module:E", "name": "A"}])
    with pytest.raises(DecodeError, match="--import not_imported_module"):
        check_spec(_spec(_node("builtins.dict", key, [LEAF])))
