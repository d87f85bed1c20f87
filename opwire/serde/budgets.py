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
    "exceeded",
]

MAX_ELEMENTS = 1_000_000
"""Containers (JSON objects and arrays; Thrift structs, unions, lists and maps) one input may decode into.
Each becomes a Python object of up to a kilobyte, so this bounds a decode to about a gigabyte; a torch
program needs about 27 per node (37k nodes fit). Keyword `max_elements=`, CLI `--max-elements`."""

MAX_INPUT_BYTES = 4 << 30
"""Bytes read from one file that is not a zip archive (JSON or Thrift). Keyword `max_bytes=`."""

MAX_ARCHIVE_BYTES = 64 << 30
"""Bytes all entries read from one zip archive may inflate to, together. Keyword `max_bytes=`."""

MAX_COMPRESSION_RATIO = 1000
"""Declared size per compressed byte a deflated zip entry may claim (zip-bomb guard). Keyword `max_ratio=`."""

MAX_EXPR_CHARS = 100_000
"""Characters of one symbolic expression string (`expr_str`)."""


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
