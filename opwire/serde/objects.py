"""Value <-> Python objects (tensors, numbers, strings, devices, dtypes, lists, dicts) for example inputs."""

from __future__ import annotations

from typing import Any

import torch

from opwire.schema import models as m
from opwire.serde.python_carriers import python_of, value_of

__all__ = ["from_python", "inputs_from_python", "inputs_to_python", "to_python"]


def from_python(obj: Any, where: str = "value") -> m.Value:
    """The Value holding a Python object; EncodeError names the path of anything it cannot hold."""
    return value_of(obj, where)


def to_python(value: m.Value, device: str | torch.device | None = None, where: str = "value") -> Any:
    """The Python object a Value holds (lists come back as lists, tensors on their device or `device`)."""
    return python_of(value, device, where)


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
