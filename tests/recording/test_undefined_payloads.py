"""A streamed trace writes no payload for a value whose content is undefined: a marker, its layout, no bytes.

DDP allocates its gradient buckets with `empty` and takes a view per parameter before the backward fills them;
the trace used to hold every byte of that uninitialised memory (a bucket's worth per view version). The script
below makes the same moves on one process: a bucket from `empty`, views of it, some written by recorded calls,
one region written through a raw pointer (as the reducer does), one never written.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest
import torch

import opwire
from opwire.cli import main
from opwire.errors import DecodeError
from opwire.recording.definedness import UNDEFINED
from opwire.recording.stream_reader import TraceReader
from opwire.recording.stream_writer import TraceWriter
from opwire.schema import models as m

BUCKET = 1 << 16  # float32 elements: 256 KiB of `empty` memory


def _ddp_like(path: Path | None) -> opwire.Trace:
    torch.manual_seed(0)
    weights = [torch.randn(64, 64), torch.randn(64)]
    with opwire.record(path=path) as trace:
        bucket = torch.empty(BUCKET)  # views taken while it is blank, as DDP's constructor does
        views = [bucket.as_strided((64, 64), (64, 1), 0), bucket.as_strided((64,), (1,), 4096)]
        raw, spare = bucket[8192:8200], bucket[16384:]
        for view, w in zip(views, weights, strict=True):
            view.copy_(w * 2)  # the gradient copied into its bucket view
        values = (ctypes.c_float * 8).from_address(raw.data_ptr())
        for k in range(8):
            values[k] = float(k)  # the reducer's write through a raw pointer: no dispatch mode sees it
        (raw + 1).sum()
        for view in views:
            view.div_(2)  # averaged in place
        spare.clone()  # read, never written: its copy is undefined too
    return trace


def _undefined_listed(trace: opwire.Trace) -> set[str]:
    return {n for r in trace.records for n in json.loads(r.metadata.get(UNDEFINED, "[]"))}


def _results(trace: opwire.Trace) -> set[str]:
    from opwire.recording.mutations import written_arguments
    from opwire.schema.refs import tensor_names

    out = {n for r in trace.records for a in r.outputs for n in tensor_names(a)}
    return out | {n for r in trace.records for ns in written_arguments(r, r.target).values() for n in ns}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("undefined")
    _ddp_like(where / "a.trace")
    _ddp_like(where / "b.trace")
    return where / "a.trace", where / "b.trace"


def test_undefined_values_are_written_as_markers_without_payload(traces: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = traces
    trace = opwire.load_trace(a)
    with TraceReader(a) as reader:
        marked = {n for n in reader.names() if reader.undefined(n)}
        listed = _undefined_listed(trace)
        # the records list every undefined result; the other marked values are inputs read before a write
        assert marked and marked & _results(trace) <= listed
        assert all(reader.nbytes(n) == 0 and reader.meta(n).digest is None for n in marked)  # type: ignore[union-attr]
        end = reader._index.end
        assert end is not None and end.payload_bytes < BUCKET * 4  # no bucket-sized payload in the file
    for n in marked:  # an undefined value loads as zeros in its layout
        t = trace.tensor(n)
        meta = trace.source.meta(n)
        assert meta is not None and list(t.shape) == list(meta.sizes) and not t.any()
    # the same trace with every payload kept (the in-memory form has no marker) is larger by the bucket at least
    memory = _ddp_like(None)
    memory.save(tmp_path / "full.trace", format="stream")
    assert (tmp_path / "full.trace").stat().st_size > a.stat().st_size + BUCKET * 4
    # converting a streamed trace keeps the markers
    trace.save(tmp_path / "copy.trace", format="stream")
    with TraceReader(tmp_path / "copy.trace") as copy:
        assert {n for n in copy.names() if copy.undefined(n)} == marked


@pytest.mark.parametrize("mode", ["isolated", "chained"])
def test_replay_and_diff_are_clean_without_the_payloads(traces: tuple[Path, Path], mode: str) -> None:
    a, b = traces
    report = opwire.replay(opwire.load_trace(a), mode=mode)  # type: ignore[arg-type]
    assert report.ok and not report.mismatches, str(report)
    diff = opwire.diff_traces(opwire.load_trace(a), opwire.load_trace(b))
    assert diff.ok and not diff.differences, str(diff)


def test_inspect_verify_counts_the_undefined_values(
    traces: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = traces
    with TraceReader(a) as reader:
        count = reader.undefined_count()
    assert main(["inspect", str(a), "--verify"]) == 0
    assert f"; {count} undefined values carry no payload" in capsys.readouterr().out


def _hostile(path: Path, entry: m.TraceTensor) -> None:
    header = m.TraceHeader(
        opwire_version=opwire.__version__,
        torch_version=str(torch.__version__),
        op_schemas={},
        outputs_mode="full",
        schema_version=m.SchemaVersion(major=m.SCHEMA_VERSION[0], minor=m.SCHEMA_VERSION[1]),
    )
    writer = TraceWriter(path, header)
    writer._frame("tensor", entry)
    writer.close()


def _meta(numel: int) -> m.TensorValue:
    cpu = m.Device(type="cpu")
    return m.TensorValue(
        dtype=m.ScalarType.FLOAT,
        sizes=[numel],
        strides=[1],
        storage_offset=0,
        device=cpu,
        requires_grad=False,
        data=b"",
    )


def test_a_marker_with_a_payload_is_refused(tmp_path: Path) -> None:
    meta = _meta(4)
    _hostile(tmp_path / "both.trace", m.TraceTensor(name="t1", value=meta, payload="00" * 32, undefined=True))
    with pytest.raises(DecodeError, match=r"tensor 't1' at byte \d+ is marked undefined and also names a payload"):
        TraceReader(tmp_path / "both.trace")


def test_an_undefined_tensor_cannot_make_the_reader_allocate_more_than_the_file_bounds(tmp_path: Path) -> None:
    huge = _meta(1 << 40)
    _hostile(tmp_path / "huge.trace", m.TraceTensor(name="t1", value=huge, undefined=True))
    with TraceReader(tmp_path / "huge.trace") as reader:
        assert reader.undefined("t1")
        with pytest.raises(DecodeError, match=r"Expected an undefined tensor of at most \d+ bytes for this file, got"):
            reader.load("t1")
