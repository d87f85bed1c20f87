"""The suite's one AOTInductor package: a model calling two custom ops with defaults, keywords and lists.

An AOTInductor compile takes ~10 s of CPU (with the suite's Inductor settings, tests/support/inductor.py),
so a run compiles this package once: the first test to ask compiles it under a lock in the run's temp
directory, shared by every xdist worker (the `aoti_package` fixture of tests/conftest.py); the others read it.
Importing this module registers the ops, which the compiled package and the executor look up by name.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

import torch

from support import inductor

__all__ = ["LIB", "Model", "inputs", "package"]

LIB = torch.library.Library("opwire_aoti_test", "DEF")
LIB.define(
    'foo(Tensor x, int n=2, float alpha=1.5, bool flag=True, str mode="sum", int[] dims=[0], '
    "Device? device=None, ScalarType? dtype=None, Tensor? bias=None, *, int k=3) -> Tensor"
)


def _foo(x, n=2, alpha=1.5, flag=True, mode="sum", dims=(0,), device=None, dtype=None, bias=None, *, k=3):  # type: ignore[no-untyped-def]
    y = x * alpha + n + k + (2 if flag else 0) + len(mode) + sum(dims)
    return (y + bias if bias is not None else y).clone()


LIB.impl("foo", _foo, "CompositeExplicitAutograd")
LIB.impl("foo", lambda x, *a, **kw: torch.empty_like(x), "Meta")
LIB.define("multi(Tensor x, SymInt[] sizes) -> (Tensor, Tensor[], int)")
LIB.impl("multi", lambda x, sizes: (x + 1, [x * s for s in sizes], len(sizes)), "CompositeExplicitAutograd")
LIB.impl(
    "multi",
    lambda x, sizes: (torch.empty_like(x), [torch.empty_like(x) for _ in sizes], len(sizes)),
    "Meta",
)


class Model(torch.nn.Module):
    """foo (positional, keyword-only and defaulted arguments), then multi (a list of outputs and an int)."""

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = torch.ops.opwire_aoti_test.foo(x, 3, 2.0, False, "mean", [1, 0], bias=b, k=4)
        a, bs, _ = torch.ops.opwire_aoti_test.multi(y, [2, 3])
        return torch.relu(a) + bs[0] + bs[1]


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs of the shapes the package was compiled for (fresh random values on every call)."""
    return torch.randn(2, 3), torch.randn(2, 3)


def package(shared: Path) -> Path:
    """`Model` compiled with AOTInductor into `shared`/aoti_model.pt2, unless another process already did."""
    dst = shared / "aoti_model.pt2"
    with open(shared / "aoti_model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not dst.exists():
            ep = torch.export.export(Model(), inputs())
            part = shared / "aoti_model.part.pt2"
            with inductor.settings():
                torch._inductor.aoti_compile_and_package(ep, package_path=str(part))
            part.rename(dst)
    return dst
