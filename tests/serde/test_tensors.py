"""TensorValue <-> torch.Tensor: every dtype, layouts restored, bad payloads are DecodeErrors; Values too."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import objects as _values
from opwire.serde import tensors as _tensors


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (a.dtype, a.shape, a.stride(), a.storage_offset()) == (b.dtype, b.shape, b.stride(), b.storage_offset())
    assert a.requires_grad == b.requires_grad
    if a.numel():
        bytes_a = a.detach().contiguous().reshape(-1).view(torch.uint8)
        assert torch.equal(bytes_a, b.detach().contiguous().reshape(-1).view(torch.uint8))


def test_dtype_table_uses_export_numbering() -> None:
    assert _tensors.TORCH_DTYPES[m.ScalarType.FLOAT] is torch.float32
    assert m.ScalarType.FLOAT == 7 and _tensors.TORCH_DTYPES[m.ScalarType(7)] is not torch.float64
    assert _tensors.TORCH_DTYPES[m.ScalarType.DOUBLE] is torch.float64
    # every IDL value except UNKNOWN has a torch dtype, and the map is one-to-one
    named = {st for st in m.ScalarType if st != m.ScalarType.UNKNOWN}
    assert set(_tensors.TORCH_DTYPES) == named
    assert len(set(_tensors.TORCH_DTYPES.values())) == len(named)


@pytest.mark.parametrize("st_", sorted(_tensors.TORCH_DTYPES, key=int), ids=lambda s: s.name)
def test_every_dtype_round_trips(st_: m.ScalarType) -> None:
    dtype = _tensors.TORCH_DTYPES[st_]
    raw = (torch.arange(24 * dtype.itemsize) % 251).to(torch.uint8).reshape(2, 3, 4 * dtype.itemsize)
    t = raw.view(dtype)
    tv = _tensors.from_tensor(t)
    assert tv.dtype == st_ and len(tv.data) == t.numel() * dtype.itemsize
    _same(_tensors.to_tensor(tv), t)


def test_bytes_are_little_endian_row_major() -> None:
    t = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32).t()  # column-major view
    tv = _tensors.from_tensor(t)
    assert tv.data == b"".join(v.to_bytes(4, "little") for v in (1, 3, 2, 4))
    assert tv.strides == [1, 2] and tv.sizes == [2, 2]
    assert tv.device == m.Device(type="cpu", index=None)


LAYOUTS = {
    "contiguous": lambda: torch.randn(3, 4),
    "transposed": lambda: torch.randn(3, 4).t(),
    "sliced": lambda: torch.arange(20.0)[3:15:3],
    "expanded": lambda: torch.arange(3.0).reshape(3, 1).expand(3, 4),
    "scalar": lambda: torch.tensor(2.5),
    "empty": lambda: torch.empty(0, 5),
    "grad": lambda: torch.randn(4, requires_grad=True),
    "conj": lambda: torch.tensor([1 + 2j, 3 - 1j]).conj(),
    "channels_last": lambda: torch.randn(1, 3, 2, 2).to(memory_format=torch.channels_last),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layout_restored(name: str) -> None:
    t = LAYOUTS[name]()
    back = _tensors.to_tensor(_tensors.from_tensor(t))
    _same(back, t.resolve_conj())


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 4), max_size=3),
    perm_seed=st.integers(0, 5),
    offset=st.integers(0, 6),
)
def test_strided_views_round_trip(sizes: list[int], perm_seed: int, offset: int) -> None:
    n = 1
    for k in sizes:
        n *= k
    t = torch.arange(offset + n, dtype=torch.float64)[offset:].reshape(sizes)
    if t.dim() > 1:
        t = t.transpose(0, perm_seed % t.dim())
    _same(_tensors.to_tensor(_tensors.from_tensor(t)), t)


def _tv(**over: object) -> m.TensorValue:
    fields: dict[str, object] = dict(
        dtype=m.ScalarType.FLOAT,
        sizes=[2],
        strides=[1],
        storage_offset=0,
        device=m.Device(type="cpu"),
        requires_grad=False,
        data=b"\0" * 8,
    )
    fields.update(over)
    return m.TensorValue(**fields)  # type: ignore[arg-type]


BAD = {
    "short data": (_tv(data=b"\0" * 7), "Expected 8 bytes of data (2 elements of torch.float32), got 7 - at `t.data`"),
    "unknown dtype": (_tv(dtype=m.ScalarType.UNKNOWN), "Expected a ScalarType torch can hold"),
    "stride count": (_tv(strides=[1, 1]), "Expected as many strides as sizes (1), got 2 - at `t.strides`"),
    "negative size": (_tv(sizes=[-2]), "Expected non-negative sizes, strides and storage_offset, got -2"),
    "hostile offset": (_tv(storage_offset=2**40), "refusing to allocate it"),
    "hostile stride": (_tv(strides=[2**50]), "refusing to allocate it"),
    "digest only": (
        _tv(data=b"", digest=m.TensorDigest(sha256="0" * 64, nan_count=0, inf_count=0)),
        "got only a digest",
    ),
    "sparse": (_tv(layout=m.Layout.SparseCoo), "Expected a strided tensor, got layout SparseCoo"),
    "device": (_tv(device=m.Device(type="nosuchdevice")), "Expected a device torch knows, got 'nosuchdevice'"),
    "grad on ints": (_tv(dtype=m.ScalarType.INT, requires_grad=True), "cannot rebuild tensor"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_payload_is_decode_error(case: str) -> None:
    tv, message = BAD[case]
    with pytest.raises(DecodeError) as info:
        _tensors.to_tensor(tv, where="t")
    assert message in str(info.value)


def test_unwritable_tensors_are_encode_errors() -> None:
    with pytest.raises(EncodeError, match=r"Expected a strided tensor, got layout torch\.sparse_coo"):
        _tensors.from_tensor(torch.eye(2).to_sparse())
    with pytest.raises(EncodeError, match="without it"):
        _tensors.from_tensor(torch.empty(2, device="meta"))
    with pytest.raises(EncodeError, match="dtype the export schema names"):
        _tensors.from_tensor(torch.zeros(2, dtype=torch.uint8).view(torch.bits8))


def test_overlapping_layout_rebuilt() -> None:
    tv = _tensors.from_tensor(torch.tensor([5.0]).expand(4))
    back = _tensors.to_tensor(tv)
    assert back.stride() == (0,) and back.tolist() == [5.0] * 4


def test_values_round_trip() -> None:
    obj = [
        torch.ones(2),
        3,
        2.5,
        True,
        "s",
        None,
        1 + 2j,
        torch.device("cpu"),
        torch.float16,
        torch.strided,
        torch.channels_last,
        {"k": [1, 2]},
    ]
    v = _values.from_python(obj)
    back = _values.to_python(v)
    assert torch.equal(back[0], obj[0]) and back[1:] == obj[1:]
    with pytest.raises(EncodeError, match=r"got object - at `value\[1\]`"):
        _values.from_python([1, object()])
