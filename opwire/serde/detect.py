"""Recognize what a file holds (JSON program, extern-node file, framed Thrift, .pt2 zip) and decode it."""

from __future__ import annotations

import json as _json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import budgets
from opwire.serde.archive import ZipArchive, is_zip
from opwire.serde.files import read_head, read_input

__all__ = ["JSON_ROOTS", "aoti_wrapper", "decode_bytes", "detect_json_root", "load_any", "looks_like_json"]

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
    except RecursionError:
        raise DecodeError(
            f"{source or 'input'}: JSON nesting deeper than Python's parser reads; opwire's JSON nesting stops at 200"
        ) from None
    if not isinstance(top, dict):
        raise DecodeError(f"{source or 'input'}: expected a JSON object at the top level, got {type(top).__name__}")
    for name, keys in JSON_ROOTS:
        if keys <= top.keys():
            return m.MODELS[name]
    known = ", ".join(name for name, _ in JSON_ROOTS)
    raise DecodeError(
        f"{source or 'input'}: JSON object with keys {sorted(top)[:6]} is none of the types opwire reads ({known})"
    )


def load_any(
    path: str | Path,
    *,
    allow_pickle: bool = False,
    lazy_archive: bool = False,
    max_elements: int = budgets.MAX_ELEMENTS,
    max_bytes: int | None = None,
) -> BaseModel:
    """Decode a file whatever it holds: .pt2 archive, .opw archive, framed Thrift, or JSON.

    With `lazy_archive=True` a .pt2 export archive yields only its program (no weight is read), and an
    AOTInductor package yields its extern-kernel nodes. The format is judged from the first bytes, so a
    file that is none of them (`/dev/zero`) is refused before it is read.
    """
    p = Path(path)
    if is_zip(p):
        return _load_zip(p, allow_pickle, lazy_archive, max_elements, max_bytes)
    from opwire.serde import opw

    if opw.is_opw(p):
        with opw.open(p, max_elements=max_elements) as archive:
            return archive.program if lazy_archive else archive.materialize()
    head = read_head(p)
    from opwire.serde import framing

    if not looks_like_json(head) and not framing.has_header(head):
        raise DecodeError(
            f"{p}: neither a .pt2 zip archive, JSON, nor a file opwire wrote in Thrift form (no opwire header); "
            "raw Thrift needs its codec and type: opwire.loads(data, cls, format=...)"
        )
    data = read_input(p, max_bytes=budgets.MAX_INPUT_BYTES if max_bytes is None else max_bytes)
    return decode_bytes(data, source=str(p), max_elements=max_elements)


def aoti_wrapper(archive: ZipArchive) -> str | None:
    """The one extern-node entry (`data/aotinductor/**/*.wrapper.json`) of an AOTInductor package, None if none.

    A package with several is a DecodeError naming them."""
    names = [n for n in archive.names() if "/data/aotinductor/" in n and n.endswith(".wrapper.json")]
    if len(names) > 1:
        raise DecodeError(
            f"{archive.src}: AOTInductor package with {len(names)} extern-node files ({', '.join(names)}); expected one"
        )
    return names[0] if names else None


def _load_zip(p: Path, allow_pickle: bool, lazy: bool, max_elements: int, max_bytes: int | None) -> BaseModel:
    """A .pt2 export archive (whole or program only), or the extern nodes of an AOTInductor package."""
    limits: budgets.ArchiveLimits = {"max_elements": max_elements}
    if max_bytes is not None:
        limits["max_bytes"] = max_bytes
    with ZipArchive(p, max_bytes=limits.get("max_bytes", budgets.MAX_ARCHIVE_BYTES)) as z:
        names = z.names()
        has_program = any("/models/" in n and n.endswith(".json") for n in names) or any(
            n.endswith("serialized_exported_program.json") for n in names
        )
        wrapper = None if has_program else aoti_wrapper(z)
        if wrapper is not None:
            from opwire.serde import json as _json_codec

            return _json_codec.decode(
                z.read(wrapper), m.ExternKernelNodes, source=f"{p}:{wrapper}", max_elements=max_elements
            )
    from opwire.serde import pt2

    with pt2.open(p, allow_pickle=allow_pickle, **limits) as archive:
        return archive.program if lazy else archive.materialize()


def looks_like_json(data: bytes | bytearray | memoryview | str) -> bool:
    """Whether `data` starts (after whitespace) like a JSON object or array."""
    if isinstance(data, str):
        return data.lstrip()[:1] in ("{", "[")
    return bytes(data[:4096]).lstrip()[:1] in (b"{", b"[")


def decode_bytes(
    data: bytes | bytearray | memoryview | str,
    *,
    source: str = "",
    max_depth: int | None = None,
    max_elements: int = budgets.MAX_ELEMENTS,
) -> BaseModel:
    """Decode opwire's framed Thrift (codec and root type from the header) or JSON (root type from its keys)."""
    from opwire.serde import framing

    where = source or "input"
    depth = framing.MAX_DEPTH if max_depth is None else max_depth
    if not isinstance(data, str) and framing.has_header(data):
        h = framing.read_header(data, source)
        cls = m.MODELS.get(h.root)
        if cls is None:
            raise DecodeError(f"{where}: the header names root type {h.root!r}, which this opwire does not know")
        from opwire.serde import thrift

        codec: Any = h.codec
        return thrift.decode(
            bytes(data), cls, codec, framed=True, max_depth=depth, source=source, max_elements=max_elements
        )
    if not looks_like_json(data):
        raise DecodeError(
            f"{where}: neither JSON nor Thrift with opwire's header; raw Thrift needs its codec and type: "
            "opwire.loads(data, cls, format=...)"
        )
    from opwire.serde import json as _json_codec

    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    _json_codec.check_elements(raw, max_elements, where)  # before detection parses it
    return _json_codec.decode(
        raw, detect_json_root(raw, source), source=source, max_depth=depth, max_elements=max_elements
    )
