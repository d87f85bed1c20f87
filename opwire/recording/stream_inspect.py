"""`stream_summary(trace)`: what `opwire inspect` says of a streamed trace, read from its frame index.

Records are decoded, payloads are not read (unless `verify`); the reader alone loads, never torch. Every other
kind `opwire.open` returns is summarized by `opwire.program.summary`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from opwire.program import StreamedTrace
from opwire.recording.stream_reader import TraceReader
from opwire.schema import models as m

__all__ = ["stream_summary"]

CODEC = "opwire stream (frames written as calls happen)"


def stream_summary(trace: StreamedTrace, *, verify: bool = False) -> m.InspectOutput:
    """The `InspectOutput` record of a streamed trace; `verify` checks every payload's SHA-256 and every record's
    CRC-32 (reading the whole file once, keeping nothing) and says so in `verified`."""
    path = trace.path
    with TraceReader(path) as reader:
        h = reader.header
        fields: dict[str, Any] = {
            "torch_version": h.torch_version,
            "opwire_version": h.opwire_version,
            "outputs_mode": h.outputs_mode,
            "records": len(reader),
            "tensors": len(reader.names()),
            "bytes": path.stat().st_size,
        }
        if reader.cut is not None:
            fields["cut"] = reader.cut
        fields["ops"] = dict(Counter(r.target for r in reader.records()).most_common())
    if verify:
        with TraceReader(path) as reader:
            payloads, records = reader.verify()
            undefined = reader.undefined_count()
        checked = f"every payload's SHA-256 ({payloads}) and every record's CRC-32 ({records}) match"
        fields["verified"] = checked + (f"; {undefined} undefined values carry no payload" if undefined else "")
    return m.InspectOutput(kind="streamed CallTrace", codec=CODEC).replace(**fields)
