"""`summary(opened)`: what `opwire inspect` says of anything `opwire.open` returns, as one `InspectOutput` record.

One dispatch on the opened kind: an opened program or archive (of a .pt2 only the program's JSON is read, never a
weight), an extern-node file, a whole trace, a snapshot, a Values file, a findings file, or any other root model.
A streamed trace is the recording layer's to read: `opwire.recording.stream_summary` says it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from opwire.errors import DecodeError
from opwire.program.files import read_head
from opwire.program.kinds import FindingsFile, StreamedTrace
from opwire.program.opened import OpenedProgram
from opwire.program.signature import dtype_name, extern_inputs, op_name, program_signature
from opwire.schema import models as m
from opwire.serde import framing
from opwire.serde.archive import ZipArchive, is_zip_head
from opwire.serde.pt2 import Pt2Archive

if TYPE_CHECKING:  # containers imports the opened program too; the alias is needed for annotations only
    from opwire.program.containers import Opened

__all__ = ["codec_of", "summary"]


def summary(opened: Opened, source: str | Path | None = None, *, verify: bool = False) -> m.InspectOutput:
    """The `InspectOutput` record of what `opwire.open(source)` returned (`source`: the file, which tells the
    codec; None for a model in memory). `verify` checks every entry's or blob's CRC-32 of a .pt2, an
    AOTInductor package or a .opw archive (streamed, nothing kept), and says so in `verified`."""
    if isinstance(opened, StreamedTrace):
        raise DecodeError(
            f"{opened.path}: a streamed trace is read by the recording layer: use opwire.recording.stream_summary"
        )
    path = None if source is None else Path(source)
    if path is None and isinstance(opened, OpenedProgram) and opened.source and Path(opened.source).is_file():
        path = Path(opened.source)
    if isinstance(opened, OpenedProgram):
        fields = _program(opened)
    elif isinstance(opened, FindingsFile):
        entries = opened.document.get("findings", opened.document.get("reports"))
        fields = {"kind": "findings", "entries": len(entries) if isinstance(entries, list) else 0}
    else:
        fields = model_fields(opened)
        if path is not None and _is_zip(path):
            fields["kind"] = f"AOTInductor package ({fields['kind']})"
    if verify:
        fields["verified"] = _verify(opened, path)
    # a key that is no field of the record is refused (ValueError), never dropped in silence
    return m.InspectOutput(kind=fields.pop("kind"), codec=codec_of(path)).replace(**fields)


def codec_of(path: Path | None) -> str:
    """How a file is encoded: JSON, a zip, a .opw archive, or the Thrift codec its opwire header names."""
    if path is None:
        return "model (in memory)"
    head = read_head(path)
    if head.startswith(framing.OPW_MAGIC):
        return "opw archive (aligned blobs, mapped)"
    if is_zip_head(head):
        return "zip archive"
    found = framing.sniff(head)
    return "json" if found is None else f"thrift {found[0]} (opwire header, schema {found[2][0]}.{found[2][1]})"


def _is_zip(path: Path) -> bool:
    return path.is_file() and is_zip_head(read_head(path))


def _program(opened: OpenedProgram) -> dict[str, Any]:
    """A program or archive; of a .pt2 only the program's JSON is read (never a weight)."""
    pt2 = opened.pt2
    if pt2 is None:
        model = opened.model
        assert model is not None
        return model_fields(model)

    fields = model_fields(opened.program)
    fields.pop("kind")
    head: dict[str, Any] = {"kind": "pt2 archive", "model": pt2.model} if isinstance(pt2, Pt2Archive) else {}
    if not head:
        head = {"kind": "opw archive", "blobs": len(pt2.table.blobs)} if hasattr(pt2, "table") else {}
    return {
        **(head or {"kind": f"archive ({type(pt2).__name__})"}),
        **fields,
        "weights": len(opened.names("weights")),
        "stored_constants": len(opened.names("constants")),
    }


def _verify(opened: Any, path: Path | None) -> str:
    """Check the CRC-32 of every entry (.pt2, AOTInductor package) or blob (.opw), streamed; what was checked."""
    if isinstance(opened, OpenedProgram) and opened.pt2 is not None:
        opened.pt2.verify()
        return "every blob's CRC-32 matches" if hasattr(opened.pt2, "table") else "every entry's CRC-32 matches"
    if path is not None and _is_zip(path):
        with ZipArchive(path) as z:
            for name in z.names():
                z.verify(name)
        return "every entry's CRC-32 matches"
    raise DecodeError(
        f"{path or 'the model'}: --verify checks .pt2, AOTInductor and .opw archives and streamed traces; this "
        "file carries no checksums"
    )


def model_fields(obj: BaseModel) -> dict[str, Any]:
    """The fields of an `InspectOutput` record (all but `codec`) summarizing any root model opwire reads."""
    if isinstance(obj, m.OpwireArchive):
        out = model_fields(obj.program)
        out["kind"] = "OpwireArchive"
        out["weights"] = len(obj.weights)
        out["stored_constants"] = len(obj.constants)
        out["payload_bytes"] = sum(len(t.data) for t in [*obj.weights.values(), *obj.constants.values()])
        return out
    if isinstance(obj, m.ExportedProgram):
        v = obj.schema_version
        return {
            "kind": "ExportedProgram",
            "schema_version": f"{v.major}.{v.minor}",
            "torch_version": obj.torch_version,
            **program_signature(obj).inspect_fields(),
            **_nodes_fields(_walk_nodes(obj.graph_module.graph)),
        }
    if isinstance(obj, m.ExternKernelNodes):
        return {
            "kind": "ExternKernelNodes",
            **_nodes_fields([n.node for n in obj.nodes]),
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


def _walk_nodes(graph: m.Graph) -> list[m.Node]:
    """Every node of a graph and of the subgraphs its arguments carry."""
    out = []
    for node in graph.nodes:
        out.append(node)
        for named in node.inputs:
            if named.arg.as_graph is not None:
                out += _walk_nodes(named.arg.as_graph.graph)
    return out


def _nodes_fields(nodes: list[m.Node]) -> dict[str, Any]:
    """Node count, ops by count (ties in order of first use) and `Argument` members by name, counted in one pass
    per kind: a program has few distinct targets, so each is spelled once, not once per node."""
    members = Counter([named.arg.type for node in nodes for named in node.inputs])
    members.update([out.type for node in nodes for out in node.outputs])
    ops: Counter[str] = Counter()
    for target, count in Counter([n.target for n in nodes]).items():  # targets in order of first use
        ops[op_name(target)] += count
    return {
        "nodes": len(nodes),
        "ops": dict(ops.most_common()),
        "argument_members": dict(sorted(members.items())),
    }
