"""The distributed wrappers users run, on 2 gloo ranks, AdamW each: DDP (plain, static_graph, gradient
accumulation with no_sync), FSDP2 (`fully_shard` per layer and on the model) and a tensor-parallel MLP
(`ColwiseParallel` then `RowwiseParallel` through `parallelize_module`). One torchrun job records them all.

PERTURB=1 changes rank 1's output in the second step of every training loop (the marked line).
"""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
perturb = rank == 1 and bool(os.environ.get("PERTURB"))


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def batch(step: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * seed + step)
    return torch.randn(4, 8, generator=g), torch.randn(4, 4, generator=g)


def train(model: torch.nn.Module, steps: int = 2, accumulate: bool = False, seed: int = rank) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(steps):
        x, y = batch(step, seed)
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


def fsdp2() -> torch.nn.Module:
    model = mlp()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


train(DDP(mlp()))
train(DDP(mlp(), static_graph=True))
train(DDP(mlp()), accumulate=True)
mesh = init_device_mesh("cpu", (2,))
train(fsdp2())
# tensor parallel: every rank takes the same batch (the input is replicated)
train(parallelize_module(mlp(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}), seed=0)
dist.destroy_process_group()
