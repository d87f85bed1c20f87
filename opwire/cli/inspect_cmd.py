"""`opwire inspect FILE`: a summary of a program, extern-node file, trace or archive."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from opwire.cli.options import LOADING_HELP, add_budget_flags, add_loading
from opwire.program.signature import dtype_name, extern_inputs, op_name, program_signature
from opwire.schema import models as m
from opwire.serde.archive import is_zip

if TYPE_CHECKING:
    from opwire.program import OpenedProgram

__all__ = ["add_parser", "run", "summarize"]


def add_parser(sub: Any) -> None:
    """Register `inspect`."""
    p = sub.add_parser(
        "inspect",
        help="summarize a program, extern-node file, trace or archive",
        description="Summarize FILE, recognized from its content: a program's signature (user inputs and "
        "outputs with dtype, shape, symbolic ranges and device; parameters, buffers, constants), an extern-node "
        "file's ops and the names its nodes read that no node produces (what `opwire exec --inputs` must give), "
        "a trace's ops, a snapshot or a Values file. FILE is torch's program JSON (models/model.json of a .pt2), "
        "a .pt2 archive (torch.export.save; weights are never read), an AOTInductor package or its "
        "<hash>.wrapper.json, or any file opwire wrote (opwire convert, opwire record, Trace.save, ops snapshot). "
        "Exit 0, or 2 when the file is unreadable. " + LOADING_HELP,
    )
    p.add_argument("file", help="JSON program, extern-node JSON, .pt2 archive, or a file opwire wrote")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check the CRC-32 of every entry of a .pt2 or blob of a .opw, or the SHA-256 of every payload of a "
        "streamed trace (reads the whole file once, keeps nothing)",
    )
    add_loading(p)
    add_budget_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the summary; exit 0, or 2 when the file is unreadable."""
    import opwire
    from opwire.program import FindingsFile, OpenedProgram, StreamedTrace

    path = Path(args.file)
    obj = opwire.open(path, max_elements=args.max_elements)  # judged by its first bytes, within the budgets
    if isinstance(obj, StreamedTrace):
        summary = _with_codec(_summarize_stream(path), "opwire stream (frames written as calls happen)")
    elif isinstance(obj, OpenedProgram):
        summary = _with_codec(_summarize_program(obj), _codec(path))
    elif isinstance(obj, FindingsFile):
        entries = obj.document.get("findings", obj.document.get("reports"))
        count = len(entries) if isinstance(entries, list) else 0
        summary = _with_codec({"kind": "findings", "entries": count}, _codec(path))
    else:
        summary = _with_codec(summarize(obj), _codec(path))
        if is_zip(path):
            summary["kind"] = f"AOTInductor package ({summary['kind']})"
    if args.verify:
        summary["verified"] = _verify(obj, path)
    # a key that is no field of the record is refused (ValueError), never dropped in silence
    record = m.InspectOutput(kind=summary.pop("kind"), codec=summary.pop("codec")).replace(**summary)
    if args.json:
        from opwire.cli.output import print_record

        print_record(record)
    else:
        print(_render(record))
    return 0


def _codec(path: Path) -> str:
    """How the file is encoded: JSON, or the Thrift codec its opwire header names."""
    from opwire.serde.files import read_head
    from opwire.serde.framing import OPW_MAGIC, sniff

    head = read_head(path)
    if head.startswith(OPW_MAGIC):
        return "opw archive (aligned blobs, mapped)"
    if is_zip(path):
        return "zip archive"
    found = sniff(head)
    return "json" if found is None else f"thrift {found[0]} (opwire header, schema {found[2][0]}.{found[2][1]})"


def _with_codec(summary: dict[str, Any], codec: str) -> dict[str, Any]:
    """`summary` with "codec" right after "kind"."""
    kind = summary.pop("kind", None)
    return {"kind": kind, "codec": codec, **summary}


def _value_text(v: m.Value) -> str:
    """A Values entry as `float32[2, 8] on cpu`, `int 3`, `list of 2`."""
    if v.type == "as_tensor":
        t = v.value
        device = f"{t.device.type}:{t.device.index}" if t.device.index is not None else t.device.type
        return f"{dtype_name(t.dtype)}[{', '.join(str(d) for d in t.sizes)}] on {device}"
    if v.type in ("as_int", "as_float", "as_bool", "as_string", "as_complex"):
        return f"{v.type.removeprefix('as_')} {v.value!r}"
    if isinstance(v.value, list):
        return f"{v.type.removeprefix('as_')} of {len(v.value)}"
    return v.type.removeprefix("as_")


def _summarize_program(opened: OpenedProgram) -> dict[str, Any]:
    """A program or archive; of a .pt2 only the program's JSON is read (never a weight)."""
    pt2 = opened.pt2
    if pt2 is None:
        model = opened.model
        assert model is not None
        return summarize(model)
    from opwire.serde.pt2 import Pt2Archive

    summary = summarize(opened.program)
    summary.pop("kind")
    head: dict[str, Any] = {"kind": "pt2 archive", "model": pt2.model} if isinstance(pt2, Pt2Archive) else {}
    if not head:
        head = {"kind": "opw archive", "blobs": len(pt2.table.blobs)} if hasattr(pt2, "table") else {}
    return {
        **(head or {"kind": f"archive ({type(pt2).__name__})"}),
        **summary,
        "weights": len(opened.tensor_names("weights")),
        "stored_constants": len(opened.tensor_names("constants")),
    }


def _verify(obj: Any, path: Path) -> str:
    """Check the CRC-32 of every entry (.pt2, AOTInductor package) or blob (.opw), streamed; what was checked."""
    from opwire.errors import DecodeError
    from opwire.program import OpenedProgram, StreamedTrace

    if isinstance(obj, OpenedProgram) and obj.pt2 is not None:
        obj.pt2.verify()
        return "every blob's CRC-32 matches" if hasattr(obj.pt2, "table") else "every entry's CRC-32 matches"
    if isinstance(obj, StreamedTrace):
        from opwire.recording.stream_reader import TraceReader

        with TraceReader(path) as reader:
            payloads, records = reader.verify()
            undefined = reader.undefined_count()
        checked = f"every payload's SHA-256 ({payloads}) and every record's CRC-32 ({records}) match"
        return checked + (f"; {undefined} undefined values carry no payload" if undefined else "")
    if is_zip(path):
        from opwire.serde.archive import ZipArchive

        with ZipArchive(path) as z:
            for name in z.names():
                z.verify(name)
        return "every entry's CRC-32 matches"
    raise DecodeError(
        f"{path}: --verify checks .pt2, AOTInductor and .opw archives and streamed traces; this file carries no "
        "checksums"
    )


def _summarize_stream(path: Path) -> dict[str, Any]:
    """Summarize a streamed trace from its frame index (records are decoded, payloads are not read)."""
    from opwire.recording.stream_reader import TraceReader  # the reader alone: `opwire.load_trace` imports torch

    with TraceReader(path) as trace:
        h = trace.header
        summary: dict[str, Any] = {
            "kind": "streamed CallTrace",
            "torch_version": h.torch_version,
            "opwire_version": h.opwire_version,
            "outputs_mode": h.outputs_mode,
            "records": len(trace),
            "tensors": len(trace.names()),
            "bytes": path.stat().st_size,
        }
        if trace.cut is not None:
            summary["cut"] = trace.cut
        summary["ops"] = dict(Counter(r.target for r in trace.records()).most_common())
    return summary


def _walk_nodes(graph: m.Graph) -> list[m.Node]:
    """Every node of a graph and of the subgraphs its arguments carry."""
    out = []
    for node in graph.nodes:
        out.append(node)
        for named in node.inputs:
            if named.arg.as_graph is not None:
                out += _walk_nodes(named.arg.as_graph.graph)
    return out


def _members(nodes: list[m.Node]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for node in nodes:
        for named in node.inputs:
            counts[named.arg.type] += 1
        for out in node.outputs:
            counts[out.type] += 1
    return counts


def _nodes_summary(nodes: list[m.Node]) -> dict[str, Any]:
    ops = Counter(op_name(n.target) for n in nodes)
    return {
        "nodes": len(nodes),
        "ops": dict(ops.most_common()),
        "argument_members": dict(sorted(_members(nodes).items())),
    }


def summarize(obj: BaseModel) -> dict[str, Any]:
    """The fields of an `InspectOutput` record (all but `codec`) summarizing any root model opwire reads."""
    if isinstance(obj, m.OpwireArchive):
        out = summarize(obj.program)
        out["kind"] = "OpwireArchive"
        out["weights"] = len(obj.weights)
        out["stored_constants"] = len(obj.constants)
        out["payload_bytes"] = sum(len(t.data) for t in [*obj.weights.values(), *obj.constants.values()])
        return out
    if isinstance(obj, m.ExportedProgram):
        graph = obj.graph_module.graph
        v = obj.schema_version
        return {
            "kind": "ExportedProgram",
            "schema_version": f"{v.major}.{v.minor}",
            "torch_version": obj.torch_version,
            **program_signature(obj).inspect_fields(),
            **_nodes_summary(_walk_nodes(graph)),
        }
    if isinstance(obj, m.ExternKernelNodes):
        return {
            "kind": "ExternKernelNodes",
            **_nodes_summary([n.node for n in obj.nodes]),
            "reads": [m.ExternRead(**e) for e in extern_inputs(obj)],
        }
    if isinstance(obj, m.CallTrace):
        h = obj.header
        return {
            "kind": "CallTrace",
            "torch_version": h.torch_version,
            "opwire_version": h.opwire_version,
            "outputs_mode": h.outputs_mode,
            "records": len(obj.records),
            "tensors": len(obj.tensors),
            "ops": dict(Counter(op_name(r.target) for r in obj.records).most_common()),
        }
    if isinstance(obj, m.OpLibrarySnapshot):
        return {"kind": "OpLibrarySnapshot", "namespaces": obj.namespaces, "overloads": len(obj.ops)}
    if isinstance(obj, m.Values):
        return {"kind": "Values", "values": {k: _value_text(v) for k, v in obj.values.items()}}
    return {"kind": type(obj).__name__}


def _render(record: m.InspectOutput) -> str:
    """The summary as text: one line per field that applies, in the record's order."""
    lines = []
    for key, value in record:
        if value is None:
            continue
        if key in ("inputs", "outputs"):
            lines.append(f"{key}:" if value else f"{key}: none")
            lines += [f"  {_port_text(p)}" for p in value]
        elif key == "ranges":
            if value:
                lines.append("ranges:")
                lines += [f"  {k:<20} {_range_text(r)}" for k, r in value.items()]
        elif key == "reads":
            head = "reads (names no node produces: give them in `opwire exec --inputs`):"
            lines.append(head if value else "reads: none")
            lines += [f"  [{e.index}] {e.name} {e.op}: {', '.join(e.reads)}" for e in value]
        elif isinstance(value, dict):
            lines.append(f"{key}:")
            lines += [f"  {k:<48} {v}" for k, v in value.items()]
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _port_text(port: m.ProgramPort) -> str:
    if port.kind == "Tensor":
        shape = ", ".join(port.symbolic_shape or [str(d) for d in port.shape or ()])
        return f"{port.name:<20} {port.dtype}[{shape}] on {port.device}"
    value = f" = {port.value.value!r}" if port.value is not None and port.value.type != "as_none" else ""
    value = " = None" if port.value is not None and port.value.type == "as_none" else value
    constant = " (constant: the program was exported with this value)" if port.constant else ""
    return f"{port.name:<20} {port.kind}{value}{constant}"


def _range_text(r: m.RangeConstraint) -> str:
    lo = "-inf" if r.min_val is None else r.min_val
    hi = "inf" if r.max_val is None else r.max_val
    return f"{lo}..{hi}"
