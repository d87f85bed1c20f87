"""`opwire exec NODES --inputs VALUES`: run every node of an extern-node file in order."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from opwire.cli.exec_flags import add_exec_flags
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_loading
from opwire.cli.values import INPUTS_HELP, describe, read_inputs, text
from opwire.errors import BindError, OpwireError
from opwire.program.signature import extern_inputs, op_name
from opwire.proxy_executor.policy import DefaultPolicy

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `exec`."""
    p = sub.add_parser(
        "exec",
        help="run the nodes of an extern-node file (AOTInductor's <hash>.wrapper.json or .pt2)",
        description="Run every node of an extern-node file in order through the proxy executor and print each "
        "output (shape, dtype, a few values, min/max/mean/std). NODES is the <hash>.wrapper.json that "
        "AOTInductor writes beside a compiled model (torch._inductor.aoti_compile_and_package keeps it under "
        "data/aotinductor/ in the .pt2 package; pass either). --inputs gives every name the nodes read that no "
        "earlier node produced: `opwire inspect NODES` lists them. " + INPUTS_HELP + " Exit 0 when every call "
        "ran, 1 when a call failed, 2 on bad input. " + LOADING_HELP,
    )
    p.add_argument("nodes", help="extern-node JSON, or a .pt2 package holding one under data/aotinductor/")
    p.add_argument("--inputs", required=True, help="the inputs file: Values, plain JSON, or torch.save (see above)")
    p.add_argument("--inputs-format", default=None, choices=("json", "binary", "compact"), help="codec of --inputs")
    p.add_argument("--allow-pickle", action="store_true", help="accept a torch.save'd --inputs file (trusted only)")
    p.add_argument(
        "--policy",
        default=DefaultPolicy.FROM_SCHEMA.value,
        choices=[p.value for p in DefaultPolicy],
        help="who fills arguments the file omits (docs/policies.md)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_loading(p)
    add_budget_flags(p)
    add_exec_flags(p, timeout=False, loops=False)
    p.set_defaults(func=run)


def _check_inputs(nodes: Any, env: dict[str, Any]) -> None:
    """A BindError naming the first name a node reads that neither --inputs nor an earlier node gives."""
    for entry in extern_inputs(nodes):
        for name in entry["reads"]:
            if name not in env:
                raise BindError(
                    f"input {name!r} is missing: node [{entry['index']}] {entry['name']} ({entry['op']}) reads it and "
                    f"no earlier node produces it; --inputs gives {', '.join(sorted(env)) or 'nothing'} "
                    "(`opwire inspect NODES` lists every name the nodes read)"
                )


def run(args: argparse.Namespace) -> int:
    """Run the nodes; exit 0, 1 when a call fails, 2 on unreadable input."""
    from opwire.proxy_executor import ProxyExecutor
    from opwire.proxy_executor.executor import load_extern_nodes

    env = read_inputs(args.inputs, args.inputs_format, allow_pickle=args.allow_pickle, max_elements=args.max_elements)
    ex = ProxyExecutor(
        load_extern_nodes(args.nodes, max_elements=args.max_elements), policy=args.policy, allow_ops=args.allow_op
    )
    _check_inputs(ex.nodes, env)
    report: list[dict[str, Any]] = []
    status = 0
    for i, ek in enumerate(ex.nodes.nodes):
        entry: dict[str, Any] = {"index": i, "name": ek.name, "target": op_name(ek.node.target)}
        try:
            outs = ex.call(i, env)
        except OpwireError as exc:
            entry["error"] = str(exc)
            report.append(entry)
            status = 1
            break
        env.update(outs)
        entry["outputs"] = {k: describe(v) for k, v in outs.items()}
        report.append(entry)
    if args.json:
        print(json.dumps({"nodes": report, "ok": status == 0}, indent=2))
    else:
        for e in report:
            outs = e.get("outputs", {})
            print(f"[{e['index']}] {e['name']} {e['target']}" + ("" if outs else " -> -"))
            for k, v in outs.items():
                print(f"    {k}: {text(v)}")
            if "error" in e:
                print(f"opwire exec: error: {e['error']}", file=sys.stderr)
    return status
