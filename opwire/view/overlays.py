"""Findings files for `opwire view --findings`: read, checked, and keyed for the page.

Three shapes are read (docs/view.md documents them):
- an opwire findings document, the IDL's `FindingsDocument` record (`{"opwire_findings": 2, "title": ...,
  "first_divergence": NODE|null, "findings": [Finding...]}`), as `opwire run --compare-nodes ... --findings F.json`
  writes it; each `Finding` names a `node` or an `op`;
- a version 1 findings document, as the previous release wrote it (`status` instead of `severity`, `target`
  instead of `op`, `mismatch` for a differing node: read as `error`);
- the output of `opwire ops validate --json` (`{"errors": N, "reports": [...]}`): each finding of a report
  applies to every node that calls the report's op.
"""

from __future__ import annotations

import json as _stdlib_json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opwire import program
from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import json

__all__ = [
    "FORMAT_VERSION",
    "SEVERITIES",
    "findings_document",
    "findings_json",
    "load_findings",
    "merge_findings",
]

FORMAT_VERSION = 2
SEVERITIES = ("error", "warning", "info", "ok")
_LEGACY_STATUS = {"mismatch": "error", "error": "error", "warning": "warning", "info": "info", "ok": "ok"}
"""Version 1 `status` -> severity."""
_MAX_BYTES = 256 << 20
_TEXT_FIELDS = ("code", "message", "fix")


def findings_document(
    findings: Sequence[m.Finding], title: str, first_divergence: str | None = None
) -> m.FindingsDocument:
    """An opwire findings document (what `--findings` reads) from findings."""
    return m.FindingsDocument(
        opwire_findings=FORMAT_VERSION, title=title, first_divergence=first_divergence, findings=list(findings)
    )


def findings_json(doc: m.FindingsDocument) -> bytes:
    """The document as opwire's JSON codec writes it (what `--findings F.json` holds)."""
    return json.encode(doc)


def op_target(op: str) -> str:
    """`ns::op` / `ns::op.overload` (as `ops validate` names ops) -> the program's `torch.ops.ns.op.overload`."""
    if "::" not in op:
        return op
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    return f"torch.ops.{ns}.{name}.{overload or 'default'}"


def load_findings(path: str | Path) -> dict[str, Any]:
    """Read one findings file into the page's form: {"title", "first", "nodes": {name: [...]}, "targets": {...}}.

    Read through `opwire.program.open` (`expect="findings"`), within its byte and element budgets."""

    p = Path(path)
    try:
        found = program.open(p, expect="findings", max_bytes=_MAX_BYTES)
    except OSError as exc:
        raise DecodeError(f"cannot read findings file {p}: {exc.strerror or exc}") from None
    except DecodeError as exc:
        raise DecodeError(f"{exc}; a findings file must be JSON (docs/view.md)") from None
    return _normalize(found.document, str(p))


def _normalize(doc: Any, where: str) -> dict[str, Any]:
    if isinstance(doc, dict) and "reports" in doc and "opwire_findings" not in doc:
        return _from_validate(doc, where)
    if not isinstance(doc, dict) or "opwire_findings" not in doc:
        raise DecodeError(
            f"{where}: expected an opwire findings document (an object with 'opwire_findings': 2 and 'findings') "
            "or the output of `opwire ops validate --json`; see docs/view.md"
        )
    version = doc["opwire_findings"]
    if version == 1 and type(version) is int:
        return _from_version_1(doc, where)
    if version != FORMAT_VERSION or type(version) is not int:
        raise DecodeError(
            f"{where}: findings format version {version!r} is not one this opwire reads (expected "
            f"{FORMAT_VERSION} or 1); write it with this opwire or upgrade opwire"
        )
    parsed = json.decode(_stdlib_json.dumps(doc).encode(), m.FindingsDocument, source=where)
    out = _empty(parsed.title or Path(where).name)
    out["first"] = parsed.first_divergence
    for i, f in enumerate(parsed.findings):
        _add_finding(out, f, f"findings[{i}]", where)
    return out


def _add_finding(out: dict[str, Any], f: m.Finding, path: str, where: str) -> None:
    if f.severity not in SEVERITIES:
        raise DecodeError(
            f"{where}: expected `{path}.severity` to be one of {', '.join(SEVERITIES)}, got {f.severity!r}",
            f"{path}.severity",
        )
    entry: dict[str, Any] = {"severity": f.severity, "code": f.code, "message": f.message, "fix": f.fix}
    if f.origin:
        entry["origin"] = f.origin
    if f.differences:
        entry["detail"] = _stdlib_json.dumps([json.to_jsonable(d) for d in f.differences], indent=1)[:4000]
    _place(out, entry, f.node, f.op, path, where)


def _place(out: dict[str, Any], entry: dict[str, Any], node: Any, op: Any, path: str, where: str) -> None:
    if isinstance(node, str) and node:
        out["nodes"].setdefault(node, []).append(entry)
    elif isinstance(op, str) and op:
        out["targets"].setdefault(op_target(op), []).append(entry)
    else:
        raise DecodeError(f"{where}: expected `{path}` to name a 'node' or an 'op' (a non-empty string)", path)
    out["count"] += 1


def _from_version_1(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """A findings document of the previous release: `status` for severity, `target` for op, free-form `detail`."""
    entries = doc.get("findings")
    if not isinstance(entries, list):
        raise DecodeError(f"{where}: expected 'findings' to be a list, got {type(entries).__name__}", "findings")
    out = _empty(_text(doc.get("title"), where, "title") or Path(where).name)
    first = doc.get("first_divergence")
    if first is not None and not isinstance(first, str):
        raise DecodeError(f"{where}: expected 'first_divergence' to be a node name or null", "first_divergence")
    out["first"] = first
    for i, e in enumerate(entries):
        path = f"findings[{i}]"
        if not isinstance(e, dict):
            raise DecodeError(f"{where}: expected an object at `{path}`, got {type(e).__name__}", path)
        status = e.get("status")
        if status not in _LEGACY_STATUS:
            raise DecodeError(
                f"{where}: expected `{path}.status` to be one of {', '.join(_LEGACY_STATUS)}, got {status!r}",
                f"{path}.status",
            )
        entry: dict[str, Any] = {"severity": _LEGACY_STATUS[status]}
        for k in _TEXT_FIELDS:
            entry[k] = _text(e.get(k), where, f"{path}.{k}")
        if "detail" in e:
            entry["detail"] = _stdlib_json.dumps(e["detail"], indent=1)[:4000]
        _place(out, entry, e.get("node"), e.get("target"), path, where)
    return out


def _empty(title: str) -> dict[str, Any]:
    return {"title": title, "first": None, "nodes": {}, "targets": {}, "count": 0}


def _text(v: Any, where: str, path: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise DecodeError(f"{where}: expected a string at `{path}`, got {type(v).__name__}", path)
    return v


def _from_validate(doc: dict[str, Any], where: str) -> dict[str, Any]:
    reports = doc["reports"]
    if not isinstance(reports, list):
        raise DecodeError(f"{where}: expected 'reports' to be a list (the output of `opwire ops validate --json`)")
    out = _empty(f"ops validate ({Path(where).name})")
    for i, r in enumerate(reports):
        if not isinstance(r, dict) or not isinstance(r.get("op"), str) or not isinstance(r.get("findings"), list):
            where_i = f"reports[{i}]"
            raise DecodeError(f"{where}: expected `{where_i}` to have an 'op' and a 'findings' list", where_i)
        for j, f in enumerate(r["findings"]):
            path = f"reports[{i}].findings[{j}]"
            if not isinstance(f, dict):
                raise DecodeError(f"{where}: expected an object at `{path}`", path)
            severity = f.get("severity")
            if severity not in SEVERITIES:
                raise DecodeError(
                    f"{where}: expected `{path}.severity` to be one of {', '.join(SEVERITIES)}, got {severity!r}",
                    f"{path}.severity",
                )
            entry: dict[str, Any] = {"severity": severity}
            for k in _TEXT_FIELDS:
                entry[k] = _text(f.get(k), where, f"{path}.{k}")
            _place(out, entry, None, r["op"], path, where)
    return out


def merge_findings(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Several loaded findings files as one (titles joined; the first divergence of the first that has one)."""
    if not parts:
        return None
    out = _empty(" + ".join(p["title"] for p in parts))
    for p in parts:
        out["first"] = out["first"] or p["first"]
        out["count"] += p["count"]
        for key in ("nodes", "targets"):
            for name, entries in p[key].items():
                out[key].setdefault(name, []).extend(entries)
    return out
