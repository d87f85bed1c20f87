"""No import cycle anywhere in opwire: every `import` counts, including those inside functions.

import-linter's contracts check the layering between packages; this checks the modules inside them, where
an import tucked into a function can hide a cycle that only bites at run time. `TYPE_CHECKING` imports
are left out (they never run).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "opwire"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The opwire modules `path` imports anywhere in its body (a package import names its __init__)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, modules) for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_among_opwire_modules() -> None:
    graph = _graph()
    # a package's __init__ re-exporting its own modules is the package's face, not a cycle: drop the edges
    # from a submodule up to its own package's __init__ (importing `opwire.serde` to reach a sibling is
    # spelled `from opwire.serde import x`, which the walker records as the sibling itself)
    for name, deps in graph.items():
        deps.difference_update({p for p in deps if name.startswith(p + ".")})
    cycles = _cycles(graph)
    assert cycles == [], "import cycles (imports inside functions included):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_checker_sees_a_cycle_hidden_in_a_function() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_two_modules_share_a_name() -> None:
    """A module's name says its one job: no two opwire modules are called the same."""
    seen: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


def _is_shim(tree: ast.Module) -> bool:
    """A module whose body is only imports (and `__all__`, a docstring, an `if`): a re-export of other modules."""
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom | ast.If):
            continue
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):  # a call such as `alias(__name__, ...)`
            continue
        return False
    return bool(body)


def test_no_rename_shims() -> None:
    """No shims at 0.x: a renamed module is imported from its new home everywhere (CHANGELOG.md says where)."""
    shims = [
        str(p.relative_to(ROOT.parent))
        for p in sorted(ROOT.rglob("*.py"))
        if p.name not in ("__init__.py", "__main__.py") and _is_shim(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert shims == [], f"modules that only re-export others (import from the real module and delete these): {shims}"


def test_the_shim_check_sees_a_re_export() -> None:
    assert _is_shim(ast.parse('"""Moved."""\nfrom a import b\n__all__ = ["b"]\n'))
    assert _is_shim(ast.parse("from x import moved\nmoved(__name__, 'y')\n"))
    assert not _is_shim(ast.parse("from a import b\n\ndef f() -> int:\n    return b\n"))


# DESIGN.md's own spelling for the IDL models (`m.Node`, `m.Graph`), used by users, docs and tests alike
_CONVENTIONS = {"opwire.schema.models": "m"}


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _module_imports(tree: ast.AST, package: str) -> list[tuple[str, str, str]]:
    """(module, its own last name, the name it is bound to) for every import of a module that names the binding."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, a.name.rpartition(".")[2], a.asname) for a in node.names if a.asname]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                if base.split(".")[0] == "opwire" and _is_module(f"{base}.{a.name}"):
                    found.append((f"{base}.{a.name}", a.name, a.asname or a.name))
    return found


def _aliases(source: str, name: str, package: str) -> list[str]:
    """Every import in module `name` that binds an opwire module under another name than its own, and every
    stdlib module aliased where no opwire module (imported, or this one) takes its name."""
    imports = _module_imports(ast.parse(source), package)
    own = {bound for module, _, bound in imports if module.startswith("opwire.")} | {name.rpartition(".")[2]}
    bad = []
    for module, last, bound in imports:
        if bound == last or _CONVENTIONS.get(module) == bound:
            continue
        top = module.split(".")[0]
        if top == "opwire" or (top in sys.stdlib_module_names and last not in own):
            bad.append(f"{name}: {module} as {bound}")
    return bad


def test_opwire_modules_are_imported_under_their_own_names() -> None:
    """`from opwire.serde import tensors`, never `tensors as _tensors`: one name per module, everywhere.

    Third-party conventions (`torch.distributed as dist`) are not opwire's to rename. A stdlib module may be
    aliased only where an opwire module of the same name takes the name (`import json as _stdlib_json` beside
    `from opwire.serde import json`, or inside opwire.serde.json itself); anywhere else it keeps its own name.
    The IDL models keep DESIGN.md's `from opwire.schema import models as m` (`m.Node`), the one convention."""
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        bad += _aliases(path.read_text(encoding="utf-8"), name, package)
    assert bad == [], "aliased imports (rename the clashing local, or import the function you need):\n" + "\n".join(bad)


def test_the_alias_checker_sees_every_spelling() -> None:
    source = (
        "import mmap as _mmap\nimport json as stdlib_json\nimport torch.distributed as dist\n"
        "from opwire.schema import models as m\nfrom opwire.serde import json, tensors as _tensors, framing\n"
        "from . import objects as values\nfrom .budgets import MAX_ELEMENTS as LIMIT\n"
        "def f():\n    import opwire.serde.thrift as codec\n"
    )
    assert _aliases("import json as _json\nimport os as _os\n", "opwire.serde.json", "opwire.serde") == [
        "opwire.serde.json: os as _os"
    ]
    assert _aliases(source, "opwire.serde.probe", "opwire.serde") == [
        "opwire.serde.probe: mmap as _mmap",
        "opwire.serde.probe: opwire.serde.tensors as _tensors",
        "opwire.serde.probe: opwire.serde.objects as values",
        "opwire.serde.probe: opwire.serde.thrift as codec",
    ]
