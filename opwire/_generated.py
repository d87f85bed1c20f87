"""Committed tables derived from the installed torch: the drift check and the write shared by their generators.

`schema/symexpr_gen.py` and `serde/torch_serializer_gen.py` each derive a table from torch and commit it as a
module headed `@generated`; `--check` (and a test) regenerates it and fails with a diff when torch moved.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

__all__ = ["check_or_write", "drift"]


def drift(committed: str, fresh: str, name: str) -> str:
    """A unified diff of committed table `name` against the regenerated one (empty when they agree)."""
    body = [ln for ln in committed.splitlines(keepends=True) if not ln.startswith('"""@generated')]
    new = [ln for ln in fresh.splitlines(keepends=True) if not ln.startswith('"""@generated')]
    return "".join(difflib.unified_diff(body, new, f"{name} (committed)", "derived from installed torch"))


def check_or_write(path: Path, fresh: str, command: str, check: bool) -> int:
    """`check`: 1 with the diff and `command` on stderr when `path` differs from `fresh`, else 0; or write `fresh`."""
    if check:
        diff = drift(path.read_text(encoding="utf-8") if path.exists() else "", fresh, path.name)
        if diff:
            sys.stderr.write(f"{diff}\nregenerate with: {command}\n")
            return 1
        return 0
    path.write_text(fresh, encoding="utf-8")
    print(f"wrote {path}")
    return 0
