"""opwire.run_program: every corpus program matches eager, subgraph HOPs run, bad programs are opwire errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from support import corpus
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.while_loop import while_loop

import opwire
from opwire.proxy_executor.runner import ProgramRunner
from opwire.schema import models as m
from opwire.serde import torch_bridge

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),  # torch's own, from deepcopy
    pytest.mark.xdist_group("corpus_export"),  # live corpus programs: exported by one worker, not by each
]


def _archive(name: str) -> m.OpwireArchive:
    """The archive of a corpus program's current state (ep.module() writes buffers into the shared ep)."""
    return torch_bridge.archive_from_exported_program(corpus.get_program(name).ep)


def _eager(prog: corpus.CorpusProgram) -> torch.nn.Module:
    """The program's eager module, with buffers of its own (the corpus ep stays untouched)."""
    return copy.deepcopy(prog.ep.module())


def _assert_same(got: Any, want: Any) -> None:
    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    assert got_spec == want_spec
    for g, w in zip(got_leaves, want_leaves, strict=True):
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor) and g.dtype == w.dtype and g.shape == w.shape
            torch.testing.assert_close(g, w, equal_nan=True, rtol=1e-5, atol=1e-6)
        else:
            assert g == w


def test_corpus_program_matches_eager(corpus_export: corpus.CorpusProgram) -> None:
    archive = opwire.loads(opwire.dumps(_archive(corpus_export.name), "compact"), m.OpwireArchive, "compact")
    for args, kwargs in corpus_export.spec.inputs():
        want = _eager(corpus_export)(*args, **kwargs)
        _assert_same(opwire.run_program(archive, args, kwargs), want)


@pytest.mark.parametrize("ir", corpus.IRS)
def test_buffer_mutations_persist_in_a_runner_like_in_the_module(ir: str) -> None:
    prog = corpus.get_program(f"counter/{ir}")
    runner = ProgramRunner(_archive(prog.name))
    module = _eager(prog)
    (x,) = prog.args
    for _ in range(3):
        _assert_same(runner(x), module(x))
    for name, buf in module.named_buffers():
        torch.testing.assert_close(runner.state[name], buf)
    # run_program itself leaves the archive's buffers alone: two runs give the first call's result
    archive = _archive(prog.name)
    first = opwire.run_program(archive, (x,))
    _assert_same(opwire.run_program(archive, (x,)), first)


class _Map(torch.nn.Module):
    def forward(self, xs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return hop_map(lambda x, y: x.sin() + y, xs, y)


class _While(torch.nn.Module):
    def forward(self, i: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 2.0), (i, x))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("module", "args"),
    [(_Map(), (torch.randn(3, 4), torch.randn(4))), (_While(), (torch.tensor(0), torch.randn(3)))],
    ids=["map", "while_loop"],
)
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_map_and_while_loop_subgraphs(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
    ep = torch.export.export(module, args)
    for program in (ep, ep.run_decompositions()):
        _assert_same(opwire.run_program(program, args), program.module()(*args))


def test_program_without_its_weights_is_a_decode_error() -> None:
    program = _archive("mlp/training").program
    with pytest.raises(
        opwire.DecodeError, match=r"binds parameter 'net.0.weight' but the ExportedProgram model holds no tensor"
    ):
        opwire.run_program(program, corpus.get_program("mlp/training").args)


def test_wrong_input_structure_is_a_bind_error() -> None:
    with pytest.raises(opwire.BindError, match=r"Expected inputs shaped like the exported ones \(1 values: .*got 2"):
        opwire.run_program(_archive("mlp/training"), (torch.randn(5, 8), torch.randn(5, 8)))


def test_unsupported_higher_order_op_lists_the_supported_ones() -> None:
    archive = _archive("cond/training").model_copy(deep=True)
    node = next(n for n in archive.program.graph_module.graph.nodes if "cond" in n.target)
    node.target = "torch.ops.higher_order.flex_attention"
    with pytest.raises(opwire.UnknownTargetError, match=r"expected one of .*higher_order\.cond"):
        opwire.run_program(archive, corpus.get_program("cond/training").args)


def test_a_node_reading_an_unknown_name_is_a_bind_error() -> None:
    archive = _archive("mlp/decomposed").model_copy(deep=True)
    node = archive.program.graph_module.graph.nodes[0]
    tensor_input = next(na for na in node.inputs if na.arg.type == "as_tensor")
    tensor_input.arg = m.Argument(as_tensor=m.TensorArgument(name="nowhere"))
    with pytest.raises(opwire.BindError, match="'nowhere'"):
        opwire.run_program(archive, corpus.get_program("mlp/decomposed").args)


def test_not_a_program_is_a_decode_error() -> None:
    with pytest.raises(opwire.DecodeError, match="Expected a path, bytes, an opwire model"):
        opwire.run_program(42, ())  # type: ignore[arg-type]
