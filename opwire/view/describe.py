"""Arguments, tensor metadata and node metadata as the short text the page shows (no torch import needed).

Every member of the IDL's unions is written generically: a union shows its one member, a struct its
fields, enums by name (dtypes as torch spells them), tensors and symbols by name, so a new IDL member
shows up without a new branch here.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Any

from pydantic import BaseModel

from opwire.program.signature import sym_text
from opwire.schema import models as m
from opwire.schema.base import ThriftUnion

__all__ = ["describe_arg", "dtype_name", "meta_label", "module_stack", "sym_label", "tensor_meta"]

# export-schema ScalarType -> (short label for edges, torch's name)
_DTYPES: dict[str, tuple[str, str]] = {
    "UNKNOWN": ("?", "unknown"),
    "BYTE": ("u8", "uint8"),
    "CHAR": ("i8", "int8"),
    "SHORT": ("i16", "int16"),
    "INT": ("i32", "int32"),
    "LONG": ("i64", "int64"),
    "HALF": ("f16", "float16"),
    "FLOAT": ("f32", "float32"),
    "DOUBLE": ("f64", "float64"),
    "COMPLEXHALF": ("c32", "complex32"),
    "COMPLEXFLOAT": ("c64", "complex64"),
    "COMPLEXDOUBLE": ("c128", "complex128"),
    "BOOL": ("b8", "bool"),
    "BFLOAT16": ("bf16", "bfloat16"),
    "UINT16": ("u16", "uint16"),
    "FLOAT8E4M3FN": ("f8e4m3fn", "float8_e4m3fn"),
    "FLOAT8E5M2": ("f8e5m2", "float8_e5m2"),
    "FLOAT8E4M3FNUZ": ("f8e4m3fnuz", "float8_e4m3fnuz"),
    "FLOAT8E5M2FNUZ": ("f8e5m2fnuz", "float8_e5m2fnuz"),
    "FLOAT8E8M0FNU": ("f8e8m0fnu", "float8_e8m0fnu"),
    "UINT32": ("u32", "uint32"),
    "UINT64": ("u64", "uint64"),
}
_PLAIN = {int, float, str, bool, type(None)}
_NAMES = {"TensorArgument", "SymIntArgument", "SymFloatArgument", "SymBoolArgument", "TokenArgument"}


def dtype_name(dtype: Any, short: bool = False) -> str:
    """torch's name of an export-schema dtype (`float32`), or the edge label's short form (`f32`)."""
    name = m.ScalarType(dtype).name if dtype in m.ScalarType._value2member_map_ else "UNKNOWN"
    return _DTYPES.get(name, ("?", name.lower()))[0 if short else 1]


def sym_label(s: Any) -> str:
    """A SymInt/SymFloat/SymBool of tensor metadata: its value, or its expression as `inspect` prints it (`s70 + 1`)."""
    v = s.value
    if isinstance(v, m.SymExpr):
        return sym_text(v.expr_str)
    return str(v).lower() if isinstance(v, bool) else str(v)


def meta_label(meta: m.TensorMeta) -> str:
    """The edge label of a tensor: `f32[s0, 4]`."""
    return f"{dtype_name(meta.dtype, short=True)}[{', '.join(sym_label(s) for s in meta.sizes)}]"


def _snake(name: str) -> str:
    """`ChannelsLast3d` -> `channels_last_3d`, `SparseCoo` -> `sparse_coo` (how torch spells the object)."""
    return re.sub(r"(?<!^)(?=[A-Z]|3d)", "_", name).lower()


def _device(d: m.Device) -> str:
    return d.type if d.index is None else f"{d.type}:{d.index}"


def tensor_meta(meta: m.TensorMeta) -> dict[str, str]:
    """Every field of a tensor's metadata, as text for the side panel."""
    return {
        "dtype": dtype_name(meta.dtype),
        "shape": f"[{', '.join(sym_label(s) for s in meta.sizes)}]",
        "strides": f"[{', '.join(sym_label(s) for s in meta.strides)}]",
        "storage_offset": sym_label(meta.storage_offset),
        "device": _device(meta.device),
        "layout": _snake(m.Layout(meta.layout).name) if meta.layout in m.Layout._value2member_map_ else "?",
        "requires_grad": str(meta.requires_grad).lower(),
    }


def describe_arg(value: Any, depth: int = 0) -> str:
    """One argument (or any member of one) as text: `%x`, `[2, 3]`, `torch.float32`, `cpu`, `subgraph true_graph_0`."""
    if depth > 24:
        return "…"
    if type(value) in _PLAIN:  # the common case first (IntEnum members are ints too: exact types only)
        return repr(value)
    if isinstance(value, ThriftUnion):
        if value.type == "as_name":
            return f"%{value.value}"
        return describe_arg(value.value, depth + 1) if value.type != "as_none" else "None"
    if isinstance(value, m.ScalarType):
        return f"torch.{dtype_name(value)}"
    if isinstance(value, IntEnum):
        return f"torch.{_snake(value.name)}"
    if isinstance(value, m.Device):
        return f"device({_device(value)!r})"
    if isinstance(value, m.GraphArgument):
        return f"subgraph {value.name}"
    if isinstance(value, m.ComplexValue):
        return repr(complex(float(value.real), float(value.imag)))
    if isinstance(value, m.SymExpr):
        return sym_text(value.expr_str)
    if isinstance(value, m.CustomObjArgument):
        return f"%{value.name} ({value.class_fqn})"
    if isinstance(value, BaseModel):
        if type(value).__name__ in _NAMES:
            return f"%{value.name}"  # type: ignore[attr-defined]
        fields = ", ".join(f"{k}={describe_arg(getattr(value, k), depth + 1)}" for k in type(value).model_fields)
        return f"{type(value).__name__}({fields})"
    if isinstance(value, list):
        return "[" + ", ".join(describe_arg(v, depth + 1) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe_arg(v, depth + 1)}" for k, v in value.items()) + "}"
    return repr(value)


def _split(item: str) -> list[str]:
    """`key,path,type` split on the commas outside brackets, as torch's deserializer splits it."""
    out, start, depth = [], 0, 0
    for i, c in enumerate(item):
        if c in "[(":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(item[start:i])
            start = i + 1
    out.append(item[start:])
    return out


def module_stack(metadata: dict[str, str]) -> list[tuple[str, str, str]]:
    """The node's `nn_module_stack`, outermost first, as (key, module path, module type)."""
    text = metadata.get("nn_module_stack")
    if not text:
        return []
    stack = []
    for item in text.split(";"):
        parts = _split(item)
        if len(parts) < 3:
            continue  # not what torch writes: show the node ungrouped rather than refuse the file
        key, path, ty = parts[0], ",".join(parts[1:-1]), parts[-1]
        stack.append((key, _clean_path(path), ty.rsplit(".", 1)[-1]))
    return stack


def _clean_path(path: str) -> str:
    """`L['self'].layers[0].attn` -> `layers.0.attn` (torch's dynamo spelling of a module path)."""
    p = path.replace("L['self']", "").replace("L__self__", "")
    for a, b in (("['", "."), ("']", ""), ("[", "."), ("]", "")):
        p = p.replace(a, b)
    if p.startswith("getattr("):
        return p
    return p.strip(".") or "(root)"
