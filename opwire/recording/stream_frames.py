"""Framing of streamed traces: the frame kinds, the frame header, and sniffing a file's first bytes.

File layout (docs/wire-format.md, "Streamed traces"): opwire's header (codec compact, root type
`TraceFrame`), then frames until the end of the file. Each frame is

    kind u8 | body length u64 BE | check u32 BE | body

`P` frames hold a payload: its SHA-256 (32 bytes) and the bytes (check: CRC-32 of the digest; the digest
checks the bytes). Every other kind holds one `TraceFrame` in compact Thrift (check: CRC-32 of the body):
`H` header, `S` op schema, `T` tensor, `R` record, `F` freed objects, `E` end, `g` a process group (records
1.2; lowercase so older readers skip it). A frame that a record names comes before the record. A file
without its `E` frame was cut (a crash, a full disk): the reader reads every whole frame before the cut and
says where the trace ends. Unknown kinds in lowercase are skipped (room for optional additions); any other
unknown kind is refused. `stream_writer` writes the frames, `stream_reader` indexes and reads them.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import framing, thrift

__all__ = [
    "DIGEST",
    "FRAME",
    "KIND_MEMBER",
    "MAX_FRAME",
    "MEMBER_KIND",
    "PAYLOAD",
    "ROOT",
    "is_stream",
    "read_stream_header",
]

ROOT = "TraceFrame"
FRAME = struct.Struct(">cQI")
MEMBER_KIND = {
    "header": b"H",
    "op_schema": b"S",
    "tensor": b"T",
    "record": b"R",
    "freed": b"F",
    "trailer": b"E",
    "group": b"g",
}
KIND_MEMBER = {v: k for k, v in MEMBER_KIND.items()}
PAYLOAD = b"P"
DIGEST = 32
MAX_FRAME = 256 << 20
"""Largest metadata frame a reader accepts (a record or a tensor entry; payloads are bounded by the file)."""


def is_stream(head: bytes) -> bool:
    """Whether bytes starting a file are a streamed trace (opwire's header naming root TraceFrame)."""
    sniffed = framing.sniff(head)
    return sniffed is not None and sniffed[1] == ROOT


def read_stream_header(path: str | Path) -> m.TraceHeader | None:
    """The header frame of a streamed trace, read alone (None when `path` is not a streamed trace).

    Op schemas and process groups come in later frames: open a `TraceReader` for those.
    """
    with open(path, "rb") as f:
        head = f.read(256)
        if not is_stream(head):
            return None
        h = framing.read_header(head, str(path))
        f.seek(h.offset)
        raw = f.read(FRAME.size)
        if len(raw) < FRAME.size:
            raise DecodeError(f"{path}: the streamed trace has no header frame; the file is cut or corrupt")
        kind, size, check = FRAME.unpack(raw)
        body = f.read(min(size, MAX_FRAME)) if kind == b"H" else b""
    if kind != b"H" or len(body) != size or zlib.crc32(body) != check:
        raise DecodeError(f"{path}: the first frame is not a whole header frame; the file is cut or corrupt")
    frame = thrift.decode(body, m.TraceFrame, "compact", framed=False, source=f"{path}@{h.offset}")
    if frame.header is None:
        raise DecodeError(f"{path}: the first frame holds a {frame.type}, not the header")
    return frame.header
