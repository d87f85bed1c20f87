"""TensorValue <-> torch.Tensor: dtype table, element bytes, sizes/strides/storage_offset restored.

`TensorValue.data` holds the elements in row-major order, little-endian; `strides` and
`storage_offset` say how the tensor sat in its storage, and `to_tensor` rebuilds that layout.
The dtype table comes from `torch_enums`, so the numbering is the export schema's (FLOAT is 7),
never c10's.
"""

from __future__ import annotations

import ctypes
import sys
import warnings

import torch

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import torch_enums
from opwire.serde.tensor_layout import (
    KNOWN,
    MAX_STORAGE_SLACK,
    SLACK_BYTES,
    check_layout,
    check_numel,
    check_shape,
    contiguous_strides,
    dtype_of,
    storage_extent,
)

__all__ = [
    "MAX_STORAGE_SLACK",
    "SLACK_BYTES",
    "TORCH_DTYPES",
    "check_device",
    "check_layout",
    "check_numel",
    "check_shape",
    "contiguous_strides",
    "device_of",
    "element_size",
    "from_tensor",
    "place",
    "scalar_type_of",
    "shared_tensor",
    "storage_extent",
    "target_device",
    "to_tensor",
    "torch_dtype",
]

_DATALESS = frozenset({"meta"})  # devices whose tensors have no elements to fill
_AVAILABLE: dict[str, bool] = {}


TORCH_DTYPES: dict[m.ScalarType, torch.dtype] = {
    m.ScalarType(v): dtype for v, dtype in torch_enums.to_torch("ScalarType").items()
}
_SCALAR_TYPES: dict[torch.dtype, m.ScalarType] = {v: k for k, v in TORCH_DTYPES.items()}


def torch_dtype(st: int, where: str = "dtype") -> torch.dtype:
    """The torch dtype of an export-schema ScalarType value; DecodeError when torch has none."""
    name = dtype_of(st, where).name  # the DecodeError for a ScalarType no torch holds
    found = TORCH_DTYPES.get(m.ScalarType(st))
    if found is None:
        raise DecodeError(
            f"Expected a dtype this torch ({torch.__version__}) has, got {name} - at `{where}`; "
            "load the file with the torch that wrote it",
            where,
        )
    return found


def scalar_type_of(dtype: torch.dtype, where: str = "dtype") -> m.ScalarType:
    """The export-schema ScalarType of a torch dtype; EncodeError for dtypes the schema lacks."""
    try:
        return _SCALAR_TYPES[dtype]
    except KeyError:
        raise EncodeError(
            f"Expected a tensor of a dtype the export schema names ({KNOWN}), got {dtype} - at `{where}`; "
            f"convert it (e.g. `.to(torch.float32)`) before writing",
            where,
        ) from None


def element_size(st: int, where: str = "dtype") -> int:
    """Bytes per element of a ScalarType."""
    return dtype_of(st, where).itemsize


def _swap_unit(dtype: torch.dtype) -> int:
    return dtype.itemsize // 2 if dtype.is_complex else dtype.itemsize


def _to_little_endian(flat_u8: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Reverse bytes per scalar on big-endian hosts (no-op on little-endian ones)."""
    unit = _swap_unit(dtype)
    if sys.byteorder == "little" or unit == 1 or flat_u8.numel() == 0:
        return flat_u8
    return flat_u8.view(-1, unit).flip(1).reshape(-1)


def from_tensor(t: torch.Tensor, where: str = "tensor") -> m.TensorValue:
    """A TensorValue holding `t`'s metadata and element bytes (row-major, little-endian)."""
    if not isinstance(t, torch.Tensor):
        raise EncodeError(f"Expected a torch.Tensor, got {type(t).__name__} - at `{where}`", where)
    if t.layout != torch.strided:
        raise EncodeError(
            f"Expected a strided tensor, got layout {t.layout} - at `{where}`; call `.to_dense()` first", where
        )
    if t.device.type == "meta" or type(t).__name__ == "FakeTensor":
        raise EncodeError(f"Expected a tensor with data, got a {t.device.type} tensor without it - at `{where}`", where)
    st = scalar_type_of(t.dtype, where)
    data = _element_bytes(t)
    # built from values this function just produced and checked: pydantic's validation would only re-walk them
    return m.TensorValue.model_construct(
        dtype=st,
        sizes=[int(n) for n in t.shape],
        strides=[int(n) for n in t.stride()],
        storage_offset=int(t.storage_offset()),
        device=m.Device.model_construct(type=t.device.type, index=t.device.index),
        requires_grad=bool(t.requires_grad),
        data=data,
        digest=None,
        layout=None,
    )


def _element_bytes(t: torch.Tensor) -> bytes:
    """Row-major element bytes of `t`, little-endian."""
    flat = t.detach().resolve_conj().resolve_neg().to("cpu").contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    if flat.stride(0) != 1:  # one element counts as contiguous whatever its stride; viewing bytes needs stride 1
        flat = flat.as_strided((flat.numel(),), (1,))
    u8 = _to_little_endian(flat.view(torch.uint8), t.dtype).contiguous()
    return ctypes.string_at(u8.data_ptr(), u8.numel())


def to_tensor(tv: m.TensorValue, device: str | torch.device | None = None, where: str = "tensor") -> torch.Tensor:
    """Rebuild the torch.Tensor a TensorValue describes (dtype, sizes, strides, storage_offset, grad)."""
    return _rebuild(tv, device, where, share=False)


def shared_tensor(tv: m.TensorValue, device: str | torch.device | None = None, where: str = "tensor") -> torch.Tensor:
    """As `to_tensor`, but a contiguous CPU tensor views `tv.data` itself instead of a copy.

    For callers that never write to the result (the program runner copies what a program mutates):
    writing to it would change the payload's bytes."""
    return _rebuild(tv, device, where, share=True)


def _rebuild(tv: m.TensorValue, device: str | torch.device | None, where: str, *, share: bool) -> torch.Tensor:
    dtype = torch_dtype(tv.dtype, f"{where}.dtype")
    extent = check_layout(tv, dtype, where)
    target = target_device(tv, device, where)
    flat = _flat_from_bytes(tv.data, dtype, share=share)
    sizes, strides, offset = list(tv.sizes), list(tv.strides), tv.storage_offset
    if offset == 0 and strides == contiguous_strides(sizes):
        out = flat.reshape(sizes)
    else:
        out = _restrided(flat, dtype, extent, sizes, strides, offset)
    return place(out, target, bool(tv.requires_grad), where)


def target_device(tv: m.TensorValue, device: str | torch.device | None, where: str = "tensor") -> torch.device:
    """Where a rebuilt payload goes: `device`, else the one it was recorded on; checked (`check_device`)."""
    return check_device(device if device is not None else device_of(tv.device, where), where)


def place(out: torch.Tensor, target: torch.device, requires_grad: bool, where: str = "tensor") -> torch.Tensor:
    """Move a rebuilt CPU tensor to its checked `target` device and set requires_grad; DecodeError on failure."""
    try:
        if target != out.device:
            out = out.to(target)
        if requires_grad:
            out.requires_grad_(True)
    except (RuntimeError, ValueError) as exc:
        raise DecodeError(f"cannot rebuild tensor: {exc} - at `{where}`", where) from None
    return out


def _flat_from_bytes(data: bytes, dtype: torch.dtype, *, share: bool = False) -> torch.Tensor:
    if not data:
        return torch.empty(0, dtype=dtype)
    if share and sys.byteorder == "little" and len(data) % dtype.itemsize == 0:
        with warnings.catch_warnings():  # read-only bytes: the caller promises not to write (see shared_tensor)
            warnings.simplefilter("ignore")
            return torch.frombuffer(data, dtype=dtype)
    u8 = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return _to_little_endian(u8, dtype).view(dtype)


def _restrided(
    flat: torch.Tensor, dtype: torch.dtype, extent: int, sizes: list[int], strides: list[int], offset: int
) -> torch.Tensor:
    """Place row-major elements into a fresh storage laid out by sizes/strides/offset."""
    base = torch.zeros(max(extent, offset), dtype=dtype)
    view = base.as_strided(sizes, strides, offset)
    if flat.numel() == 0:
        return view
    if torch._debug_has_internal_overlap(view) == 0:
        view.copy_(flat.reshape(sizes))
    else:  # overlapping layout (e.g. expanded): scatter by storage position
        positions = torch.arange(max(extent, 1)).as_strided(sizes, strides, offset).reshape(-1)
        base[positions] = flat
    return view


def device_of(d: m.Device, where: str = "device") -> torch.device:
    """The torch.device a Device names; DecodeError for a device type torch does not know."""
    try:
        return torch.device(d.type) if d.index is None else torch.device(d.type, d.index)
    except (RuntimeError, ValueError):
        raise DecodeError(
            f"Expected a device torch knows, got {d.type!r} - at `{where}.device`; pass device= to load elsewhere",
            f"{where}.device",
        ) from None


def check_device(device: str | torch.device, where: str = "device") -> torch.device:
    """The torch.device `device` names, if tensors with data can live there in this torch build.

    Checked before any tensor is built: an unknown device type, a backend this build lacks (cuda, xpu,
    mtia, hpu, privateuseone on a CPU-only torch), an index past the devices present, or a device
    without storage (meta) is a one-line DecodeError."""
    try:
        dev = device if isinstance(device, torch.device) else torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise DecodeError(
            f"Expected a device torch knows (cpu, cuda, mps, xpu, ...), got {str(device)!r} - at `{where}`", where
        ) from None
    name = str(dev)
    if dev.type in _DATALESS:
        raise DecodeError(
            f"device {name!r} holds no data: a tensor with elements cannot be placed there - at `{where}`; "
            "load it on cpu (device='cpu', CLI: --device cpu)",
            where,
        )
    if name not in _AVAILABLE:
        try:  # the backend's own check: raises AssertionError, RuntimeError, ModuleNotFoundError, ... when absent
            torch.empty(0, device=dev)
            _AVAILABLE[name] = True
        except Exception:
            _AVAILABLE[name] = False
    if not _AVAILABLE[name]:
        raise DecodeError(
            f"device {name!r} is not available in this torch build (torch {torch.__version__}) - at `{where}`; "
            "pass device='cpu' (CLI: --device cpu) or use a torch built for it",
            where,
        )
    return dev
