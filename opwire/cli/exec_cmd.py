"""`opwire exec NODES --inputs VALUES`: run every node of an extern-node file in order."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from opwire import program
from opwire.cli.exec_flags import add_exec_flags, limits
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_loading
from opwire.cli.output import print_record
from opwire.cli.values import INPUTS_HELP, describe, text
from opwire.cli.wording import for_cli
from opwire.errors import DecodeError, OpwireError, printable
from opwire.program import op_name
from opwire.proxy_executor import DefaultPolicy, in_process, run_in_child
from opwire.schema import models as m
from opwire.serde import dumps, loads

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
    add_exec_flags(p, loops=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the nodes (in a sandboxed child unless --no-isolate); exit 0, 1 when a call fails, 2 on bad input."""

    if args.isolate:
        outcome = run_in_child(lambda child: _work(args, child), limits(args, (args.nodes, args.inputs)))
        if outcome.error is not None and not outcome.running:
            raise outcome.error
        if outcome.error is not None:
            blobs = {
                "report": dumps(m.ExecOutput(nodes=[], ok=False)),
                "error": str(outcome.error).encode(),
            }
        else:
            blobs = outcome.blobs
    else:
        blobs = in_process(lambda child: _work(args, child))
    try:
        nodes = list(loads(blobs["report"], m.ExecOutput, format="json").nodes)
    except (DecodeError, KeyError):
        raise OpwireError("the isolated run sent back a malformed report") from None
    if "error" in blobs:  # the child died (crash, limit): the last node it started is named in the error
        error = blobs["error"].decode("utf-8", "replace")
        nodes.append(m.ExecNodeResult(index=len(nodes), name="", target="", error=error))
    status = 1 if any(e.error is not None for e in nodes) else 0
    if args.json:
        print_record(m.ExecOutput(nodes=nodes, ok=status == 0))
        return status
    for e in nodes:
        outs = e.outputs or {}
        if e.name or e.target:
            print(printable(f"[{e.index}] {e.name} {e.target}") + ("" if outs else " -> -"))
        for k, v in outs.items():
            print(f"    {printable(str(k))}: {printable(text(v))}")
        if e.error is not None:
            print(f"opwire exec: error: {printable(for_cli(e.error))}", file=sys.stderr)
    return status


def _work(args: argparse.Namespace, child: Any) -> dict[str, bytes]:
    """Load the nodes and inputs, then run the nodes in order (the child's part); the report as JSON."""
    from opwire.proxy_executor import (  # deferred: imports torch
        ProxyExecutor,
        check_time,
        load_extern_nodes,
        time_limit,
    )

    env = program.read_inputs(
        args.inputs, args.inputs_format, allow_pickle=args.allow_pickle, max_elements=args.max_elements
    )
    ex = ProxyExecutor(
        load_extern_nodes(args.nodes, max_elements=args.max_elements),
        policy=args.policy,
        allow_ops=args.allow_op,
        max_memory=args.max_memory,
    )
    program.check_extern_inputs(ex.nodes, env)
    nodes: list[m.ExecNodeResult] = []
    child.ready()
    with time_limit(args.timeout):
        for i, ek in enumerate(ex.nodes.nodes):
            target = op_name(ek.node.target)
            child.at(f"node [{i}] {printable(repr(ek.name))} ({printable(target)})")
            try:
                check_time(f"node [{i}] {ek.name!r}")
                outs = ex.call(i, env)
            except (OpwireError, MemoryError) as exc:
                nodes.append(m.ExecNodeResult(index=i, name=ek.name, target=target, error=str(child.explain(exc))))
                break
            env.update(outs)
            described = {k: describe(v) for k, v in outs.items()}
            nodes.append(m.ExecNodeResult(index=i, name=ek.name, target=target, outputs=described))
    ok = not nodes or nodes[-1].error is None
    return {"report": dumps(m.ExecOutput(nodes=nodes, ok=ok))}
