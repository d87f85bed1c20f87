"""torch bridge: ExportedProgram -> opwire -> compact bytes -> opwire -> ExportedProgram runs and matches eager."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree
from support import corpus

import opwire
from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import torch_bridge

pytestmark = pytest.mark.xdist_group("corpus_export")  # live corpus programs: exported by one worker, not by each


def _assert_same_outputs(got: object, want: object) -> None:
    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    assert got_spec == want_spec
    for a, b in zip(got_leaves, want_leaves, strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_corpus_program_through_compact(corpus_export: corpus.CorpusProgram) -> None:
    archive = torch_bridge.archive_from_exported_program(corpus_export.ep)
    assert archive.program == opwire.loads(corpus_export.json_bytes, m.ExportedProgram)
    data = opwire.dumps(archive, format="compact")
    back = opwire.loads(data, m.OpwireArchive, format="compact")
    assert opwire.dumps(back) == opwire.dumps(archive)  # (NaN constants make `==` on models unusable)
    ep = opwire.serde.to_exported_program(back)
    module, args, kwargs = corpus_export.fresh()
    with torch.no_grad():
        want = module(*args, **kwargs)
        _, args, kwargs = corpus_export.fresh()
        got = ep.module()(*args, **kwargs)
    _assert_same_outputs(got, want)


def test_from_exported_program_is_torch_json() -> None:
    prog = corpus.get_program("mlp/training")
    model = opwire.serde.from_exported_program(prog.ep)
    assert opwire.dumps(model) == prog.json_bytes


def test_program_with_explicit_tensors() -> None:
    prog = corpus.get_program("mlp/training")
    archive = torch_bridge.archive_from_exported_program(prog.ep)
    with pytest.raises(DecodeError, match=r"^the program binds parameter '.+' but no tensor was given for it"):
        torch_bridge.to_exported_program(archive.program)
    ep = torch_bridge.to_exported_program(archive.program, state_dict=prog.ep.state_dict, constants=prog.ep.constants)
    _assert_same_outputs(ep.module()(*prog.args), prog.module(*prog.args))


def test_bad_inputs() -> None:
    with pytest.raises(EncodeError, match=r"Expected a torch\.export\.ExportedProgram, got str"):
        torch_bridge.from_exported_program("nope")  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match="Expected an OpwireArchive or ExportedProgram model, got int"):
        torch_bridge.to_exported_program(3)  # type: ignore[arg-type]
    prog = corpus.get_program("mlp/decomposed")
    program = opwire.loads(prog.json_bytes, m.ExportedProgram)
    node = program.graph_module.graph.nodes[0].model_copy(update={"target": "torch.ops.opwire_test.no_such_op.default"})
    graph = program.graph_module.graph.model_copy(update={"nodes": [node, *program.graph_module.graph.nodes[1:]]})
    broken = program.model_copy(update={"graph_module": program.graph_module.model_copy(update={"graph": graph})})
    with pytest.raises(DecodeError, match=r"^torch could not rebuild the program: "):
        torch_bridge.to_exported_program(broken, state_dict=prog.ep.state_dict, constants=prog.ep.constants)
