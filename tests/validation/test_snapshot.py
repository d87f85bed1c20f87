"""snapshot_ops: stable, sorted, diffable snapshots of live namespaces; snapshot files."""

from __future__ import annotations

from pathlib import Path

import oplib.bc_v2_live
import oplib.validate_lib  # noqa: F401  (registers opwire_vt)
import pytest
import torch
from oplib.bc_versions import V2

import opwire
from opwire.errors import OpValidationError
from opwire.schema import models as m
from opwire.validation.snapshot import load_snapshot, snapshot_from_schemas, snapshot_ops


def test_snapshot_is_sorted_and_complete() -> None:
    snap = snapshot_ops(["opwire_vt"])
    keys = [(o.name, o.overload) for o in snap.ops]
    assert keys == sorted(keys)
    assert ("opwire_vt::over", "two") in keys and ("opwire_vt::over", "") in keys
    assert not any(o.name == "opwire_vt::ghost" for o in snap.ops)  # kernels without a schema
    assert snap.namespaces == ["opwire_vt"] and snap.torch_version == torch.__version__
    good = next(o for o in snap.ops if o.name == "opwire_vt::good")
    assert [(a.name, a.type, a.default_value) for a in good.arguments] == [("x", "Tensor", None), ("n", "SymInt", "2")]
    inplace = next(o for o in snap.ops if o.name == "opwire_vt::inplace_")
    assert inplace.arguments[0].alias_info == "a!" and inplace.returns[0].alias_info == "a!"


def test_snapshot_bytes_are_stable() -> None:
    first = opwire.dumps(snapshot_ops(["opwire_vt", "opwire_bc"]))
    second = opwire.dumps(snapshot_ops(["opwire_bc", "opwire_vt", "opwire_bc"]))
    assert first == second
    assert b"0x" not in first  # no addresses


def test_live_snapshot_matches_schema_strings() -> None:
    assert snapshot_ops("opwire_bc") == snapshot_from_schemas(V2)


def test_tags_are_recorded() -> None:
    lib = torch.library.Library("opwire_snap_tags", "FRAGMENT")
    lib.define("t(Tensor x) -> Tensor", tags=[torch.Tag.pt2_compliant_tag, torch.Tag.core])
    (op,) = snapshot_ops("opwire_snap_tags").ops
    assert op.tags == ["core", "pt2_compliant_tag"]


def test_file_round_trip(tmp_path: Path) -> None:
    snap = snapshot_ops("opwire_bc")
    path = tmp_path / "snap.json"
    path.write_bytes(opwire.dumps(snap))
    assert load_snapshot(path) == snap
    assert opwire.loads(path.read_bytes(), m.OpLibrarySnapshot) == snap


def test_load_snapshot_refuses_other_files(tmp_path: Path) -> None:
    path = tmp_path / "values.json"
    path.write_bytes(opwire.dumps(m.Values(values={})))
    with pytest.raises(OpValidationError) as info:
        load_snapshot(path)
    assert str(info.value) == (
        f"{path}: expected an op library snapshot (written by `opwire ops snapshot`), got a Values; "
        "pass the snapshot file"
    )


def test_unknown_namespace() -> None:
    with pytest.raises(OpValidationError) as info:
        snapshot_ops(["opwire_nothing_here"])
    assert str(info.value) == (
        "no operator with a schema is registered in namespace(s) opwire_nothing_here: expected the library to be "
        "loaded; load it first (--import MODULE or --load-library PATH.so)"
    )


@pytest.mark.parametrize("bad", [[], ["a::b"], [""], ["ns.op"]])
def test_bad_namespace_names(bad: list[str]) -> None:
    with pytest.raises(OpValidationError, match="expected one or more namespace names such as 'mylib'"):
        snapshot_ops(bad)
