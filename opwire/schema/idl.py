"""Parse the Thrift IDL once into a frozen description that codegen, codecs and schema diff read.

thriftpy2 parses the files (names, ids, types, defaults); a small line scan adds what thriftpy2
drops: `optional` requiredness and the `/** doc */` comments that become docstrings.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "IDL_DIR",
    "IDL_FILES",
    "EnumDef",
    "FieldDef",
    "IdlError",
    "Schema",
    "StructDef",
    "TypeRef",
    "idl_checksum",
    "load",
    "load_files",
]

IDL_DIR = Path(__file__).resolve().parent
IDL_FILES = ("export_schema.thrift", "opwire.thrift")

# thriftpy2's TType numbers -> our primitive kind names.
_PRIMITIVES = {2: "bool", 3: "i8", 4: "double", 6: "i16", 8: "i32", 10: "i64", 11: "string", 18: "binary"}
_LIST, _SET, _MAP, _STRUCT, _ENUM_OR_I32 = 15, 14, 13, 12, 8


class IdlError(Exception):
    """The IDL itself could not be parsed (a developer error, not bad input)."""


@dataclass(frozen=True)
class TypeRef:
    """A field type: a primitive kind, a named enum/struct, or a container of TypeRefs."""

    kind: str  # bool i8 i16 i32 i64 double string binary | enum | struct | list | set | map
    name: str | None = None
    args: tuple[TypeRef, ...] = ()

    def spelled(self) -> str:
        """The type as the IDL spells it (module prefixes dropped)."""
        if self.kind in ("enum", "struct"):
            return str(self.name)
        if self.kind in ("list", "set"):
            return f"{self.kind}<{self.args[0].spelled()}>"
        if self.kind == "map":
            return f"map<{self.args[0].spelled()}, {self.args[1].spelled()}>"
        return self.kind

    def structs_named(self) -> frozenset[str]:
        """The structs and unions this type names, at any depth (a container's element types included)."""
        own = frozenset({str(self.name)}) if self.kind == "struct" else frozenset()
        return own.union(*(a.structs_named() for a in self.args))


@dataclass(frozen=True)
class FieldDef:
    """One field of a struct or member of a union."""

    id: int
    name: str
    type: TypeRef
    optional: bool = False
    required: bool = False
    default: Any = None
    doc: str = ""


@dataclass(frozen=True)
class StructDef:
    """A struct or union, fields in IDL order (the order torch's JSON writes keys)."""

    name: str
    kind: str  # "struct" | "union"
    fields: tuple[FieldDef, ...]
    doc: str = ""
    module: str = ""

    def field_by_id(self, fid: int) -> FieldDef | None:
        """The field with Thrift id `fid`, or None."""
        for f in self.fields:
            if f.id == fid:
                return f
        return None


@dataclass(frozen=True)
class EnumDef:
    """An enum: (name, value) pairs in IDL order."""

    name: str
    values: tuple[tuple[str, int], ...]
    doc: str = ""
    module: str = ""


@dataclass(frozen=True)
class Schema:
    """Everything the IDL files define, by name."""

    enums: dict[str, EnumDef] = field(default_factory=dict)
    structs: dict[str, StructDef] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)


_TYPE_RE = re.compile(r"^(enum|struct|union|exception)\s+(\w+)\s*\{")
_FIELD_RE = re.compile(r"^\s*(\d+)\s*:\s*(required\s+|optional\s+)?(.+?)\s+(\w+)\s*(=[^;,]*)?[;,]?\s*$")
_ENUM_VALUE_RE = re.compile(r"^\s*(\w+)\s*=\s*(-?\d+)\s*,?\s*$")
_CONST_RE = re.compile(r"^const\s+\S+\s+(\w+)\s*=")
_DOC_RE = re.compile(r"^\s*/\*\*(.*?)\*/\s*$")


@dataclass
class _Scan:
    type_docs: dict[str, str] = field(default_factory=dict)
    field_docs: dict[tuple[str, str], str] = field(default_factory=dict)
    optional: set[tuple[str, str]] = field(default_factory=set)
    const_docs: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)


def _scan(text: str) -> _Scan:
    """Collect doc comments, `optional` markers and definition order from IDL text."""
    scan = _Scan()
    doc = ""
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        m = _DOC_RE.match(line)
        if m:
            doc = m.group(1).strip()
            continue
        if stripped.startswith("//") or not stripped:
            continue
        m = _TYPE_RE.match(stripped)
        if m:
            current = m.group(2)
            scan.kinds[current] = m.group(1)
            scan.order.append(current)
            scan.type_docs[current] = doc
        elif stripped.startswith("}"):
            current = None
        elif current is not None:
            fm = _FIELD_RE.match(line)
            if fm:
                key = (current, fm.group(4))
                scan.field_docs[key] = doc
                if (fm.group(2) or "").strip() == "optional":
                    scan.optional.add(key)
        else:
            cm = _CONST_RE.match(stripped)
            if cm:
                scan.const_docs[cm.group(1)] = doc
        doc = ""
    return scan


def _type_ref(spec: Any, enum_names: set[str]) -> TypeRef:
    """Convert one thriftpy2 type spec (ttype plus extra) to a TypeRef."""
    if isinstance(spec, tuple):
        ttype, extra = spec
    else:
        ttype, extra = spec, None
    if ttype == _LIST or ttype == _SET:
        return TypeRef("list" if ttype == _LIST else "set", args=(_type_ref(extra, enum_names),))
    if ttype == _MAP:
        return TypeRef("map", args=(_type_ref(extra[0], enum_names), _type_ref(extra[1], enum_names)))
    if ttype == _STRUCT:
        return TypeRef("struct", extra.__name__)
    if ttype == _ENUM_OR_I32 and extra is not None:
        return TypeRef("enum", extra.__name__)
    if ttype in _PRIMITIVES:
        return TypeRef(_PRIMITIVES[ttype])
    raise IdlError(f"unsupported Thrift type {ttype!r}")


def _field_type_spec(spec: tuple[Any, ...]) -> Any:
    """The (ttype, extra) part of a thriftpy2 thrift_spec entry."""
    if len(spec) == 3:
        return spec[0]
    return (spec[0], spec[2])


def load_files(path: Path, include_dirs: list[Path] | None = None) -> Schema:
    """Parse one IDL file (and the files it includes) into a Schema."""
    import thriftpy2  # the IDL parser; only needed when reading IDL text

    dirs: list[Any] = [str(d) for d in (include_dirs or [path.parent])]
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    with _isolated_thrift_cache():
        try:
            module = thriftpy2.load(str(path), module_name=f"opwire_idl_{digest}_thrift", include_dirs=dirs)
        except Exception as exc:  # thriftpy2 raises several unrelated types
            raise IdlError(f"{path}: {exc}") from exc
        schema = Schema()
        _collect(module, path, dirs, schema)
    return schema


def _is_thrift_module(module: object) -> bool:
    return "__thrift_file__" in getattr(module, "__dict__", {})


@contextmanager
def _isolated_thrift_cache() -> Iterator[None]:
    """Parse without thriftpy2's caches, restoring them afterwards.

    thriftpy2 caches included files, and registers them in sys.modules, by file name alone, so two IDL
    trees that each include their own `export_schema.thrift` (a schema diff) would otherwise share or
    clash, and an edited file would be served stale.
    """
    from thriftpy2.parser import parser

    saved_cache = dict(parser._thrift_cache)
    saved_modules = {k: v for k, v in sys.modules.items() if _is_thrift_module(v)}
    parser._thrift_cache.clear()
    for name in saved_modules:
        del sys.modules[name]
    try:
        yield
    finally:
        parser._thrift_cache.clear()
        parser._thrift_cache.update(saved_cache)
        for name in [k for k, v in sys.modules.items() if _is_thrift_module(v)]:
            del sys.modules[name]
        sys.modules.update(saved_modules)


def _collect(module: Any, path: Path, dirs: list[str], schema: Schema) -> None:
    """Add the definitions of `module` (parsed from `path`) and its includes to `schema`."""
    meta = module.__thrift_meta__
    for inc in meta["includes"]:
        inc_path = Path(inc.__thrift_file__)
        _collect(inc, inc_path, dirs, schema)
    text = Path(path).read_text()
    scan = _scan(text)
    modname = Path(path).stem
    enum_names = {e.__name__ for e in meta["enums"]}
    for enum_cls in meta["enums"]:
        name = enum_cls.__name__
        order = _enum_order(text, name)
        pairs = tuple(
            sorted(
                enum_cls._NAMES_TO_VALUES.items(),
                key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order),
            )
        )
        schema.enums[name] = EnumDef(name, pairs, scan.type_docs.get(name, ""), modname)
    classes = {c.__name__: c for c in meta["structs"] + meta["unions"] + meta.get("exceptions", [])}
    for name in scan.order:
        if name not in classes:
            continue
        cls = classes[name]
        defaults = dict(cls.default_spec)
        fields = []
        for fid, spec in cls.thrift_spec.items():
            fname = spec[1]
            fields.append(
                FieldDef(
                    id=fid,
                    name=fname,
                    type=_type_ref(_field_type_spec(spec), enum_names),
                    optional=(name, fname) in scan.optional,
                    required=bool(spec[-1]),
                    default=defaults.get(fname),
                    doc=scan.field_docs.get((name, fname), ""),
                )
            )
        kind = "union" if scan.kinds[name] == "union" else "struct"
        schema.structs[name] = StructDef(name, kind, tuple(fields), scan.type_docs.get(name, ""), modname)
    for cname in scan.const_docs:
        schema.consts[cname] = getattr(module, cname)


def _enum_order(text: str, enum: str) -> list[str]:
    """Value names of enum `enum` in the order the IDL text writes them."""
    m = re.search(rf"enum\s+{enum}\s*\{{(.*?)\}}", text, re.S)
    body = m.group(1) if m else ""
    return [vm.group(1) for vm in map(_ENUM_VALUE_RE.match, body.splitlines()) if vm]


def idl_checksum() -> str:
    """SHA-256 over the IDL files, the value models.py records in its header."""
    h = hashlib.sha256()
    for name in IDL_FILES:
        h.update(name.encode() + b"\0" + (IDL_DIR / name).read_bytes())
    return h.hexdigest()


def load() -> Schema:
    """Parse opwire's own IDL (opwire.thrift and the export schema it includes)."""
    return load_files(IDL_DIR / "opwire.thrift", [IDL_DIR])
