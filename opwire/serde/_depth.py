"""Nesting depth of a decoded model, counted as every codec counts it (structs, unions, lists, maps).

The walk is pruned by the IDL: a type whose nesting is bounded (no path back to itself) is never
descended into when its deepest possible nesting fits the limit, so only recursive members
(subgraphs, `as_string_to_argument`, `Value.as_list`, ...) are actually visited.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from opwire.errors import DecodeError
from opwire.schema.idl import TypeRef
from opwire.schema.models import SCHEMA
from opwire.serde._paths import format_path

__all__ = ["check_depth", "static_depth"]

_UNBOUNDED = 1 << 30
Loc = tuple[str | int, ...]


@cache
def _struct_depth(name: str, visiting: frozenset[str] = frozenset()) -> int:
    if name in visiting:
        return _UNBOUNDED
    inner = visiting | {name}
    fields = SCHEMA.structs[name].fields
    return 1 + max((_type_depth(f.type, inner) for f in fields), default=0)


def _type_depth(t: TypeRef, visiting: frozenset[str]) -> int:
    if t.kind == "struct":
        return min(_struct_depth(str(t.name), visiting), _UNBOUNDED)
    if t.kind in ("list", "set"):
        return min(1 + _type_depth(t.args[0], visiting), _UNBOUNDED)
    if t.kind == "map":
        return min(1 + _type_depth(t.args[1], visiting), _UNBOUNDED)
    return 0


@cache
def static_depth(t: TypeRef) -> int:
    """Deepest nesting a value of type `t` can have (a huge number when the type is recursive)."""
    return _type_depth(t, frozenset())


@cache
def _fields(name: str) -> tuple[tuple[str, TypeRef, int], ...]:
    """(field name, type, static depth) of a struct's fields, deepest first."""
    fields = [(f.name, f.type, static_depth(f.type)) for f in SCHEMA.structs[name].fields]
    return tuple(sorted(fields, key=lambda f: -f[2]))


@cache
def _reachable(t: TypeRef) -> frozenset[str]:
    """Names of every struct a value of type `t` can contain (itself included)."""
    seen: set[str] = set()
    todo = [t]
    while todo:
        cur = todo.pop()
        if cur.kind == "struct":
            if cur.name in seen:
                continue
            seen.add(str(cur.name))
            todo += [f.type for f in SCHEMA.structs[str(cur.name)].fields]
        else:
            todo += list(cur.args)
    return frozenset(seen)


@cache
def _recursive_members() -> frozenset[str]:
    """Names of union members through which a union can contain itself (`as_graph`, `as_list`, ...)."""
    return frozenset(
        f.name
        for sdef in SCHEMA.structs.values()
        if sdef.kind == "union"
        for f in sdef.fields
        if sdef.name in _reachable(f.type)
    )


@cache
def _nonrecursive_depth(t: TypeRef) -> int:
    """Static depth of a value of type `t` in which no recursive union member is set (RecursionError when a cycle
    is not broken by a union member)."""
    if t.kind == "struct":
        sdef = SCHEMA.structs[str(t.name)]
        skip = _recursive_members() if sdef.kind == "union" else frozenset()
        return 1 + max((_nonrecursive_depth(f.type) for f in sdef.fields if f.name not in skip), default=0)
    if t.kind in ("list", "set", "map"):
        return 1 + _nonrecursive_depth(t.args[-1])
    return 0


@cache
def _depth_without_recursion(root: str) -> int:
    """Static depth of `root` if no recursive union member is ever set."""
    try:
        return _nonrecursive_depth(TypeRef("struct", root))
    except RecursionError:  # a cycle not broken by a union member: always walk
        return _UNBOUNDED


@cache
def _depth_per_member() -> int:
    """The most nesting one recursive member's value adds when no further recursive member is set in it (any
    union member of a recursive member's name counts: the bytes cannot tell the unions apart)."""
    names = _recursive_members()
    try:
        return max(
            (
                _nonrecursive_depth(f.type)
                for sdef in SCHEMA.structs.values()
                if sdef.kind == "union"
                for f in sdef.fields
                if f.name in names
            ),
            default=0,
        )
    except RecursionError:
        return _UNBOUNDED


def _cannot_recurse(json_bytes: bytes | None, root: str, max_depth: int) -> bool:
    """True when the JSON bytes cannot nest past `max_depth`: a path from the root passes each recursive member
    at most once, and between two of them (or before the first) nests no deeper than their static bounds; the
    members are counted by their quoted names in the bytes (no escapes), so a name used as a value only adds."""
    if json_bytes is None or b"\\u" in json_bytes:
        return False
    members = sum(json_bytes.count(b'"' + name.encode() + b'"') for name in _recursive_members())
    return _depth_without_recursion(root) + members * _depth_per_member() <= max_depth


def check_depth(obj: Any, max_depth: int, source: str = "", json_bytes: bytes | None = None) -> None:
    """DecodeError if `obj` nests deeper than `max_depth` containers.

    `json_bytes`, the JSON `obj` was decoded from, lets the check skip the walk when no recursive union
    member appears in it at all (the common case: programs without subgraphs).
    """
    name = type(obj).__name__
    root = TypeRef("struct", name)
    if static_depth(root) <= max_depth or _cannot_recurse(json_bytes, name, max_depth):
        return
    loc = _deepest(obj, root, 0, max_depth, ())
    if loc is not None:
        where = f"{source}: " if source else ""
        raise DecodeError(
            f"{where}nesting deeper than max_depth={max_depth}; pass a larger max_depth if the input is trusted"
            f" - at `{format_path(loc)}`",
            format_path(loc),
        )


def _deepest(value: Any, t: TypeRef, depth: int, limit: int, loc: Loc) -> Loc | None:
    """Where nesting first exceeds `limit` below `value` (whose static depth does not fit), or None."""
    depth += 1
    if depth > limit:
        return loc
    if t.kind in ("list", "set", "map"):
        inner = t.args[-1]
        if depth + static_depth(inner) <= limit:
            return None
        items = value.items() if t.kind == "map" else enumerate(value)
        for key, item in items:
            found = _deepest(item, inner, depth, limit, (*loc, key if t.kind != "map" else str(key)))
            if found is not None:
                return found
        return None
    d = value.__dict__
    for fname, ftype, fdepth in _fields(str(t.name)):  # a union's unset members are None: skipped alike
        if depth + fdepth <= limit:
            break  # deepest first: the rest fit too
        v = d[fname]
        if v is not None:
            found = _deepest(v, ftype, depth, limit, (*loc, fname))
            if found is not None:
                return found
    return None
