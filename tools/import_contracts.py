"""import-linter contract `faces`: the source packages import the faces of other packages, never below them.

A face is a public package's `__init__` (no name component starts with an underscore): `opwire.program`,
`opwire.serde`, `opwire.recording.distributed`, the root `opwire`. A module that is not a package (for example
`opwire.serde.json`) sits below its package's face; so does every module of a private package. Imports inside
the source packages and of the `allowed_modules` (for example `opwire.errors`, `opwire.schema.models`) are
always fine. The rule is derived from the package tree, so no module list is spelled by hand: a new module is
below its face the day it is added. `tests/test_faces.py` checks the same rule with a message naming the
file, the line and the fix.

Registered in pyproject's `[tool.importlinter]` as `contract_types = ["faces: tools.import_contracts.FacesContract"]`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import grimp
from importlinter import Contract, ContractCheck, fields, output

__all__ = ["FacesContract", "below_face"]


def below_face(
    imported: str, sources: Iterable[str], allowed: Iterable[str], is_package: Callable[[str], bool]
) -> bool:
    """Whether importing `imported` from a source package reaches below a face."""
    if any(imported == s or imported.startswith(s + ".") for s in sources) or imported in set(allowed):
        return False
    private = any(part.startswith("_") and not part.startswith("__") for part in imported.split("."))
    return private or not is_package(imported)


def face_of(module: str, is_package: Callable[[str], bool]) -> str:
    """The nearest public package above `module`: where its public names belong."""
    parts = module.split(".")
    while len(parts) > 1:
        parts.pop()
        name = ".".join(parts)
        if is_package(name) and not any(p.startswith("_") for p in parts):
            return name
    return parts[0]


class FacesContract(Contract):
    """The modules of `source_modules` import only faces (public packages), their own modules and
    `allowed_modules` from `root_package`'s tree.

    Configuration options:
        - source_modules: the packages held to faces (their descendants too).
        - allowed_modules: modules below a face that the sources may still import (optional).
    """

    type_name = "faces"

    source_modules = fields.ListField(subfield=fields.StringField())
    allowed_modules = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        """Every direct import from a source module into the root package's tree that lands below a face."""
        sources = [str(s) for s in self.source_modules]  # type: ignore[attr-defined]
        allowed = [str(a) for a in (self.allowed_modules or [])]  # type: ignore[attr-defined]
        roots = {s.split(".")[0] for s in sources}
        importers = set(sources) | {d for s in sources for d in graph.find_descendants(s)}

        def is_package(name: str) -> bool:
            return bool(graph.find_children(name))

        broken = []
        for importer in sorted(importers):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported.split(".")[0] not in roots or not below_face(imported, sources, allowed, is_package):
                    continue
                details = graph.get_import_details(importer=importer, imported=imported)
                lines = sorted({d["line_number"] for d in details})
                broken.append((importer, imported, face_of(imported, is_package), lines))
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        """One line per import below a face, with the face the name belongs on."""
        for importer, imported, face, lines in check.metadata["broken"]:
            where = ", ".join(f"l.{n}" for n in lines)
            output.print_error(
                f"- {importer} -> {imported} ({where}): below the face {face}; import the name from {face} "
                "(export it there, lazily if its module imports torch)",
                bold=False,
            )
        output.new_line()
