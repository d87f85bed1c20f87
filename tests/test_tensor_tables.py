"""Every reader of tensor tables (the three lazy archives and `OpenedProgram`) says the same four words with the
same signatures, and they agree on what a file holds."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

import opwire
from opwire.program import OpenedProgram
from opwire.schema import models as m
from opwire.serde import opw, pt2, thrift_archive, torch_bridge
from opwire.serde.tensor_tables import TABLES, TensorTables, check_table

READERS: tuple[type, ...] = (opw.OpwArchive, pt2.Pt2Archive, thrift_archive.ThriftArchive, OpenedProgram)
WORDS = [name for name in vars(TensorTables) if not name.startswith("_")]
OLD_WORDS = (
    "weight",
    "constant",
    "weight_entries",
    "constant_entries",
    "tensor_names",
    "load_tensors",
    "tensor_values",
)


def _shape(fn: Callable[..., object]) -> tuple[list[tuple[str, object, object]], object]:
    """(each parameter's name, kind and default, with its resolved type; the return type)."""
    hints = typing.get_type_hints(fn, localns={"torch": torch, "Tensor": torch.Tensor, "m": m})
    params = [(p.name, p.kind, p.default, hints.get(p.name)) for p in inspect.signature(fn).parameters.values()]
    return params, hints.get("return")  # type: ignore[return-value]


def test_the_vocabulary_is_the_four_words() -> None:
    assert sorted(WORDS) == ["names", "tensor", "tensors", "value"]


@pytest.mark.parametrize("reader", READERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("word", WORDS)
def test_every_reader_offers_each_word_with_the_same_signature(reader: type, word: str) -> None:
    assert _shape(getattr(reader, word)) == _shape(getattr(TensorTables, word)), f"{reader.__name__}.{word}"


@pytest.mark.parametrize("reader", READERS, ids=lambda c: c.__name__)
def test_no_reader_keeps_an_old_word(reader: type) -> None:
    assert [w for w in OLD_WORDS if hasattr(reader, w)] == []


def test_a_table_that_is_not_one_is_refused() -> None:
    assert check_table("weights") == "weights"
    with pytest.raises(ValueError, match="'weights' or 'constants', got 'kind'"):
        check_table("kind")


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("scale", torch.full((2,), 2.0))
        self.c = torch.tensor([1.0, -1.0])  # a tensor constant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale + self.c


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("tables")
    ep = torch.export.export(_Net(), (torch.randn(4, 3),))
    out = {"pt2": tmp / "a.pt2", "opw": tmp / "a.opw", "compact": tmp / "a.compact"}
    torch.export.save(ep, out["pt2"])
    with pt2.open(out["pt2"]) as archive:
        opw.write(archive, out["opw"])
    out["compact"].write_bytes(opwire.dumps(torch_bridge.archive_from_exported_program(ep), "compact"))
    return out


def _readers(files: dict[str, Path]) -> list[TensorTables]:
    return [
        pt2.open(files["pt2"]),
        opw.open(files["opw"]),
        thrift_archive.open(files["compact"]),
        opwire.open(files["pt2"]),
        opwire.open(files["compact"]),
        opwire.open(thrift_archive.open(files["compact"])),
        opwire.open(opw.open(files["opw"])),
    ]


def test_every_lazy_archive_runs_as_a_program(files: dict[str, Path]) -> None:
    x = torch.randn(4, 3)
    want = opwire.run_program(files["pt2"], (x,))
    for archive in (pt2.open(files["pt2"]), opw.open(files["opw"]), thrift_archive.open(files["compact"])):
        assert torch.equal(opwire.run_program(archive, (x,)), want), type(archive).__name__


def test_every_reader_reads_the_same_tables(files: dict[str, Path]) -> None:
    readers = _readers(files)
    first = readers[0]
    assert first.names("weights") and first.names("constants")
    for reader in readers:
        where = type(reader).__name__
        weights, constants = reader.tensors("cpu")
        for table, got in zip(TABLES, (weights, constants), strict=True):
            assert sorted(reader.names(table)) == sorted(first.names(table)) == sorted(got), where
            for name in reader.names(table):
                want = first.tensor(table, name)
                assert torch.equal(reader.tensor(table, name, "cpu"), want), (where, table, name)
                assert torch.equal(got[name], want), (where, table, name)
                value = reader.value(table, name)
                assert isinstance(value, m.TensorValue) and list(value.sizes) == list(want.shape), (where, name)


def test_a_missing_name_is_an_opwire_error_naming_it(files: dict[str, Path]) -> None:
    for reader in _readers(files):
        with pytest.raises(opwire.DecodeError, match="no weight named 'nope'"):
            reader.value("weights", "nope")
        with pytest.raises(ValueError, match="got 'kind'"):
            reader.names("kind")  # type: ignore[arg-type]
