"""Schema evolution: every change between two IDLs and the version bump it needs.

The rules are the ones written in opwire/schema/README.md ("Compatibility rules"); each change has a
stable `code`. A major bump is needed when a reader of the new schema could misread or reject files of
the old one (or the reverse for a member it no longer knows); a minor bump when the new schema only adds.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opwire.errors import DecodeError
from opwire.schema.idl import EnumDef, FieldDef, IdlError, Schema, StructDef, load_files

if TYPE_CHECKING:
    from opwire.schema import models as m

__all__ = ["BUMPS", "RULES", "SchemaChange", "load_idl", "required_bump", "schema_diff"]

BUMPS = ("none", "minor", "major")

# code -> (bump, what it means); README.md lists the same table and a test keeps them in sync.
RULES: dict[str, tuple[str, str]] = {
    "type_removed": ("major", "a struct, union or enum was removed"),
    "type_kind_changed": ("major", "a type changed kind (struct/union/enum)"),
    "field_removed": ("major", "a struct field was removed"),
    "field_id_reused": ("major", "a field id now names a different field"),
    "field_id_changed": ("major", "a field kept its name but changed its id"),
    "field_type_changed": ("major", "a field or union member changed type"),
    "requiredness_changed": ("major", "a field changed between required, default and optional"),
    "required_field_added": ("major", "a struct gained a field old files lack and that has no default"),
    "default_changed": ("major", "a field's default value changed or was removed"),
    "union_member_removed": ("major", "a union lost a member"),
    "enum_value_removed": ("major", "an enum lost a value"),
    "enum_value_renumbered": ("major", "an enum value kept its name but changed its number"),
    "enum_value_renamed": ("major", "an enum number now has a different name"),
    "type_added": ("minor", "a new struct, union or enum"),
    "optional_field_added": ("minor", "a struct gained an optional field or one with a default"),
    "default_added": ("minor", "a field without a default gained one"),
    "union_member_added": ("minor", "a union gained a member"),
    "enum_value_added": ("minor", "an enum gained a value"),
    "doc_changed": ("none", "a doc comment changed"),
    "field_order_changed": ("none", "fields were reordered (ids and names unchanged)"),
    "const_changed": ("none", "a constant was added, removed or changed"),
}


@dataclass(frozen=True)
class SchemaChange:
    """One difference between two schemas and the bump it needs."""

    code: str
    bump: str
    where: str
    message: str

    def to_model(self) -> m.SchemaDiffChange:
        """The change as the IDL's `SchemaDiffChange` record (what `opwire schema diff --json` lists)."""
        from opwire.schema import models as m  # deferred: imports pydantic

        return m.SchemaDiffChange(code=self.code, bump=self.bump, where=self.where, message=self.message)


def _change(code: str, where: str, message: str) -> SchemaChange:
    return SchemaChange(code, RULES[code][0], where, message)


def required_bump(changes: list[SchemaChange]) -> str:
    """The largest bump any change needs: "major", "minor" or "none"."""
    return max((c.bump for c in changes), key=BUMPS.index, default="none")


def load_idl(idl: str | Path) -> Schema:
    """Parse an IDL given as a path or as IDL text; DecodeError when it does not parse."""
    text = isinstance(idl, str) and ("{" in idl or "\n" in idl)
    if text:
        with tempfile.TemporaryDirectory(prefix="opwire-idl-") as tmp:
            path = Path(tmp) / "idl.thrift"
            path.write_text(str(idl))
            return _load(path, "IDL text")
    path = Path(idl)
    if not path.is_file():
        raise DecodeError(f"{path}: no such IDL file; expected a .thrift path or IDL text")
    return _load(path, str(path))


def _load(path: Path, source: str) -> Schema:
    try:
        return load_files(path)
    except IdlError as exc:
        detail = str(exc).replace(str(path), source)
        raise DecodeError(f"{source}: not a valid Thrift IDL ({detail})") from None


def schema_diff(old_idl: str | Path | Schema, new_idl: str | Path | Schema) -> list[SchemaChange]:
    """Every change from `old_idl` to `new_idl` (paths, IDL text or parsed Schemas), with its bump."""
    old = old_idl if isinstance(old_idl, Schema) else load_idl(old_idl)
    new = new_idl if isinstance(new_idl, Schema) else load_idl(new_idl)
    changes: list[SchemaChange] = []
    old_types = _kinds(old)
    new_types = _kinds(new)
    for name, kind in old_types.items():
        if name not in new_types:
            changes.append(_change("type_removed", name, f"{kind} {name} was removed"))
        elif new_types[name] != kind:
            changes.append(_change("type_kind_changed", name, f"{name} was a {kind}, is now a {new_types[name]}"))
        elif kind == "enum":
            changes += _diff_enum(old.enums[name], new.enums[name])
        else:
            changes += _diff_struct(old.structs[name], new.structs[name])
    for name, kind in new_types.items():
        if name not in old_types:
            changes.append(_change("type_added", name, f"new {kind} {name}"))
    changes += _diff_consts(old.consts, new.consts)
    return changes


def _kinds(schema: Schema) -> dict[str, str]:
    out = {name: "enum" for name in schema.enums}
    out.update({name: s.kind for name, s in schema.structs.items()})
    return out


def _doc_change(where: str, old: str, new: str) -> list[SchemaChange]:
    return [_change("doc_changed", where, f"doc of {where} changed")] if old != new else []


def _diff_enum(old: EnumDef, new: EnumDef) -> list[SchemaChange]:
    changes = _doc_change(old.name, old.doc, new.doc)
    old_by_name, new_by_name = dict(old.values), dict(new.values)
    new_by_value = {v: n for n, v in new.values}
    for vname, value in old.values:
        where = f"{old.name}.{vname}"
        if vname in new_by_name:
            if new_by_name[vname] != value:
                msg = f"{where} was {value}, is now {new_by_name[vname]}: old files mean something else"
                changes.append(_change("enum_value_renumbered", where, msg))
        elif value in new_by_value:
            msg = f"{where} (= {value}) is now named {new_by_value[value]}"
            changes.append(_change("enum_value_renamed", where, msg))
        else:
            changes.append(_change("enum_value_removed", where, f"{where} (= {value}) was removed"))
    old_values = set(old_by_name.values())
    for vname, value in new.values:
        if vname not in old_by_name and value not in old_values:
            where = f"{old.name}.{vname}"
            changes.append(_change("enum_value_added", where, f"new value {where} = {value}"))
    return changes


def _requiredness(f: FieldDef) -> str:
    return "required" if f.required else "optional" if f.optional else "default"


def _diff_struct(old: StructDef, new: StructDef) -> list[SchemaChange]:
    changes = _doc_change(old.name, old.doc, new.doc)
    union = old.kind == "union"
    old_by_name = {f.name: f for f in old.fields}
    new_by_name = {f.name: f for f in new.fields}
    new_by_id = {f.id: f for f in new.fields}
    reused: set[str] = set()
    for f in old.fields:
        where = f"{old.name}.{f.name}"
        g = new_by_name.get(f.name)
        if g is not None:
            changes += _diff_field(f, g, where, union)
        elif f.id in new_by_id and new_by_id[f.id].name not in old_by_name:
            g = new_by_id[f.id]
            reused.add(g.name)
            msg = f"{where} (id {f.id}) was removed and id {f.id} now names `{g.name}`"
            changes.append(_change("field_id_reused", where, msg))
        else:
            code = "union_member_removed" if union else "field_removed"
            changes.append(_change(code, where, f"{where} (id {f.id}) was removed"))
    for g in new.fields:
        if g.name in old_by_name or g.name in reused:
            continue
        changes.append(_added(new.name, g, union))
    common = [n for n in old_by_name if n in new_by_name]
    if common != [n for n in new_by_name if n in old_by_name]:
        changes.append(_change("field_order_changed", old.name, f"fields of {old.name} were reordered"))
    return changes


def _added(struct: str, g: FieldDef, union: bool) -> SchemaChange:
    where = f"{struct}.{g.name}"
    if union:
        return _change("union_member_added", where, f"new member {where} (id {g.id})")
    if g.optional or (g.default is not None and not g.required):
        return _change("optional_field_added", where, f"new {_requiredness(g)} field {where} (id {g.id})")
    return _change(
        "required_field_added", where, f"new field {where} (id {g.id}) has no default: files written before lack it"
    )


def _diff_field(f: FieldDef, g: FieldDef, where: str, union: bool) -> list[SchemaChange]:
    changes = _doc_change(where, f.doc, g.doc)
    if f.id != g.id:
        changes.append(_change("field_id_changed", where, f"{where} moved from id {f.id} to id {g.id}"))
    if f.type != g.type:
        msg = f"{where} was `{f.type.spelled()}`, is now `{g.type.spelled()}`"
        changes.append(_change("field_type_changed", where, msg))
    if not union and _requiredness(f) != _requiredness(g):
        msg = f"{where} was {_requiredness(f)}, is now {_requiredness(g)}"
        changes.append(_change("requiredness_changed", where, msg))
    if not union and f.default != g.default:
        if f.default is None:
            changes.append(_change("default_added", where, f"{where} gained the default {g.default!r}"))
        else:
            changes.append(_change("default_changed", where, f"default of {where} was {f.default!r}, is {g.default!r}"))
    return changes


def _diff_consts(old: dict[str, Any], new: dict[str, Any]) -> list[SchemaChange]:
    changes = []
    for name in sorted(old.keys() | new.keys()):
        if old.get(name) != new.get(name):
            msg = f"constant {name}: {old.get(name)!r} -> {new.get(name)!r}"
            changes.append(_change("const_changed", name, msg))
    return changes
