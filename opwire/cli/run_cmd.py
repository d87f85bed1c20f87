"""`opwire run PROGRAM --inputs VALUES`: run a serialized exported program with opwire's graph runner."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from opwire.cli.exec_flags import add_exec_flags
from opwire.errors import DecodeError, OpwireError
from opwire.schema import models as m

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `run`."""
    p = sub.add_parser("run", help="run a serialized program (archive, .pt2, or program JSON) node by node")
    p.add_argument(
        "program", help="an OpwireArchive (binary/compact), a .pt2 archive, or a program that has no weights"
    )
    p.add_argument(
        "--inputs",
        required=True,
        help="a Values file: the program's user-input names (e.g. x, y), or 'args' (a list) and 'kwargs' (a dict)",
    )
    p.add_argument("--inputs-format", default=None, choices=("json", "binary", "compact"), help="codec of --inputs")
    p.add_argument("--out", default=None, help="write the flattened outputs as a Values file (output[0], ...)")
    p.add_argument("--device", default=None, help="run on this device (weights and inputs are moved there)")
    p.add_argument("--json", action="store_true", help="print the outputs' summary as JSON")
    add_exec_flags(p)
    p.set_defaults(func=run)


def _read_values(path: str, fmt: str | None) -> m.Values:
    import opwire
    from opwire.serde import framing

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DecodeError(f"cannot read --inputs {path}: {exc.strerror or exc}") from None
    if fmt is None:
        header = framing.read_header(data, path) if framing.has_header(data) else None
        fmt = header.codec if header is not None else "json"
    return opwire.loads(data, m.Values, format=fmt)  # type: ignore[arg-type]


def _inputs(values: m.Values, runner: Any, device: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) from named user inputs (in graph order) or from 'args'/'kwargs' entries."""
    import torch.utils._pytree as pytree

    from opwire.serde import objects as _values

    table = values.values
    py = {k: _values.to_python(v, device, f"inputs[{k!r}]") for k, v in table.items()}
    names = [
        str(s.value.arg.value.name) if s.value.arg.type == "as_tensor" else str(s.value.arg.value.as_name)
        for s in runner.signature.input_specs
        if s.type == "user_input" and s.value.arg.type in ("as_tensor", "as_sym_int")
    ]
    if set(py) <= {"args", "kwargs"} and py:
        return tuple(py.get("args", [])), dict(py.get("kwargs", {}))
    missing = [n for n in names if n not in py]
    if missing or runner.in_spec is None:
        raise DecodeError(
            f"Expected the program's user inputs {names} (or 'args'/'kwargs') in --inputs, got {sorted(py)}; "
            f"missing {missing}",
            "values",
        )
    args, kwargs = pytree.tree_unflatten([py[n] for n in names], runner.in_spec)
    return tuple(args), dict(kwargs)


def _describe(v: Any) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        return {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch."), "device": str(v.device)}
    return v if isinstance(v, (int, float, bool, str)) or v is None else repr(v)


def run(args: argparse.Namespace) -> int:
    """Run the program; exit 0, 1 when the run fails, 2 on unreadable input."""
    import torch.utils._pytree as pytree

    import opwire
    from opwire.proxy_executor.graph import ProgramRunner
    from opwire.serde import objects as _values

    runner = ProgramRunner(
        args.program,
        device=args.device,
        allow_ops=args.allow_op,
        max_while_iterations=args.max_while_iterations,
        timeout=args.timeout,
    )
    call_args, call_kwargs = _inputs(_read_values(args.inputs, args.inputs_format), runner, args.device)
    try:
        result = runner(*call_args, **call_kwargs)
    except OpwireError as exc:
        print(f"opwire run: error: {exc}", file=sys.stderr)
        return 1
    leaves = pytree.tree_leaves(result)
    if args.out:
        out = m.Values(values={f"output[{i}]": _values.from_python(v, f"output[{i}]") for i, v in enumerate(leaves)})
        fmt = "json" if str(args.out).endswith(".json") else "compact"
        Path(args.out).write_bytes(opwire.dumps(out, format=fmt))  # type: ignore[arg-type]
    summary = {f"output[{i}]": _describe(v) for i, v in enumerate(leaves)}
    if args.json:
        print(json.dumps({"ok": True, "outputs": summary}, indent=2))
    else:
        for k, v in summary.items():
            print(f"{k}: {v}")
    return 0
