"""`opwire.snapshot_ops`: every op of some namespaces as a stable, diffable `OpLibrarySnapshot`.

Sorted namespaces and ops, no addresses or timestamps: an unchanged library gives identical bytes.
The schema -> snapshot conversion is `opwire.schema.ops.OpSchema.to_snapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from pydantic import BaseModel

from opwire import program
from opwire.errors import OpValidationError
from opwire.schema import models as m
from opwire.schema.ops import OpSchema, op_schema, parse_op_schema

__all__ = ["load_snapshot", "snapshot_from_schemas", "snapshot_ops"]


def _namespaces(namespaces: str | Iterable[str]) -> list[str]:
    names = [namespaces] if isinstance(namespaces, str) else list(namespaces)
    bad = [n for n in names if not isinstance(n, str) or not n or "::" in n or "." in n]
    if not names or bad:
        raise OpValidationError(
            f"expected one or more namespace names such as 'mylib', got {names!r}; "
            "name namespaces without '::' or an op name"
        )
    return sorted(set(names))


def _library(namespaces: list[str], schemas: list[tuple[OpSchema, tuple[str, ...]]]) -> m.OpLibrarySnapshot:
    ops = sorted((s.to_snapshot(tags) for s, tags in schemas), key=lambda o: (o.name, o.overload))
    return m.OpLibrarySnapshot(namespaces=namespaces, ops=ops, torch_version=str(torch.__version__))


def snapshot_ops(namespaces: str | Iterable[str]) -> m.OpLibrarySnapshot:
    """A snapshot of every op with a registered schema in the given namespaces (loaded in this process)."""
    wanted = _namespaces(namespaces)
    found: list[tuple[OpSchema, tuple[str, ...]]] = []
    seen: set[str] = set()
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        ns, _, rest = name.partition("::")
        if ns not in wanted:
            continue
        base, _, overload = rest.partition(".")
        try:
            torch._C._dispatch_find_schema_or_throw(f"{ns}::{base}", overload)
        except RuntimeError:
            continue  # kernels without a schema: `ops validate` reports them (schema_missing)
        op = getattr(getattr(getattr(torch.ops, ns), base), overload or "default")
        found.append((op_schema(op), tuple(sorted(t.name for t in op.tags))))
        seen.add(ns)
    empty = [ns for ns in wanted if ns not in seen]
    if empty:
        raise OpValidationError(
            f"no operator with a schema is registered in namespace(s) {', '.join(empty)}: expected the library "
            "to be loaded; load it first (--import MODULE or --load-library PATH.so)"
        )
    return _library(wanted, found)


def snapshot_from_schemas(schemas: Iterable[str], tags: dict[str, Iterable[str]] | None = None) -> m.OpLibrarySnapshot:
    """A snapshot built from schema strings ("ns::op.overload(...) -> ..."), without registering anything.

    `tags` maps "ns::op.overload" (or "ns::op") to tag names.
    """
    parsed = [parse_op_schema(s) for s in schemas]
    tag_map = tags or {}
    rows = [(s, tuple(sorted(tag_map.get(s.qualname, ())))) for s in parsed]
    return _library(sorted({s.namespace for s in parsed}), rows)


def _wrong_kind(path: str | Path, kind: str) -> OpValidationError:
    return OpValidationError(
        f"{path}: expected an op library snapshot (written by `opwire ops snapshot`), got a {kind}; "
        "pass the snapshot file"
    )


def load_snapshot(path: str | Path, *, max_elements: int | None = None) -> m.OpLibrarySnapshot:
    """Read a snapshot file (JSON, or Thrift with opwire's header) written by `opwire ops snapshot`.

    Read through `opwire.program.open`, within its byte and element budgets; another kind of file is an
    OpValidationError saying what it holds."""

    obj = program.open(path, max_elements=max_elements)
    if not isinstance(obj, m.OpLibrarySnapshot):
        model = getattr(obj, "model", None)
        raise _wrong_kind(path, type(model if isinstance(model, BaseModel) else obj).__name__)
    return obj
