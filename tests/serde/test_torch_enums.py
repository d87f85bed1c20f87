"""The one table between the export schema's enums and torch objects, derived from torch and checked against it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._export.serde import serialize

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import torch_enums, torch_serializer_gen


def test_float_is_seven_and_means_float32() -> None:
    assert torch_enums.to_torch("ScalarType")[7] is torch.float32
    assert torch_enums.to_torch("ScalarType")[m.ScalarType.DOUBLE] is torch.float64
    assert torch_enums.from_torch("ScalarType")[torch.bfloat16] is m.ScalarType.BFLOAT16


def test_every_torch_mapping_is_covered_both_ways() -> None:
    for enum, suffix in torch_enums.ENUMS.items():
        torch_map = getattr(serialize, f"_TORCH_TO_SERIALIZE_{suffix}")
        ours = torch_enums.from_torch(enum)
        assert set(ours) == set(torch_map), enum
        for obj, member in ours.items():
            assert int(member) == int(torch_map[obj]), (enum, obj)
            assert torch_enums.to_torch(enum)[int(member)] == obj


def test_unknown_has_no_torch_object() -> None:
    for enum in torch_enums.ENUMS:
        assert 0 not in torch_enums.to_torch(enum)


def test_committed_table_matches_installed_torch() -> None:
    fresh = torch_serializer_gen.render(torch_serializer_gen.derive(), torch.__version__.split("+")[0])
    diff = torch_serializer_gen.drift(torch_serializer_gen.TABLE_PATH.read_text(encoding="utf-8"), fresh)
    assert not diff, (
        f"torch's serialized enums changed; regenerate with python -m opwire.serde.torch_serializer_gen\n{diff}"
    )


def test_check_prints_a_readable_diff_on_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "torch_serializer_tables.py"
    fake.write_text(
        torch_serializer_gen.TABLE_PATH.read_text(encoding="utf-8").replace('"FLOAT": "float32"', '"FLOAT": "float64"')
    )
    monkeypatch.setattr(torch_serializer_gen, "TABLE_PATH", fake)
    assert torch_serializer_gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert '+        "FLOAT": "float32",' in err
    assert "regenerate with: python -m opwire.serde.torch_serializer_gen" in err


def test_reading_a_tensor_does_not_import_torchs_serializer() -> None:
    """The table is committed data: reading tensors must not pay torch._export's import (torch._dynamo, sympy)."""
    code = "import sys, opwire.serde.tensors, opwire.serde.python_carriers; print('torch._export.serde.serialize' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_torch_free_dtypes_name_and_size_what_torch_does() -> None:
    """What inspect, convert and view read instead of torch (tensor_layout.DTYPES) agrees with torch's dtypes."""
    from opwire.serde import tensor_layout, tensors

    assert set(tensor_layout.DTYPES) == {int(st) for st in tensors.TORCH_DTYPES}
    for st, dtype in tensors.TORCH_DTYPES.items():
        ours = tensor_layout.DTYPES[int(st)]
        assert (str(ours), ours.itemsize) == (str(dtype), dtype.itemsize), st
        assert tensors.element_size(st) == dtype.itemsize
    with pytest.raises(DecodeError, match=r"Expected a ScalarType torch can hold .*, got UNKNOWN - at `w\.dtype`"):
        tensor_layout.dtype_of(0, "w.dtype")
