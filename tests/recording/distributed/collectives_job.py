"""A 2-rank gloo job calling every collective opwire checks (run by the tests under torchrun)."""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

dist.init_process_group("gloo")
r, w = dist.get_rank(), dist.get_world_size()
torch.manual_seed(r)
x = torch.randn(4)
dist.all_reduce(x)
y = torch.arange(3.0) * (r + 1)
dist.all_reduce(y, op=dist.ReduceOp.MAX)
outs = [torch.zeros(4) for _ in range(w)]
dist.all_gather(outs, x * 2)
big = torch.zeros(4 * w)
dist.all_gather_into_tensor(big, x)
rs = torch.zeros(2)
dist.reduce_scatter_tensor(rs, torch.arange(2.0 * w) + r)
b = torch.full((3,), float(r))
dist.broadcast(b, src=1)
a2a = torch.zeros(w)
dist.all_to_all_single(a2a, torch.arange(float(w)) + 10 * r)
if r == 0:
    dist.send(x + 1, dst=1)
else:
    got = torch.zeros(4)
    dist.recv(got, src=0)
sub = dist.new_group([0, 1])
z = torch.ones(2) * r
dist.all_reduce(z, group=sub)
f = fc.all_reduce(x, "sum", dist.group.WORLD) * 2
g = fc.all_gather_tensor(x, 0, dist.group.WORLD) + 1
dist.barrier()
dist.destroy_process_group()
