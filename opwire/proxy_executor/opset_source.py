# mypy: disable-error-code="no-untyped-call,operator,no-any-return,attr-defined,unused-ignore,misc"
"""Derive the op allowlist from torch: the `core` tag, plus what `torch.export` and eager runs emit for real modules.

`python -m opwire.proxy_executor.opset_source` rewrites `allowlist.txt`; `--check` prints the diff against
the running torch and exits 1 when it moved (tests/proxy_executor/test_allowlist.py does the same). The
modules below are small but representative: MLPs, convolutional nets with normalization and pooling,
a transformer layer, recurrent nets, embeddings, dynamic shapes, buffer mutation, control flow and a
broad sweep of tensor functions. Each is exported in the training IR (what `torch.export.export` writes,
traced before dispatch; strict where that fails) and the core ATen inference IR (`run_decompositions()`),
and run eagerly under a dispatch mode (what `opwire.record` sees). Ops the review removes are
`opwire.proxy_executor.preconditions.REMOVED` (with the reason).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["DATA", "core_ops", "derive", "emitted_ops", "render"]

DATA = Path(__file__).with_name("allowlist.txt")


def core_ops() -> set[str]:
    """Every registered overload torch tags `core` ("aten::add.Tensor"; "aten::relu" for `.default`)."""
    import torch

    out: set[str] = set()
    for name in torch._C._dispatch_get_all_op_names():
        ns, _, rest = name.partition("::")
        op, _, overload = rest.partition(".")
        try:
            obj = getattr(getattr(getattr(torch.ops, ns), op), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.core in obj.tags:
            out.add(_spell(obj))
    return out


def _spell(overload: Any) -> str:
    """The allowlist spelling of an OpOverload: "ns::op.overload", or "ns::op" for the default overload."""
    s = overload._schema
    return f"{s.name}.{s.overload_name}" if s.overload_name else s.name


def _modules() -> Iterator[tuple[str, Any, tuple[Any, ...], Any]]:
    """(name, module, example args, dynamic_shapes) of the representative modules."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    x4 = torch.randn(2, 3, 16, 16)

    class Sweep(nn.Module):
        def forward(self, x: torch.Tensor, idx: torch.Tensor) -> Any:
            a = torch.cat([x, x.flip(0)], 1).reshape(2, -1)[:, 1:7].contiguous()
            b = a.softmax(-1) + a.log_softmax(-1) - a.sigmoid() * a.tanh() / (a.abs() + 1)
            c = torch.stack(list(a.unbind(0))).permute(1, 0).transpose(0, 1).unsqueeze(0).squeeze(0)
            d = torch.where(c > 0, c.exp(), c.expm1()).clamp(-1, 1).pow(2).sqrt().rsqrt().log1p()
            e = d.index_select(1, idx) + d.gather(1, idx.expand(2, 3)) + d[:, idx]
            f = torch.zeros_like(e).scatter(1, idx.expand(2, 3), e).scatter_add(1, idx.expand(2, 3), e)
            g = f.masked_fill(f < 0, 0.0).cumsum(1).cumprod(1).flip(1).roll(1, 1)
            h = torch.topk(g, 2).values.sum() + g.sort(1).values.mean() + g.var() + g.std(1).amax()
            i = g.argmax(1).float() + g.max(1).values + g.min() + g.amin(1) + g.norm() + g.prod()
            j = torch.einsum("ij,kj->ik", g, g) @ torch.ones(2, 2, 2).bmm(torch.ones(2, 2, 2)).sum(0)
            k = torch.arange(6).float().view(2, 3).expand(2, 3).repeat(2, 1)[:2].tril().triu()
            m = (a.floor() + a.ceil() + a.round() + a.trunc() + a.frac() + a.sign()).remainder(3).fmod(2)
            n = (a > 0).logical_and(a < 1).logical_or(a == 0).logical_not().any() | (a != 0).all()
            o = a.sin() + a.cos() + a.atan2(a) + a.erf() + a.reciprocal() + a.neg() + torch.rsub(a, 1)
            p = torch.nan_to_num(a.isnan().float() + a.isinf().float()).mean(1, keepdim=True)
            q = F.pad(a, (1, 1)).narrow(1, 0, 6).select(0, 0).chunk(2)[0].split(1)[0]
            r = torch.full((2, 3), 2.0).new_zeros(2, 3).new_ones(2, 3).new_full((2, 3), 1.0).new_empty(2, 3).fill_(1)
            s = (
                torch.addmm(a[:, :3], a[:, :3], torch.eye(3)).sum()
                + torch.baddbmm(a[:, :2][None], c[None], c.T[None]).sum()
            )
            t = F.one_hot(idx, 4).float().sum() + F.normalize(a, dim=1).sum() + F.cosine_similarity(a, a).sum()
            u = a.to(torch.float64).to(torch.int32).to(torch.bool).int().long().double().half().float()
            v = a.bitwise_and(3) if a.dtype == torch.int64 else (a.int() & 3) | (a.int() ^ 1) << 1 >> 1
            w = a.clone().index_put_((idx % 2,), torch.ones(6), accumulate=True)
            y = torch.maximum(a, b).minimum(a).lerp(a, 0.5).hypot(a).clamp_min(0).clamp_max(1)
            z = F.embedding(idx % 2, a) + torch.flatten(a).unflatten(0, (2, 6))[0]
            return (b, e, h + i, j, k, m, n, o, p, q, r, s, t, u, v, w, y, z, x.unfold(2, 4, 4).mean())

    class Inplace(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", torch.zeros(1))
            self.lin = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.count.add_(1)
            y = x.clone()
            y.mul_(2).add_(1).sub_(0.5).div_(3).clamp_(-1, 1).relu_()
            y[:, 0] = 0
            y.masked_fill_(y > 0.9, 0.9).copy_(y.sigmoid())
            return F.relu(self.lin(y), inplace=True) + self.count

    class Dyn(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = x.shape[0]
            return x.reshape(-1)[:n].add(x.sum(1)) * n + x.numel() + x.stride(0) + x[:, 1:].sum()

    class Flow(nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            from torch._higher_order_ops.while_loop import while_loop

            y = torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))
            _, z = while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * 2), (torch.tensor(0), y))
            return z, x.nonzero().sum()

    class Rnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm, self.gru = nn.LSTM(8, 8, batch_first=True), nn.GRU(8, 8, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm(x)[0] + self.gru(x)[0]

    class Vision(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 8, 3, groups=2, padding=1, bias=False), nn.GroupNorm(2, 8), nn.SiLU(),
                nn.ConvTranspose2d(8, 8, 2, stride=2), nn.Hardswish(), nn.AvgPool2d(2), nn.Upsample(scale_factor=2),
                nn.InstanceNorm2d(8), nn.Mish(), nn.Dropout2d(0.1), nn.PixelShuffle(2), nn.LeakyReLU(),
                nn.Conv2d(2, 4, 1), nn.ELU(), nn.AdaptiveAvgPool2d(3), nn.Hardtanh(), nn.AdaptiveMaxPool2d(2),
                nn.Flatten(), nn.Linear(16, 4), nn.Softplus(), nn.GELU(approximate="tanh"),
            )  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.body(x)
            z = F.interpolate(x, scale_factor=0.5, mode="bilinear") + F.interpolate(x, size=(8, 8), mode="nearest")
            w = F.conv1d(x.flatten(2), torch.ones(3, 3, 3)).sum() + F.avg_pool1d(x.flatten(2), 2).sum()
            return y.sum() + z.mean() + w + F.cross_entropy(y, torch.tensor([0, 1])) + F.mse_loss(y, y.detach())

    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.1)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 4), nn.Tanh())

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.norm = nn.Embedding(10, 16), nn.RMSNorm(16)
            self.mha = nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            h = self.norm(self.emb(ids))
            q = h.view(1, 4, 2, 8).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2).reshape(1, 4, 16)
            return self.mha(a, h, h, need_weights=False)[0] + torch.triu(torch.ones(4, 4), 1).bool().any()

    class Complex(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            freqs = torch.polar(torch.ones(3, 2), torch.arange(6.0).view(3, 2))
            z = torch.view_as_complex(x.reshape(3, 2, 2)) * freqs
            return torch.view_as_real(z).flatten(1) + z.abs().sum() + z.angle().sum() + torch.real(z * z.conj()).sum()

    dyn = {"x": {0: torch.export.Dim("n", min=2, max=64)}}
    yield "sweep", Sweep(), (torch.randn(2, 3, 4, 4), torch.tensor([0, 2, 1])), None
    yield "inplace", Inplace(), (torch.randn(4, 8),), None
    yield "dynamic", Dyn(), (torch.randn(4, 3),), dyn
    yield "control flow", Flow(), (torch.randn(3),), None
    yield "rnn", Rnn(), (torch.randn(2, 5, 8),), None
    yield "vision", Vision(), (x4,), None
    yield "transformer", layer, (torch.randn(2, 4, 16),), None
    yield "mlp", mlp, (torch.randn(4, 16),), None
    yield "attention", Attn(), (torch.tensor([[1, 2, 3, 4]]),), None
    yield "complex", Complex(), (torch.randn(3, 4),), None


def _graph_ops(ep: Any, out: set[str]) -> None:
    import torch

    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for n in gm.graph.nodes:
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                out.add(_spell(n.target))


def _training_steps(mode: Any, out: set[str]) -> None:
    """Eager training steps under the mode (what `opwire.record` sees): init, forward, backward, SGD and Adam."""
    import torch
    from torch import nn

    with mode():  # what a training script's data loading calls: shuffles, random batches, masks
        g = torch.Generator().manual_seed(0)
        torch.randint(0, 10, (4,)), torch.randint(10, (4,)), torch.randint(0, 10, (4,), generator=g)
        torch.randperm(8), torch.randperm(8, generator=g), torch.rand(2, generator=g), torch.randn(2, generator=g)
        torch.tril_indices(3, 3), torch.triu_indices(3, 3, 1), torch.empty(2, 3), torch.empty_like(torch.ones(2))
        torch.multinomial(torch.ones(4), 2), torch.bernoulli(torch.full((3,), 0.5)), torch.rand(2).uniform_()
    for opt in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW):
        with mode():
            model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.1), nn.Linear(8, 2))
            o = opt(model.parameters(), lr=0.1)
            loss = nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.tensor([0, 1, 0, 1]))
            loss.backward()
            o.step()
            o.zero_grad()
    for _, mod, args, _ in _modules():  # backward through every representative module
        mod.train(True)
        try:
            with mode():
                res = mod(*args)
                flat = res if isinstance(res, tuple) else (res,)
                parts = [r.float().sum() for r in flat if isinstance(r, torch.Tensor) and r.is_floating_point()]
                total = torch.stack(parts).sum() if parts else None
                if total is not None and total.requires_grad:
                    total.backward()
        except NotImplementedError:  # a higher-order op the mode does not trace
            continue


def _exported(mod: Any, args: tuple[Any, ...], dyn: Any) -> Iterator[tuple[str, Any]]:
    """(IR, program or the exception torch raised) for the training and core ATen IRs of `mod`.

    The training IR is what `torch.export.export` writes: a pre-dispatch trace (`_export(pre_dispatch=True,
    strict=False)` in torch 2.13). Where that fails (the `while_loop` module), a user turns to `strict=True`,
    the same IR traced through Dynamo, so that is tried next; where both work they emit the same ops.
    """
    import torch

    training: Any
    try:
        training = torch.export.export(mod, args, dynamic_shapes=dyn)
    except Exception as exc:
        training = exc
    yield "training IR", training
    if isinstance(training, Exception):
        try:
            yield "training IR, strict", torch.export.export(mod, args, dynamic_shapes=dyn, strict=True)
        except Exception as exc:
            yield "training IR, strict", exc
        yield "core ATen IR", training
        return
    try:  # the training IR's program decomposed: one export serves both (its ops were read first)
        yield "core ATen IR", training.run_decompositions()
    except Exception as exc:
        yield "core ATen IR", exc


def emitted_ops(log: Callable[[str], None] = lambda _: None) -> set[str]:
    """The op overloads the representative modules emit: exported in two IRs (train and eval) and run eagerly."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    out: set[str] = set()

    class Seen(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out.add(_spell(func))
            return func(*args, **(kwargs or {}))

    _training_steps(Seen, out)
    for name, mod, args, dyn in _modules():
        for train in (False, True):
            mod.train(train)
            before = len(out)
            try:
                with torch.no_grad(), Seen():  # type: ignore[no-untyped-call]
                    mod(*args)
            except NotImplementedError:  # a higher-order op the dispatch mode does not trace: export sees it
                log(f"  {name}: not run eagerly under the mode")
            for how, ep in _exported(mod, args, dyn):
                if isinstance(ep, Exception):  # a module torch cannot export in one IR still counts in the others
                    log(f"  {name} ({'train' if train else 'eval'}, {how}): not exported: {type(ep).__name__}")
                    continue
                _graph_ops(ep, out)
            log(f"{name} ({'train' if train else 'eval'}): {len(out) - before} new ops")
    return out


def derive(log: Callable[[str], None] = lambda _: None) -> dict[str, str]:
    """Allowlisted op -> its sources ("core", "emitted" or both), the review's removals and policy refusals left out."""
    from opwire.proxy_executor.exec_policy import classify_name
    from opwire.proxy_executor.preconditions import REMOVED

    core, emitted = core_ops(), emitted_ops(log)
    siblings = functional_overloads({op.partition(".")[0] for op in core | emitted}) - core - emitted
    found: dict[str, str] = {}
    for op in sorted(core | emitted | siblings):
        if op in REMOVED or op.partition(".")[0] in REMOVED or classify_name(op) is not None:
            continue
        groups = (("core", core), ("emitted", emitted), ("overload", siblings))
        found[op] = "+".join(s for s, group in groups if op in group)
    return found


def functional_overloads(names: set[str]) -> set[str]:
    """The overloads of ops `names` that take or return a tensor and write into none of their arguments.

    No `(a!)`: no in-place, no out=. Tensor-free overloads are TorchScript's scalar builtins
    (`remainder.int`, `to.prim_Device`), which export never emits and whose kernels trust their operands
    (the per-op fuzz crashed `remainder.int(x, 0)` with SIGFPE and `to.prim_dtype` with SIGSEGV).
    """
    import torch

    out: set[str] = set()
    for name in names:
        ns, _, op = name.partition("::")
        packet = getattr(getattr(torch.ops, ns), op)
        for overload in packet.overloads():
            obj = getattr(packet, overload)
            types = [str(a.type) for a in (*obj._schema.arguments, *obj._schema.returns)]
            if not obj._schema.is_mutable and any("Tensor" in t for t in types):
                out.add(_spell(obj))
    return out


def render(ops: dict[str, str]) -> str:
    """The allowlist file's text: a header, then one `op source` line per op, sorted."""
    import torch

    head = (
        "# opwire's execution allowlist: the ops a file may run (generated by\n"
        "# `python -m opwire.proxy_executor.opset_source`; reviewed: see preconditions.REMOVED).\n"
        f"# derived from torch {torch.__version__.split('+')[0]}: `core` = torch.Tag.core, "
        "`emitted` = seen in torch.export / eager runs,\n"
        "# `overload` = a functional overload of a core or emitted op\n"
    )
    return head + "".join(f"{op} {src}\n" for op, src in sorted(ops.items()))


def main(argv: list[str]) -> int:
    """Rewrite allowlist.txt, or with --check print how torch's set differs from it."""
    import difflib

    ops = derive(lambda s: print(s, file=sys.stderr))
    text = render(ops)
    if "--check" in argv:
        old = DATA.read_text().splitlines()[4:]
        diff = list(difflib.unified_diff(old, text.splitlines()[4:], "allowlist.txt", "torch", lineterm=""))
        print("\n".join(diff) or "allowlist.txt matches the running torch")
        return 1 if diff else 0
    DATA.write_text(text)
    print(f"wrote {DATA} ({len(ops)} ops)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
