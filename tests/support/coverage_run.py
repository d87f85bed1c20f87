"""Run the coverage corpus as a user would and print its table: `python tests/support/coverage_run.py [--write]`.

Every program case (torch.nn, and the transformers and diffusers architectures when they are installed) is
exported in the training IR and the core ATen IR, written as an archive's bytes and run from them by
`opwire.run_program` with no `allow_ops`; every recorded case is recorded by `opwire.record` and replayed chained and isolated. A case passes
when no op is refused and the outputs equal eager's. `--write` stores the ops the run saw in
`coverage_seen_ops.txt` beside this file (a test checks the committed policy admits every one) and the table in
docs/coverage.md. `make coverage` runs it; `make test` runs a sample (tests/proxy_executor/test_coverage.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

if __package__ in (None, ""):  # run as a script: tests/ on the path, as pytest puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import opwire
from opwire.errors import OpwireError
from opwire.proxy_executor import ExecPolicy
from opwire.proxy_executor.exec_policy import TORCH_NAMESPACES
from opwire.proxy_executor.targets import resolve
from opwire.serde import torch_bridge
from support.coverage_diffusers import diffusers_cases
from support.coverage_hf import hf_cases, model_training_cases
from support.coverage_nn import ProgramCase, functional_cases, loss_cases, module_cases
from support.coverage_train import RecordedCase, training_cases

__all__ = ["SEEN", "Outcome", "core_aten_table", "run_program_case", "run_recorded_case", "table"]

SEEN = Path(__file__).with_name("coverage_seen_ops.txt")
DOC = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"


@dataclass
class Outcome:
    """One case in one IR (or one replay mode): the ops it ran, those refused, and what happened."""

    category: str
    name: str
    how: str
    status: str
    """"ok", "refused", "mismatch", "failed" (opwire raised), "torch differs" (torch's own run of the exported
    program differs from eager as opwire's does), or "not built"/"not exported" (torch could not)."""
    ops: set[str] = field(default_factory=set)
    refused: list[str] = field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0
    """Wall time of the case (export, writing, runs and comparison; replays), counted on its first outcome."""


def _spell(target: Any) -> str | None:
    if isinstance(target, torch._ops.OpOverload):
        s = target._schema
        return f"{s.name}.{s.overload_name}" if s.overload_name else s.name
    return None


def _program_ops(ep: Any) -> set[str]:
    out: set[str] = set()
    for gm in ep.graph_module.modules():
        if isinstance(gm, torch.fx.GraphModule):
            for n in gm.graph.nodes:
                if n.op == "call_function" and (name := _spell(n.target)) is not None:
                    out.add(name)
    return out


def _refused(ops: Iterable[str]) -> list[str]:
    policy, out = ExecPolicy(), []
    for op in sorted(ops):
        try:
            if policy.allowed(resolve(op)) is not None:
                out.append(op)
        except OpwireError:
            out.append(op)
    return out


def _close(a: Any, b: Any, tolerance: tuple[float, float] = (1e-4, 1e-5)) -> bool:
    la, lb = pytree.tree_leaves(a), pytree.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.allclose(x.float(), y.float(), *tolerance, equal_nan=True):
                return False
        elif x != y and not (isinstance(x, float) and x != x):
            return False
    return True


def core_aten_table() -> dict[Any, Any]:
    """torch's default decomposition table, materialized: what `run_decompositions()` builds on each call (~0.1
    CPU-s of its ~0.3 fixed cost), built once for a batch of cases. Build it after the cases' libraries have
    registered their ops (transformers' own), as each call would."""
    return dict(torch.export.default_decompositions().materialize())


def run_program_case(case: ProgramCase, decomp_table: dict[Any, Any] | None = None) -> list[Outcome]:
    """The case in the training IR and the core ATen IR, each written as an archive's bytes, run by run_program
    from those bytes and compared with eager. `decomp_table` (core_aten_table()) is the default table once built;
    None builds it again, as `run_decompositions()` does."""
    if case.module is None:
        return [Outcome(case.category, case.name, "-", "not built", detail=case.why)]
    mod, args, kwargs = case.module.eval(), case.args, case.kwargs
    torch.manual_seed(0)
    try:
        with torch.no_grad():
            want = mod(*args, **kwargs)
    except Exception as exc:  # the model fails in eager torch with these inputs: not opwire's to cover
        return [Outcome(case.category, case.name, "-", "not built", detail=_why(exc))]
    out = []
    try:
        training = torch.export.export(mod, args, kwargs)
    except Exception as exc:
        return [Outcome(case.category, case.name, "export", "not exported", detail=_why(exc))]
    for how in ("training IR", "core ATen IR"):
        try:
            ep = training if how == "training IR" else training.run_decompositions(decomp_table)
        except Exception as exc:
            out.append(Outcome(case.category, case.name, how, "not exported", detail=_why(exc)))
            continue
        ops = _program_ops(ep)
        refused = _refused(ops)
        if refused:
            out.append(Outcome(case.category, case.name, how, "refused", ops, refused))
            continue
        torch.manual_seed(0)
        try:
            data = opwire.dumps(torch_bridge.archive_from_exported_program(ep), "compact")
            got = opwire.run_program(data, args, kwargs)
        except Exception as exc:
            out.append(Outcome(case.category, case.name, how, "failed", ops, detail=f"{type(exc).__name__}: {exc}"))
            continue
        status = "ok" if _close(got, want, case.tolerance) else "mismatch"
        if status == "mismatch" and _close(got, ep.module()(*args, **kwargs), case.tolerance):
            status, detail = "torch differs", "torch's own run of the program differs from eager the same way"
            out.append(Outcome(case.category, case.name, how, status, ops, detail=detail))
            continue
        out.append(Outcome(case.category, case.name, how, status, ops))
    return out


def _why(exc: BaseException) -> str:
    """Why torch could not build or export: the exception's class and its first sentence."""
    first = (str(exc).strip().splitlines() or [""])[0].split(". ")[0]
    return f"{type(exc).__name__}: {first}"[:140]


def run_recorded_case(case: RecordedCase) -> list[Outcome]:
    """The case recorded by opwire.record, then replayed chained and isolated."""
    if case.work is None:
        return [Outcome(case.category, case.name, "-", "not built", detail=case.why)]
    try:
        with opwire.record() as trace:
            case.work()
    except Exception as exc:  # the work itself fails in eager torch: not opwire's to cover
        return [Outcome(case.category, case.name, "-", "not built", detail=f"{type(exc).__name__}: {exc}"[:200])]
    ops = {r.target.removesuffix(".default") for r in trace.records if "skipped" not in r.metadata}
    refused = _refused(ops)
    if refused:
        return [Outcome(case.category, case.name, "record", "refused", ops, refused)]
    out = []
    for mode in ("chained", "isolated"):
        try:
            report = opwire.replay(trace, mode=mode)
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            out.append(Outcome(case.category, case.name, f"replay {mode}", "failed", ops, detail=detail))
            continue
        status = "ok" if not report.mismatches else "mismatch"
        detail = "" if status == "ok" else str(report.mismatches[0])[:200]
        out.append(Outcome(case.category, case.name, f"replay {mode}", status, ops, detail=detail))
    return out


def table(outcomes: list[Outcome]) -> str:
    """The coverage table (Markdown): per category, cases, runs, distinct ops, refused, mismatches, failures, time."""
    rows = ["| category | cases | runs | ops | refused | mismatches | failed | torch differs | not built or exported "
            "| seconds |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    cats = list(dict.fromkeys(o.category for o in outcomes))
    for cat in [*cats, "all"]:
        sel = [o for o in outcomes if cat in ("all", o.category)]
        ran = [o for o in sel if o.status not in ("not built", "not exported")]
        ops = set().union(*(o.ops for o in sel)) if sel else set()
        refused = sorted(set().union(*(set(o.refused) for o in sel))) if sel else []
        cases = len({(o.category, o.name) for o in sel})
        count = {s: sum(o.status == s for o in sel) for s in ("mismatch", "failed", "torch differs")}
        absent = len({o.name for o in sel if o.status in ("not built", "not exported")})
        rows.append(f"| {cat} | {cases} | {len(ran)} | {len(ops)} | {len(refused)} | {count['mismatch']} | "
                    f"{count['failed']} | {count['torch differs']} | {absent} | {sum(o.seconds for o in sel):.0f} |")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    """Run the whole corpus, print the table and every problem; exit 1 on any refusal, mismatch or failure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="store the ops seen and the table (docs/coverage.md)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)  # export's notes on data-dependent sizes
    start, outcomes = time.monotonic(), []
    for case in (*module_cases(), *loss_cases(), *functional_cases(), *hf_cases(), *diffusers_cases()):
        outcomes += _timed(run_program_case, case)
    for rec in (*training_cases(), *model_training_cases()):
        outcomes += _timed(run_recorded_case, rec)
    for o in outcomes:
        if o.status not in ("ok",):
            print(f"{o.category} / {o.name} / {o.how}: {o.status} {o.refused or ''} {o.detail[:300]}")
    text = table(outcomes)
    print(text)
    print(f"({time.monotonic() - start:.0f} s, torch {torch.__version__})")
    if args.write:
        # torch's ops only: the policy never refuses a library's own ops (transformers::grouped_mm_fallback)
        seen = sorted(op for op in set().union(*(o.ops for o in outcomes)) if op.split("::")[0] in TORCH_NAMESPACES)
        SEEN.write_text("# ops the last full coverage run saw (tests/support/coverage_run.py --write)\n"
                        + "".join(f"{op}\n" for op in seen))  # fmt: skip
        _write_doc(text, outcomes)
    bad = [o for o in outcomes if o.status in ("refused", "mismatch", "failed")]
    return 1 if bad else 0


def _timed(run: Callable[[Any], list[Outcome]], case: Any) -> list[Outcome]:
    start = time.monotonic()
    out = run(case)
    out[0].seconds = time.monotonic() - start
    return out


def _write_doc(text: str, outcomes: list[Outcome]) -> None:
    absent = sorted(
        {
            f"{o.name}{'' if o.how in ('-', 'export') else f' in the {o.how}'} ({o.detail or o.status})"
            for o in outcomes
            if o.status in ("not built", "not exported")
        }
    )
    body = DOC.read_text().split("<!-- coverage table -->")
    table_part = (
        f"<!-- coverage table -->\n{text}\n\nNot built or not exported by torch: {', '.join(absent) or 'none'}.\n"
    )
    DOC.write_text(body[0] + table_part + "<!-- coverage table -->" + (body[2] if len(body) > 2 else "\n"))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
