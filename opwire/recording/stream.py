"""The streaming trace format: frames written as the calls happen, payloads stored once by content.

File layout (docs/wire-format.md, "Streamed traces"): opwire's header (codec compact, root type
`TraceFrame`), then frames until the end of the file. Each frame is

    kind u8 | body length u64 BE | check u32 BE | body

`P` frames hold a payload: its SHA-256 (32 bytes) and the bytes (check: CRC-32 of the digest; the digest
checks the bytes). Every other kind holds one `TraceFrame` in compact Thrift (check: CRC-32 of the body):
`H` header, `S` op schema, `T` tensor, `R` record, `F` freed objects, `E` end, `g` a process group (records
1.2; lowercase so older readers skip it). A frame that a record
names comes before the record. A file without its `E` frame was cut (a crash, a full disk): the reader
reads every whole frame before the cut and says where the trace ends. Unknown kinds in lowercase are
skipped (room for optional additions); any other unknown kind is refused.

`stream_frames` holds the framing, `stream_writer` the writer, `stream_reader` the reader; this module is
their face.
"""

from __future__ import annotations

from opwire.recording.stream_frames import MAX_FRAME, ROOT, is_stream, read_stream_header
from opwire.recording.stream_reader import TraceReader
from opwire.recording.stream_writer import BUFFER_BYTES, SNAPSHOT_BYTES, TraceWriter

__all__ = [
    "BUFFER_BYTES",
    "MAX_FRAME",
    "ROOT",
    "SNAPSHOT_BYTES",
    "TraceReader",
    "TraceWriter",
    "is_stream",
    "read_stream_header",
]
