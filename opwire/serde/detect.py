"""Recognize what bytes hold (JSON by its top-level keys, Thrift by opwire's header) and decode them.

Files (paths, zips, streams, budgets) are opened by `opwire.program` (`opwire.open`), which uses these.
"""

from __future__ import annotations

import json as _stdlib_json
from typing import Any

from pydantic import BaseModel

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import budgets, json
from opwire.serde.archive import ZipArchive
from opwire.serde.json import JSON_ROOTS, json_root, looks_like_json

__all__ = ["JSON_ROOTS", "aoti_wrapper", "decode_bytes", "detect_json_root", "looks_like_json"]


def detect_json_root(data: bytes, source: str = "") -> type[BaseModel]:
    """The model class a JSON document holds, judged by its top-level keys."""
    try:
        top = _stdlib_json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"{source or 'input'}: not valid JSON ({exc})") from None
    except RecursionError:
        raise DecodeError(
            f"{source or 'input'}: JSON nesting deeper than Python's parser reads; opwire's JSON nesting stops at 200"
        ) from None
    if not isinstance(top, dict):
        raise DecodeError(f"{source or 'input'}: expected a JSON object at the top level, got {type(top).__name__}")
    root = json_root(top)
    if root is not None:
        return m.MODELS[root]
    known = ", ".join(name for name, _ in JSON_ROOTS)
    raise DecodeError(
        f"{source or 'input'}: JSON object with keys {sorted(top)[:6]} is none of the types opwire reads ({known})"
    )


def aoti_wrapper(archive: ZipArchive) -> str | None:
    """The one extern-node entry (`data/aotinductor/**/*.wrapper.json`) of an AOTInductor package, None if none.

    A package with several is a DecodeError naming them."""
    names = [n for n in archive.names() if "/data/aotinductor/" in n and n.endswith(".wrapper.json")]
    if len(names) > 1:
        raise DecodeError(
            f"{archive.src}: AOTInductor package with {len(names)} extern-node files ({', '.join(names)}); expected one"
        )
    return names[0] if names else None


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
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    json.check_elements(raw, max_elements, where)  # before detection parses it
    return json.decode(raw, detect_json_root(raw, source), source=source, max_depth=depth, max_elements=max_elements)
