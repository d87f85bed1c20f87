"""opwire's own reader of pytree spec strings (`in_spec`/`out_spec`): a TreeSpec from JSON, importing nothing.

torch's `treespec_loads` imports whatever module a file names: an `{"__enum__": true, "fqn": "os:..."}`
dictionary key runs `importlib.import_module`, and a `collections.defaultdict` context sets
`default_factory` to any attribute of any module (`os.abort`). This reader parses the same JSON
(protocol 1 of torch/utils/_pytree.py) and builds the TreeSpec itself: node types resolve only among
the classes registered with `torch.utils._pytree` at run time (by their serialized type names),
namedtuple classes only among registered namedtuples, enum keys only among enum classes of modules
already imported, and a defaultdict's factory only from `DEFAULT_FACTORIES`. A class nobody registered
is a DecodeError naming it and saying that importing the module that registers it fixes it.
"""

from __future__ import annotations

import collections
import enum
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from opwire.errors import DecodeError
from opwire.schema import models as m

if TYPE_CHECKING:
    import torch.utils._pytree as pytree

# torch.utils._pytree is imported only where a TreeSpec is built: checking a spec, as `opwire convert` does,
# needs no torch

__all__ = ["DEFAULT_FACTORIES", "MAX_SPEC_NODES", "check_spec", "loads_spec", "program_specs"]

DEFAULT_FACTORIES: dict[tuple[str, str], Any] = {
    ("builtins", "list"): list,
    ("builtins", "dict"): dict,
    ("builtins", "set"): set,
    ("builtins", "tuple"): tuple,
    ("builtins", "int"): int,
    ("builtins", "float"): float,
    ("builtins", "bool"): bool,
    ("builtins", "str"): str,
    ("builtins", "bytes"): bytes,
    ("builtins", "complex"): complex,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("collections", "deque"): collections.deque,
}
"""(module, qualname) -> the only default_factory values a serialized defaultdict may name."""

MAX_SPEC_NODES = 1_000_000
"""Most nodes one spec string may describe."""

_DEPTH = 1000  # deepest nesting; the JSON parser itself stops far below what a spec needs


class _SpecError(Exception):
    def __init__(self, message: str, loc: str) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc


def loads_spec(serialized: str, where: str = "spec") -> pytree.TreeSpec:
    """The TreeSpec a serialized spec string describes; DecodeError for anything but registered types."""
    spec: pytree.TreeSpec = _walk(serialized, where, build=True)
    return spec


def check_spec(serialized: str, where: str = "spec") -> None:
    """DecodeError unless torch's `treespec_loads` could read `serialized` without importing or fetching anything.

    For specs opwire writes on (`convert`) rather than reads: types need not be registered here, but
    defaultdict factories must come from the table and enum keys from modules already imported."""
    _walk(serialized, where, build=False)


def _walk(serialized: str, where: str, build: bool) -> Any:
    tree = _parse(serialized, where)
    try:
        return _Builder(build).node(tree, "", 0)
    except _SpecError as exc:
        loc = f"{where}{exc.loc}"
        raise DecodeError(f"{exc.message} - at `{loc}`", loc) from None


def program_specs(program: m.ExportedProgram) -> Iterator[tuple[str, str]]:
    """(spec string, path) of every in_spec and out_spec of a program's module call graph."""
    for i, entry in enumerate(program.graph_module.module_call_graph):
        if entry.signature is not None:
            where = f"graph_module.module_call_graph[{i}].signature"
            yield entry.signature.in_spec, f"{where}.in_spec"
            yield entry.signature.out_spec, f"{where}.out_spec"


def _parse(serialized: str, where: str) -> Any:
    """The tree of a spec string after checking its envelope `[1, tree]`."""
    if not isinstance(serialized, str):
        raise DecodeError(f"Expected a pytree spec string, got {type(serialized).__name__} - at `{where}`", where)
    try:
        doc = json.loads(serialized)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"Expected a pytree spec (JSON), got unreadable text ({exc}) - at `{where}`", where) from None
    if not (isinstance(doc, list) and len(doc) == 2 and type(doc[0]) is int):
        raise DecodeError(f"Expected a pytree spec [protocol, tree], got {serialized[:60]!r} - at `{where}`", where)
    protocol, tree = doc
    if protocol != 1:
        raise DecodeError(
            f"Expected pytree spec protocol 1, got {protocol} - at `{where}`; the file comes from a newer torch",
            where,
        )
    return tree


class _Builder:
    """Walks a spec tree; builds the TreeSpec (`build=True`) or only checks that nothing in it imports."""

    def __init__(self, build: bool = True) -> None:
        self.count = 0
        self.build = build

    def node(self, tree: Any, loc: str, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_SPEC_NODES or depth > _DEPTH:
            raise _SpecError(f"a pytree spec of more than {MAX_SPEC_NODES} nodes or {_DEPTH} levels", loc)
        if not isinstance(tree, dict) or set(tree) != {"type", "context", "children_spec"}:
            got = sorted(tree) if isinstance(tree, dict) else type(tree).__name__
            raise _SpecError(f"Expected a spec node with keys type, context, children_spec, got {got}", loc)
        name, context, children = tree["type"], tree["context"], tree["children_spec"]
        if not isinstance(children, list):
            raise _SpecError(f"Expected a list of children, got {type(children).__name__}", f"{loc}.children_spec")
        if name is None:
            if context is not None or children:
                raise _SpecError("a leaf (type null) with a context or children", loc)
            if not self.build:
                return None
            import torch.utils._pytree as pytree  # deferred: building a spec (see the imports)

            return pytree.treespec_leaf()
        if not isinstance(name, str):
            raise _SpecError(f"Expected a type name, got {type(name).__name__}", f"{loc}.type")
        specs = [self.node(c, f"{loc}.children_spec[{i}]", depth + 1) for i, c in enumerate(children)]
        if not self.build:
            _check_context(name, context, f"{loc}.context")
            return None
        import torch.utils._pytree as pytree  # deferred: building a spec (see the imports)

        typ = _registered(name, loc)
        return pytree.TreeSpec(typ, _context(name, typ, context, f"{loc}.context"), specs)


def _registered(name: str, loc: str) -> type:
    import torch.utils._pytree as pytree  # deferred: building a spec (see the imports)

    typ = pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name)
    if typ is None or typ not in pytree.SUPPORTED_NODES:
        module = name.rpartition(".")[0] or name
        raise _SpecError(
            f"the pytree type {name!r} is not registered with torch.utils._pytree in this process; opwire never "
            f"imports a module a file names: import the module that registers it first (CLI: --import {module})",
            f"{loc}.type",
        )
    return typ


def _context(name: str, typ: type, context: Any, loc: str) -> Any:
    if name == "collections.namedtuple":
        return _namedtuple(context, loc)
    if name == "collections.defaultdict":
        return _defaultdict(context, loc)
    import torch.utils._pytree as pytree  # deferred: building a spec (see the imports)

    node = pytree.SUPPORTED_SERIALIZED_TYPES.get(typ)
    if node is not None and node.from_dumpable_context is not None:
        # a custom serializer registered by the user's own library (trusted, like its op kernels)
        try:
            return node.from_dumpable_context(context)
        except Exception as exc:  # user code: report, do not crash
            raise _SpecError(f"the context reader registered for {name!r} refused it ({exc})", loc) from None
    if not isinstance(context, str):
        raise _SpecError(f"Expected a JSON string context for {name!r}, got {type(context).__name__}", loc)
    return _json_context(context, loc)


def _json_context(context: str, loc: str) -> Any:
    """A JSON context, enum keys resolved among imported modules only."""
    try:
        return json.loads(context, object_hook=_enum_key)
    except _SpecError as exc:
        raise _SpecError(exc.message, loc) from None
    except (ValueError, RecursionError) as exc:
        raise _SpecError(f"Expected a JSON context, got unreadable text ({exc})", loc) from None


def _check_context(name: str, context: Any, loc: str) -> None:
    """What torch's loader would import for this node's context: defaultdict factories and enum keys."""
    if name == "collections.defaultdict":
        _defaultdict(context, loc)
    elif isinstance(context, str) and name != "collections.namedtuple":
        _json_context(context, loc)


def _namedtuple(context: Any, loc: str) -> type:
    import torch.utils._pytree as pytree  # deferred: building a spec (see the imports)

    typ = pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(context) if isinstance(context, str) else None
    if typ is None or not (isinstance(typ, type) and issubclass(typ, tuple) and hasattr(typ, "_fields")):
        raise _SpecError(
            f"the namedtuple class {context!r} is not registered with torch.utils._pytree in this process; import "
            f"the module that registers it first (CLI: --import MODULE)",
            loc,
        )
    return typ


def _defaultdict(context: Any, loc: str) -> list[Any]:
    keys = {"default_factory_module", "default_factory_name", "dict_context"}
    if not isinstance(context, dict) or set(context) != keys:
        raise _SpecError(f"Expected a defaultdict context with keys {sorted(keys)}, got {context!r:.80}", loc)
    key = (context["default_factory_module"], context["default_factory_name"])
    factory = DEFAULT_FACTORIES.get(key) if all(isinstance(k, str) for k in key) else None
    if factory is None:
        allowed = ", ".join(f"{m}.{n}" for m, n in DEFAULT_FACTORIES)
        raise _SpecError(f"defaultdict factory {key[0]}.{key[1]} is not one opwire builds (allowed: {allowed})", loc)
    keys_ctx = context["dict_context"]
    if not isinstance(keys_ctx, list):
        raise _SpecError(f"Expected a list of dict keys, got {type(keys_ctx).__name__}", f"{loc}.dict_context")
    return [factory, [_plain_key(k, f"{loc}.dict_context") for k in keys_ctx]]


def _plain_key(k: Any, loc: str) -> Any:
    if isinstance(k, dict):
        return _enum_key(k, loc)
    return k


def _enum_key(obj: dict[str, Any], loc: str = "") -> Any:
    """An enum member named by `{"__enum__": true, "fqn": "module:Qual", "name": ...}`, from imported modules only."""
    if "__enum__" not in obj:
        return obj
    fqn, member = obj.get("fqn"), obj.get("name")
    if not isinstance(fqn, str) or not isinstance(member, str):
        raise _SpecError(f"Expected an enum key with string fqn and name, got {obj!r:.80}", loc)
    modname, _, qualname = fqn.partition(":")
    mod = sys.modules.get(modname)
    target: Any = mod
    for part in qualname.split("."):
        # vars() lookups only: no module __getattr__ (lazy imports), no descriptors run
        target = vars(target).get(part) if target is not None and hasattr(target, "__dict__") else None
    if not (isinstance(target, type) and issubclass(target, enum.Enum)) or member not in target.__members__:
        raise _SpecError(
            f"the enum {fqn}.{member} is not a member of an enum class of an imported module; opwire never imports a "
            f"module a file names: import {modname or 'the module that defines it'} first (CLI: --import {modname})",
            loc,
        )
    return target.__members__[member]
