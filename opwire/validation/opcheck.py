"""`--sample-inputs`: run `torch.library.opcheck` on user-given samples and turn its results into findings.

opcheck decides what it checks (schema, autograd registration, fake tensor, AOT dispatch); this module
only feeds it samples and reports each failed test as an `opcheck_failed` finding. What torch logs while a
sample is checked (Dynamo and AOTAutograd print whole tracebacks) goes into that sample's finding as a count
and its first line, not to the terminal; the fix line is chosen by the cause the error names (no fake
implementation, data-dependent sizes, wrong shapes, mutation annotations...), the failing test's when none
matches.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from opwire.errors import OpValidationError, describe_exception
from opwire.validation.catalog import finding
from opwire.validation.findings import Finding, samples_text

__all__ = ["SampleInputs", "fix_for", "load_sample_inputs", "opcheck_findings"]

SampleInputs = Callable[[str], Iterable[Any]]

_AUTOGRAD_FIX = (
    "register the autograd formula with torch.library.register_autograd (or a kernel for the Autograd key), "
    "not for a backend key"
)
_HOW: dict[str, str] = {
    "test_schema": "make the kernel match the schema's mutation and aliasing annotations (mutates_args, Tensor(a!))",
    "test_autograd_registration": _AUTOGRAD_FIX,
    "test_faketensor": "fix the fake implementation (register_fake) so its outputs match the real kernel's "
    "sizes, strides, dtype and device, without reading tensor data",
    "test_aot_dispatch_static": "make the op traceable by AOTAutograd: a correct fake implementation and "
    "autograd formula",
    "test_aot_dispatch_dynamic": "make the fake implementation work with symbolic sizes (no int() on sizes)",
}
_HOW_DEFAULT = "read the opcheck error and https://pytorch.org/docs/stable/library.html#testing-custom-ops"

_NEEDS_FAKE = frozenset({"test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"})

# (pattern in the error's text, tests it applies to (empty: any), fix): the first match names the cause
_CAUSES: tuple[tuple[re.Pattern[str], frozenset[str], str], ...] = (
    (re.compile(r"no fake impl|register_fake|fake impl.*not|There was no fake", re.I), frozenset(),
     "register a fake implementation (torch.library.register_fake) that computes the output's sizes, strides, "
     "dtype and device without reading data"),
    (re.compile(r"data.dependent|GuardOnDataDependentSymNode|\.item\(\)|tolist|nonzero", re.I), frozenset(),
     "the fake implementation reads tensor data: give data-dependent sizes with "
     "torch.library.get_ctx().new_dynamic_size() instead"),
    (re.compile(r"SymInt|symbolic|guard|dynamic shape|ConstraintViolation", re.I),
     frozenset({"test_aot_dispatch_dynamic", "test_faketensor"}),
     "make the fake implementation work with symbolic sizes (no int() or Python branches on sizes)"),
    (re.compile(r"(shape|size|stride)s? (mismatch|differ|do not match|are not equal)|Shapes .* are not equal", re.I),
     frozenset(), "make the fake implementation (register_fake) return the real kernel's output sizes and strides"),
    (re.compile(r"dtype", re.I), _NEEDS_FAKE, "make the fake implementation return the real kernel's dtype"),
    (re.compile(r"mutat|alias|Tensor\(a", re.I), frozenset(),
     "make the schema's mutation and aliasing annotations (mutates_args, Tensor(a!)) match what the kernel does: "
     "declare every input it writes, and return no view of an input unless the schema says so"),
    (re.compile(r"autograd|requires_grad|backward|grad_fn", re.I), frozenset(),
     _AUTOGRAD_FIX),
    (re.compile(r"device", re.I), frozenset(),
     "make every output (and the fake implementation's) use the input's device"),
)  # fmt: skip
_MAX_LOG_LINES = 2000


def fix_for(test: str, error: str) -> str:
    """The fix line for opcheck test `test` failing with `error` (its whole text): chosen by the cause the error
    names, else by the test."""
    for pattern, tests, how in _CAUSES:
        if (not tests or test in tests) and pattern.search(error):
            return how
    return _HOW.get(test, _HOW_DEFAULT)


class _Collect(logging.Handler):
    """Keeps the non-blank lines torch logs at WARNING and above (at most `_MAX_LOG_LINES`), counts them all."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # a record that cannot format is still counted
            text = str(record.msg)
        new = [line for line in text.splitlines() if line.strip()]
        self.count += len(new)
        self.lines += new[: max(_MAX_LOG_LINES - len(self.lines), 0)]


@contextlib.contextmanager
def _torch_logs() -> Iterator[_Collect]:
    """Route torch's logging (every `torch.*` logger with handlers of its own) to one collector while inside."""
    collect = _Collect()
    names = ["torch", *(n for n in list(logging.Logger.manager.loggerDict) if n.startswith("torch."))]
    saved = []
    for name in names:
        lg = logging.getLogger(name)
        if name == "torch" or lg.handlers:
            saved.append((lg, lg.handlers[:], lg.propagate))
            lg.handlers, lg.propagate = [collect], False
    try:
        yield collect
    finally:
        for lg, handlers, propagate in saved:
            lg.handlers, lg.propagate = handlers, propagate


def _logged(collect: _Collect) -> str:
    if not collect.count:
        return ""
    first = next((line.strip() for line in collect.lines if line.strip()), "")
    shown = first if len(first) <= 120 else first[:117] + "..."
    return f" (torch logged {collect.count} line{'s' if collect.count != 1 else ''} meanwhile; the first: {shown!r})"


def load_sample_inputs(spec: str) -> SampleInputs:
    """The function `MODULE:FUNC` names (imported), checked to be callable."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise OpValidationError(f"--sample-inputs expects MODULE:FUNC (e.g. mylib.samples:sample_inputs), got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise OpValidationError(
            f"--sample-inputs {spec}: importing {module_name!r} failed ({type(exc).__name__}: {exc}); "
            "make the module importable (PYTHONPATH) and free of import errors"
        ) from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise OpValidationError(
            f"--sample-inputs {spec}: expected a function {func_name!r} in module {module_name!r}, "
            f"got {type(func).__name__}; define def {func_name}(op_name) returning (args, kwargs) pairs"
        )
    return func  # type: ignore[no-any-return]


def _samples(op: str, source: SampleInputs) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The (args, kwargs) pairs `source` gives for `op`, each checked."""
    got = source(op)
    if got is None:
        return []
    out = []
    for index, sample in enumerate(got):
        ok = isinstance(sample, tuple) and len(sample) == 2
        if not ok or not isinstance(sample[0], tuple) or not isinstance(sample[1], dict):
            raise OpValidationError(
                f"sample inputs for {op}: expected sample {index} to be a pair (args: tuple, kwargs: dict), "
                f"got {type(sample).__name__} {sample!r:.80}; return e.g. [((torch.randn(3),), {{}})]"
            )
        out.append((sample[0], sample[1]))
    return out


def opcheck_findings(
    shown: str, op: torch._ops.OpOverload, source: SampleInputs, *, has_fake: bool = True
) -> list[Finding]:
    """One `opcheck_failed` finding per root cause: per failed opcheck test, its samples together.

    Without a fake implementation the fake-tensor and AOT tests fail for that reason alone, which the
    `no_fake_impl` finding already reports with its fix; they are not repeated here.
    """
    failed: dict[str, list[tuple[int, str, str, str]]] = {}  # test -> (sample, error, its whole text, logs)
    for index, (args, kwargs) in enumerate(_samples(shown, source)):
        with _torch_logs() as collect:  # torch's logging belongs to the finding, not to the terminal
            try:
                results: dict[str, Any] = torch.library.opcheck(op, args, kwargs, raise_exception=False)
            except Exception as exc:  # opcheck itself could not run the sample
                results = {"setup": exc}
        for test, result in sorted(results.items()):
            if isinstance(result, BaseException) and (test == "setup" or has_fake or test not in _NEEDS_FAKE):
                fail = (index, describe_exception(result), _whole(result), _logged(collect))
                failed.setdefault(test, []).append(fail)
    out: list[Finding] = []
    for test, fails in failed.items():
        _, error, whole, logged = fails[0]
        how = "pass arguments the op accepts" if test == "setup" else fix_for(test, whole)
        samples = samples_text([f[0] for f in fails])
        out.append(finding("opcheck_failed", shown, test=test, samples=samples, error=error + logged, how=how))
    return out


def _whole(exc: BaseException) -> str:
    """The text of an exception and of the exceptions it came from (the cause is often a few levels down)."""
    parts, seen = [], set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        parts.append(f"{type(at).__name__}: {at}")
        at = at.__cause__ or at.__context__
    return "\n".join(parts)
