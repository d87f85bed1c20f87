"""DDP three ways on 2 gloo ranks: plain, static_graph, and gradient accumulation with no_sync; AdamW each.

PERTURB=1 changes rank 1's output in the second step of every training loop (the marked line).
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
perturb = rank == 1 and bool(os.environ.get("PERTURB"))


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(4, 8, generator=g), torch.randn(4, 4, generator=g)


def train(model: torch.nn.Module, steps: int = 2, accumulate: bool = False) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(steps):
        x, y = batch(step)
        if accumulate:  # the first half of the batch without synchronizing gradients
            with model.no_sync():
                torch.nn.functional.mse_loss(model(x[:2]), y[:2]).backward()
            x, y = x[2:], y[2:]
        out = model(x)
        if perturb and step == 1:
            out = out + 0.25  # PERTURBED
        torch.nn.functional.mse_loss(out, y).backward()
        opt.step()
        opt.zero_grad()


train(DDP(mlp()))
train(DDP(mlp(), static_graph=True))
train(DDP(mlp()), accumulate=True)
dist.destroy_process_group()
