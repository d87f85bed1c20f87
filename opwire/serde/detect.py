"""Recognize what a file holds (JSON program, extern-node file, framed Thrift, .pt2 zip) and decode it."""

from __future__ import annotations

import json as _json
import zipfile
from pathlib import Path

from pydantic import BaseModel

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde.framing import MAX_DEPTH, has_header, read_header

__all__ = ["JSON_ROOTS", "decode_bytes", "detect_json_root", "load_any", "looks_like_json"]

# top-level JSON keys that identify each root type opwire reads as JSON
JSON_ROOTS: tuple[tuple[str, frozenset[str]], ...] = (
    ("ExportedProgram", frozenset({"graph_module", "schema_version"})),
    ("ExternKernelNodes", frozenset({"nodes"})),
    ("OpwireArchive", frozenset({"program", "weights"})),
    ("CallTrace", frozenset({"header", "records"})),
    ("OpLibrarySnapshot", frozenset({"namespaces", "ops"})),
    ("Values", frozenset({"values"})),
)


def detect_json_root(data: bytes, source: str = "") -> type[BaseModel]:
    """The model class a JSON document holds, judged by its top-level keys."""
    try:
        top = _json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"{source or 'input'}: not valid JSON ({exc})") from None
    if not isinstance(top, dict):
        raise DecodeError(f"{source or 'input'}: expected a JSON object at the top level, got {type(top).__name__}")
    for name, keys in JSON_ROOTS:
        if keys <= top.keys():
            return m.MODELS[name]
    known = ", ".join(name for name, _ in JSON_ROOTS)
    raise DecodeError(
        f"{source or 'input'}: JSON object with keys {sorted(top)[:6]} is none of the types opwire reads ({known})"
    )


def looks_like_json(data: bytes | bytearray | memoryview | str) -> bool:
    """Whether `data` starts (after whitespace) like a JSON object or array."""
    if isinstance(data, str):
        return data.lstrip()[:1] in ("{", "[")
    return bytes(data).lstrip()[:1] in (b"{", b"[")


def decode_bytes(
    data: bytes | bytearray | memoryview | str, *, source: str = "", max_depth: int = MAX_DEPTH
) -> BaseModel:
    """Decode opwire's framed Thrift (codec and root type from the header) or JSON (root type from its keys)."""
    where = source or "input"
    if not isinstance(data, str) and has_header(data):
        h = read_header(data, source)
        cls = m.MODELS.get(h.root)
        if cls is None:
            raise DecodeError(f"{where}: the header names root type {h.root!r}, which this opwire does not know")
        from opwire.serde import thrift

        return thrift.decode(data, cls, h.codec, framed=True, max_depth=max_depth, source=source)  # type: ignore[arg-type]
    if not looks_like_json(data):
        raise DecodeError(
            f"{where}: neither JSON nor Thrift with opwire's header; raw Thrift needs its codec and type: "
            "opwire.loads(data, cls, format=...)"
        )
    from opwire.serde import json as _json_codec

    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    return _json_codec.decode(raw, detect_json_root(raw, source), source=source, max_depth=max_depth)


def load_any(path: str | Path, *, allow_pickle: bool = False, lazy_archive: bool = False) -> BaseModel:
    """Decode a file whatever it holds: .pt2 archive, framed Thrift, or JSON.

    With `lazy_archive=True` a .pt2 export archive yields only its program (no weight is read), and an
    AOTInductor package yields its extern-kernel nodes.
    """
    p = Path(path)
    if zipfile.is_zipfile(p):
        return _load_zip(p, allow_pickle, lazy_archive)
    data = p.read_bytes()
    if not has_header(data) and not looks_like_json(data):
        raise DecodeError(
            f"{p}: neither a .pt2 zip archive, JSON, nor a file opwire wrote in Thrift form (no opwire header); "
            "raw Thrift needs its codec and type: opwire.loads(data, cls, format=...)"
        )
    return decode_bytes(data, source=str(p))


def _load_zip(p: Path, allow_pickle: bool, lazy: bool) -> BaseModel:
    """A .pt2 export archive (whole or program only), or the extern nodes of an AOTInductor package."""
    with zipfile.ZipFile(p) as z:
        names = z.namelist()
    wrappers = [n for n in names if "/data/aotinductor/" in n and n.endswith(".wrapper.json")]
    has_program = any("/models/" in n and n.endswith(".json") for n in names) or any(
        n.endswith("serialized_exported_program.json") for n in names
    )
    if wrappers and not has_program:
        if len(wrappers) != 1:
            raise DecodeError(f"{p}: AOTInductor package with {len(wrappers)} extern-node files; expected one")
        from opwire.serde import json as _json_codec

        with zipfile.ZipFile(p) as z:
            data = z.read(wrappers[0])
        return _json_codec.decode(data, m.ExternKernelNodes, source=f"{p}:{wrappers[0]}")
    from opwire.serde import pt2

    if lazy:
        with pt2.open(p, allow_pickle=allow_pickle) as archive:
            return archive.program
    return pt2.read(p, allow_pickle=allow_pickle)
