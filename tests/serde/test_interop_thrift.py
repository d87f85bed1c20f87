"""Interop with Apache Thrift itself: Python code generated from opwire's IDL by the official compiler reads
opwire's bytes and writes them back identically, and opwire reads what the generated code writes, for binary
and compact, across the corpus (with Apache Thrift's pure-Python protocols, not its C codec)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support.typed import assert_same_model
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.transport.TTransport import TMemoryBuffer

import opwire
from opwire.schema import models as m
from opwire.schema.idl import IDL_DIR, IDL_FILES
from opwire.serde import thrift

PROTOCOLS = {"binary": TBinaryProtocol.TBinaryProtocol, "compact": TCompactProtocol.TCompactProtocol}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Generated classes by IDL name (`thrift -r --gen py` on a copy of the IDL, py namespaces renamed)."""
    return _generate(tmp_path_factory, "interop")


@pytest.fixture(scope="module")
def generated_1_6(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same from the IDL without `TensorValue.padding`: a reader that does not know the field (records 1.6)."""
    return _generate(tmp_path_factory, "old", drop=r"\n  /\*\*[^\n]*\*/\n  65: optional binary padding;")


def _generate(tmp_path_factory: pytest.TempPathFactory, prefix: str, drop: str = "") -> dict[str, Any]:
    compiler = shutil.which("thrift")
    if compiler is None:
        if os.environ.get("CI"):
            pytest.fail("the thrift compiler is missing in CI: .ci/run installs Debian's thrift-compiler")
        pytest.skip("SKIPPED INTEROP: no `thrift` compiler on PATH (apt-get install thrift-compiler); CI runs it")
    work = tmp_path_factory.mktemp(f"thrift_{prefix}")
    for name in IDL_FILES:
        text = (IDL_DIR / name).read_text()
        if drop:
            text = re.sub(drop, "", text)
        stem = Path(name).stem
        (work / name).write_text(re.sub(r"(?m)^namespace py .*$", f"namespace py {prefix}_{stem}", text))
    out = work / "gen"
    out.mkdir()
    proc = subprocess.run(
        [compiler, "-r", "--gen", "py", "-out", str(out), str(work / "opwire.thrift")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    sys.path.insert(0, str(out))
    try:
        classes: dict[str, Any] = {}
        for stem in ("export_schema", "opwire"):
            mod = importlib.import_module(f"{prefix}_{stem}.ttypes")
            classes.update({n: getattr(mod, n) for n in m.SCHEMA.structs if hasattr(mod, n)})
    finally:
        sys.path.remove(str(out))
    assert set(classes) == set(m.SCHEMA.structs)
    return classes


def _to_generated(value: Any, classes: dict[str, Any]) -> Any:
    """An opwire model as the generated classes' objects (by field name; enums as ints)."""
    if isinstance(value, BaseModel):
        kwargs = {k: _to_generated(v, classes) for k, v in value.__dict__.items() if v is not None}
        return classes[type(value).__name__](**kwargs)
    if isinstance(value, IntEnum):
        return int(value)
    if isinstance(value, list):
        return [_to_generated(v, classes) for v in value]
    if isinstance(value, dict):
        return {k: _to_generated(v, classes) for k, v in value.items()}
    return value


def _read(data: bytes, cls: Any, codec: str) -> Any:
    trans = TMemoryBuffer(data)
    obj = cls()
    obj.read(PROTOCOLS[codec](trans))
    assert trans.cstringio_buf.tell() == len(data)
    return obj


def _write(obj: Any, codec: str) -> bytes:
    trans = TMemoryBuffer()
    obj.write(PROTOCOLS[codec](trans))
    return trans.getvalue()


def _check(model: BaseModel, codec: str, classes: dict[str, Any]) -> None:
    cls = classes[type(model).__name__]
    ours = thrift.encode(model, codec, framed=False)  # type: ignore[arg-type]
    theirs_obj = _read(ours, cls, codec)  # opwire -> Apache Thrift
    assert _write(theirs_obj, codec) == ours
    written = _write(_to_generated(model, classes), codec)  # Apache Thrift -> opwire
    back = thrift.decode(written, type(model), codec, framed=False)  # type: ignore[arg-type]
    assert_same_model(back, model)
    assert thrift.encode(back, codec, framed=False) == written  # type: ignore[arg-type]


def test_corpus_both_ways(generated: dict[str, Any], corpus_programs: list, codec: str) -> None:
    for prog in corpus_programs:
        _check(opwire.loads(prog.json_bytes, m.ExportedProgram), codec, generated)


def test_records_both_ways(generated: dict[str, Any], codec: str) -> None:
    tensor = m.TensorValue(
        dtype=m.ScalarType.FLOAT,
        sizes=[2],
        strides=[1],
        storage_offset=0,
        device=m.Device(type="cpu"),
        requires_grad=False,
        data=b"\x00\x00\x80\x3f\x00\x00\x00\x40",
    )
    values = m.Values(
        values={
            "t": m.Value(as_tensor=tensor),
            "l": m.Value(as_list=[m.Value(as_float=float("inf")), m.Value(as_string="é"), m.Value(as_none=True)]),
            "d": m.Value(as_dict={"x": m.Value(as_complex=m.ComplexValue(real=1.0, imag=-2.0))}),
        }
    )
    _check(values, codec, generated)
    _check(m.TensorDigest(sha256="ab", min=-1.5, nan_count=0, inf_count=2), codec, generated)


def test_a_padded_archive_is_read_by_readers_that_know_the_padding_or_not(
    generated: dict[str, Any], generated_1_6: dict[str, Any], codec: str
) -> None:
    """Records 1.7: opwire pads each payload of an archive to a multiple of 64 in the file. Apache Thrift's code
    generated from this IDL reads the padding and writes the same bytes back; code generated without the field
    (what a 1.6 reader knows) skips it and reads the same tensors."""
    torch = pytest.importorskip("torch")
    from opwire.serde import framing, torch_bridge

    assert "padding" not in generated_1_6["TensorValue"].__init__.__code__.co_varnames
    ep = torch.export.export(torch.nn.Linear(3, 5), (torch.ones(2, 3),))
    archive = torch_bridge.archive_from_exported_program(ep)
    archive = archive.model_copy(update={"constants": {"c": archive.weights["bias"]}})
    ours = thrift.encode(archive, codec, framed=False)  # type: ignore[arg-type]
    theirs = _read(ours, generated["OpwireArchive"], codec)
    assert _write(theirs, codec) == ours
    old = _read(ours, generated_1_6["OpwireArchive"], codec)
    for table in ("weights", "constants"):
        for name, tv in getattr(archive, table).items():
            assert getattr(theirs, table)[name].data == tv.data
            assert set(getattr(theirs, table)[name].padding) <= {0}
            assert getattr(old, table)[name].data == tv.data
            assert (ours.index(tv.data) + len(framing.write_header(codec, "OpwireArchive"))) % 64 == 0
