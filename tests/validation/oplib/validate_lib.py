"""Namespace `opwire_vt`: one op per validation finding (import once per process)."""

from __future__ import annotations

import torch
from torch import Tensor

NS = "opwire_vt"
lib = torch.library.Library(NS, "FRAGMENT")


# clean: fake implementation, vmap rule, serializable types
@torch.library.custom_op(f"{NS}::good", mutates_args=())
def good(x: Tensor, n: int = 2) -> Tensor:
    return x * n


@good.register_fake
def _(x: Tensor, n: int = 2) -> Tensor:
    return torch.empty_like(x)


@good.register_vmap
def _(info: object, in_dims: tuple[int | None, ...], x: Tensor, n: int = 2) -> tuple[Tensor, int | None]:
    return x * n, in_dims[0]


# no_fake_impl (a custom_op shows a Meta kernel that raises "no fake impl registered")
@torch.library.custom_op(f"{NS}::nofake", mutates_args=())
def nofake(x: Tensor) -> Tensor:
    return x.sin()


# opcheck_failed: a fake implementation with the wrong shape
@torch.library.custom_op(f"{NS}::badfake", mutates_args=())
def badfake(x: Tensor) -> Tensor:
    return x.cos()


@badfake.register_fake
def _(x: Tensor) -> Tensor:
    return x.new_empty((x.shape[0] + 1,))


def _twice(x: Tensor, *args: object) -> Tensor:
    return x * 2


# unserializable_argument / unserializable_return
lib.define("bad_types(Tensor x, Dict(int, Tensor) d, Device[] devs, Generator g, Storage s) -> Dict(str, Tensor)")
lib.impl("bad_types", _twice, "CompositeExplicitAutograd")

# unrepresentable_default: None on a non-optional int
lib.define("none_default(Tensor x, int n=None) -> Tensor")
lib.impl("none_default", _twice, "CPU")
lib.impl("none_default", lambda x, n=None: torch.empty_like(x), "Meta")

# aoti_unsupported_argument / aoti_unsupported_return (all serializable); vmap_unsupported (non-Tensor returns)
lib.define("aoti(Tensor x, Tensor? y, complex c, SymBool b, int[][] nested) -> (SymInt, bool, float, Scalar, str)")
lib.impl("aoti", lambda *a: (1, True, 1.0, 1, "s"), "CPU")
torch.library.register_fake(f"{NS}::aoti", lambda *a: (1, True, 1.0, 1, "s"), lib=lib)

# dead_batching_rule: FuncTorchBatched next to CompositeImplicitAutograd
lib.define("dead_batch(Tensor x) -> Tensor")
lib.impl("dead_batch", _twice, "CompositeImplicitAutograd")
lib.impl("dead_batch", _twice, "FuncTorchBatched")

# privateuse1_no_autograd
lib.define("pu1(Tensor x) -> Tensor")
lib.impl("pu1", _twice, "PrivateUse1")
lib.impl("pu1", lambda x: torch.empty_like(x), "Meta")

# vmap_unsupported: a view op
lib.define("view_op(Tensor(a) x) -> Tensor(a)")
lib.impl("view_op", lambda x: x.view(x.shape), "CompositeExplicitAutograd")

# decomposition route
lib.define("comp(Tensor x) -> Tensor")
lib.impl("comp", _twice, "CompositeImplicitAutograd")

# register_vmap route on a Library.define op
lib.define("vmapped(Tensor x) -> Tensor")
lib.impl("vmapped", _twice, "CPU")
torch.library.register_fake(f"{NS}::vmapped", lambda x: torch.empty_like(x), lib=lib)


@torch.library.register_vmap(f"{NS}::vmapped")
def _(info: object, in_dims: tuple[int | None, ...], x: Tensor) -> tuple[Tensor, int | None]:
    return x * 2, in_dims[0]


# two overloads for target resolution; in-place op (fallback route through the in-place loop)
lib.define("over(Tensor x) -> Tensor")
lib.define("over.two(Tensor x, int n) -> Tensor")
lib.define("inplace_(Tensor(a!) x) -> Tensor(a!)")
for _name in ("over", "over.two", "inplace_"):
    lib.impl(_name, lambda x, *a: x, "CompositeExplicitAutograd")

# schema_missing: kernels for an op nobody defined
impl_lib = torch.library.Library(NS, "IMPL")
impl_lib.impl("ghost", _twice, "CPU")


def sample_inputs(op: str) -> list[tuple[tuple[object, ...], dict[str, object]]]:
    """Sample inputs for --sample-inputs: a good op passes opcheck, badfake fails test_faketensor."""
    if op in (f"{NS}::good.default", f"{NS}::badfake.default"):
        return [((torch.randn(3),), {})]
    return []
