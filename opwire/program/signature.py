"""What a serialized program takes and returns, read from its graph signature alone (no torch program is built).

`program_signature(program)` lists the user inputs and outputs by name with dtype, shape (symbolic sizes
as their expressions, with the ranges `range_constraints` gives each symbol) and device, and counts the
parameters, buffers and constants the program binds itself. `extern_inputs(nodes)` lists, for an
extern-node file, the names each node reads that no earlier node produces. `op_name` is the one spelling
opwire prints for an operator: `aten::linear.default`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opwire.errors import BindError
from opwire.schema import models as m
from opwire.schema.refs import tensor_names
from opwire.schema.spec_roles import spec_member
from opwire.serde import torch_enums

__all__ = [
    "Port",
    "Signature",
    "check_inputs",
    "dtype_name",
    "extern_inputs",
    "node_outputs",
    "op_name",
    "program_signature",
    "sym_text",
]

_SYM_MEMBERS = {"as_sym_int": "SymInt", "as_sym_float": "SymFloat", "as_sym_bool": "SymBool"}
_SYM_LISTS = {"as_sym_ints": "SymInt", "as_sym_floats": "SymFloat", "as_sym_bools": "SymBool"}
_CONSTANT_MEMBERS = ("as_int", "as_float", "as_bool", "as_string", "as_none")


def op_name(target: str) -> str:
    """`aten::linear.default` for `torch.ops.aten.linear.default` or `aten::linear`; other targets unchanged."""
    if target.startswith("torch.ops.") and not target.startswith("torch.ops.higher_order."):
        parts = target.split(".")
        if len(parts) == 5:
            return f"{parts[2]}::{parts[3]}.{parts[4]}"
    if "::" in target and "." not in target.partition("::")[2]:
        return f"{target}.default"
    return target


def dtype_name(st: int) -> str:
    """torch's name of a serialized ScalarType (`float32` for FLOAT), or the enum's own name."""
    name = torch_enums.names("ScalarType").get(st)
    if name is not None:
        return name
    return m.ScalarType(st).name if st in m.ScalarType._value2member_map_ else f"ScalarType({st})"


def _size(s: m.SymInt) -> int | str:
    return int(s.as_int) if s.as_int is not None else sym_text(s.as_expr.expr_str if s.as_expr else "?")


_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<num>-?\d+)|'(?P<str>[^']*)'|(?P<punct>[(),=]))")
_INFIX = {"Add": " + ", "Mul": "*", "Pow": "**", "FloorDiv": "//", "Mod": "%", "PythonMod": "%"}


def sym_text(expr: str) -> str:
    """`s0 + 1` for torch's sympy repr `Add(Symbol('s0', integer=True), Integer(1))`; read, never evaluated.

    Anything this small reader does not follow is shown as written.
    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if match is None or match.end() == pos:
            return expr if expr.strip() else "?"
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    try:
        text, end = _read(tokens, 0, 0)
    except (IndexError, ValueError):
        return expr
    return text if end == len(tokens) else expr


def _read(tokens: list[tuple[str, str]], i: int, depth: int) -> tuple[str, int]:
    if depth > 64:
        raise ValueError("too deep")
    kind, text = tokens[i]
    if kind in ("num", "str"):
        return text, i + 1
    if kind != "name":
        raise ValueError(text)
    if i + 1 >= len(tokens) or tokens[i + 1][1] != "(":
        return text, i + 1
    args: list[str] = []
    i += 2
    while tokens[i][1] != ")":
        if tokens[i][0] == "name" and tokens[i + 1][1] == "=":  # keyword (assumptions): skip name, '=', value
            _, i = _read(tokens, i + 2, depth + 1)
        else:
            arg, i = _read(tokens, i, depth + 1)
            args.append(arg)
        if tokens[i][1] == ",":
            i += 1
    i += 1
    if text in ("Symbol", "Integer", "Float", "Rational") and len(args) == 1:
        return args[0], i
    if text in _INFIX and args:
        wrap = [f"({a})" if " " in a and text != "Add" else a for a in args]
        joined = _INFIX[text].join(wrap)
        return (joined.replace(" + -", " - ") if text == "Add" else joined), i
    return f"{text}({', '.join(args)})", i


@dataclass(frozen=True)
class Port:
    """One user input or output: its name and kind, and for tensors dtype, shape and device."""

    name: str
    kind: str  # "Tensor", "SymInt", "SymFloat", "SymBool", "int", "float", "bool", "str", "None", ...
    dtype: str | None = None
    shape: tuple[int | str, ...] | None = None
    device: str | None = None
    value: Any = None  # a constant's value
    constant: bool = False  # an input the program was specialized to (torch's constant_input): value is fixed

    @property
    def symbols(self) -> list[str]:
        """The symbols its symbolic sizes mention (s0, s1, ...), in order."""
        out: list[str] = []
        for d in self.shape or ():
            if isinstance(d, str):
                out += [tok for tok in _tokens(d) if tok not in out]
        return out

    def describe(self) -> str:
        """`float32[s0, 8] on cpu`, `SymInt`, or `int = 3`."""
        if self.kind == "Tensor":
            dims = ", ".join(str(d) for d in self.shape or ())
            return f"{self.dtype}[{dims}] on {self.device}"
        text = f"{self.kind} = {self.value!r}" if self.kind in ("int", "float", "bool", "str") else self.kind
        return f"{text} (constant)" if self.constant else text

    def to_model(self) -> m.ProgramPort:
        """The port as the IDL's `ProgramPort` record (what `opwire inspect --json` lists)."""
        if self.kind == "Tensor":
            dims = list(self.shape or ())
            symbolic = [str(d) for d in dims] if any(isinstance(d, str) for d in dims) else None
            shape = [d if isinstance(d, int) else -1 for d in dims]
            return m.ProgramPort(
                name=self.name, kind=self.kind, dtype=self.dtype, shape=shape, symbolic_shape=symbolic,
                device=self.device, constant=self.constant,
            )  # fmt: skip
        value = _scalar_value(self.value) if self.value is not None or self.constant else None
        return m.ProgramPort(name=self.name, kind=self.kind, value=value, constant=self.constant)


def _scalar_value(x: Any) -> m.Value:
    """A port's constant as a Value (a scalar, None, or another object's repr as a string)."""
    if x is None:
        return m.Value(as_none=True)
    if isinstance(x, bool):
        return m.Value(as_bool=x)
    if isinstance(x, int):
        return m.Value(as_int=x)
    if isinstance(x, float):
        return m.Value(as_float=x)
    return m.Value(as_string=x if isinstance(x, str) else repr(x))


def _tokens(expr: str) -> list[str]:
    return re.findall(r"[A-Za-z_][A-Za-z_0-9]*", expr)


@dataclass(frozen=True)
class Signature:
    """A program's user-facing signature and what it binds itself."""

    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    ranges: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    bound: dict[str, int] = field(default_factory=dict)  # parameters, buffers, constants, ... -> count

    def inspect_fields(self) -> dict[str, Any]:
        """The signature's fields of the IDL's `InspectOutput` record: ports, symbol ranges, bound counts."""
        return {
            "inputs": [p.to_model() for p in self.inputs],
            "outputs": [p.to_model() for p in self.outputs],
            "ranges": {k: m.RangeConstraint(min_val=lo, max_val=hi) for k, (lo, hi) in self.ranges.items()},
            **self.bound,
        }


def _port(arg: m.Argument, graph: m.Graph, fallback: str) -> Port:
    kind, v = arg.type, arg.value
    if kind == "as_tensor":
        name = str(v.name)
        meta = graph.tensor_values.get(name)
        if meta is None:
            return Port(name, "Tensor")
        dev = meta.device.type + (f":{meta.device.index}" if meta.device.index is not None else "")
        return Port(name, "Tensor", dtype_name(meta.dtype), tuple(_size(s) for s in meta.sizes), dev)
    if kind in _SYM_MEMBERS:
        if v.type == "as_name":
            return Port(str(v.as_name), _SYM_MEMBERS[kind])
        return Port(fallback, type(v.value).__name__, value=v.value)
    if kind in _CONSTANT_MEMBERS:
        value = None if kind == "as_none" else v
        return Port(fallback, "None" if kind == "as_none" else type(v).__name__, value=value)
    if kind == "as_custom_obj":
        return Port(str(v.name), f"custom object {v.class_fqn}")
    if kind == "as_token":
        return Port(str(v.name), "token")
    return Port(fallback, kind.removeprefix("as_"))


_BOUND = {  # an input spec's role (opwire.schema.spec_roles) -> what inspect counts it as
    "parameter": "parameters",
    "buffer": "buffers",
    "tensor_constant": "constants",
    "custom_obj": "custom_objects",
    "constant_input": "constant_inputs",
    "token": "tokens",
}


def program_signature(program: m.ExportedProgram) -> Signature:
    """The user inputs and outputs of a program (in graph order) and the counts of what it binds itself."""
    gm = program.graph_module
    graph = gm.graph
    inputs: list[Port] = []
    bound: Counter[str] = Counter({v: 0 for v in ("parameters", "buffers", "constants")})
    for i, spec in enumerate(gm.signature.input_specs):
        role = spec_member(spec).role
        if role == "user_input":
            inputs.append(_port(spec.value.arg, graph, f"input[{i}]"))
        elif role == "constant_input":
            c = spec.value
            value = None if c.value.type == "as_none" else c.value.value
            kind = type(value).__name__ if value is not None else "None"
            inputs.append(Port(c.name, kind, value=value, constant=True))
        else:
            bound[_BOUND.get(role, role)] += 1
    outputs = [
        _port(spec.value.arg, graph, f"output[{i}]")
        for i, spec in enumerate(gm.signature.output_specs)
        if spec_member(spec).is_user
    ]
    used = {s for p in inputs + outputs for s in p.symbols}
    ranges = {k: (r.min_val, r.max_val) for k, r in sorted(program.range_constraints.items()) if k in used or not used}
    return Signature(tuple(inputs), tuple(outputs), ranges, dict(bound))


def _sym_names(arg: m.Argument) -> list[str]:
    kind, v = arg.type, arg.value
    if kind in _SYM_MEMBERS:
        return [str(v.as_name)] if v.type == "as_name" else []
    if kind in _SYM_LISTS:
        return [str(x.as_name) for x in v if x.type == "as_name"]
    return []


def _names(arg: m.Argument) -> list[str]:
    return tensor_names(arg) + _sym_names(arg)


def node_outputs(node: m.Node) -> list[str]:
    """The names a node's outputs define (tensors and symbolic values)."""
    return [n for out in node.outputs for n in _names(out)]


def extern_inputs(nodes: m.ExternKernelNodes) -> list[dict[str, Any]]:
    """Per node that reads outside names: its index, name, op and the names no earlier node produced."""
    produced: set[str] = set()
    out: list[dict[str, Any]] = []
    for i, ek in enumerate(nodes.nodes):
        reads: list[str] = []
        for named in ek.node.inputs:
            for name in _names(named.arg):
                if name not in produced and name not in reads:
                    reads.append(name)
        if reads:
            out.append({"index": i, "name": ek.name, "op": op_name(ek.node.target), "reads": reads})
        produced.update(node_outputs(ek.node))
    return out


def _listing(ports: tuple[Port, ...]) -> str:
    return ", ".join(f"{p.name}: {p.describe()}" for p in ports) or "no inputs"


def check_inputs(signature: Signature, values: Mapping[str, Any]) -> None:
    """A BindError naming the first input that is missing, extra, or of the wrong kind, dtype, rank or size."""
    names = [p.name for p in signature.inputs]
    for p in signature.inputs:
        if p.name not in values and not p.constant:
            raise BindError(
                f"input {p.name!r} is missing: the program takes {_listing(signature.inputs)}; "
                f"got {', '.join(sorted(values)) or 'nothing'}"
            )
    for name in values:
        if name not in names:
            raise BindError(f"input {name!r} is not an input of the program: it takes {_listing(signature.inputs)}")
    seen: dict[str, tuple[int, str]] = {}
    for p in signature.inputs:
        if p.name in values:
            _check_one(p, values[p.name], signature.ranges, seen)


def _check_one(p: Port, v: Any, ranges: Mapping[str, tuple[int | None, int | None]], seen: dict[str, Any]) -> None:
    want = p.describe()
    if p.constant:
        if v != p.value or type(v) is not type(p.value):
            raise BindError(
                f"input {p.name!r}: the program was exported with the constant {p.value!r}, got {v!r}; leave it "
                "out or pass that value (re-export the program to use another)"
            )
        return
    if p.kind != "Tensor":
        ok = {"SymInt": (int,), "SymFloat": (int, float), "SymBool": (bool,)}.get(p.kind)
        if ok is not None and (not isinstance(v, ok) or (p.kind == "SymInt" and isinstance(v, bool))):
            raise BindError(f"input {p.name!r}: expected {p.kind}, got {_what(v)}")
        return
    shape = getattr(v, "shape", None)
    if shape is None or not hasattr(v, "dtype"):
        raise BindError(f"input {p.name!r}: expected a tensor {want}, got {_what(v)}")
    got = f"{str(v.dtype).removeprefix('torch.')}[{', '.join(str(s) for s in shape)}]"
    if p.dtype is not None and str(v.dtype).removeprefix("torch.") != p.dtype:
        raise BindError(f"input {p.name!r}: expected {want}, got dtype {got}; convert it (x.to(torch.{p.dtype}))")
    if p.shape is None:
        return
    if len(shape) != len(p.shape):
        raise BindError(f"input {p.name!r}: expected {len(p.shape)} dims ({want}), got {len(shape)} ({got})")
    for dim, (expect, size) in enumerate(zip(p.shape, shape, strict=True)):
        if isinstance(expect, int):
            if expect != size:
                raise BindError(f"input {p.name!r}: expected size {expect} at dim {dim} ({want}), got {size} ({got})")
            continue
        if expect in ranges:
            lo, hi = ranges[expect]
            if (lo is not None and size < lo) or (hi is not None and size > hi):
                span = f"{'-inf' if lo is None else lo}..{'inf' if hi is None else hi}"
                raise BindError(
                    f"input {p.name!r}: dim {dim} is {size}, outside the range {span} of {expect} ({want}); "
                    "the program was exported for sizes in that range"
                )
            if expect in seen and seen[expect][0] != size:
                first, where = seen[expect]
                raise BindError(
                    f"input {p.name!r}: dim {dim} is {size} but {expect} is {first} ({where}); "
                    f"every dim named {expect} must have the same size"
                )
            seen.setdefault(expect, (int(size), f"{p.name} dim {dim}"))


def _what(v: Any) -> str:
    shape = getattr(v, "shape", None)
    if shape is not None and hasattr(v, "dtype"):
        return f"a {str(v.dtype).removeprefix('torch.')} tensor of shape {list(shape)}"
    return f"{type(v).__name__} {v!r:.40}"
