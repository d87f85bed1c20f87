"""The op policy a file's ops are checked against: `allowlist.txt`, data derived from torch by `opset_source`.

Each line is `op class detail`: `admitted SOURCE`, `precondition FAMILY` or `refused CATEGORY`.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["allowlist", "policy_entry", "policy_table", "read_allowlist", "read_policy"]

_DATA = Path(__file__).with_name("allowlist.txt")


def read_policy(text: str) -> dict[str, tuple[str, str]]:
    """Op spelling ("aten::add.Tensor", "aten::relu") -> (class, detail), from the policy file's text."""
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, cls, detail = [*line.split(None, 2), "", ""][:3]
            out[op] = (cls, detail)
    return out


def read_allowlist(text: str) -> dict[str, str]:
    """Op spelling -> "class detail" for every op the policy file lets run (admitted or with a precondition)."""
    return {op: f"{c} {d}" for op, (c, d) in read_policy(text).items() if c in ("admitted", "precondition")}


@functools.cache
def policy_table() -> dict[str, tuple[str, str]]:
    """Every ATen overload of the policy file -> (class, detail)."""
    return read_policy(_DATA.read_text(encoding="utf-8"))


def policy_entry(op: str) -> tuple[str, str] | None:
    """(class, detail) of op `op` ("aten::add.Tensor"; "aten::relu" for the default overload), or None."""
    return policy_table().get(op)


@functools.cache
def allowlist() -> frozenset[str]:
    """The ops a file may run without `allow_ops` (torch namespaces; other namespaces are the user's)."""
    return frozenset(op for op, (cls, _) in policy_table().items() if cls in ("admitted", "precondition"))
