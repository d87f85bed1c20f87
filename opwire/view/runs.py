"""Node-by-node comparison of two runs of one program: `opwire run --save-nodes` / `--compare-nodes`.

A `.nodes` file is a `Values` record (framed compact Thrift, as opwire writes every record): one entry per
value a top-level node produced, keyed by its name in the graph (`linear`, `sym_size_int`, ...). The
comparison runs the program again, compares each node's outputs with the saved ones as they are made
(dtype, shape, then values within rtol/atol), and writes an opwire findings document: one finding per
node, and the first node whose outputs differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from opwire import program
from opwire.errors import EncodeError, OpwireError
from opwire.recording.compare import Difference, compare_scalar, compare_tensor
from opwire.schema import models as m
from opwire.schema.refs import value_names
from opwire.serde import dumps, objects
from opwire.validation.catalog import node_finding
from opwire.view.model import node_names
from opwire.view.overlays import findings_document

__all__ = ["NodeComparer", "NodeRecorder", "read_nodes"]


class _Observer:
    """Names the top-level nodes of a graph, for a `ProgramRunner(observer=...)`."""

    def __init__(self, graph: m.Graph) -> None:
        self.names = {id(n): name for n, name in zip(graph.nodes, node_names(graph.nodes), strict=True)}
        self.order = node_names(graph.nodes)
        self.seen = 0  # top-level nodes observed so far

    def name(self, node: m.Node) -> str:
        self.seen += 1
        return self.names.get(id(node), node.name or "?")


class NodeRecorder(_Observer):
    """Observer keeping every top-level node's outputs (values it cannot hold, e.g. script objects, are skipped)."""

    def __init__(self, graph: m.Graph) -> None:
        super().__init__(graph)
        self.values: dict[str, m.Value] = {}
        self.skipped: dict[str, str] = {}

    def __call__(self, node: m.Node, outputs: Mapping[str, Any]) -> None:
        name = self.name(node)
        for key, v in outputs.items():
            try:
                self.values[key] = objects.from_python(_plain(v), f"node {name!r} output {key!r}")
            except EncodeError:
                self.skipped[key] = type(v).__name__

    def save(self, path: str | Path) -> Path:
        """Write the saved outputs as a `.nodes` file (a framed compact `Values` record)."""
        out = Path(path)
        out.write_bytes(dumps(m.Values(values=self.values), format="compact"))
        return out


def read_nodes(path: str | Path) -> m.Values:
    """A `.nodes` file written by `opwire run --save-nodes` (read by `opwire.program.open`, within its budgets)."""

    nodes: m.Values = program.open(path, expect="values")
    return nodes


def _plain(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach()
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


class NodeComparer(_Observer):
    """Observer comparing each top-level node's outputs with a saved run as they are produced."""

    def __init__(self, graph: m.Graph, saved: m.Values, rtol: float = 1e-5, atol: float = 1e-6) -> None:
        super().__init__(graph)
        self.saved = saved.values
        self.rtol, self.atol = rtol, atol
        self._shapes: dict[tuple[str, str], list[int] | None] = {}  # (node, output) -> shape of a differing output
        self.findings: list[m.Finding] = []
        self.first: str | None = None
        self._differing: set[str] = set()  # values whose outputs differed (strides aside) so far

    def __call__(self, node: m.Node, outputs: Mapping[str, Any]) -> None:
        name = self.name(node)
        diffs: list[tuple[str, Difference]] = []
        missing = []
        for key, got in outputs.items():
            want = self.saved.get(key)
            if want is None:
                missing.append(key)
                continue
            d = self._compare(got, want)
            if d is not None:
                shape = getattr(got, "shape", None)
                diffs.append((key, d))
                self._shapes[(name, key)] = list(shape) if shape is not None else None
        finding = self._finding(name, diffs, missing, list(outputs))
        if any(d.kind != "stride" for _, d in diffs):
            received = any(n in self._differing for n in _input_names(node))
            finding = finding.model_copy(update={"origin": "inherited" if received else "local"})
            self._differing.update(key for key, d in diffs if d.kind != "stride")
            if self.first is None:
                self.first = name
        self.findings.append(finding)

    def _compare(self, got: Any, want: m.Value) -> Difference | None:
        if want.type == "as_tensor":
            return compare_tensor(got, want.value, self.rtol, self.atol)
        if want.type == "as_list":
            items = got if isinstance(got, list | tuple) else None
            if items is None or len(items) != len(want.value):
                n = len(items) if items is not None else type(got).__name__
                return Difference("shape", f"expected a list of {len(want.value)}, got {n}")
            for i, (g, w) in enumerate(zip(items, want.value, strict=True)):
                d = self._compare(g, w)
                if d is not None:
                    return Difference(d.kind, f"[{i}]: {d.detail}", d.max_diff, d.where)
            return None
        return compare_scalar(got, objects.to_python(want, None, "saved"), self.rtol, self.atol)

    def _finding(
        self, name: str, diffs: list[tuple[str, Difference]], missing: list[str], outs: list[str]
    ) -> m.Finding:
        if any(d.kind != "stride" for _, d in diffs):
            code = "node_mismatch"
        elif diffs:
            code = "node_strides"
        elif missing and len(missing) == len(outs):
            code = "node_not_saved"
        else:
            code = "node_match"
        parts = [f"{key}: {d.kind}: {d.detail}" for key, d in diffs]
        parts += [f"{key}: not in the saved run" for key in missing]
        what = "; ".join(parts) or f"{len(outs)} output(s) match within rtol={self.rtol}, atol={self.atol}"
        differences = [self._difference(name, k, d) for k, d in diffs] or None
        return node_finding(code, name, differences, what=what)

    def _difference(self, name: str, key: str, d: Difference) -> m.NodeDifference:
        return m.NodeDifference(
            output=key,
            kind=d.kind,
            max_diff=d.max_diff,
            max_rel=d.max_rel,
            where=list(d.where) if d.where is not None else None,
            shape=self._shapes.get((name, key)),
        )

    def failed(self, exc: OpwireError) -> None:
        """The run stopped with `exc`: the node after the last one observed is where it failed."""
        name = self.order[self.seen] if self.seen < len(self.order) else "?"
        self.findings.append(node_finding("node_failed", name, what=str(exc)))
        self.first = self.first or name

    def document(self, title: str) -> m.FindingsDocument:
        """The findings document `opwire view --findings` reads."""
        return findings_document(self.findings, title, self.first)


def _input_names(node: m.Node) -> list[str]:
    """The names of the values a node reads: tensors, symbols, tokens (subgraphs not entered)."""
    return [n for na in node.inputs for n in value_names(na.arg)]
