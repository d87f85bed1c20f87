"""A program (or an extern-node file) as the page's data: graphs, module groups, value metadata, source table.

The page gets plain JSON: per graph its inputs (by signature kind), nodes (target, decoded arguments,
the values they read, outputs, module group, source location, subgraphs of higher-order ops) and the
metadata of every value; module groups come from `nn_module_stack`, shared by all graphs.
"""

from __future__ import annotations

from typing import Any

from opwire.schema import models as m
from opwire.schema.refs import value_names
from opwire.schema.spec_roles import spec_member, target_name
from opwire.view.describe import describe_arg, meta_label, module_stack, sym_label, tensor_meta

__all__ = ["node_names", "page_data"]

# an input spec's role (opwire.schema.spec_roles) -> the page's input category; every other role is a constant
_INPUT_KINDS = {"user_input": "user input", "parameter": "parameter", "buffer": "buffer", "token": "token"}
CHUNK_OVER = 200  # a module group (or the root) with more nodes of its own than this is split into runs
CHUNK = 100  # nodes per run


def node_names(nodes: list[m.Node]) -> list[str]:
    """The name of each node: its own, else its first output's, else its position (old files have none)."""
    names = []
    for i, node in enumerate(nodes):
        name = node.name
        if not name and node.outputs:
            refs = value_names(node.outputs[0])
            name = refs[0] if refs else None
        names.append(name or f"node_{i}")
    return names


class _Builder:
    """Collects module groups and source strings while graphs are converted."""

    def __init__(self) -> None:
        self.groups: list[dict[str, Any]] = []
        self._group_ids: dict[tuple[str, ...], int] = {}
        self.strings: list[str] = []
        self._string_ids: dict[str, int] = {}
        self._stacks: dict[str, int] = {}

    def string(self, text: str | None) -> int:
        if not text:
            return -1
        i = self._string_ids.get(text)
        if i is None:
            i = self._string_ids[text] = len(self.strings)
            self.strings.append(text)
        return i

    def group(self, metadata: dict[str, str]) -> int:
        """The innermost module group of a node (-1: the program's root module)."""
        text = metadata.get("nn_module_stack", "")
        known = self._stacks.get(text)  # the nodes of one module share its stack text: parsed once per page
        if known is None:
            known = self._stacks[text] = self._group(metadata)
        return known

    def _group(self, metadata: dict[str, str]) -> int:
        parent = -1
        chain: tuple[str, ...] = ()
        for key, path, ty in module_stack(metadata):
            if path == "(root)":
                continue
            chain = (*chain, key)
            gid = self._group_ids.get(chain)
            if gid is None:
                gid = self._group_ids[chain] = len(self.groups)
                self.groups.append({"path": path, "type": ty, "parent": parent})
            parent = gid
        return parent

    def graph(self, graph: m.Graph, names: list[str] | None = None, grouped: bool = True) -> dict[str, Any]:
        values: dict[str, list[str]] = {}
        for name, meta in graph.tensor_values.items():
            values[name] = [meta_label(meta), *tensor_meta(meta).values()]
        for table, kind in ((graph.sym_int_values, "int"), (graph.sym_float_values, "float")):
            for name, sym in table.items():
                values[name] = [f"Sym{kind}({sym_label(sym)})"]
        for name, symb in graph.sym_bool_values.items():
            values[name] = [f"SymBool({sym_label(symb)})"]
        names = names if names is not None else node_names(graph.nodes)
        nodes = [self.node(node, name, grouped) for node, name in zip(graph.nodes, names, strict=True)]
        return {
            "inputs": [
                {"name": n, "kind": "input", "target": "", "g": -1} for a in graph.inputs for n in value_names(a)
            ],
            "nodes": nodes,
            "outputs": [{"text": describe_arg(a), "refs": value_names(a), "kind": "output"} for a in graph.outputs],
            "values": values,
        }

    def node(self, node: m.Node, name: str, grouped: bool) -> dict[str, Any]:
        args, refs, subs = [], [], []
        for i, a in enumerate(node.inputs):
            args.append([a.name or f"#{i}", describe_arg(a.arg)])  # higher-order ops' inputs have no names
            refs += value_names(a.arg)
            for g in _subgraphs(a.arg):
                subs.append({"arg": a.name or g.name, "name": g.name, "graph": self.graph(g.graph, grouped=False)})
        outs = [r for o in node.outputs for r in value_names(o)]
        consts = [describe_arg(o) for o in node.outputs if not value_names(o)]
        meta = node.metadata
        return {
            "n": name,
            "t": _short_target(node.target),
            "tf": node.target,
            "g": self.group(meta) if grouped else -1,
            "in": list(dict.fromkeys(refs)),
            "a": args,
            "o": outs,
            "oc": consts,
            "st": self.string(meta.get("stack_trace")),
            "fn": meta.get("torch_fn", "").split(";")[-1],
            "sub": subs,
        }


def _subgraphs(arg: m.Argument) -> list[m.GraphArgument]:
    if arg.type == "as_graph":
        return [arg.value]
    return []


def _short_target(target: str) -> str:
    """`torch.ops.aten.add.Tensor` -> `aten.add.Tensor`; `torch.ops.higher_order.cond` -> `cond`."""
    t = target.removeprefix("torch.ops.")
    return t.removeprefix("higher_order.")


def _signature_inputs(gm: m.GraphModule, graph: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
    """Label the top graph's inputs by signature kind and place weights in the group of their users."""
    specs = gm.signature.input_specs
    if len(specs) != len(graph["inputs"]):
        return  # a signature that does not match: leave the inputs unlabelled rather than guess
    users: dict[str, set[int]] = {}
    for n in nodes:
        for r in n["in"]:
            users.setdefault(r, set()).add(n["g"])
    for entry, spec in zip(graph["inputs"], specs, strict=True):
        role = spec_member(spec).role
        entry["kind"] = _INPUT_KINDS.get(role, "constant")
        target = target_name(spec)
        if target is not None:
            entry["target"] = target
        elif role == "constant_input":
            entry["target"] = describe_arg(spec.value.value)
        groups = users.get(entry["name"], set())
        entry["g"] = next(iter(groups)) if entry["kind"] != "user input" and len(groups) == 1 else -1
    kinds = {o.type: o.type.replace("_", " ") for o in gm.signature.output_specs}
    if len(gm.signature.output_specs) == len(graph["outputs"]):
        for entry, ospec in zip(graph["outputs"], gm.signature.output_specs, strict=True):
            entry["kind"] = kinds[ospec.type]


def page_data(obj: m.ExportedProgram | m.OpwireArchive | m.ExternKernelNodes, title: str) -> dict[str, Any]:
    """The page's data for a program, an archive's program, or an AOTInductor extern-node file."""
    b = _Builder()
    if isinstance(obj, m.OpwireArchive):
        obj = obj.program
    if isinstance(obj, m.ExternKernelNodes):
        nodes = [e.node for e in obj.nodes]
        graph = b.graph(
            m.Graph(inputs=[], outputs=[], nodes=nodes, tensor_values={}, sym_int_values={}, sym_bool_values={}),
            names=[e.name for e in obj.nodes],
        )
        _extern_inputs(graph)
        _chunk(graph["nodes"], b.groups)
        kind, schema, torch_version, ranges = "extern", "", "", {}
    else:
        gm = obj.graph_module
        graph = b.graph(gm.graph)
        _signature_inputs(gm, graph, graph["nodes"])
        _mark_unused(graph)
        _chunk(graph["nodes"], b.groups)
        kind = "program"
        v = obj.schema_version
        schema = f"{v.major}.{v.minor}" if v is not None else ""
        torch_version = obj.torch_version or ""
        ranges = {k: [_bound(r.min_val), _bound(r.max_val)] for k, r in obj.range_constraints.items()}
    return {
        "title": title,
        "kind": kind,
        "schema": schema,
        "torch": torch_version,
        "ranges": ranges,
        "graph": graph,
        "groups": b.groups,
        "strings": b.strings,
    }


def _chunk(nodes: list[dict[str, Any]], groups: list[dict[str, Any]]) -> None:
    """Split a group's own nodes, past CHUNK_OVER, into runs of CHUNK consecutive nodes (collapsible like modules).

    A program without module metadata (or one huge module) would otherwise open as one flat graph that
    no layout draws readably, or quickly.
    """
    direct: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        direct.setdefault(n["g"], []).append(i)
    for gid, members in direct.items():
        if len(members) <= CHUNK_OVER:
            continue
        for start in range(0, len(members), CHUNK):
            part = members[start : start + CHUNK]
            groups.append(
                {"path": f"{nodes[part[0]]['n']} … {nodes[part[-1]]['n']}", "type": f"{len(part)} nodes", "parent": gid}
            )
            for i in part:
                nodes[i]["g"] = len(groups) - 1


def _mark_unused(graph: dict[str, Any]) -> None:
    """Flag the top graph's inputs that no node and no output reads (`num_batches_tracked` of an eval model).

    The page draws them as one box instead of a row of boxes above the program.
    """
    used = {r for n in graph["nodes"] for r in n["in"]} | {r for o in graph["outputs"] for r in o["refs"]}
    for entry in graph["inputs"]:
        if entry["name"] not in used:
            entry["unused"] = True


def _bound(v: int | None) -> str:
    return "inf" if v is None or abs(v) >= 2**62 else str(v)


def _extern_inputs(graph: dict[str, Any]) -> None:
    """An extern-node file has no graph inputs: the tensors no node produces are its inputs."""
    made = {o for n in graph["nodes"] for o in n["o"]}
    seen: dict[str, None] = {}
    for n in graph["nodes"]:
        for r in n["in"]:
            if r not in made:
                seen[r] = None
    graph["inputs"] = [{"name": r, "kind": "extern input", "target": "", "g": -1} for r in seen]
