"""House rules for opwire's modules: each is small enough to read in one sitting, and each package's guide lists
exactly the modules in its folder.

A package's guide is the `Modules:` section of its `__init__.py` docstring (Google style, so the reference pages
render it as a table): one line per module or subpackage, `name: what it does`. A module added, renamed or removed
without its line fails here with the line to add or remove.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "opwire"
MAX_LINES = 400
_ENTRY = re.compile(r"    (\w+): (.*\S)\Z")


def _generated(path: Path) -> bool:
    """Written by a generator (its first line says `@generated`): exempt from the size rule, as from review."""
    with path.open(encoding="utf-8") as f:
        return "@generated" in f.readline()


def _rel(path: Path, root: Path = ROOT) -> str:
    return path.relative_to(root.parent).as_posix()


def test_no_hand_written_module_is_over_400_lines() -> None:
    long = {}
    for path in sorted(ROOT.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and not _generated(path):
            long[_rel(path)] = lines
    assert long == {}, (
        f"modules over {MAX_LINES} lines: split each along its seams into modules named for their one job "
        f"(and add them to the package's guide): {long}"
    )


def test_only_generated_modules_are_exempt_from_the_size_rule() -> None:
    assert _generated(ROOT / "schema" / "models.py")
    assert not _generated(ROOT / "schema" / "symexpr.py")
    assert not _generated(ROOT / "_generated.py")  # the generators' shared helper is written by hand


def _modules(package: Path) -> dict[str, Path]:
    """The modules and subpackages in a package's folder, by name."""
    found = {p.stem: p for p in package.glob("*.py") if p.name != "__init__.py"}
    found.update({d.name: d for d in package.iterdir() if (d / "__init__.py").is_file()})
    return found


def _guide(init: Path) -> dict[str, str] | None:
    """The `Modules:` section of a package's docstring (name -> line), or None without one."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")), clean=True) or ""
    lines = doc.splitlines()
    if "Modules:" not in lines:
        return None
    entries: dict[str, str] = {}
    for line in lines[lines.index("Modules:") + 1 :]:
        if not line.startswith("    "):
            break
        match = _ENTRY.match(line)
        entries[match.group(1) if match else line.strip()] = match.group(2) if match else ""
    return entries


def _guide_problems(package: Path, root: Path = ROOT) -> list[str]:
    """What to change in a package's guide so it lists exactly the modules in its folder, one line each."""

    init = package / "__init__.py"
    modules = _modules(package)
    guide = _guide(init)
    if guide is None:
        return [
            f"{_rel(init, root)}: its docstring has no `Modules:` section; end the docstring with `Modules:` and one "
            f"line per module, `    name: what it does`, for: {', '.join(sorted(modules))}"
        ]
    problems = []
    for name in sorted(modules.keys() - guide.keys()):
        path = modules[name]
        shown = f"{_rel(path, root)}/" if path.is_dir() else _rel(path, root)
        before = [n for n in sorted(guide) if n < name and n in modules]
        where = f"after the `{before[-1]}` line" if before else "as its first line"
        problems.append(
            f"{shown} is missing from the guide in {_rel(init, root)}: add `    {name}: <what it does, one line>` "
            f"under `Modules:`, {where}"
        )
    for name in sorted(guide.keys() - modules.keys()):
        problems.append(
            f"{_rel(init, root)} lists `{name}` under `Modules:`, but {_rel(package, root)}/ has no module or package of that "
            "name: remove the line (or rename it to the module's new name)"
        )
    for name in sorted(guide.keys() & modules.keys()):
        if not guide[name]:
            problems.append(
                f"{_rel(init, root)}: the `{name}` line under `Modules:` must be `    {name}: what it does`"
            )
    return problems


def test_every_package_guide_lists_exactly_its_modules() -> None:
    packages = sorted(p.parent for p in ROOT.rglob("__init__.py"))
    assert ROOT in packages and ROOT / "recording" / "distributed" in packages
    problems = [problem for package in packages for problem in _guide_problems(package)]
    assert problems == [], "package guides out of date:\n" + "\n".join(problems)


def test_the_guide_check_names_what_to_add_and_what_to_remove(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("alpha.py", "gamma.py", "sub/__init__.py"):
        (package / name).write_text('"""x."""\n')
    (package / "__init__.py").write_text('"""A package.\n\nModules:\n    alpha: the first\n    beta: gone\n"""\n')
    assert _guide_problems(package, root=package) == [
        "pkg/gamma.py is missing from the guide in pkg/__init__.py: add `    gamma: <what it does, one line>` under "
        "`Modules:`, after the `alpha` line",
        "pkg/sub/ is missing from the guide in pkg/__init__.py: add `    sub: <what it does, one line>` under "
        "`Modules:`, after the `alpha` line",
        "pkg/__init__.py lists `beta` under `Modules:`, but pkg/ has no module or package of that name: remove the "
        "line (or rename it to the module's new name)",
    ]
