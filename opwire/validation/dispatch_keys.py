"""What the dispatcher holds for one op: kernels per dispatch key, the fake implementation, the vmap route.

`torch._C._dispatch_has_kernel_for_dispatch_key` sees direct registrations only (a `custom_op` has none
for "CPU": it registers CompositeExplicitAutograd); `_dispatch_has_computed_kernel_for_dispatch_key` says
whether a runtime key can run (backend fallbacks included) and raises on alias keys. Both are shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from opwire.schema import models as m
from opwire.serde.json import to_jsonable

__all__ = ["ALIAS_KEYS", "KEYS", "KernelInfo", "VmapRoute", "fake_impl_source", "kernels", "vmap_route"]

KEYS: tuple[str, ...] = (
    "CPU",
    "CUDA",
    "Meta",
    "Autograd",
    "AutogradCPU",
    "AutogradCUDA",
    "PrivateUse1",
    "AutogradPrivateUse1",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "FuncTorchBatched",
    "Functionalize",
    "Python",
)
ALIAS_KEYS = frozenset({"Autograd", "CompositeImplicitAutograd", "CompositeExplicitAutograd"})
_TABLE_LINE = re.compile(r"^(\w+): .*\[([^\]]+)\]\s*$")
_DUMP_LINE = re.compile(r"^(\w+)(?:\[alias\])?: registered at (.+?):\d+ ::")


@dataclass(frozen=True)
class KernelInfo:
    """One dispatch key of one op: a direct registration, whether it can run, and where the kernel comes from."""

    key: str
    registered: bool
    runnable: bool | None  # None for alias keys: they have no runtime kernel of their own
    source: str | None  # from the computed table: "kernel", "math kernel", "backend fallback", ...

    def to_model(self) -> m.OpKernel:
        """The entry as the IDL's `OpKernel` record."""
        return m.OpKernel(key=self.key, registered=self.registered, runnable=self.runnable, source=self.source)

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON-ready data (the JSON codec's form of `to_model()`)."""
        data: dict[str, Any] = to_jsonable(self.to_model())
        return data


@dataclass(frozen=True)
class VmapRoute:
    """How torch.vmap handles the op: route is one of batching_rule, register_vmap, decomposition, fallback,
    unsupported."""

    route: str
    detail: str

    def to_model(self) -> m.OpVmapRoute:
        """The route as the IDL's `OpVmapRoute` record."""
        return m.OpVmapRoute(route=self.route, detail=self.detail)

    def to_json(self) -> dict[str, str]:
        """The route as JSON-ready data (the JSON codec's form of `to_model()`)."""
        data: dict[str, str] = to_jsonable(self.to_model())
        return data


def _computed_sources(name: str) -> dict[str, str]:
    """Runtime key -> kind of kernel the computed dispatch table holds ("kernel", "math kernel", ...)."""
    out: dict[str, str] = {}
    for line in torch._C._dispatch_dump_table(name).splitlines():
        match = _TABLE_LINE.match(line.strip())
        if match:
            out[match.group(1)] = match.group(2)
    return out


def _registration_files(name: str) -> dict[str, str]:
    """Key -> source file of the direct registration, from the dispatcher's debug dump."""
    out: dict[str, str] = {}
    for line in torch._C._dispatch_dump(name).splitlines():
        match = _DUMP_LINE.match(line.strip())
        if match:
            out[match.group(1)] = match.group(2)
    return out


def kernels(name: str) -> tuple[KernelInfo, ...]:
    """Kernel information for every key of `KEYS`; `name` is "ns::op" or "ns::op.overload"."""
    sources = _computed_sources(name)
    infos = []
    for key in KEYS:
        registered = bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))
        if key in ALIAS_KEYS:
            infos.append(KernelInfo(key, registered, None, None))
            continue
        runnable = bool(torch._C._dispatch_has_computed_kernel_for_dispatch_key(name, key))
        infos.append(KernelInfo(key, registered, runnable, sources.get(key) if runnable else None))
    return tuple(infos)


def fake_impl_source(op: torch._ops.OpOverload) -> str | None:
    """Where FakeTensor finds this op's fake implementation, or None when there is none.

    Mirrors `torch._library.utils.has_fake_kernel` and names the source. A `custom_op` always shows a Meta
    kernel (one that raises "no fake impl registered"), so for it only `register_fake` counts.
    """
    from torch._library import custom_ops, simple_registry
    from torch._library import utils as library_utils

    name = op._name
    if library_utils.can_generate_trivial_fake_impl(op):
        return "trivial (returns nothing or its out=/in-place arguments)"
    if torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"):
        return "CompositeImplicitAutograd decomposition"
    opdef = custom_ops._maybe_get_opdef(name)
    if opdef is not None:
        return "register_fake" if opdef._abstract_fn is not None else None
    if torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeExplicitAutograd"):
        return "CompositeExplicitAutograd kernel run on fake tensors"
    entry = simple_registry.singleton.get(name)
    if entry is not None and entry.fake_impl.kernel is not None:
        return "register_fake"
    if torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta"):
        return "Meta kernel"
    return None


def _is_inplace(schema: Any) -> bool:
    """functorch's isInplaceOp: mutates and returns its first argument, aliases nothing else."""
    args, rets = schema.arguments, schema.returns
    if not schema.is_mutable or len(rets) != 1 or not args:
        return False
    first = args[0].alias_info
    if first is None or not first.is_write or any(a.alias_info is not None for a in args[1:]):
        return False
    return rets[0].alias_info is not None and bool(rets[0].alias_info.is_write)


def fallback_blocker(schema: Any) -> str | None:
    """Why functorch's for-loop vmap fallback cannot run an op of this schema, or None when it can.

    Mirrors `batchedTensorForLoopFallback` in aten/src/ATen/functorch/BatchedFallback.cpp.
    """
    tensor = torch._C.TensorType.get()
    tensor_lists = (torch._C.ListType.ofTensors(), torch._C.ListType(torch._C.OptionalType.ofTensor()))
    if not all(r.type == tensor for r in schema.returns):
        return "a return is not a plain Tensor"
    if any(a.type.isSubtypeOf(t) for a in schema.arguments for t in tensor_lists):
        return "an argument is a list of tensors"
    if _is_inplace(schema):
        return None
    has_alias = any(a.alias_info is not None for a in (*schema.arguments, *schema.returns))
    if schema.is_mutable or has_alias:
        return "the fallback path doesn't work on out= or view ops"
    if not schema.returns:
        return "the fallback path does not support operations with no returns"
    return None


def vmap_route(op: torch._ops.OpOverload, infos: tuple[KernelInfo, ...]) -> VmapRoute:
    """Which route torch.vmap takes for `op`, given its kernel information."""
    from torch._library import custom_ops

    name = op._name
    registered = {k.key for k in infos if k.registered}
    opdef = custom_ops._maybe_get_opdef(name)
    blocker = fallback_blocker(op._schema)
    if opdef is not None and getattr(opdef, "_vmap_fn", None) is not None:
        return VmapRoute("register_vmap", "a vmap rule registered with register_vmap on the custom_op")
    if "FuncTorchBatched" in registered:
        origin = _registration_files(name).get("FuncTorchBatched", "")
        if origin.replace("\\", "/").endswith("torch/library.py"):
            return VmapRoute("register_vmap", "a vmap rule registered with torch.library.register_vmap")
        return VmapRoute("batching_rule", f"a FuncTorchBatched kernel registered at {origin or 'an unknown place'}")
    if "CompositeImplicitAutograd" in registered:
        plain = "plain vmap runs the decomposition once per batch element through the for-loop fallback"
        if blocker is not None:
            plain = f"plain vmap fails: the for-loop fallback cannot run it ({blocker})"
        return VmapRoute(
            "decomposition",
            "the CompositeImplicitAutograd kernel decomposes into other ops inside autograd transforms; " + plain,
        )
    if blocker is None:
        return VmapRoute("fallback", "no batching rule: the for-loop fallback runs the op once per batch element")
    return VmapRoute("unsupported", f"no batching rule and the for-loop fallback cannot run it ({blocker})")
