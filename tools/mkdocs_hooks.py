"""mkdocs hooks: SECURITY.md lives at the repository root (where GitHub shows it) and is published as security.md.

One source for the trust boundary: the page is generated from the root file at build time, with its
`docs/...` links rewritten to be relative to the site, so nothing is copied by hand.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

_ROOT = Path(__file__).resolve().parent.parent
_DOCS_LINK = re.compile(r"\]\(docs/")


def on_files(files: Files, config: Any) -> Files:
    """Add security.md, generated from the repository's SECURITY.md."""
    text = (_ROOT / "SECURITY.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "security.md", content=_DOCS_LINK.sub("](", text)))
    return files
