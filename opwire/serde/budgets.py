"""The decoding budgets: how much work and memory a file opwire did not write may cost, and how to raise each.

Every decoder takes the budget as a keyword (the CLI as a flag); the defaults below fit every torch
program we have seen with room to spare and stop hostile files long before they hurt. SECURITY.md lists
them. Exceeding one is a `DecodeError` that names the budget and how to raise it (`exceeded`).
"""

from __future__ import annotations

from typing import TypedDict

from opwire.errors import DecodeError

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_COMPRESSION_RATIO",
    "MAX_ELEMENTS",
    "MAX_EXPR_CHARS",
    "MAX_INPUT_BYTES",
    "ArchiveLimits",
    "Budget",
    "exceeded",
]

MAX_ELEMENTS = 2_000_000
"""Values one input may decode into: containers (JSON objects and arrays; Thrift structs, unions, lists and
maps) and the leaves in them (strings, numbers, bools, nulls; a key is part of its entry). Each becomes a
Python object of 30 bytes to a kilobyte (a decode stays near a gigabyte); a torch program needs about 60
per node (30k nodes fit). A streamed trace counts every frame it decodes on open against one budget.
Keyword `max_elements=`, CLI `--max-elements`."""

MAX_INPUT_BYTES = 4 << 30
"""Bytes read from one file that is not a zip archive (JSON or Thrift). Keyword `max_bytes=`."""

MAX_ARCHIVE_BYTES = 64 << 30
"""Bytes all entries read from one zip archive may inflate to, together. Keyword `max_bytes=`."""

MAX_COMPRESSION_RATIO = 1000
"""Declared size per compressed byte a deflated zip entry may claim (zip-bomb guard). Keyword `max_ratio=`."""

MAX_EXPR_CHARS = 100_000
"""Characters of one symbolic expression string (`expr_str`)."""


class Budget:
    """A `max_elements` budget spent across several decodes (the frames of one streamed trace)."""

    def __init__(self, max_elements: int = MAX_ELEMENTS) -> None:
        self.max_elements = max_elements
        self.spent = 0

    @property
    def remaining(self) -> int:
        """Values the next decodes may still produce."""
        return self.max_elements - self.spent

    def spend(self, n: int, what: str, where: str = "") -> None:
        """Charge `n` values for `what`; the budget's DecodeError once the total passes `max_elements`."""
        self.spent += n
        if self.spent > self.max_elements:
            got = f"more than {self.max_elements}"
            raise exceeded(what, got, "max_elements", self.max_elements, where, cli="--max-elements")


class ArchiveLimits(TypedDict, total=False):
    """The budgets an archive reader takes as keywords (each defaults to the constant above)."""

    max_bytes: int
    max_ratio: int
    max_elements: int


def exceeded(what: str, got: int | str, budget: str, limit: int, where: str = "", cli: str = "") -> DecodeError:
    """The DecodeError for an input past budget `budget`=`limit`, saying how to raise it."""
    flag = f" (CLI: {cli})" if cli else ""
    at = f" - at `{where}`" if where else ""
    return DecodeError(
        f"{what}: {got} exceeds the budget {budget}={limit}{at}; pass a larger {budget}={flag} if the input is trusted",
        where,
    )
