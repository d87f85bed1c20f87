"""JSON writers compiled once from the IDL: a model -> torch's exact JSON text, in one pass.

For every struct and union this module writes one Python function (source generated from the IDL, compiled
on first use) that formats the model straight into the text `json.dumps(to_jsonable(model))` gives: keys in
IDL order with `", "` and `": "`, strings through the C escaper `json.dumps` uses (`ensure_ascii`), ints and
enums as `int.__repr__`, finite doubles as `float.__repr__` and the others as torch's strings, binary as
base64, None as `null`, a union as its one member. No intermediate dicts and lists are built.

These writers serve where the C module (`_cplan`, `_cbuild_src/json_write.c`: the same bytes, 3-5x faster, by
the same rules) is not built: a source checkout without a compiler keeps an encoder near torch's C++ speed
instead of the reference path's several times slower one, as `_build`'s Python builders do for decoding. The
tests hold both writers to the reference bytes.

A writer never decides an error: a value it does not expect (a bool or None where an int belongs, two union
members set, ...) raises, and the caller writes that model the reference way (`to_jsonable` and
`json.dumps`), which words the error or writes what it always wrote. A test holds both to the same bytes.
"""

from __future__ import annotations

from functools import cache
from json.encoder import encode_basestring_ascii
from typing import Any

from opwire.schema.base import binary_out
from opwire.schema.idl import StructDef, TypeRef
from opwire.schema.models import SCHEMA

__all__ = ["json_writers"]

_INTS = frozenset({"i8", "i16", "i32", "i64", "enum"})


_SMALL_UNION = 4  # members up to which a union's writer branches on the member


def _fstring(parts: list[str]) -> str:
    """Source of an f-string joining `parts`: `{expr}` parts are expressions (no single quotes in them), the
    others literal text (braces doubled here)."""
    out = []
    for p in parts:
        is_expr = p.startswith("{") and p.endswith("}") and len(p) > 2
        out.append(p if is_expr else p.replace("{", "{{").replace("}", "}}"))
    return "f'" + "".join(out) + "'"


class _Unexpected(Exception):
    """A value the writer does not take: the reference path writes (or refuses) the model."""


def _int(v: Any) -> str:
    if v.__class__ is bool:
        raise _Unexpected
    return int.__repr__(v)


def _bool(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    raise _Unexpected


def _double(v: Any) -> str:
    if v.__class__ is not float:
        raise _Unexpected
    if v - v == 0:  # finite
        return float.__repr__(v)
    if v != v:
        return '"NaN"'
    return '"Infinity"' if v > 0 else '"-Infinity"'


def _binary(v: Any) -> str:
    if v.__class__ is not bytes:
        raise _Unexpected
    return '"' + binary_out(v) + '"'


_LEAF = {"string": "esc", "bool": "wbool", "double": "wdouble", "binary": "wbinary"}
_NAMESPACE: dict[str, Any] = {
    "U": _Unexpected,
    "esc": encode_basestring_ascii,
    "irepr": int.__repr__,
    "wint": _int,
    "wbool": _bool,
    "wdouble": _double,
    "wbinary": _binary,
}


class _Compiler:
    def __init__(self) -> None:
        self.ns: dict[str, Any] = dict(_NAMESPACE)
        self.lines: list[str] = []
        self.types: dict[TypeRef, str] = {}

    def fn(self, t: TypeRef) -> str:
        """Name of the function writing a (non-None) value of type `t`."""
        if t.kind in _INTS:
            return "wint"
        if t.kind in _LEAF:
            return _LEAF[t.kind]
        if t.kind == "struct":
            return f"w_{t.name}"
        if t in self.types:
            return self.types[t]
        name = self.types[t] = f"c_{len(self.types)}"
        item = self.fn(t.args[-1])
        if t.kind == "map":
            if t.args[0].kind != "string":
                self.lines += [f"def {name}(v):", "    raise U", ""]
            else:
                join = f"', '.join([esc(k) + ': ' + {item}(x) for k, x in v.items()])"
                self.lines += [f"def {name}(v):", "    if v.__class__ is not dict:", "        raise U"]
                self.lines += [f"    return '{{' + {join} + '}}'", ""]
        else:
            self.lines += [f"def {name}(v):", "    if v.__class__ is not list:", "        raise U"]
            self.lines += [f"    return '[' + ', '.join(map({item}, v)) + ']'", ""]
        return name

    def struct(self, s: StructDef) -> None:
        parts: list[str] = []
        for i, f in enumerate(s.fields):
            value = f'{self.fn(f.type)}(d["{f.name}"])'
            if f.optional:
                value = f'"null" if (x := d["{f.name}"]) is None else {self.fn(f.type)}(x)'
            parts += [("" if i == 0 else ", ") + f'"{f.name}": ', "{" + value + "}"]
        self.lines += [f"def w_{s.name}(o):", "    d = o.__dict__", f"    return {_fstring(['{', *parts, '}'])}", ""]

    def union(self, s: StructDef) -> None:
        """The one member named by the fields set (as `json._single_member`'s fast path); otherwise raise. A small
        union branches on the member (ints written inline), a large one looks its writer up."""
        writers = f"M_{s.name}"
        self.ns[writers] = {f.name: (f'{{"{f.name}": ', self.fn(f.type)) for f in s.fields}
        lines = [f"def w_{s.name}(o):", "    (k,) = o.__pydantic_fields_set__", "    v = o.__dict__[k]"]
        if len(s.fields) <= _SMALL_UNION:
            for f in s.fields:
                if f.type.kind in _INTS - {"enum"}:
                    test, value = " and v.__class__ is int", "{irepr(v)}"
                else:
                    test, value = " and v is not None", "{" + self.fn(f.type) + "(v)}"
                text = _fstring(["{", f'"{f.name}": ', value, "}"])
                lines += [f'    if k == "{f.name}"{test}:', f"        return {text}"]
        lines += ["    if v is None:", "        raise U", f"    key, write = {writers}[k]"]
        text = _fstring(["{key}", "{write(v)}", "}"])
        self.lines += [*lines, f"    return {text}", ""]

    def compile(self) -> dict[str, Any]:
        for s in SCHEMA.structs.values():
            (self.union if s.kind == "union" else self.struct)(s)
        ns = self.ns
        exec(compile("\n".join(self.lines), "<opwire JSON writers>", "exec"), ns)
        for s in SCHEMA.structs.values():  # member writers are functions once compiled
            if s.kind == "union":
                ns[f"M_{s.name}"] = {k: (key, ns[fn]) for k, (key, fn) in ns[f"M_{s.name}"].items()}
        return {name: ns[f"w_{name}"] for name in SCHEMA.structs}


@cache
def json_writers() -> dict[str, Any]:
    """struct or union name -> function writing its model as torch's JSON text (raises on what it does not take)."""
    return _Compiler().compile()
