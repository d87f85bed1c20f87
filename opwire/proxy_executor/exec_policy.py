"""The execution policy for file-supplied work: which torch ops a file may call, and the execution budgets.

A file opwire did not write names its ops. Most torch ops only read and write their tensor arguments;
some reach further: the filesystem (`aten::from_file` maps any path, shared and writable), other
processes (the distributed namespaces), the process's output streams or profiler, an attribute named by
the file, or they build tensors whose invariants nobody checks (sparse constructors: a CSR tensor with
bad `crow_indices` makes `_to_dense` write out of bounds, SIGSEGV). Those are refused at bind time with a
`BindError` naming the op and why, unless the caller allows them by name (`allow_ops=[...]`,
`--allow-op`).

The refused set is computed from each op's registered schema (`classify`), with rules that fail closed:
a `str` argument whose name is not a known mode/flag spelling, or an `unsafe` in the name that nobody
reviewed, refuses the op too. Ops of namespaces torch does not ship (the user's own libraries, which
the user imported and so trusts) are never refused. `refusal_table()` lists every refused op of the
running torch (docs/executor.md shows it; a test fails when torch adds an op the rules cannot place).

`ExecPolicy` also carries the budgets of a run: `while_loop` iterations and an optional wall time
(`opwire.proxy_executor.run_budgets`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opwire.errors import BindError, OpwireError
from opwire.proxy_executor import policy_rules
from opwire.proxy_executor.allowlist import allowlist, policy_entry
from opwire.proxy_executor.run_budgets import MAX_MEMORY, WHILE_LOOP_ITERATIONS
from opwire.proxy_executor.targets import Target, resolve, split_target
from opwire.schema.opschema import OpSchema, op_schema

__all__ = [
    "TORCH_NAMESPACES",
    "ExecPolicy",
    "Refusal",
    "classify",
    "refusal_table",
    "refusals_collected",
    "refused_message",
    "sparse_checks_on",
]

TORCH_NAMESPACES = frozenset(
    {
        "aten", "prim", "prims", "quantized", "_quantized", "quantized_decomposed", "quantization",
        "static_runtime", "c10d", "_c10d_functional", "_c10d_functional_autograd", "symm_mem", "_dtensor",
        "onednn", "mkldnn", "mkldnn_prepacked", "mkl", "sparse", "inductor", "inductor_prims", "profiler",
        "_test", "debugprims", "rngprims", "_native", "debug_mode_ops", "export", "higher_order", "fbgemm",
        "cuda", "xpu", "mps", "_inductor_test", "streams",
    }
)  # fmt: skip
"""Namespaces whose ops torch itself registers (a test checks `import torch` registers no other)."""

_DISTRIBUTED = frozenset({"c10d", "_c10d_functional", "_c10d_functional_autograd", "symm_mem", "_dtensor"})
_NAMESPACE_REASONS = {
    **{ns: ("process", "communicates with other processes (distributed collectives)") for ns in _DISTRIBUTED},
    "profiler": ("process", "drives the process-wide profiler"),
    "debugprims": ("filesystem", "reads tensors from the content store on disk"),
}

_OP_REASONS = {
    "aten::_print": ("process", "writes to the process's standard output"),
    "aten::warn": ("process", "emits a Python warning (process-wide warning filters may turn it into an error)"),
    "export::access_subclass_inner_tensor": ("attribute", "reads a tensor attribute whose name the file supplies"),
}

_FILE_ARGS = re.compile(r"^(filename|file|path|file_?path|fname|dir|directory|url)$", re.IGNORECASE)

# `str` arguments that select a mode, an algorithm or a message: read by the kernel, never opened
_MODE_STR_ARGS = frozenset(
    {
        "UPLO", "activation", "algorithm", "api_name", "approximate", "assert_msg", "attr", "binary_attr",
        "binary_post_op", "device_type", "driver", "equation", "indexing", "interpolation", "mode", "norm",
        "ord", "p", "pad_mode", "padding", "padding_side", "post_op_algorithm", "post_op_name", "reduce",
        "rounding_mode", "side", "unary_algorithm", "unary_attr", "unary_post_op", "unary_post_op_algorithm",
        "msg", "cls", "tag", "reduce_op", "red_op", "group_name", "op_list", "name", "args", "message",
        # TorchScript's string builtins (aten::strip, aten::split.str, aten::__getitem__.str, ...): pure
        "a", "b", "self", "s", "el", "key", "item", "substr", "separator", "string", "new", "old", "t",
        "input", "values", "idx", "ind", "chars", "fillchar", "type", "dict", "l", "to_add", "inputs", "_0",
    }
)  # fmt: skip

# ops with `unsafe` in their name that were read and found memory-safe in eager mode (the "unsafe" is
# about autograd view tracking or compiler assumptions, not about skipping checks)
_REVIEWED_UNSAFE = {
    "aten::_unsafe_view": "checks the shape against the storage like view; skips only autograd's view tracking",
    "aten::unsafe_split": "split without autograd view tracking; sizes are checked",
    "aten::unsafe_split_with_sizes": "split without autograd view tracking; sizes are checked",
    "aten::unsafe_chunk": "chunk without autograd view tracking; sizes are checked",
    "aten::_unsafe_index": "the eager kernel is aten::index, which bounds-checks every index",
    "aten::_unsafe_index_put": "the eager kernel is aten::index_put_, which bounds-checks every index",
    "aten::_unsafe_masked_index": "indices are clamped into range before the gather",
    "aten::_unsafe_masked_index_put_accumulate": "indices are clamped into range before the scatter",
}

# sparse constructors from components: torch checks their invariants only with
# torch.sparse.check_sparse_tensor_invariants() on, and these honour that switch (measured)
_SPARSE_CHECKED_WHEN_ON = frozenset(
    {
        "aten::sparse_coo_tensor", "aten::sparse_compressed_tensor", "aten::sparse_csr_tensor",
        "aten::sparse_csc_tensor", "aten::sparse_bsr_tensor", "aten::sparse_bsc_tensor",
        "aten::_sparse_compressed_tensor_unsafe", "aten::_sparse_csr_tensor_unsafe",
        "aten::_sparse_csc_tensor_unsafe", "aten::_sparse_bsr_tensor_unsafe", "aten::_sparse_bsc_tensor_unsafe",
    }
)  # fmt: skip
_SPARSE_INDICES = re.compile(r"^(|crow_|col_|ccol_|row_|compressed_|plain_)indices$")


@dataclass(frozen=True)
class Refusal:
    """Why the default policy refuses an op: a category and a sentence."""

    op: str
    """The op's qualified name with overload ("aten::from_file.out"; the default overload has none)."""
    category: str
    """"filesystem", "process", "attribute", "unchecked" or "unclassified"."""
    reason: str
    sparse_checks_lift: bool = False
    """True when running with torch.sparse.check_sparse_tensor_invariants() on allows the op."""


def _str_args(schema: OpSchema) -> list[str]:
    """Names of the arguments whose type holds a `str` (`str`, `str?`, `str[]`, `Dict(str, t)`, ...)."""
    return [a.name for a in schema.arguments if "str" in re.findall(r"[A-Za-z_]+", a.type)]


def classify(schema: OpSchema) -> Refusal | None:
    """Why the default policy refuses the op of `schema`, or None when it may run (the rules are above)."""
    ns = schema.namespace
    qual = schema.qualname
    if ns not in TORCH_NAMESPACES:
        return None  # the user's own library: imported by the user, so trusted
    if ns in _NAMESPACE_REASONS:
        category, reason = _NAMESPACE_REASONS[ns]
        return Refusal(qual, category, reason)
    if schema.name in _OP_REASONS:
        category, reason = _OP_REASONS[schema.name]
        return Refusal(qual, category, reason)
    for name in _str_args(schema):
        if _FILE_ARGS.match(name):
            return Refusal(qual, "filesystem", f"opens the file its `{name}` argument names")
        if name not in _MODE_STR_ARGS:
            return Refusal(
                qual, "unclassified", f"takes a string argument `{name}` that opwire's policy has not classified"
            )
    op_name = schema.name.partition("::")[2]
    sparse_parts = "sparse" in op_name and any(
        _SPARSE_INDICES.match(a.name) and a.type == "Tensor" for a in schema.arguments
    )
    if sparse_parts and op_name.endswith(("tensor", "tensor_unsafe", "_and_tensors")):
        lift = schema.name in _SPARSE_CHECKED_WHEN_ON
        how = (
            "run under torch.sparse.check_sparse_tensor_invariants() to have them checked"
            if lift
            else "even torch.sparse.check_sparse_tensor_invariants() does not check this constructor"
        )
        return Refusal(
            qual,
            "unchecked",
            f"builds a sparse tensor from file-supplied indices without checking them (bad indices make later "
            f"kernels read and write out of bounds); {how}",
            sparse_checks_lift=lift,
        )
    if "unsafe" in op_name and schema.name not in _REVIEWED_UNSAFE:
        return Refusal(qual, "unchecked", "skips invariant checks (an `unsafe` op opwire has not reviewed)")
    return None


def classify_name(op: str) -> Refusal | None:
    """`classify` of an op spelled "ns::op[.overload]" (None when no such op is registered)."""
    import torch

    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    try:
        obj = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")
    except (AttributeError, RuntimeError):
        return None
    try:
        return classify(op_schema(obj))
    except OpwireError:
        return Refusal(op, "unclassified", "has a schema opwire cannot read")


def sparse_checks_on() -> bool:
    """Whether torch checks sparse tensor invariants right now (torch.sparse.check_sparse_tensor_invariants)."""
    import torch

    return bool(torch._C._check_sparse_tensor_invariants())


def all_schemas() -> list[OpSchema]:
    """Every op schema registered in this process that opwire can read (TorchScript builtins included)."""
    import torch

    out: list[OpSchema] = []
    for fs in torch._C._jit_get_all_schemas():
        try:
            out.append(op_schema(fs))
        except OpwireError:
            continue  # a schema opwire's type parser does not read cannot be bound by a file either
    return out


def refusal_table() -> list[Refusal]:
    """Every op of the running torch that the default policy refuses, sorted by name."""
    found = {r.op: r for s in all_schemas() if (r := classify(s)) is not None}
    return [found[k] for k in sorted(found)]


def _normalize(name: str) -> str:
    parts = split_target(name) if isinstance(name, str) else None
    if parts is None:
        raise BindError(
            f"allow_ops entry {name!r} is not an op name; expected 'ns::op' (every overload) or 'ns::op.overload'"
        )
    ns, op, overload = parts
    names_overload = name.startswith("torch.ops.") or "." in name.partition("::")[2]
    return f"{ns}::{op}.{overload}" if names_overload else f"{ns}::{op}"


class ExecPolicy:
    """What file-supplied work may do: the ops it may call beyond the default, and the budgets of a run."""

    def __init__(
        self,
        allow_ops: Iterable[str] = (),
        max_while_iterations: int = WHILE_LOOP_ITERATIONS,
        timeout: float | None = None,
        max_memory: int = MAX_MEMORY,
    ) -> None:
        if isinstance(allow_ops, str):
            allow_ops = [allow_ops]
        self.allow_ops = frozenset(_normalize(n) for n in allow_ops)
        if isinstance(max_while_iterations, bool) or not isinstance(max_while_iterations, int):
            raise BindError(f"max_while_iterations must be a positive int, got {max_while_iterations!r}")
        if max_while_iterations < 1:
            raise BindError(f"max_while_iterations must be a positive int, got {max_while_iterations}")
        bad_timeout = isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        if timeout is not None and bad_timeout:
            raise BindError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        if isinstance(max_memory, bool) or not isinstance(max_memory, int) or max_memory < 1:
            raise BindError(f"max_memory must be a positive number of bytes, got {max_memory!r}")
        self.max_while_iterations = max_while_iterations
        self.timeout = None if timeout is None else float(timeout)
        self.max_memory = max_memory

    def key(self) -> tuple[Any, ...]:
        """A hashable identity (runners built for one policy are not reused for another)."""
        return (self.allow_ops, self.max_while_iterations, self.timeout, self.max_memory)

    def allowed(self, target: Target) -> Refusal | None:
        """The refusal that applies to `target` under this policy, or None when it may run."""
        if target.kind != "op" or target.schema is None:
            return None
        schema = target.schema
        if schema.namespace not in TORCH_NAMESPACES:
            return None  # the user's own library: imported by the user, so trusted
        if schema.name in self.allow_ops or _with_overload(schema) in self.allow_ops:
            return None
        if schema.qualname in allowlist():
            return None
        return _unlisted(schema)

    def check(self, target: Target, where: str) -> None:
        """Raise the BindError refusing `target` (bind time: never on the call path); inside
        `refusals_collected()` the refusal is noted and the one error naming every refused op comes at its end."""
        refusal = self.allowed(target)
        if refusal is None:
            return
        found = getattr(_collect, "found", None)
        if found is None:
            raise BindError(refused_message([(refusal, where)]))
        found.append((refusal, where))

    def check_name(self, name: str, where: str) -> None:
        """`check` for a target spelled as in a file; names that do not resolve are left to binding."""
        try:
            target = resolve(name)
        except OpwireError:
            return
        self.check(target, where)


_collect = threading.local()


@contextmanager
def refusals_collected() -> Iterator[None]:
    """Bind inside: every refused op is noted, and at the end one BindError names them all (nested: the outer one)."""
    if getattr(_collect, "found", None) is not None:
        yield
        return
    found: list[tuple[Refusal, str]] = []
    _collect.found = found
    try:
        yield
    except BindError as exc:
        if found:  # a later binding error: the refusals come first (the file would not run anyway)
            raise BindError(refused_message(found)) from exc
        raise
    finally:
        _collect.found = None
    if found:
        raise BindError(refused_message(found))


def allow_name(refusal: Refusal) -> str:
    """What allow_ops takes for `refusal`: the exact overload, or the op (all overloads) when its kind is refused."""
    whole = refusal.category in ("filesystem", "process", "attribute", "unchecked", "unclassified")
    return refusal.op.partition(".")[0] if whole else refusal.op


def refused_message(refused: list[tuple[Refusal, str]]) -> str:
    """The BindError text for refused ops: each op, where and why, then the one `allow_ops=[...]` admitting them all.

    `opwire.cli.wording` turns the `allow_ops=[...]` advice into the `--allow-op A,B` flag for the command line."""
    names = list(dict.fromkeys(allow_name(r) for r, _ in refused))
    allow = f"allow_ops={names!r}"
    if len(refused) == 1:
        refusal, where = refused[0]
        return (
            f"{where}: op {refusal.op} is refused by opwire's execution policy: it {refusal.reason}; "
            f"a file cannot call it unless you allow it: {allow}"
        )
    ops = list(dict.fromkeys(r.op for r, _ in refused))
    each = "; ".join(f"{where}: {r.op} {r.reason}" for r, where in refused[:20])
    more = f"; and {len(refused) - 20} more" if len(refused) > 20 else ""
    return (
        f"{len(ops)} ops are refused by opwire's execution policy ({each}{more}); a file cannot call them "
        f"unless you allow them: {allow}"
    )


def _unlisted(schema: OpSchema) -> Refusal:
    """Why an op outside the policy's admitted ops is refused: classify's or the review's reason, else "not listed"."""
    known = _classified(schema)
    if known is not None:
        return known
    entry = policy_entry(schema.qualname)
    if entry is not None and entry[0] == "refused":
        reviewed = policy_rules.refused_reason(schema.name.partition("::")[2])
        if reviewed is not None:
            return Refusal(schema.qualname, reviewed[0], reviewed[1])
        return Refusal(
            schema.qualname,
            "internal",
            "is an internal kernel: torch's tables (the core tag, autograd's derivatives) do not put it into "
            "programs or recordings and opwire's review did not admit it (`opwire ops policy` explains)",
        )
    return Refusal(
        schema.qualname,
        "unlisted",
        "is not in opwire's op policy, derived from torch's registry (a torch newer than the policy, or an op "
        "of a torch namespace exported programs do not use; `opwire ops policy` explains)",
    )


def _with_overload(schema: OpSchema) -> str:
    return f"{schema.name}.{schema.overload or 'default'}"


_CLASSIFIED: dict[str, Refusal | None] = {}


def _classified(schema: OpSchema) -> Refusal | None:
    """`classify`, remembered per schema string (binding asks once per node)."""
    key = schema.schema
    if key not in _CLASSIFIED:
        _CLASSIFIED[key] = classify(schema)
    return _CLASSIFIED[key]
