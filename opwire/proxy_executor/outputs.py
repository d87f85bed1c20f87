"""Kernel results -> serialized outputs: tensors and symbolic values stored by name, constants checked.

An output serialized as a constant (an `as_int` AOTInductor specialized) has no name: the kernel must
return that value, or the op no longer computes what was compiled in.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from opwire.errors import KernelError
from opwire.proxy_executor.context import BindContext
from opwire.proxy_executor.convert import convert
from opwire.schema import models as m
from opwire.schema.members import ARGUMENT, members_carrying

__all__ = ["check_const", "check_span", "describe", "store_output"]


def describe(v: Any) -> str:
    """A short description of a kernel result for error messages."""
    import torch

    if isinstance(v, torch.Tensor):
        return f"a tensor of shape {tuple(v.shape)}"
    if isinstance(v, (list, tuple)):
        return f"a {type(v).__name__} of {len(v)}"
    return f"{type(v).__name__} {v!r}"


# What an output member's kind asks of the kernel result (schema/members.py reads the kinds off the IDL):
# a named tensor, a union that names its value or records a constant, a list of those (each element
# checked like its own member), or a constant the kernel must reproduce.
_NAMEABLE = frozenset({"tensor", "optional_tensor", "symbolic"})


@cache
def _element_member(member: str) -> str:
    """The Argument member holding one element of list member `member` (as_tensors -> as_tensor)."""
    elem = ARGUMENT[member].elem
    assert elem is not None
    (found,) = members_carrying(elem)
    return found


def store_output(arg: m.Argument, value: Any, where: str, out: dict[str, Any]) -> None:
    """Check one kernel result against its serialized output and put named values into `out`."""
    import torch

    member, s = arg.type, arg.value
    carrier = ARGUMENT[member]
    if carrier.kind == "tensor":
        if not isinstance(value, torch.Tensor):
            raise KernelError(f"{where}: the file names tensor {s.name!r} but the kernel returned {describe(value)}")
        out[s.name] = value
    elif carrier.kind in _NAMEABLE:  # a union: a name, a tensor, or a recorded constant
        if s.type == "as_name":
            out[s.as_name] = value
        elif s.type == "as_tensor":
            store_output(m.Argument(as_tensor=s.as_tensor), value, where, out)
        else:
            check_const(s.value if s.type != "as_none" else None, value, where)
    elif carrier.kind == "list" and carrier.elem is not None and carrier.elem.kind in _NAMEABLE:
        if not isinstance(value, (list, tuple)) or len(value) != len(s):
            raise KernelError(f"{where}: the file names {len(s)} values but the kernel returned {describe(value)}")
        inner = _element_member(member)
        for j, (e, v) in enumerate(zip(s, value, strict=True)):
            store_output(m.Argument(**{inner: e}), v, f"{where}[{j}]", out)
    else:
        conv = convert(arg, where, BindContext())
        check_const(conv.const, value, where)


def check_const(expected: Any, value: Any, where: str) -> None:
    """KernelError unless the kernel returned the constant the file recorded."""
    import torch

    got = value.tolist() if isinstance(value, torch.Tensor) and value.dim() == 0 else value
    if isinstance(got, tuple):
        got = list(got)
    if got != expected or (type(got) is bool and type(expected) is not bool):
        raise KernelError(
            f"{where}: expected the constant {expected!r} recorded when the call was serialized, but the kernel "
            f"returned {describe(value)}; the op no longer computes what was compiled in"
        )


def check_span(value: Any, where: str) -> None:
    """KernelError when tensor `value` (a view a kernel returned) reaches outside its storage."""
    if value.numel() == 0:
        return
    end = value.storage_offset() + 1
    for size, stride in zip(value.shape, value.stride(), strict=True):
        if stride < 0:
            raise KernelError(f"{where}: the kernel returned a view with a negative stride {tuple(value.stride())}")
        end += (size - 1) * stride
    if end * value.element_size() > value.untyped_storage().nbytes():
        raise KernelError(
            f"{where}: the kernel returned a view reaching element {end - 1} of a storage of "
            f"{value.untyped_storage().nbytes() // value.element_size()} elements; nothing reads it"
        )
