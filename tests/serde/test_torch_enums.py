"""The one table between the export schema's enums and torch objects."""

from __future__ import annotations

import torch
from torch._export.serde import serialize

from opwire.schema import models as m
from opwire.serde import torch_enums


def test_float_is_seven_and_means_float32() -> None:
    assert torch_enums.to_torch("ScalarType")[7] is torch.float32
    assert torch_enums.to_torch("ScalarType")[m.ScalarType.DOUBLE] is torch.float64
    assert torch_enums.from_torch("ScalarType")[torch.bfloat16] is m.ScalarType.BFLOAT16


def test_every_torch_mapping_is_covered_both_ways() -> None:
    for enum, suffix in torch_enums.ENUMS.items():
        torch_map = getattr(serialize, f"_TORCH_TO_SERIALIZE_{suffix}")
        ours = torch_enums.from_torch(enum)
        assert set(ours) == set(torch_map), enum
        for obj, member in ours.items():
            assert int(member) == int(torch_map[obj]), (enum, obj)
            assert torch_enums.to_torch(enum)[int(member)] == obj


def test_unknown_has_no_torch_object() -> None:
    for enum in torch_enums.ENUMS:
        assert 0 not in torch_enums.to_torch(enum)
