"""The page's data: every node, module groups, input kinds, decoded arguments, subgraphs, edge labels."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sympy
import torch
from support import corpus
from torch._export.serde.serialize import serialize

from opwire.program.signature import program_signature
from opwire.schema import models as m
from opwire.serde.json import decode
from opwire.view.describe import describe_arg, meta_label, module_stack, tensor_meta
from opwire.view.model import node_names, page_data


def _data(prog: corpus.SerializedProgram) -> dict:  # type: ignore[type-arg]
    return page_data(decode(prog.json_bytes, m.ExportedProgram), prog.name)


@pytest.mark.xdist_group("corpus_export")  # live corpus programs: exported by one worker, not by each
def test_every_node_and_input_of_every_corpus_program(corpus_export: corpus.CorpusProgram) -> None:
    data = _data(corpus_export)
    graph = corpus_export.ep.graph
    fx_calls = [n.name for n in graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)]
    assert {n["n"] for n in data["graph"]["nodes"]} >= set(fx_calls)
    assert [i["name"] for i in data["graph"]["inputs"]] == [n.name for n in graph.nodes if n.op == "placeholder"]
    made = {i["name"] for i in data["graph"]["inputs"]}
    for node in data["graph"]["nodes"]:  # every value a node reads comes from an input or an earlier node: the edges
        assert set(node["in"]) <= made, (node["n"], set(node["in"]) - made)
        made.update(node["o"])


def test_inputs_split_by_signature_kind() -> None:
    data = _data(corpus.get_serialized("conv_bn/decomposed"))
    kinds = {i["name"]: (i["kind"], i["target"]) for i in data["graph"]["inputs"]}
    assert kinds["x"] == ("user input", "")
    assert kinds["p_conv_weight"] == ("parameter", "conv.weight")
    assert kinds["b_bn_running_mean"] == ("buffer", "bn.running_mean")
    outs = {o["kind"] for o in data["graph"]["outputs"]}
    assert outs == {"buffer mutation", "user output"}


def test_module_groups_from_nn_module_stack() -> None:
    data = _data(corpus.get_serialized("transformer/training"))
    groups = {(g["path"], g["type"]) for g in data["groups"]}
    assert ("self_attn", "MultiheadAttention") in groups and ("linear1", "Linear") in groups
    linear = next(n for n in data["graph"]["nodes"] if n["n"] == "linear")
    assert data["groups"][linear["g"]]["path"] == "self_attn"
    weight = next(i for i in data["graph"]["inputs"] if i["name"] == "p_linear1_weight")
    assert data["groups"][weight["g"]]["path"] == "linear1"  # a weight sits in the group of its only user
    assert data["strings"][linear["st"]].startswith("File ")  # the source location (stack_trace metadata)


def test_symbolic_dims_by_name_on_edges() -> None:
    data = _data(corpus.get_serialized("dynamic/training"))
    labels = {v[0] for v in data["graph"]["values"].values()}
    assert any("s" in label and label.startswith("f32[") for label in labels), labels
    assert data["ranges"]
    assert "Symbol(" not in json.dumps(data)


class _Cat(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x]).reshape(-1)[1:]  # sizes 2*s, then 2*s*4 - 1: expressions, not only symbols


def test_symbolic_sizes_are_shown_as_inspect_shows_them(resnet_eps: dict[str, Any]) -> None:
    """Real torch 2.13 programs: a dynamic batch is `Symbol('s77', positive=True, integer=True)` in the file."""
    ep = torch.export.export(_Cat(), (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim("n", max=64)},))
    for exported in (resnet_eps["decomposed"], resnet_eps["training"], ep):
        program = decode(serialize(exported).exported_program, m.ExportedProgram)
        raw = json.dumps(program.model_dump(mode="json", by_alias=True))
        assert "Symbol(" in raw  # what torch writes ...
        data = page_data(program, "p")
        assert "Symbol(" not in json.dumps(data)  # ... is never what the page shows
        sig = program_signature(program)  # what `opwire inspect` prints
        values = data["graph"]["values"]
        for port, name in ((sig.inputs[0], "x"), (sig.outputs[0], data["graph"]["outputs"][0]["refs"][0])):
            assert values[name][0].endswith("[" + ", ".join(str(d) for d in port.shape or ()) + "]")
            assert values[name][2] == "[" + ", ".join(str(d) for d in port.shape or ()) + "]"  # the panel's shape
    (sym,) = ep.range_constraints
    cat = data["graph"]["values"][data["graph"]["outputs"][0]["refs"][0]]
    assert cat[0].startswith(f"f32[8*{sym} ") and data["ranges"] == {str(sym): ["0", "64"]}


def test_unused_inputs_are_flagged(resnet_eps: dict[str, Any]) -> None:
    program = decode(serialize(resnet_eps["decomposed"]).exported_program, m.ExportedProgram)
    data = page_data(program, "resnet")
    unused = {i["target"] for i in data["graph"]["inputs"] if i.get("unused")}
    assert len(unused) == 20 and all(t.endswith("num_batches_tracked") for t in unused)


def test_hop_subgraphs_are_nested(hops_json: bytes) -> None:
    data = page_data(decode(hops_json, m.ExportedProgram), "hops")
    subs = {n["n"]: [s["arg"] for s in n["sub"]] for n in data["graph"]["nodes"] if n["sub"]}
    assert set(subs) == {"map_impl", "cond", "while_loop"}
    assert len(subs["cond"]) == 2 and len(subs["while_loop"]) == 2
    cond = next(n for n in data["graph"]["nodes"] if n["n"] == "cond")
    branch = cond["sub"][0]["graph"]
    assert [n["t"] for n in branch["nodes"]] == ["aten.linear.default", "aten.relu.default"]
    assert dict(cond["a"])["#1"] == "subgraph true_graph_0"


def test_arguments_are_decoded() -> None:
    assert describe_arg(m.Argument(as_scalar_type=m.ScalarType.BFLOAT16)) == "torch.bfloat16"
    assert describe_arg(m.Argument(as_device=m.Device(type="cuda", index=1))) == "device('cuda:1')"
    assert describe_arg(m.Argument(as_ints=[2, 3])) == "[2, 3]"
    assert describe_arg(m.Argument(as_memory_format=m.MemoryFormat.ChannelsLast)) == "torch.channels_last"
    sym = m.Argument(as_sym_ints=[m.SymIntArgument(as_name="s0"), m.SymIntArgument(as_int=4)])
    assert describe_arg(sym) == "[%s0, 4]"
    assert describe_arg(m.Argument(as_layout=m.Layout.SparseCoo)) == "torch.sparse_coo"
    opt = m.Argument(as_optional_tensors=[m.OptionalTensorArgument(as_none=True)])
    assert describe_arg(opt) == "[None]"
    data = _data(corpus.get_serialized("argkinds/training"))
    texts = {a[1] for n in data["graph"]["nodes"] for a in n["a"]}
    assert any(t.startswith("torch.") for t in texts) and any(t.startswith("device(") for t in texts)


def test_meta_label() -> None:
    from torch._export.serde.serialize import _print_sympy  # how torch 2.13 writes an expression

    s0 = sympy.Symbol("s0", positive=True, integer=True)
    sizes = [m.SymInt(as_expr=m.SymExpr(expr_str=_print_sympy(2 * s0 + 1))), m.SymInt(as_int=4)]
    z = m.SymInt(as_int=0)
    meta = m.TensorMeta(
        dtype=m.ScalarType.HALF,
        sizes=sizes,
        requires_grad=False,
        device=m.Device(type="cpu"),
        strides=[m.SymInt(as_expr=m.SymExpr(expr_str=_print_sympy(4 * s0))), z],
        storage_offset=z,
        layout=m.Layout.Strided,
    )
    assert meta_label(meta) == "f16[2*s0 + 1, 4]"
    assert tensor_meta(meta)["strides"] == "[4*s0, 0]"


def test_module_stack_parsing() -> None:
    text = "L__self__,,torch.M;L__self___layers_0,layers.0,torch.nn.Linear;k,getattr(L['self'].a, '0'),x.Y"
    assert module_stack({"nn_module_stack": text}) == [
        ("L__self__", "(root)", "M"),
        ("L__self___layers_0", "layers.0", "Linear"),
        ("k", "getattr(.a, '0')", "Y"),
    ]
    assert module_stack({"nn_module_stack": "garbage"}) == []


def test_nodes_without_names_are_named_after_their_output() -> None:
    out = m.Argument(as_tensor=m.TensorArgument(name="buf3"))
    nodes = [
        m.Node(target="t", inputs=[], outputs=[out], metadata={}),
        m.Node(target="t", inputs=[], outputs=[], metadata={}),
    ]
    assert node_names(nodes) == ["buf3", "node_1"]


def test_extern_node_file_inputs_are_what_no_node_produces() -> None:
    a = m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="arg0_1")))
    b = m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="buf0")))
    out0 = [m.Argument(as_tensor=m.TensorArgument(name="buf0"))]
    nodes = m.ExternKernelNodes(
        nodes=[
            m.ExternKernelNode(name="buf0", node=m.Node(target="ns::a", inputs=[a], outputs=out0, metadata={})),
            m.ExternKernelNode(name="buf1", node=m.Node(target="ns::b", inputs=[b], outputs=[], metadata={})),
        ]
    )
    data = page_data(nodes, "extern")
    assert data["kind"] == "extern"
    assert [i["name"] for i in data["graph"]["inputs"]] == ["arg0_1"]
    assert [n["n"] for n in data["graph"]["nodes"]] == ["buf0", "buf1"]


@pytest.mark.parametrize("depth", [40])
def test_deep_arguments_are_cut_not_recursed(depth: int) -> None:
    arg: m.Argument = m.Argument(as_int=1)
    for _ in range(depth):
        arg = m.Argument(as_string_to_argument={"k": arg})
    assert "…" in describe_arg(arg)
