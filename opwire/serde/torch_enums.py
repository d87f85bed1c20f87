"""The one table between the export schema's enums and torch's objects (dtypes, layouts, memory formats).

Built once from the IDL's enum names joined, name by name, with torch's own serializer maps (derived into
`torch_serializer_tables.py` by `torch_serializer_gen.py`, checked against the installed torch by a test), so
the numbering is always the export schema's (`ScalarType.FLOAT` is 7, where c10's 7 is Double).
"""

from __future__ import annotations

from enum import IntEnum
from functools import cache
from typing import Any

from opwire.schema import models as m
from opwire.serde.torch_serializer_gen import SOURCES
from opwire.serde.torch_serializer_tables import TORCH_ATTRIBUTES

__all__ = ["ENUMS", "from_torch", "names", "to_torch"]

ENUMS: dict[str, str] = SOURCES
"""IDL enum -> suffix of torch's `_TORCH_TO_SERIALIZE_<suffix>` map in torch/_export/serde/serialize.py."""


@cache
def names(enum: str) -> dict[int, str]:
    """Serialized value of the IDL enum `enum` -> the name of its torch object (7 -> "float32"), without torch."""
    ours: type[IntEnum] = getattr(m, enum)
    return {int(ours[name]): attr for name, attr in TORCH_ATTRIBUTES[enum].items() if name in ours.__members__}


@cache
def from_torch(enum: str) -> dict[Any, IntEnum]:
    """torch object (torch.float32, torch.strided, ...) -> member of the IDL enum `enum`."""
    import torch

    ours: type[IntEnum] = getattr(m, enum)
    return {
        getattr(torch, attr): ours[name]
        for name, attr in TORCH_ATTRIBUTES[enum].items()
        if name in ours.__members__ and hasattr(torch, attr)
    }


@cache
def to_torch(enum: str) -> dict[int, Any]:
    """Serialized value of the IDL enum `enum` -> torch object (0/Unknown and unmapped values are absent)."""
    return {int(member): obj for obj, member in from_torch(enum).items()}
