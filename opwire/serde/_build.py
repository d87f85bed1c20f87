"""Model builders compiled once from the IDL: parsed values -> models, without pydantic's per-field work.

For every struct and union of `SCHEMA` this module writes one small Python function (source generated from
the IDL and the models' field defaults, compiled once on first use, as `dataclasses` writes `__init__`) that
checks each value as strictly as the models' own schema does and builds the model directly: `__dict__`,
`__pydantic_fields_set__` (the keys that were present, as pydantic records them), no extra, no private.
The result is equal, field for field, to what pydantic's validation builds from the same input.

Two flavours, one per input:
- `json`: values parsed from JSON (`pydantic_core.from_json`). Ints, strings and bools are checked by exact
  type (bools are no ints), ints in their IDL range, doubles as torch writes them ("Infinity", ...), binary as
  base64, enums by value, lists and maps by type, unions hold exactly one non-null member.
- `thrift`: keyword arguments from Apache Thrift's C codec, which has typed every value by the IDL already:
  only enums are converted, required fields and single union members checked, and the values counted against
  the decode's budget (`COUNT`), so no separate counting pass is needed.

A builder never reports an error: anything it does not accept raises `Fallback`, and the caller lets
pydantic's own validation (or the checking Thrift decoder) decide and word the error, so messages and paths
stay exactly what they were. Accepting less than pydantic is safe (slower); accepting more is a bug, which
the tests guard by comparing both on the hostile tables and by fuzzing.
"""

from __future__ import annotations

import base64
import binascii
import copy
import math
import re
import threading
from functools import cache, lru_cache
from typing import Any

from pydantic import BaseModel

from opwire.schema import models
from opwire.schema.idl import FieldDef, StructDef, TypeRef
from opwire.schema.models import MODELS, SCHEMA
from opwire.schema.symexpr import check_expr

__all__ = [
    "COUNT",
    "EXPRESSIONS",
    "NONFINITE",
    "Builders",
    "Fallback",
    "TooMany",
    "binary",
    "enum_values",
    "expr",
    "field_default",
    "json_builders",
    "reachable",
    "thrift_builders",
]

_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}  # the objects base.py returns
_EXACT_FLOAT_INT = 2**53  # ints a double field takes as they are (pydantic's strict float takes JSON ints)
_IMMUTABLE = (type(None), bool, int, float, str, bytes, tuple, frozenset)
_SMALL_UNION = 4  # members up to which a union branches on its key (a display for __dict__)
EXPRESSIONS = frozenset({("SymExpr", "expr_str")})
"""(struct, field) whose string goes through opwire's expression grammar."""


_CALL = re.compile(r" *v\d+ = (\w+)\(v\d+\)")


class Fallback(Exception):
    """The builder does not take this input: let the validating path decide (and word the error)."""


class TooMany(Exception):
    """A thrift-flavour build passed the values budget of its decode (`COUNT.state` = [count, limit])."""


COUNT = threading.local()
"""Per thread, `state = [values built so far, limit]` while a thrift-flavour build runs (set by the caller)."""


def _f64(v: Any) -> float:
    c = v.__class__
    if c is float:
        return v  # type: ignore[no-any-return]
    if c is int and -_EXACT_FLOAT_INT <= v <= _EXACT_FLOAT_INT:
        return float(v)
    if c is str and v in NONFINITE:
        return NONFINITE[v]
    raise Fallback


def binary(v: Any) -> bytes:
    """The bytes of a binary field's strict base64 text (Fallback for anything else)."""
    if v.__class__ is not str:
        raise Fallback
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise Fallback from None


@lru_cache(maxsize=4096)
def _grammatical(text: str) -> bool:
    """Whether opwire's expression grammar takes `text` (programs repeat their few expressions many times)."""
    try:
        check_expr(text)
    except ValueError:  # a refusal is not cached as such: the validating path checks again and words it
        return False
    return True


def expr(v: Any) -> str:
    """`v` if it is a string opwire's expression grammar takes (Fallback for anything else)."""
    if v.__class__ is not str or not _grammatical(v):
        raise Fallback
    return v


def field_default(struct: str, field: str) -> tuple[str, Any]:
    """How pydantic fills in a field the input left out: ("factory", f) calls f, ("shared", v) takes v itself
    (immutable, or a model: pydantic does not copy those), ("copy", v) a deep copy of v."""
    info = MODELS[struct].model_fields[field]
    if info.default_factory is not None:
        return "factory", info.default_factory
    if isinstance(info.default, _IMMUTABLE) or info.default.__class__.__module__ == models.__name__:
        return "shared", info.default
    return "copy", info.default


def enum_values(name: str) -> dict[int, Any]:
    """IDL enum `name`: value -> member."""
    return {int(e): e for e in getattr(models, name)}


_slots = BaseModel.__dict__
_NAMESPACE: dict[str, Any] = {
    "F": Fallback,
    "TooMany": TooMany,
    "COUNT": COUNT,
    "M": object(),  # a key that is absent
    "new": object.__new__,
    "set_dict": _slots["__dict__"].__set__,  # the slot's setter itself: no attribute lookup by name
    "set_fields": _slots["__pydantic_fields_set__"].__set__,
    "set_extra": _slots["__pydantic_extra__"].__set__,
    "set_private": _slots["__pydantic_private__"].__set__,
    "f64": _f64,
    "binary": binary,
    "expr": expr,
    "deepcopy": copy.deepcopy,
}


class _Compiler:
    """Writes the source of every builder of one flavour ("json" or "thrift")."""

    def __init__(self, flavour: str) -> None:
        self.json = flavour == "json"
        self.ns: dict[str, Any] = dict(_NAMESPACE)
        self.lines: list[str] = []
        self.types: dict[TypeRef, str] = {}

    def signature(self, name: str) -> str:
        """The builder's def line: json builders take the parsed dict; thrift builders are the `__new__` of the
        classes the C codec instantiates with the fields as keywords."""
        return f"def {self.builder(name)}(d):" if self.json else f"def {self.builder(name)}(_cls, **d):"

    def builder(self, name: str) -> str:
        """Name of the function building struct or union `name`."""
        return f"b_{name}"

    def check(self, t: TypeRef, var: str, ind: str, checked: bool = False) -> list[str]:
        """Lines checking (and converting in place) `var`, a value of IDL type `t` that is not None."""
        k = t.kind
        if checked:
            return [f"{ind}{var} = expr({var})"]
        if k == "struct":  # the C codec built nested models already (its classes are these builders)
            return [f"{ind}{var} = {self.builder(str(t.name))}({var})"] if self.json else []
        if k == "enum":
            values = f"E_{t.name}"
            self.ns[values] = enum_values(str(t.name))
            if self.json:
                return [
                    f"{ind}if {var}.__class__ is not int:",
                    f"{ind}    raise F",
                    f"{ind}{var} = {values}.get({var})",
                    f"{ind}if {var} is None:",
                    f"{ind}    raise F",
                ]
            return [f"{ind}{var} = {values}[{var}]"]
        if k in ("list", "set", "map"):
            return [f"{ind}{var} = {self.container(t)}({var})"]
        if not self.json:
            return []  # the C codec typed it by the wire, whose widths are the IDL's
        if k in _INT_BITS:
            bits = _INT_BITS[k]
            lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            return [f"{ind}if {var}.__class__ is not int or not {lo} <= {var} <= {hi}:", f"{ind}    raise F"]
        if k in ("string", "bool"):
            py = "str" if k == "string" else "bool"
            return [f"{ind}if {var}.__class__ is not {py}:", f"{ind}    raise F"]
        if k == "double":
            return [f"{ind}{var} = f64({var})"]
        if k == "binary":
            return [f"{ind}{var} = binary({var})"]
        raise AssertionError(f"unhandled IDL type {t}")

    def container(self, t: TypeRef) -> str:
        """Name of the function checking a list or map of type `t` (written once per type)."""
        if t in self.types:
            return self.types[t]
        fn = self.types[t] = f"c_{len(self.types)}"
        py = "dict" if t.kind == "map" else "list"
        item = t.args[-1]
        body = self.check(item, "x", "        ")
        out = [f"def {fn}(v):", f"    if v.__class__ is not {py}:", "        raise F"]
        items, one = ("v.values()", "{k: %s for k, x in v.items()}") if t.kind == "map" else ("v", "[%s for x in v]")
        if not body:
            out.append("    return v")
        elif len(body) == 1 and body[0].startswith("        x = "):  # one conversion: a comprehension
            out.append("    return " + one % body[0].removeprefix("        x = "))
        elif not any(line.lstrip().startswith("x = ") for line in body):  # checks only: the parsed value is ours
            out += [f"    for x in {items}:", *body, "    return v"]
        elif t.kind == "map":
            out += ["    r = {}", "    for k, x in v.items():", *body, "        r[k] = x", "    return r"]
        else:
            out += ["    r = []", "    for x in v:", *body, "        r.append(x)", "    return r"]
        if t.kind == "map" and t.args[0].kind != "string":
            out = [f"def {fn}(v):", "    raise F"]  # JSON keys are strings: other keys are pydantic's to judge
        self.lines += [*out, ""]
        return fn

    def default(self, s: StructDef, f: FieldDef) -> str:
        """An expression for the default of a field the input left out (what pydantic fills in)."""
        how, value = field_default(s.name, f.name)
        if how == "factory":
            self.ns[f"D_{s.name}_{f.name}"] = value
            return f"D_{s.name}_{f.name}()"
        self.ns[f"K_{s.name}_{f.name}"] = value
        return f"K_{s.name}_{f.name}" if how == "shared" else f"deepcopy(K_{s.name}_{f.name})"

    def term(self, t: TypeRef, expr: str) -> str:
        """What a present value of type `t` adds to the values count (as `fast.count_values` counts: a container
        1 plus its items, a leaf 1, a struct 0 since it counts itself); thrift flavour only."""
        if t.kind == "struct":
            return "0"
        if t.kind not in ("list", "set", "map"):
            return "1"
        item = t.args[-1]
        inner = self.term(item, "x")
        items = f"{expr}.values()" if t.kind == "map" else expr
        if inner == "0":
            return "1"
        if inner == "1":
            return f"(1 + len({expr}))"
        return f"(1 + sum({inner} for x in {items}))"

    def counted(self, ind: str, terms: list[str]) -> list[str]:
        """Lines charging `terms` to the decode's values budget (thrift flavour; json counts before parsing)."""
        if self.json:
            return []
        const = 1 + sum(int(t) for t in terms if t.isdigit())
        expr = " + ".join([str(const), *(t for t in terms if not t.isdigit())])
        return [f"{ind}st = COUNT.state", f"{ind}st[0] += {expr}", f"{ind}if st[0] > st[1]:", f"{ind}    raise TooMany"]

    def finish(self, name: str, dict_expr: str, fields_expr: str) -> list[str]:
        self.ns[f"C_{name}"] = MODELS[name]
        return [
            f"    o = new(C_{name})",
            f"    set_dict(o, {dict_expr})",
            f"    set_fields(o, {fields_expr})",
            "    set_extra(o, None)",
            "    set_private(o, None)",
            "    return o",
            "",
        ]

    def struct(self, s: StructDef) -> None:
        model = MODELS[s.name]
        names = [f.name for f in s.fields]
        self.ns[f"N_{s.name}"] = tuple(names)
        self.ns[f"S_{s.name}"] = set(names)
        out = [self.signature(s.name)]
        if self.json:
            out += ["    if d.__class__ is not dict:", "        raise F"]
        if not all(model.model_fields[n].is_required() for n in names):
            out.append("    missing = False")
        values, terms = [], []
        for i, f in enumerate(s.fields):
            v = f"v{i}"
            checks = self.check(f.type, v, "    ", (s.name, f.name) in EXPRESSIONS)
            if model.model_fields[f.name].is_required():  # absent: a KeyError, so pydantic decides
                terms.append(self.term(f.type, f"d[{f.name!r}]"))
                call = _CALL.fullmatch(checks[0]) if len(checks) == 1 else None
                if call is not None:  # `v = fn(v)`: call fn in the dict display
                    values.append(f"{call[1]}(d[{f.name!r}])")
                    continue
                out += [f"    {v} = d[{f.name!r}]", *checks]
            else:  # checks refuse None (no value of a type is None): only optional fields take null
                out += [f"    {v} = d.get({f.name!r}, M)", f"    if {v} is M:"]
                out += ["        missing = True", f"        {v} = {self.default(s, f)}"]
                if not self.json:
                    out += ["    else:", f"        n += {self.term(f.type, v)}", *["    " + line for line in checks]]
                elif checks:
                    out.append(f"    elif {v} is not None:" if f.optional else "    else:")
                    out += ["    " + line for line in checks]
            values.append(v)
        if not self.json:
            out.insert(1, "    n = 0")
            out += self.counted("    ", [*terms, "n"])
        items = ", ".join(f"{n!r}: {e}" for n, e in zip(names, values, strict=True))
        fields = f"S_{s.name}.copy()"
        if "    missing = False" in out:
            fields += f" if not missing else {{k for k in N_{s.name} if k in d}}"
        self.lines += out + self.finish(s.name, "{" + items + "}", fields)

    def union(self, s: StructDef) -> None:
        """A small union branches on its one key; a large one dispatches on it to a function per member. Either
        way the member's value is checked and the model built (a constant fields set: the one member)."""
        head = [self.signature(s.name)]
        if self.json:
            head += ["    if d.__class__ is not dict:", "        raise F"]
        head.append("    ((k, v),) = d.items()  # not exactly one member: a ValueError, so pydantic decides")
        if len(s.fields) <= _SMALL_UNION:
            for f in s.fields:
                items = "{" + ", ".join(f"{g.name!r}: {'v' if g is f else 'None'}" for g in s.fields) + "}"
                head += [f"    if k == {f.name!r}:", *self.check(f.type, "v", "        ")]
                head += self.counted("        ", [self.term(f.type, "v")])
                head += ["    " + line for line in self.finish(s.name, items, "{" + repr(f.name) + "}")[:-1]]
            self.lines += [*head, "    raise F", ""]
            return
        members = f"U_{s.name}"
        self.ns[members] = {}
        self.ns[f"T_{s.name}"] = dict.fromkeys(f.name for f in s.fields)
        for f in s.fields:  # copying a template is several times faster than a display of many keys
            fn = self.ns[members][f.name] = f"m_{s.name}_{f.name}"
            body = [f"def {fn}(v):", *self.counted("    ", [self.term(f.type, "v")]), *self.check(f.type, "v", "    ")]
            body += [f"    r = T_{s.name}.copy()", f"    r[{f.name!r}] = v"]
            self.lines += body + self.finish(s.name, "r", "{" + repr(f.name) + "}")
        self.lines += [*head, f"    return {members}[k](v)  # an unknown member: a KeyError", ""]

    def compile(self, names: list[str]) -> None:
        """Write and run the builders of `names` (structs and unions not compiled yet) in the namespace."""
        self.lines = []
        for name in names:
            s = SCHEMA.structs[name]
            (self.union if s.kind == "union" else self.struct)(s)
        ns = self.ns
        exec(compile("\n".join(self.lines), f"<opwire builders: {'json' if self.json else 'thrift'}>", "exec"), ns)
        for name in names:  # large unions dispatch to member functions by name
            if f"U_{name}" in ns:
                ns[f"U_{name}"] = {k: ns[fn] for k, fn in ns[f"U_{name}"].items()}


def reachable(root: str) -> set[str]:
    """`root` and every struct and union a value of it can contain."""
    seen: set[str] = set()
    todo = [TypeRef("struct", root)]
    while todo:
        t = todo.pop()
        if t.kind != "struct":
            todo += t.args
        elif t.name not in seen:
            seen.add(str(t.name))
            todo += [f.type for f in SCHEMA.structs[str(t.name)].fields]
    return seen


class Builders:
    """Builders by struct or union name, compiled on first use of a root type: only what that root can contain
    (compiling every type costs tens of milliseconds a process; a program's types are fewer than half)."""

    def __init__(self, flavour: str) -> None:
        self._compiler = _Compiler(flavour)
        self._done: set[str] = set()
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> Any:
        """The builder of `name` (KeyError for a name that is no struct or union)."""
        if name not in self._done:
            if name not in SCHEMA.structs:
                raise KeyError(name)
            with self._lock:  # one compiler, one namespace: a root's types appear in `_done` once all are built
                missing = sorted(reachable(name) - self._done)
                if missing:
                    self._compiler.compile(missing)
                    self._done.update(missing)
        return self._compiler.ns[self._compiler.builder(name)]


@cache
def json_builders() -> Builders:
    """struct or union name -> function building its model from `pydantic_core.from_json` output (or Fallback)."""
    return Builders("json")


@cache
def thrift_builders() -> Builders:
    """struct or union name -> `__new__(cls, **fields)` building its model from the C codec's keyword arguments,
    charging `COUNT.state` what it holds (raises on anything it does not take, TooMany past the limit)."""
    return Builders("thrift")
