"""`opwire run PROGRAM --inputs VALUES`: run a serialized exported program with opwire's graph runner."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import opwire
from opwire import program
from opwire.cli.exec_flags import add_exec_flags, limits
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_device, add_loading
from opwire.cli.output import print_record
from opwire.cli.values import INPUTS_HELP, describe, text
from opwire.cli.wording import for_cli
from opwire.errors import DecodeError, OpwireError, printable
from opwire.program import check_output, write_output
from opwire.proxy_executor import in_process, run_in_child
from opwire.schema import models as m
from opwire.serde import dumps, loads, values
from opwire.view import findings_json

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `run`."""
    p = sub.add_parser(
        "run",
        help="run a serialized program (archive, .pt2, or program JSON) node by node",
        description="Run PROGRAM on the inputs of --inputs with opwire's graph runner and print each output "
        "(shape, dtype, a few values, min/max/mean/std). PROGRAM is an OpwireArchive (opwire convert x.pt2 "
        "x.opw --to compact), a .pt2 archive (torch.export.save), or torch's program JSON when the program "
        "binds no weights; `opwire inspect PROGRAM` shows the inputs it takes. The inputs are checked against "
        "the program's signature before it runs. " + INPUTS_HELP + " The file names the program's user inputs "
        "(x, y, ...) or, as a Values file, holds 'args' (a list) and 'kwargs' (a dict). Extern-node files "
        "(AOTInductor) run with `opwire exec`. Exit 0, 1 when the run failed, 2 on bad input. " + LOADING_HELP,
    )
    p.add_argument(
        "program", help="an OpwireArchive (binary/compact), a .pt2 archive, or a program that has no weights"
    )
    p.add_argument("--inputs", required=True, help="the inputs file: Values, plain JSON, or torch.save (see above)")
    p.add_argument("--inputs-format", default=None, choices=("json", "binary", "compact"), help="codec of --inputs")
    p.add_argument("--allow-pickle", action="store_true", help="accept a torch.save'd --inputs file (trusted only)")
    p.add_argument("--out", default=None, help="write the flattened outputs as a Values file (output[0], ...)")
    add_device(p, "run")
    p.add_argument("--json", action="store_true", help="print the outputs' summary as JSON")
    add_loading(p)
    add_budget_flags(p)
    add_exec_flags(p)
    _add_node_flags(p)
    p.set_defaults(func=run)


def _add_node_flags(p: Any) -> None:
    """The node-by-node comparison flags (docs/view.md)."""
    p.add_argument("--save-nodes", default=None, metavar="A.nodes", help="save every top-level node's outputs")
    p.add_argument(
        "--compare-nodes",
        default=None,
        metavar="A.nodes",
        help="compare every top-level node's outputs with a --save-nodes file; exit 1 when one differs",
    )
    p.add_argument(
        "--findings", default=None, metavar="F.json", help="with --compare-nodes: write the findings for `opwire view`"
    )
    p.add_argument("--rtol", type=float, default=1e-5, help="--compare-nodes relative tolerance (default 1e-5)")
    p.add_argument("--atol", type=float, default=1e-6, help="--compare-nodes absolute tolerance (default 1e-6)")


def _load_program(path: str, max_elements: int) -> Any:
    """The program or archive in `path`, opened lazily; an extern-node file (AOTInductor's) is sent to `opwire exec`."""

    obj = program.open(path, max_elements=max_elements)
    if isinstance(obj, m.ExternKernelNodes):
        raise DecodeError(
            f"{path} holds AOTInductor extern nodes (ExternKernelNodes), not a program; run it with "
            f"`opwire exec {path} --inputs VALUES` (`opwire inspect {path}` lists the names it reads)"
        )
    return program.open(obj, expect="program")  # another kind is a DecodeError saying what the file holds


def _labels(result: Any, n: int) -> list[str]:
    """`output[i]`, with the pytree path when the outputs are a structure (`output[0] ['logits']`)."""
    import torch.utils._pytree as pytree

    try:
        paths = [pytree.keystr(path) for path, _ in pytree.tree_flatten_with_path(result)[0]]
    except Exception:  # a class registered without key paths: plain indices
        paths = []
    if len(paths) != n or all(not p or (p.startswith("[") and p[1:-1].isdigit()) for p in paths):
        return [f"output[{i}]" for i in range(n)]
    return [f"output[{i}] {p}" for i, p in enumerate(paths)]


def run(args: argparse.Namespace) -> int:
    """Run the program (in a sandboxed child unless --no-isolate); exit 0, 1 when the run fails, 2 on bad input."""

    for out in (args.out, args.save_nodes, args.findings):
        if out:
            check_output(out, [args.program, args.inputs, *([args.compare_nodes] if args.compare_nodes else [])])
    if args.findings and not args.compare_nodes:
        raise DecodeError("--findings needs --compare-nodes (the findings are the comparison's)")
    if args.save_nodes and args.compare_nodes:
        raise DecodeError("--save-nodes and --compare-nodes are two runs: pass one of them")
    if args.isolate:
        reads = (args.program, args.inputs, args.compare_nodes)
        outcome = run_in_child(lambda child: _work(args, child), limits(args, reads))
        if outcome.error is not None:
            if not outcome.running:
                raise outcome.error
            print(f"opwire run: error: {printable(for_cli(str(outcome.error)))}", file=sys.stderr)
            return 1
        blobs = outcome.blobs
    else:
        blobs = in_process(lambda child: _work(args, child))
    return _report(args, blobs)


def _work(args: argparse.Namespace, child: Any) -> dict[str, bytes]:
    """Load, bind, run (the child's part): the summary, outputs and node files as bytes for `_report`."""
    import torch
    import torch.utils._pytree as pytree

    from opwire.proxy_executor import ProgramRunner, progress_observer  # deferred: imports torch

    runner = ProgramRunner(
        _load_program(args.program, args.max_elements),
        device=args.device,
        allow_ops=args.allow_op,
        max_while_iterations=args.max_while_iterations,
        timeout=args.timeout,
        max_memory=args.max_memory,
    )
    dtypes = program.input_dtypes(runner.opened)
    py = program.read_inputs(
        args.inputs, args.inputs_format, allow_pickle=args.allow_pickle, dtypes=dtypes, max_elements=args.max_elements
    )
    if args.device is not None:
        py = pytree.tree_map(lambda v: v.to(args.device) if isinstance(v, torch.Tensor) else v, py)
    call_args, call_kwargs = program.bind_inputs(runner.opened, py)
    observer = _node_observer(args, runner)
    runner.observer = progress_observer(runner.graph, child, observer)
    child.ready()
    blobs: dict[str, bytes] = {}
    try:
        result = runner(*call_args, **call_kwargs)
    except (OpwireError, MemoryError) as exc:
        blobs["error"] = str(child.explain(exc)).encode()
        if observer is not None and hasattr(observer, "failed"):
            observer.failed(exc)
            blobs["compare"] = _compare_doc(args, observer)
        return blobs
    if args.save_nodes:
        blobs["nodes"] = opwire.dumps(m.Values(values=observer.values), format="compact")
        blobs["skipped"] = str(len(observer.skipped)).encode()
    elif args.compare_nodes:
        blobs["compare"] = _compare_doc(args, observer)
    leaves = pytree.tree_leaves(result)
    if args.out:
        out = values({f"output[{i}]": v for i, v in enumerate(leaves)})
        fmt = "json" if str(args.out).endswith(".json") else "compact"
        blobs["out"] = opwire.dumps(out, format=fmt)  # type: ignore[arg-type]
    labels = _labels(result, len(leaves))
    summary = m.RunOutput(ok=True, outputs={f"output[{i}]": describe(v) for i, v in enumerate(leaves)}, labels=labels)
    blobs["summary"] = dumps(summary)
    return blobs


def _compare_doc(args: argparse.Namespace, observer: Any) -> bytes:
    """The findings document of the comparison (a `FindingsDocument` record in opwire's JSON codec)."""

    return findings_json(observer.document(f"{Path(args.program).name} against {Path(args.compare_nodes).name}"))


def _report(args: argparse.Namespace, blobs: dict[str, bytes]) -> int:
    """The parent's part: check what came back, write the files asked for, print; the exit code."""
    inputs = [args.program, args.inputs]
    failed = False
    if "error" in blobs:
        print(f"opwire run: error: {printable(for_cli(blobs['error'].decode('utf-8', 'replace')))}", file=sys.stderr)
        failed = True
    if "nodes" in blobs:
        n = len(_check_values(blobs["nodes"], "compact", "--save-nodes").values)
        write_output(args.save_nodes, blobs["nodes"], inputs)
        skipped = int(blobs.get("skipped", b"0"))
        more = f" (skipped {skipped} values it cannot hold)" if skipped else ""
        print(f"saved {n} node outputs to {printable(args.save_nodes)}{more}", file=sys.stderr)
    if "compare" in blobs:
        doc = _findings(blobs["compare"])
        if args.findings:
            write_output(args.findings, blobs["compare"], [*inputs, args.compare_nodes])
            print(f"wrote {printable(args.findings)}: {len(doc.findings)} node findings (opwire view PROGRAM "
                  f"--findings {printable(args.findings)} colours the page with them)", file=sys.stderr)  # fmt: skip
        failed = _print_compare(args, doc) or failed
    if failed:
        return 1
    if "out" in blobs:
        fmt = "json" if str(args.out).endswith(".json") else "compact"
        n = len(_check_values(blobs["out"], fmt, "--out").values)
        write_output(args.out, blobs["out"], inputs)
        size = len(blobs["out"])
        print(f"wrote {printable(args.out)}: {n} output{'' if n == 1 else 's'} as a Values file ({fmt}, {size} bytes)",
              file=sys.stderr)  # fmt: skip
    summary = _summary(blobs["summary"])
    if args.json:
        print_record(summary)
    else:
        for label, d in zip(summary.labels, summary.outputs.values(), strict=True):
            print(f"{printable(str(label))}: {printable(text(d))}")
    return 0


def _print_compare(args: argparse.Namespace, doc: m.FindingsDocument) -> bool:
    """Print how the nodes compared, the first divergence with its numbers; True when a node differs."""
    bad = [f for f in doc.findings if f.severity == "error"]
    first = doc.first_divergence
    n = len(doc.findings)
    print(
        f"compared {n} node{'' if n == 1 else 's'}: {len(bad)} differ"
        + (f"; first divergence: {printable(str(first))}" if first else ""),
        file=sys.stderr,
    )
    entry = next((f for f in bad if f.node == first), None)
    if entry is not None:
        print(f"  {printable(entry.message)}", file=sys.stderr)
        for d in entry.differences or []:
            figures = [f"{label} {v:.3g}" for v, label in ((d.max_diff, "max abs diff"), (d.max_rel, "max rel diff"))
                       if v is not None]  # fmt: skip
            shape = f", shape {d.shape}" if d.shape is not None else ""
            if figures:
                print(f"  {printable(d.output)}: {', '.join(figures)}{shape} (rtol={args.rtol:g}, atol={args.atol:g})",
                      file=sys.stderr)  # fmt: skip
        print(f"  (opwire view {printable(args.program)} --findings FILE.json shows every node; --findings writes it)",
              file=sys.stderr)  # fmt: skip
    return bool(bad)


def _findings(data: bytes) -> m.FindingsDocument:
    """The findings document the run sent back, read with the checking JSON decoder before it is written anywhere."""
    try:
        return loads(data, m.FindingsDocument, format="json")
    except OpwireError as exc:
        raise OpwireError(f"the run sent back a malformed findings document ({exc})") from None


def _check_values(data: bytes, fmt: str, what: str) -> Any:
    """The Values record the run sent back, read with the checking decoder before it is written anywhere."""

    try:
        return opwire.loads(data, m.Values, format=fmt)  # type: ignore[call-overload]
    except OpwireError as exc:
        raise OpwireError(f"{what}: the run sent back an unreadable record ({exc})") from None


def _summary(data: bytes) -> m.RunOutput:
    """The outputs' summary the run sent back (a `RunOutput` record), read with the checking JSON decoder."""
    try:
        summary = loads(data, m.RunOutput, format="json")
    except OpwireError as exc:
        raise OpwireError(f"the run sent back a malformed summary ({exc})") from None
    if len(summary.labels) != len(summary.outputs):
        raise OpwireError("the run sent back a malformed summary (a label per output expected)")
    return summary


def _node_observer(args: argparse.Namespace, runner: Any) -> Any:
    """The per-node observer --save-nodes or --compare-nodes asks for (None without either)."""
    from opwire.view import NodeComparer, NodeRecorder, read_nodes  # deferred: imports torch

    if args.save_nodes:
        return NodeRecorder(runner.graph)
    if args.compare_nodes:
        return NodeComparer(runner.graph, read_nodes(args.compare_nodes), args.rtol, args.atol)
    return None
