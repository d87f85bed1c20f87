"""A program's inputs: read from a file by name (`read_inputs`), and bound by name to a call (`bind_inputs`).

An inputs file is one of
- a `Values` file (opwire's record; `opwire.serde.values({...})` makes one; JSON, binary or compact),
- a plain JSON object `{"x": [[1.0, 2.0]], "n": 3}` (nested lists become tensors, numbers stay numbers),
- a `torch.save`d dict of tensors, read only with `allow_pickle=True` (it is a pickle).
The file's first bytes decide which, before the rest is read; `opwire run` and `opwire exec` read theirs here.
`check_extern_inputs` says which name an extern-node file reads that the inputs do not give.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opwire.errors import BindError, DecodeError
from opwire.program.files import read_head, read_input
from opwire.program.opener import open
from opwire.program.signature import check_inputs, extern_inputs
from opwire.schema import models as m
from opwire.serde import framing, loads, python_values
from opwire.serde.archive import is_zip_head
from opwire.serde.json import is_document_head

if TYPE_CHECKING:
    from opwire.program.opened import OpenedProgram

__all__ = ["bind_inputs", "check_extern_inputs", "input_dtypes", "read_inputs"]


def check_extern_inputs(nodes: m.ExternKernelNodes, inputs: Mapping[str, Any]) -> None:
    """A BindError naming the first name a node of `nodes` reads that neither `inputs` nor an earlier node gives."""
    for entry in extern_inputs(nodes):
        for name in entry["reads"]:
            if name not in inputs:
                raise BindError(
                    f"input {name!r} is missing: node [{entry['index']}] {entry['name']} ({entry['op']}) reads it and "
                    f"no earlier node produces it; the inputs give {', '.join(sorted(inputs)) or 'nothing'} "
                    "(`opwire.program.extern_inputs(nodes)` lists every name the nodes read)"
                )


def bind_inputs(opened: OpenedProgram, named: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) for a program's call from its user inputs by name (in graph order, checked against its
    signature: a BindError names the first missing, extra or ill-fitting one), or from "args"/"kwargs" entries."""
    import torch.utils._pytree as pytree

    signature = opened.signature()
    in_spec = opened.check()[0]
    names = [p.name for p in signature.inputs]
    if named and set(named) <= {"args", "kwargs"} and not set(names) & {"args", "kwargs"}:
        args, kwargs = tuple(named.get("args", [])), dict(named.get("kwargs", {}))
        leaves = pytree.tree_leaves((args, kwargs))
        if len(leaves) == len(names):
            check_inputs(signature, dict(zip(names, leaves, strict=True)))
        return args, kwargs
    check_inputs(signature, named)
    ports = signature.inputs
    if in_spec is None or in_spec.num_leaves != len(ports):
        ports = tuple(p for p in ports if not p.constant)  # the spec does not count constant inputs
    values = [named.get(p.name, p.value) for p in ports]
    if in_spec is None:
        return tuple(values), {}
    if in_spec.num_leaves != len(values):
        raise BindError(
            f"the program's input spec holds {in_spec.num_leaves} values but its signature names "
            f"{len(values)} inputs ({', '.join(p.name for p in ports)}); pass 'args' and 'kwargs' in a Values file"
        )
    args, kwargs = pytree.tree_unflatten(values, in_spec)
    return tuple(args), dict(kwargs)


def input_dtypes(opened: OpenedProgram) -> dict[str, str]:
    """The dtype of each tensor input by name: what plain-JSON lists become in `read_inputs`."""
    return {p.name: p.dtype for p in opened.signature().inputs if p.dtype is not None}


def read_inputs(
    path: str | Path,
    fmt: str | None,
    *,
    allow_pickle: bool = False,
    dtypes: Mapping[str, str] | None = None,
    max_elements: int | None = None,
) -> dict[str, Any]:
    """The Python values an inputs file holds, by name (`dtypes` gives plain-JSON tensors their dtype; `fmt`
    names the codec of raw Thrift, which has no header). What the file is comes from its first bytes, within the
    input-size budget; a file that is none of the above is a DecodeError saying what it starts with."""
    path = str(path)
    try:
        head = read_head(path)  # the first bytes decide before the rest is read (/dev/zero is refused here)
        if is_zip_head(head):
            return _torch_saved(path, allow_pickle)
        if fmt not in (None, "json") and not framing.has_header(head):  # raw Thrift: the caller named the codec
            raw = read_input(path, what="--inputs file")
            return python_values(loads(raw, m.Values, format=fmt, max_elements=max_elements))  # type: ignore[call-overload]
        if not is_document_head(head):
            raise DecodeError(
                f"{path}: not a Values JSON object (it starts with {head[:8]!r}), a plain JSON object, a "
                "torch.save file nor a file opwire wrote in Thrift form; pass --inputs-format binary|compact "
                "for raw Thrift"
            )
        data = read_input(path, what="--inputs file")  # within the input-size budget
    except OSError as exc:
        raise DecodeError(f"cannot read --inputs {path}: {exc.strerror or exc}") from None
    if not framing.has_header(data) and not _is_values_json(data):
        return _plain_json(data, path, dtypes or {})
    values: m.Values = open(path, expect="values", max_elements=max_elements)  # sniffed and budgeted there
    return python_values(values)


def _is_values_json(data: bytes) -> bool:
    """A `Values` JSON file has one top-level key, "values", holding an object."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return True  # let the Values decoder report where the JSON breaks
    return not isinstance(doc, dict) or (set(doc) == {"values"} and isinstance(doc["values"], dict))


def _plain_json(data: bytes, path: str, dtypes: Mapping[str, str]) -> dict[str, Any]:
    import torch

    doc = json.loads(data)  # _is_values_json parsed it already: an object that is not a Values record
    out: dict[str, Any] = {}
    for name, value in doc.items():
        if isinstance(value, list):
            try:
                t = torch.tensor(value)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise DecodeError(
                    f"{path}: input {name!r} is a list that is not a rectangular array of numbers ({exc}); "
                    "give a tensor as nested lists of equal length",
                    name,
                ) from None
            want = dtypes.get(name)
            if want is not None and (t.dtype != torch.bool or want == "bool"):
                target = getattr(torch, want, None)
                if isinstance(target, torch.dtype) and (target.is_floating_point or not t.is_floating_point()):
                    t = t.to(target)
            out[name] = t
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            raise DecodeError(
                f"{path}: input {name!r} is a JSON {type(value).__name__}; expected nested lists (a tensor) or a "
                "number (or a Values file, as `opwire run --out` writes)",
                name,
            )
    return out


def _torch_saved(path: str, allow_pickle: bool) -> dict[str, Any]:
    import torch

    if not allow_pickle:
        raise DecodeError(
            f"--inputs {path} is a zip (a torch.save pickle); pickles run code when loaded: pass --allow-pickle "
            'for a file you trust, or give the inputs as plain JSON ({"x": [[1.0, 2.0]]})'
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (zipfile.BadZipFile, RuntimeError, OSError, EOFError, ValueError) as exc:
        raise DecodeError(f"--inputs {path}: torch.load failed ({str(exc).splitlines()[0]})") from None
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        raise DecodeError(
            f"--inputs {path}: expected a torch.save'd dict of name -> tensor, got {type(obj).__name__}"
            + (" with other values" if isinstance(obj, dict) else "")
        )
    return dict(obj)
