"""Value <-> Python objects (tensors, numbers, strings, devices, dtypes, lists, dicts) for example inputs."""

from __future__ import annotations

from typing import Any

import torch

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import tensors as _tensors
from opwire.serde import torch_enums

__all__ = ["from_python", "inputs_from_python", "inputs_to_python", "to_python"]


_LAYOUTS = torch_enums.from_torch("Layout")
_FORMATS = torch_enums.from_torch("MemoryFormat")
_LAYOUTS_BACK = {v: k for k, v in _LAYOUTS.items()}
_FORMATS_BACK = {v: k for k, v in _FORMATS.items()}


def from_python(obj: Any, where: str = "value") -> m.Value:
    """The Value holding a Python object; EncodeError names the path of anything it cannot hold."""
    if isinstance(obj, torch.Tensor):
        return m.Value(as_tensor=_tensors.from_tensor(obj, where))
    if obj is None:
        return m.Value(as_none=True)
    if isinstance(obj, bool):
        return m.Value(as_bool=obj)
    if isinstance(obj, int):
        return m.Value(as_int=obj)
    if isinstance(obj, float):
        return m.Value(as_float=obj)
    if isinstance(obj, complex):
        return m.Value(as_complex=m.ComplexValue(real=obj.real, imag=obj.imag))
    if isinstance(obj, str):
        return m.Value(as_string=obj)
    if isinstance(obj, torch.device):
        return m.Value(as_device=m.Device(type=obj.type, index=obj.index))
    if isinstance(obj, torch.dtype):
        return m.Value(as_scalar_type=_tensors.scalar_type_of(obj, where))
    if isinstance(obj, torch.layout) and obj in _LAYOUTS:
        return m.Value(as_layout=_LAYOUTS[obj])
    if isinstance(obj, torch.memory_format) and obj in _FORMATS:
        return m.Value(as_memory_format=_FORMATS[obj])
    if isinstance(obj, list | tuple):
        return m.Value(as_list=[from_python(x, f"{where}[{i}]") for i, x in enumerate(obj)])
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return m.Value(as_dict={k: from_python(v, f"{where}[{k!r}]") for k, v in obj.items()})
    raise EncodeError(
        f"Expected a tensor, number, string, None, device, dtype, list or str-keyed dict, got "
        f"{type(obj).__name__} - at `{where}`",
        where,
    )


def to_python(value: m.Value, device: str | torch.device | None = None, where: str = "value") -> Any:
    """The Python object a Value holds (lists come back as lists, tensors on their device or `device`)."""
    kind = value.type
    v = value.value
    if kind == "as_tensor":
        return _tensors.to_tensor(v, device, f"{where}.as_tensor")
    if kind == "as_none":
        return None
    if kind == "as_complex":
        return complex(v.real, v.imag)
    if kind == "as_device":
        return _tensors.device_of(v, f"{where}.as_device")
    if kind == "as_scalar_type":
        return _tensors.torch_dtype(v, f"{where}.as_scalar_type")
    if kind == "as_layout":
        return _enum_back(_LAYOUTS_BACK, v, "Layout", where)
    if kind == "as_memory_format":
        return _enum_back(_FORMATS_BACK, v, "MemoryFormat", where)
    if kind == "as_list":
        return [to_python(x, device, f"{where}[{i}]") for i, x in enumerate(v)]
    if kind == "as_dict":
        return {k: to_python(x, device, f"{where}[{k!r}]") for k, x in v.items()}
    return v  # as_int, as_float, as_bool, as_string


def _enum_back(table: dict[Any, Any], v: Any, name: str, where: str) -> Any:
    try:
        return table[v]
    except KeyError:
        raise DecodeError(f"Expected a {name} torch knows, got {v!r} - at `{where}`", where) from None


def inputs_from_python(args: Any, kwargs: Any) -> tuple[list[m.Value], dict[str, m.Value]]:
    """Example inputs `(args, kwargs)` as the Values an OpwireArchive keeps."""
    return (
        [from_python(a, f"example_args[{i}]") for i, a in enumerate(args)],
        {str(k): from_python(v, f"example_kwargs[{k!r}]") for k, v in kwargs.items()},
    )


def inputs_to_python(
    args: list[m.Value] | None, kwargs: dict[str, m.Value] | None, device: str | torch.device | None = None
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """Example inputs back as `(args, kwargs)`, or None when the archive kept none."""
    if args is None and kwargs is None:
        return None
    return (
        tuple(to_python(v, device, f"example_args[{i}]") for i, v in enumerate(args or [])),
        {k: to_python(v, device, f"example_kwargs[{k!r}]") for k, v in (kwargs or {}).items()},
    )
