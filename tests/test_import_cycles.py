"""No import cycle anywhere in opwire: every `import` counts, including those inside functions.

import-linter's contracts check the layering between packages; this checks the modules inside them, where
an import tucked into a function can hide a cycle that only bites at run time. `TYPE_CHECKING` imports
are left out (they never run).
"""

from __future__ import annotations

import ast
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
    """A module's name says its one job: no two opwire modules are called the same (deprecated aliases aside)."""
    seen: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        if path.name in ("__init__.py", "__main__.py") or "moved_module(__name__" in path.read_text(encoding="utf-8"):
            continue
        seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


def test_renamed_modules_still_import_with_a_warning() -> None:
    import importlib
    import json
    import subprocess
    import sys

    shims = {}
    for old in ROOT.rglob("*.py"):
        text = old.read_text(encoding="utf-8")
        if "moved_module(__name__" in text:
            shims[_module_name(old)] = text.split('moved_module(__name__, "')[1].split('"')[0]
    assert shims
    # one fresh process imports every old name once (none is loaded yet there) and reports what each warned
    code = (
        "import importlib, json, sys, warnings\n"
        "said = {}\n"
        "for name in sys.argv[1:]:\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        importlib.import_module(name)\n"
        "    said[name] = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]\n"
        "print(json.dumps(said))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *sorted(shims)], capture_output=True, text=True, check=True)
    said = json.loads(done.stdout)
    for old_name, new_name in shims.items():
        assert any(f"moved to {new_name}" in message for message in said[old_name]), (old_name, said[old_name])
        assert importlib.util.find_spec(new_name) is not None, new_name
