"""What a finding is: its severity, its code's entry in the catalog, and the finding itself.

`ops validate`, `bc-check` and node comparison (`opwire run --compare-nodes`) report findings as data, never
as exceptions, in one shape: the IDL's `Finding` record. `catalog.py` holds every code (`CODES`) and makes
findings from them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from opwire.schema import models as m
from opwire.serde.json import to_jsonable

__all__ = [
    "EFFECT_ORDER",
    "EFFECT_SEVERITY",
    "Code",
    "Effect",
    "Finding",
    "Severity",
    "samples_text",
]


class Severity(str, enum.Enum):
    """How bad a finding is: an error fails `ops validate`, a warning or info does not; ok marks a match."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    OK = "ok"  # nothing wrong: a node whose outputs match the saved run (node comparison)


class Effect(str, enum.Enum):
    """What a bc-check change does to one audience: breaks it, silently changes its results, or nothing."""

    BREAKING = "breaking"
    SILENT = "silent"
    COMPATIBLE = "compatible"


EFFECT_SEVERITY: dict[Effect, Severity] = {
    Effect.BREAKING: Severity.ERROR,
    Effect.SILENT: Severity.WARNING,
    Effect.COMPATIBLE: Severity.INFO,
}
"""The severity of a change whose worst effect is this."""

EFFECT_ORDER = (Effect.BREAKING, Effect.SILENT, Effect.COMPATIBLE)
"""Worst first."""


@dataclass(frozen=True)
class Code:
    """One finding code: its severity, a one-line summary for the docs, and message/fix templates.

    bc-check codes also carry `effects`: the worst effect on (source callers, REQUIRE_SERIALIZED files,
    REQUIRE_CALLER files, FROM_SCHEMA files); their severity is the worst of these.
    """

    code: str
    severity: Severity
    summary: str
    message: str
    fix: str
    effects: tuple[Effect, Effect, Effect, Effect] | None = None


@dataclass(frozen=True)
class Finding:
    """One thing op validation found about one op."""

    code: str
    severity: Severity
    op: str
    message: str
    fix: str

    def __str__(self) -> str:
        """Two lines, as `opwire ops validate` prints them: severity, code and message; then the fix."""
        return f"{self.severity.value} {self.code}: {self.message}\n  fix: {self.fix}"

    def to_model(self) -> m.Finding:
        """The finding as the IDL's `Finding` record (opwire.thrift), the shape every findings output shares."""
        return m.Finding(code=self.code, severity=self.severity.value, op=self.op, message=self.message, fix=self.fix)

    def to_json(self) -> dict[str, Any]:
        """The finding as JSON-ready data: exactly the JSON codec's form of `to_model()`."""
        data: dict[str, Any] = to_jsonable(self.to_model())
        return data


def samples_text(indices: list[int]) -> str:
    """`sample 0`, or `samples 0 and 2 (the error of sample 0)` when one cause fails several samples."""
    if len(indices) == 1:
        return f"sample {indices[0]}"
    listed = ", ".join(str(i) for i in indices[:-1]) + f" and {indices[-1]}"
    return f"samples {listed} (the error of sample {indices[0]})"
