"""One small streamed trace, byte for byte (docs/wire-format.md, "Streamed traces"): the frame layout must not drift."""

from __future__ import annotations

from pathlib import Path

import torch
from support.golden_bytes import check_golden

from opwire.recording.stream_reader import TraceReader
from opwire.recording.stream_writer import TraceWriter
from opwire.schema import models as m


def _write(path: Path) -> None:
    header = m.TraceHeader(
        opwire_version="golden",
        torch_version="golden",
        op_schemas={},
        outputs_mode="full",
        schema_version=m.SchemaVersion(major=m.SCHEMA_VERSION[0], minor=m.SCHEMA_VERSION[1]),
    )
    w = TraceWriter(path, header)
    w.op_schema("aten::neg.default", "aten::neg(Tensor self) -> Tensor")
    x = torch.tensor([1.0, -2.0], dtype=torch.float32)
    w.tensor("t0", x, full=True)
    w.tensor("t1", -x, full=True)
    w.record(
        m.CallRecord(
            target="aten::neg.default",
            inputs=[m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="t0")), kind=1)],
            outputs=[m.Argument(as_tensor=m.TensorArgument(name="t1"))],
            metadata={},
        )
    )
    w.freed(["t0", "t1"])
    w.close()


def test_small_streamed_trace_is_golden(tmp_path: Path) -> None:
    path = tmp_path / "golden.trace"
    _write(path)
    want = check_golden("stream/neg.trace.hex", path.read_bytes())
    path.write_bytes(want)
    with TraceReader(path) as r:
        assert r.cut is None and len(r) == 1
        assert r.record(0).target == "aten::neg.default"
        assert r.load("t1").tolist() == [-1.0, 2.0]
