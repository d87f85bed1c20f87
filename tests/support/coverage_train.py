"""The coverage corpus's recorded cases: a training step for every optimizer of torch.optim in each of its
implementations (single-tensor, foreach, fused), with gradient clipping and a scheduler, plus CPU autocast.

Each case is a function that runs the work it records (the runner wraps it in `opwire.record`). The
optimizers come from `vars(torch.optim)`, the implementations from each constructor's own parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["RecordedCase", "training_cases"]


@dataclass
class RecordedCase:
    """Eager work to record and replay (None when it cannot run here: `why` says so)."""

    category: str
    name: str
    work: Callable[[], None] | None
    why: str = ""


def _model(sparse: bool) -> nn.Module:
    torch.manual_seed(0)
    if sparse:
        return nn.Embedding(10, 8, sparse=True)  # SparseAdam takes sparse gradients only
    return nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.1), nn.Linear(8, 4))


def _step(opt_cls: type[torch.optim.Optimizer], impl: str) -> Callable[[], None]:
    sparse = opt_cls is torch.optim.SparseAdam
    model = _model(sparse)
    kw = {"foreach": False} if impl == "single" else {impl: True}
    if impl == "single" and "foreach" not in inspect.signature(opt_cls.__init__).parameters:
        kw = {}  # LBFGS, Muon, SparseAdam: one implementation
    opt = opt_cls(model.parameters(), lr=0.01, **kw)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.9)
    x = torch.randint(0, 10, (4, 2)) if sparse else torch.randn(4, 8)
    y = torch.tensor([0, 1, 2, 3])

    def work() -> None:
        for _ in range(2):  # the first step creates the optimizer's state, the second reads it

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = model(x).pow(2).sum() if sparse else F.cross_entropy(model(x), y)
                loss.backward()
                if not sparse:
                    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                return loss

            opt.step(closure)
            sched.step()

    return work


def _impls(opt_cls: type[torch.optim.Optimizer]) -> list[str]:
    params = inspect.signature(opt_cls.__init__).parameters
    return ["single", *[p for p in ("foreach", "fused") if p in params]]


def _autocast() -> None:
    model = _model(False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(torch.randn(4, 8)), torch.tensor([0, 1, 2, 3]))
    loss.backward()


def training_cases() -> Iterator[RecordedCase]:
    """A recorded training step per optimizer and implementation, and an autocast forward and backward."""
    for name, cls in sorted(vars(torch.optim).items()):
        if not (inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer)) or cls is torch.optim.Optimizer:
            continue
        for impl in _impls(cls):
            try:
                work = _step(cls, impl)
                work_ok: Callable[[], None] | None = work
                why = ""
            except Exception as exc:  # an implementation this build or device does not have
                work_ok, why = None, f"{type(exc).__name__}: {str(exc)[:120]}"
            yield RecordedCase("training steps", f"{name} ({impl})", work_ok, why)
    yield RecordedCase("training steps", "CPU autocast (bfloat16) forward and backward", _autocast)
