"""Fuzz what the per-op fuzz does not vary (issue 25, item 3): real calls with one tensor argument made hostile.

The calls come from real work (tests/proxy_executor/test_preconditions.py's modules, forward and backward,
recorded under a dispatch mode); each admitted op's call is replayed through `ProxyExecutor.call` with one
tensor argument at a time replaced by a 1-element tensor, a huge-index tensor, another dtype, a
non-contiguous or zero-stride (expanded) view, or None where the schema allows it. A case passes when opwire
runs it or raises its own error; a crash (a signal) is a finding. The child runs cases in order and prints
each before running it, so the parent knows which one killed it and resumes after it.

`python tests/proxy_executor/companion_fuzz.py [MAX_CASES]` runs the whole fuzz (the real calls of the coverage
corpus's modules, losses and functions too) and prints the figures; tests/proxy_executor/test_fuzz_executor.py
runs every case of the family ops' calls.
"""

from __future__ import annotations

import functools
import json
import os
import select
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):  # run as a script: tests/ on the path, as pytest puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.forked import Served

MUTATIONS = ("one element", "huge index", "other dtype", "non-contiguous", "zero stride", "none")


def _mutate(v: torch.Tensor, how: str) -> Any:
    if how == "one element":
        return torch.zeros(1, dtype=v.dtype)
    if how == "huge index":
        return torch.full(v.shape, 2**40, dtype=torch.int64) if v.dim() else torch.tensor(2**40)
    if how == "other dtype":
        return v.to(torch.float64 if not v.is_floating_point() or v.dtype != torch.float64 else torch.int64)
    if how == "non-contiguous":
        return torch.cat([v.unsqueeze(-1), v.unsqueeze(-1)], -1)[..., 0] if v.dim() else v
    if how == "zero stride":
        return v.reshape(-1)[:1].expand(v.shape) if v.numel() and v.dim() else v
    return None


def cases(calls: list[tuple[str, dict[str, Any]]], limit: int | None = None) -> list[tuple[str, dict[str, Any], str]]:
    """(op, named values, description) for each call, tensor argument and mutation."""
    out = []
    for op, values in calls:
        schema = _schema(op)
        optional = {a.name for a in schema.arguments if str(a.type).endswith("?") or "Optional" in str(a.type)}
        for name, v in values.items():
            if not isinstance(v, torch.Tensor) or v.layout != torch.strided:  # sparse: the input fuzz's file axis
                continue
            for how in MUTATIONS:
                if how == "none" and name not in optional:
                    continue
                out.append((op, {**values, name: _mutate(v, how)}, f"{op} {name}: {how}"))
    return out[:limit]


def _schema(op: str) -> Any:
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), name), overload or "default")._schema


def _broad_work() -> None:
    """Forward and backward of every program case of the coverage corpus that builds (the long run's calls)."""
    from support.coverage_nn import functional_cases, loss_cases, module_cases

    for case in (*module_cases(), *loss_cases(), *functional_cases()):
        if case.module is None:
            continue
        args = [a.detach().requires_grad_(a.is_floating_point()) for a in case.args]
        try:
            out = case.module.train()(*args)
            leaves = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            total = sum(t.float().sum() for t in leaves if t.requires_grad)
            if isinstance(total, torch.Tensor):
                total.backward()
        except Exception:  # a case that runs only in eval: its forward was seen
            continue


def real_calls(broad: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """One call per admitted op the real work of test_preconditions makes (`broad`: and the coverage corpus's
    forward and backward), its values by argument name."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from proxy_executor.test_preconditions import _real_work
    from torch.utils._python_dispatch import TorchDispatchMode

    from opwire.proxy_executor.allowlist import allowlist

    found: dict[str, dict[str, Any]] = {}

    class Seen(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            s = func._schema
            op = f"{s.name}.{s.overload_name}" if s.overload_name else s.name
            if (
                op not in found
                and op in allowlist()
                and not s.is_mutable
                and any("Tensor" in str(r.type) for r in s.returns)
            ):
                names = [a.name for a in s.arguments]
                values = dict(zip(names, args, strict=False)) | dict(kwargs or {})
                if all(not isinstance(v, list) or not v or not isinstance(v[0], torch.Tensor) for v in values.values()):
                    found[op] = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in values.items()}
            return func(*args, **(kwargs or {}))

    with Seen():
        _real_work()
        if broad:
            _broad_work()
    return sorted((op, v) for op, v in found.items() if _picklable(v))


def _picklable(values: dict[str, Any]) -> bool:
    import io

    try:
        torch.save(values, io.BytesIO())
        return True
    except Exception:  # a value the child cannot receive (a module, a callable): not a file's value either
        return False


def _child(todo: list[tuple[str, dict[str, Any], str]], start: int, stderr: str) -> None:
    """The forked child: runs the cases from `start` in order, printing each one's index before it runs it."""
    from support.op_call import call_node

    from opwire.errors import OpwireError
    from opwire.proxy_executor import ProxyExecutor

    fd = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)  # the crash's last words, for the report
    os.close(fd)
    for i in range(start, len(todo)):
        op, values, _label = todo[i]
        print(i, flush=True)
        try:
            node, env = call_node(op, **values)
            ProxyExecutor().call(node, env)
        except (OpwireError, TypeError):
            pass
    print("done", flush=True)


def _output(child: Served, timeout: float) -> str:
    """What the child printed until it ended, killing it (TimeoutError) when `timeout` seconds pass first."""
    out, deadline, fd = b"", time.monotonic() + timeout, child.stdout.fileno()
    while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            return out.decode()
        out += chunk
    child.kill()
    child.wait()
    raise TimeoutError(f"the companion fuzz's child ran over {timeout:.0f}s")


def run(todo: list[tuple[str, dict[str, Any], str]], timeout: float = 600) -> dict[str, Any]:
    """Run the cases in children forked from this process (resuming after a crash): the figures and every crash's
    case. A fork, not a fresh interpreter: the cases arrive as they are (no pickling) and torch is imported once."""
    crashes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        stderr = str(Path(tmp) / "stderr")
        start = 0
        while start < len(todo):
            child = Served(functools.partial(_child, todo, start, stderr), None)
            lines = _output(child, timeout).split()
            code = child.wait()
            child.kill()
            if lines and lines[-1] == "done":
                break
            last = int(lines[-1]) if lines and lines[-1].isdigit() else start
            last_words = Path(stderr).read_text(errors="replace").strip()[-200:]
            crashes.append(f"{todo[last][2]} (exit {code}: {last_words})")
            start = last + 1
    return {"ops": len({op for op, _, _ in todo}), "cases": len(todo), "crashes": crashes}


def main(argv: list[str]) -> int:
    """Fuzz every real call's companions and print the figures as JSON; exit 1 on a crash."""
    limit = int(argv[0]) if argv else None
    result = run(cases(real_calls(broad=True), limit), timeout=3600)
    print(json.dumps(result, indent=2))
    return 1 if result["crashes"] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
