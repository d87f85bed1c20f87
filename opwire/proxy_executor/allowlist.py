"""The allowlist a file's ops are checked against: `allowlist.txt`, data derived from torch by `opset_source`."""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["allowlist", "read_allowlist"]

_DATA = Path(__file__).with_name("allowlist.txt")


def read_allowlist(text: str) -> dict[str, str]:
    """Op spelling ("aten::add.Tensor", "aten::relu") -> its sources, from the allowlist file's text."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, source = line.partition(" ")
            out[op] = source.strip()
    return out


@functools.cache
def allowlist() -> frozenset[str]:
    """The ops a file may run without `allow_ops` (torch namespaces; other namespaces are the user's)."""
    return frozenset(read_allowlist(_DATA.read_text(encoding="utf-8")))
