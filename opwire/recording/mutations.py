"""The `mutated` metadata of a recorded call: which arguments its kernel wrote in place, and into which tensors.

The dispatch mode writes it (`{"argument": ["tensor name", ...]}` as compact JSON); replay, diff and the
distributed checks read it back from a file someone else may have written, so the reading side checks it:
anything but an object of argument name -> list of tensor names is a `DecodeError` naming the call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from opwire.errors import DecodeError, printable
from opwire.schema import models as m

__all__ = ["MUTATED", "mutated_metadata", "written_arguments"]

MUTATED = "mutated"
"""The metadata key."""


def mutated_metadata(written: Mapping[str, list[str]]) -> str:
    """The metadata value for `written` (argument name -> names of the tensors it wrote)."""
    return json.dumps(dict(written), separators=(",", ":"))


def written_arguments(rec: m.CallRecord, where: str) -> dict[str, list[str]]:
    """Argument name -> names of the tensors the call wrote ({} when it wrote none); `where` names the call."""
    raw = rec.metadata.get(MUTATED)
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and all(
        isinstance(names, list) and all(isinstance(n, str) for n in names) for names in doc.values()
    ):
        return doc
    raise DecodeError(
        f"{where}: metadata {MUTATED!r} should be a JSON object of argument name -> list of tensor names, "
        f"got {printable(raw[:60])!r}{'...' if len(raw) > 60 else ''}"
    )
