"""`opwire exec NODES --inputs VALUES`: run every node of an extern-node file in order."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from opwire.cli.exec_flags import add_exec_flags
from opwire.errors import DecodeError, OpwireError
from opwire.proxy_executor.policy import DefaultPolicy
from opwire.schema import models as m

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `exec`."""
    p = sub.add_parser("exec", help="run the nodes of an extern-node file (AOTInductor's <hash>.wrapper.json or .pt2)")
    p.add_argument("nodes", help="extern-node JSON, or a .pt2 package holding one under data/aotinductor/")
    p.add_argument("--inputs", required=True, help="a Values file naming the tensors and sym ints the nodes read")
    p.add_argument("--inputs-format", default="json", choices=("json", "binary", "compact"), help="codec of --inputs")
    p.add_argument(
        "--policy",
        default=DefaultPolicy.FROM_SCHEMA.value,
        choices=[p.value for p in DefaultPolicy],
        help="who fills arguments the file omits (docs/policies.md)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_exec_flags(p, timeout=False, loops=False)
    p.set_defaults(func=run)


def _describe(v: Any) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        return {"tensor": list(v.shape), "dtype": str(v.dtype).removeprefix("torch."), "device": str(v.device)}
    return v if isinstance(v, (int, float, bool, str)) or v is None else repr(v)


def run(args: argparse.Namespace) -> int:
    """Run the nodes; exit 0, 1 when a call fails, 2 on unreadable input."""
    import opwire
    from opwire.proxy_executor import ProxyExecutor

    try:
        data = Path(args.inputs).read_bytes()
        values_model = opwire.loads(data, m.Values, format=args.inputs_format)
    except OSError as exc:
        raise DecodeError(f"cannot read --inputs {args.inputs}: {exc.strerror or exc}") from None
    env = opwire.serde.python_values(values_model)
    ex = ProxyExecutor(args.nodes, policy=args.policy, allow_ops=args.allow_op)
    report: list[dict[str, Any]] = []
    status = 0
    for i, ek in enumerate(ex.nodes.nodes):
        entry: dict[str, Any] = {"index": i, "name": ek.name, "target": ek.node.target}
        try:
            outs = ex.call(i, env)
        except OpwireError as exc:
            entry["error"] = str(exc)
            report.append(entry)
            status = 1
            break
        env.update(outs)
        entry["outputs"] = {k: _describe(v) for k, v in outs.items()}
        report.append(entry)
    if args.json:
        print(json.dumps({"nodes": report, "ok": status == 0}, indent=2))
    else:
        for e in report:
            outs_text = ", ".join(f"{k}: {_short(v)}" for k, v in e.get("outputs", {}).items()) or "-"
            print(f"[{e['index']}] {e['name']} {e['target']} -> {outs_text}")
            if "error" in e:
                print(f"opwire exec: error: {e['error']}", file=sys.stderr)
    return status


def _short(v: Any) -> str:
    if isinstance(v, dict) and "tensor" in v:
        return f"{v['dtype']}{v['tensor']}"
    return repr(v)
