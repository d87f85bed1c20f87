"""Write an OpwireArchive as a torch .pt2 archive that `torch.export.load` accepts.

The program goes in as the JSON torch writes (`models/model.json`), each weight and constant as raw
storage bytes with a PayloadMeta index, exactly the layout `torch.export.save` produces. Example
inputs, when the archive has them, go where torch keeps them (`data/sample_inputs/model.pt`, which
torch itself only reads with `torch.load`); without them the entry is empty.
"""

from __future__ import annotations

import ctypes
import io
from pathlib import Path

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.schema.spec_roles import parameter_names
from opwire.serde import json
from opwire.serde.tensor_layout import check_layout, contiguous_strides, dtype_of

__all__ = ["storage_bytes", "write"]


def _sym_ints(values: list[int]) -> list[m.SymInt]:
    return [m.SymInt(as_int=v) for v in values]


def storage_bytes(tv: m.TensorValue, where: str) -> bytes:
    """The bytes of a storage in which (sizes, strides, storage_offset) views the elements."""
    if tv.storage_offset == 0 and list(tv.strides) == contiguous_strides(list(tv.sizes)):
        return tv.data
    from opwire.serde import tensors  # deferred: torch lays out a strided storage; contiguous ones need no torch

    try:
        t = tensors.to_tensor(tv, "cpu", where).detach()
    except DecodeError as exc:
        raise EncodeError(str(exc), where) from None
    storage = t.untyped_storage()
    return ctypes.string_at(storage.data_ptr(), storage.nbytes()) if storage.nbytes() else b""


def _payload(tv: m.TensorValue, path_name: str, is_param: bool) -> m.PayloadMeta:
    return m.PayloadMeta(
        path_name=path_name,
        is_param=is_param,
        use_pickle=False,
        tensor_meta=m.TensorMeta(
            dtype=tv.dtype,
            sizes=_sym_ints(tv.sizes),
            requires_grad=tv.requires_grad,
            device=tv.device,
            strides=_sym_ints(tv.strides),
            storage_offset=m.SymInt(as_int=tv.storage_offset),
            layout=m.Layout.Strided,
        ),
    )


def _check_tensor(tv: m.TensorValue, where: str) -> None:
    try:
        check_layout(tv, dtype_of(tv.dtype, f"{where}.dtype"), where)
    except DecodeError as exc:
        raise EncodeError(f"cannot write {where}: {exc}", where) from None


def _example_inputs(archive: m.OpwireArchive) -> bytes:
    if archive.example_args is None and archive.example_kwargs is None:
        return b""
    import torch  # deferred: an archive without example inputs is written without torch

    from opwire.serde import objects  # deferred: imports torch

    try:
        inputs = objects.inputs_to_python(archive.example_args, archive.example_kwargs, "cpu")
    except DecodeError as exc:
        raise EncodeError(f"cannot write the example inputs: {exc}", exc.path) from None
    buffer = io.BytesIO()
    torch.save(inputs, buffer, pickle_protocol=2)
    return buffer.getvalue()


def write(archive: m.OpwireArchive, path: str | Path, *, model: str = "model") -> None:
    """Write `archive` as a .pt2 file (the layout torch.export.save writes) at `path`."""
    import json as _stdlib_json

    from torch.export.pt2_archive._package import PT2ArchiveWriter

    if not isinstance(archive, m.OpwireArchive):
        raise EncodeError(f"Expected an OpwireArchive, got {type(archive).__name__}")
    program_json = json.encode(archive.program)
    params = parameter_names(archive.program)
    entries: list[tuple[str, bytes]] = []
    configs: dict[str, dict[str, m.PayloadMeta]] = {"weights": {}, "constants": {}}
    for kind, table, prefix in (("weights", archive.weights, "weight_"), ("constants", archive.constants, "tensor_")):
        for i, (name, tv) in enumerate(table.items()):
            where = f"{kind}[{name!r}]"
            _check_tensor(tv, where)
            path_name = f"{prefix}{i}"
            entries.append((f"data/{kind}/{path_name}", storage_bytes(tv, where)))
            configs[kind][name] = _payload(tv, path_name, kind == "weights" and name in params)
    sample_inputs = _example_inputs(archive)
    target = Path(path)
    try:
        with PT2ArchiveWriter(str(target)) as writer:
            for name, data in entries:
                writer.write_bytes(name, data)
            for kind, config in configs.items():
                index = json.to_jsonable(m.PayloadConfig(config=config))
                writer.write_string(f"data/{kind}/{model}_{kind}_config.json", _stdlib_json.dumps(index))
            writer.write_bytes(f"models/{model}.json", program_json)
            writer.write_bytes(f"data/sample_inputs/{model}.pt", sample_inputs)
    except RuntimeError as exc:  # torch's zip writer reports I/O problems as RuntimeError
        raise OSError(f"cannot write {target}: {exc}") from None
