"""TensorValue <-> torch.Tensor: every dtype, layouts restored, bad payloads are DecodeErrors; Values too."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import objects, tensors


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (a.dtype, a.shape, a.stride(), a.storage_offset()) == (b.dtype, b.shape, b.stride(), b.storage_offset())
    assert a.requires_grad == b.requires_grad
    if a.numel():
        bytes_a = a.detach().contiguous().reshape(-1).view(torch.uint8)
        assert torch.equal(bytes_a, b.detach().contiguous().reshape(-1).view(torch.uint8))


def test_dtype_table_uses_export_numbering() -> None:
    assert tensors.TORCH_DTYPES[m.ScalarType.FLOAT] is torch.float32
    assert m.ScalarType.FLOAT == 7 and tensors.TORCH_DTYPES[m.ScalarType(7)] is not torch.float64
    assert tensors.TORCH_DTYPES[m.ScalarType.DOUBLE] is torch.float64
    # every IDL value except UNKNOWN has a torch dtype, and the map is one-to-one
    named = {st for st in m.ScalarType if st != m.ScalarType.UNKNOWN}
    assert set(tensors.TORCH_DTYPES) == named
    assert len(set(tensors.TORCH_DTYPES.values())) == len(named)


@pytest.mark.parametrize("st_", sorted(tensors.TORCH_DTYPES, key=int), ids=lambda s: s.name)
def test_every_dtype_round_trips(st_: m.ScalarType) -> None:
    dtype = tensors.TORCH_DTYPES[st_]
    raw = (torch.arange(24 * dtype.itemsize) % 251).to(torch.uint8).reshape(2, 3, 4 * dtype.itemsize)
    t = raw.view(dtype)
    tv = tensors.from_tensor(t)
    assert tv.dtype == st_ and len(tv.data) == t.numel() * dtype.itemsize
    _same(tensors.to_tensor(tv), t)


def test_bytes_are_little_endian_row_major() -> None:
    t = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32).t()  # column-major view
    tv = tensors.from_tensor(t)
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
    back = tensors.to_tensor(tensors.from_tensor(t))
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
    _same(tensors.to_tensor(tensors.from_tensor(t)), t)


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
        tensors.to_tensor(tv, where="t")
    assert message in str(info.value)


def test_unwritable_tensors_are_encode_errors() -> None:
    with pytest.raises(EncodeError, match=r"Expected a strided tensor, got layout torch\.sparse_coo"):
        tensors.from_tensor(torch.eye(2).to_sparse())
    with pytest.raises(EncodeError, match="without it"):
        tensors.from_tensor(torch.empty(2, device="meta"))
    with pytest.raises(EncodeError, match="dtype the export schema names"):
        tensors.from_tensor(torch.zeros(2, dtype=torch.uint8).view(torch.bits8))


def test_overlapping_layout_rebuilt() -> None:
    tv = tensors.from_tensor(torch.tensor([5.0]).expand(4))
    back = tensors.to_tensor(tv)
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
    v = objects.from_python(obj)
    back = objects.to_python(v)
    assert torch.equal(back[0], obj[0]) and back[1:] == obj[1:]
    with pytest.raises(EncodeError, match=r"got object - at `value\[1\]`"):
        objects.from_python([1, object()])


# ---- issue 10: payloads checked before any allocation; devices validated up front ----------------------------
def _tv(**kw: object) -> m.TensorValue:
    fields: dict[str, object] = {
        "dtype": m.ScalarType.FLOAT,
        "sizes": [2, 2],
        "strides": [2, 1],
        "storage_offset": 0,
        "device": m.Device(type="cpu"),
        "requires_grad": False,
        "data": b"\0" * 16,
    }
    fields.update(kw)
    return m.TensorValue(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"sizes": [-1, 2]}, "Expected non-negative sizes"),
        ({"strides": [2, -1]}, "Expected non-negative sizes, strides"),
        ({"sizes": [1 << 62, 1 << 62], "strides": [0, 0]}, "numel and byte span fit in 64 bits"),
        ({"sizes": [1 << 40], "strides": [1 << 40]}, "fit in 64 bits"),
        ({"device": m.Device(type="meta")}, "device 'meta' holds no data"),
        ({"device": m.Device(type="cuda")}, "device 'cuda' is not available in this torch build"),
        ({"device": m.Device(type="banana")}, "Expected a device torch knows"),
    ],
)
def test_hostile_payloads_are_refused_before_allocation(kw: dict[str, object], message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        tensors.to_tensor(_tv(**kw), where="weights['w']")


@pytest.mark.parametrize("device", ["cuda", "xpu", "mtia", "hpu", "privateuseone", "cuda:3", "mps"])
def test_unavailable_devices_are_one_line_errors(device: str) -> None:
    from opwire.serde.tensors import check_device

    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    with pytest.raises(DecodeError, match=rf"^device '{device}' is not available in this torch build \(torch "):
        check_device(device, "--device")


def test_an_explicit_device_overrides_the_recorded_one() -> None:
    t = tensors.to_tensor(_tv(device=m.Device(type="cuda")), device="cpu")
    assert t.device.type == "cpu"


def test_pt2_zero_strides_past_the_storage_are_refused() -> None:
    from opwire.serde._archive.pt2_payload import raw_tensor_value

    def meta(sizes: list[int], strides: list[int], device: str = "cpu") -> m.PayloadMeta:
        return m.PayloadMeta(
            path_name="w",
            is_param=True,
            use_pickle=False,
            tensor_meta=m.TensorMeta(
                dtype=m.ScalarType.FLOAT,
                sizes=[m.SymInt(as_int=n) for n in sizes],
                strides=[m.SymInt(as_int=n) for n in strides],
                requires_grad=False,
                device=m.Device(type=device),
                storage_offset=m.SymInt(as_int=0),
                layout=m.Layout.Strided,
            ),
        )

    with pytest.raises(DecodeError, match=r"materializes 1073741824 bytes from a storage of 48"):
        raw_tensor_value(meta([1 << 26, 4], [0, 0]), b"\0" * 48, "weights['w']")
    with pytest.raises(DecodeError, match="64 bits"):
        raw_tensor_value(meta([1 << 62, 1 << 62], [0, 0]), b"\0" * 48, "weights['w']")
    with pytest.raises(DecodeError, match="device 'meta' holds no data"):
        raw_tensor_value(meta([2], [1], "meta"), b"\0" * 8, "weights['w']")
    small = raw_tensor_value(meta([1000], [0]), b"\1\0\0\0", "weights['w']")  # a legit expanded weight
    assert len(small.data) == 4000
