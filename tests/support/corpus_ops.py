"""Custom operators of the test corpus, in the `opwire_test` namespace (registered once per process).

`opwire_test::mix` has defaults of many types (Tensor?, float, int, bool, str, int[], float[],
ScalarType?, Device?, complex, Layout?, MemoryFormat?), some positional and some keyword-only;
`opwire_test::tagged` takes the list types that carry no default (bool[], str[], Tensor?[]) and
returns Tensor[]; `opwire_test::accumulate_` mutates its first argument in place (decomposition
turns it into `auto_functionalized_v2`, whose first argument is an operator). Importing this module
registers all three; `register()` is idempotent, so a second copy of this module (imported by path
under another name) does not register them twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["ACCUMULATE_SCHEMA", "MIX_SCHEMA", "NAMESPACE", "TAGGED_SCHEMA", "register"]

NAMESPACE = "opwire_test"
MIX_SCHEMA = (
    '(Tensor x, Tensor? y=None, float alpha=0.5, int n=2, *, bool flag=True, str mode="sum", int[] dims=[0], '
    "float[] weights=[1., 2.], ScalarType? dtype=None, Device? device=None, complex c=1j, Layout? layout=None, "
    "MemoryFormat? memory_format=None) -> Tensor"
)
TAGGED_SCHEMA = "(Tensor x, bool[] mask, str[] tags, Tensor?[] extras) -> Tensor[]"
ACCUMULATE_SCHEMA = "(Tensor(a!) acc, Tensor x, float alpha=1.) -> ()"


def _mix(
    x: torch.Tensor,
    y: torch.Tensor | None = None,
    alpha: float = 0.5,
    n: int = 2,
    *,
    flag: bool = True,
    mode: str = "sum",
    dims: Sequence[int] = (0,),
    weights: Sequence[float] = (1.0, 2.0),
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    c: complex = 1j,
    layout: torch.layout | None = None,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    out = x * (alpha * n)
    if y is not None:
        out = out + y
    reduced = out.amax(dim=list(dims), keepdim=True) if mode == "max" else out.sum(dim=list(dims), keepdim=True)
    out = out + reduced * (sum(weights) / len(weights)) + (c.real - c.imag)
    if flag:
        out = out.relu()
    return out.to(dtype=dtype if dtype is not None else x.dtype, device=device)


def _mix_fake(
    x: torch.Tensor,
    y: torch.Tensor | None = None,
    alpha: float = 0.5,
    n: int = 2,
    *,
    flag: bool = True,
    mode: str = "sum",
    dims: Sequence[int] = (0,),
    weights: Sequence[float] = (1.0, 2.0),
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    c: complex = 1j,
    layout: torch.layout | None = None,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    return torch.empty_like(x, dtype=dtype if dtype is not None else x.dtype, device=device)


def _tagged(
    x: torch.Tensor, mask: Sequence[bool], tags: Sequence[str], extras: Sequence[torch.Tensor | None]
) -> list[torch.Tensor]:
    out = x.clone()
    for keep, tag in zip(mask, tags):
        if keep:
            out = out + len(tag)
    for extra in extras:
        if extra is not None:
            out = out * extra
    return [out]


def _tagged_fake(
    x: torch.Tensor, mask: Sequence[bool], tags: Sequence[str], extras: Sequence[torch.Tensor | None]
) -> list[torch.Tensor]:
    return [torch.empty_like(x)]


def _accumulate(acc: torch.Tensor, x: torch.Tensor, alpha: float = 1.0) -> None:
    acc.add_(x, alpha=alpha)


def _accumulate_fake(acc: torch.Tensor, x: torch.Tensor, alpha: float = 1.0) -> None:
    return None


def _defined(name: str) -> bool:
    return hasattr(getattr(torch.ops, NAMESPACE), name)


def register() -> None:
    """Define the `opwire_test` custom ops with their fake kernels, unless this process already has them."""
    if not _defined("mix"):
        mix = torch.library.custom_op(f"{NAMESPACE}::mix", mutates_args=(), schema=MIX_SCHEMA)(_mix)
        mix.register_fake(_mix_fake)
    if not _defined("tagged"):
        tagged = torch.library.custom_op(f"{NAMESPACE}::tagged", mutates_args=(), schema=TAGGED_SCHEMA)(_tagged)
        tagged.register_fake(_tagged_fake)
    if not _defined("accumulate_"):
        accumulate = torch.library.custom_op(
            f"{NAMESPACE}::accumulate_", mutates_args=("acc",), schema=ACCUMULATE_SCHEMA
        )(_accumulate)
        accumulate.register_fake(_accumulate_fake)


register()
