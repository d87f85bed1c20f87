"""Our export_schema.thrift contradicts the one the installed torch ships nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from opwire.schema import idl
from opwire.schema.models import SCHEMA, SCHEMA_VERSION

TORCH_IDL = Path(torch.__file__).parent / "_export" / "serde" / "export_schema.thrift"


@pytest.fixture(scope="module")
def torch_schema() -> idl.Schema:
    return idl.load_files(TORCH_IDL)


def contradictions(theirs: idl.Schema, ours: idl.Schema) -> list[str]:
    """Every way `ours` disagrees with `theirs` on what `theirs` defines."""
    problems = []
    for name, enum in theirs.enums.items():
        mine = ours.enums.get(name)
        if mine is None:
            problems.append(f"enum {name}: missing")
        elif dict(mine.values) != dict(enum.values):
            problems.append(f"enum {name}: values {dict(mine.values)} != torch's {dict(enum.values)}")
    for name, sdef in theirs.structs.items():
        mine_s = ours.structs.get(name)
        if mine_s is None:
            problems.append(f"{sdef.kind} {name}: missing")
            continue
        if mine_s.kind != sdef.kind:
            problems.append(f"{name}: is a {mine_s.kind}, torch's is a {sdef.kind}")
        if [f.name for f in mine_s.fields] != [f.name for f in sdef.fields]:
            problems.append(f"{name}: field order {[f.name for f in mine_s.fields]} != torch's")
        for f in sdef.fields:
            g = mine_s.field_by_id(f.id)
            where = f"{name}.{f.name} (id {f.id})"
            if g is None:
                problems.append(f"{where}: no field with this id")
                continue
            for attr in ("name", "optional", "required"):
                if getattr(g, attr) != getattr(f, attr):
                    problems.append(f"{where}: {attr} {getattr(g, attr)!r} != torch's {getattr(f, attr)!r}")
            if g.type.spelled() != f.type.spelled():
                problems.append(f"{where}: type {g.type.spelled()} != torch's {f.type.spelled()}")
        extra = {f.id for f in mine_s.fields} - {f.id for f in sdef.fields}
        problems += [f"{name}: extra field id {i}" for i in sorted(extra)]
    return problems


def test_ours_contradicts_torch_nowhere(torch_schema: idl.Schema) -> None:
    assert contradictions(torch_schema, SCHEMA) == []


def test_covers_every_torch_type(torch_schema: idl.Schema) -> None:
    assert set(torch_schema.structs) <= set(SCHEMA.structs)
    assert set(torch_schema.enums) <= set(SCHEMA.enums)
    assert len(SCHEMA.structs["Argument"].fields) == 31


def test_schema_version_matches_torch() -> None:
    from torch._export.serde.schema import SCHEMA_VERSION as TORCH_VERSION

    assert tuple(TORCH_VERSION) == SCHEMA_VERSION


def test_checker_names_type_and_field(torch_schema: idl.Schema) -> None:
    """The comparison itself reports a changed id, type, requiredness or enum value precisely."""
    text = (idl.IDL_DIR / "export_schema.thrift").read_text()
    mutated = (
        text.replace("  20: optional i64 index;", "  21: optional i64 index;")
        .replace("  10: string expr_str;", "  10: i64 expr_str;")
        .replace("  30: optional ArgumentKind kind;", "  30: ArgumentKind kind;")
        .replace("  FLOAT = 7,", "  FLOAT = 70,")
    )
    assert mutated != text
    path = Path(torch_schema.structs["Device"].module + "_mutated.thrift")
    tmp = Path(__file__).parent / "_tmp_idl"
    tmp.mkdir(exist_ok=True)
    try:
        (tmp / path).write_text(mutated)
        problems = contradictions(torch_schema, idl.load_files(tmp / path))
    finally:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    assert "Device.index (id 20): no field with this id" in problems
    assert "Device: extra field id 21" in problems
    assert "SymExpr.expr_str (id 10): type i64 != torch's string" in problems
    assert "NamedArgument.kind (id 30): optional False != torch's True" in problems
    assert any(p.startswith("enum ScalarType: values") for p in problems)
