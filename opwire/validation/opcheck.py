"""`--sample-inputs`: run `torch.library.opcheck` on user-given samples and turn its results into findings.

opcheck decides what it checks (schema, autograd registration, fake tensor, AOT dispatch); this module
only feeds it samples and reports each failed test as an `opcheck_failed` finding.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

import torch

from opwire.errors import OpValidationError, describe_exception
from opwire.validation.findings import Finding, finding, samples_text

__all__ = ["SampleInputs", "load_sample_inputs", "opcheck_findings"]

SampleInputs = Callable[[str], Iterable[Any]]

_HOW: dict[str, str] = {
    "test_schema": "make the kernel match the schema's mutation and aliasing annotations (mutates_args, Tensor(a!))",
    "test_autograd_registration": "register the autograd formula with torch.library.register_autograd "
    "(or a kernel for the Autograd key), not for a backend key",
    "test_faketensor": "fix the fake implementation (register_fake) so its outputs match the real kernel's "
    "sizes, strides, dtype and device, without reading tensor data",
    "test_aot_dispatch_static": "make the op traceable by AOTAutograd: a correct fake implementation and "
    "autograd formula",
    "test_aot_dispatch_dynamic": "make the fake implementation work with symbolic sizes (no int() on sizes)",
}
_HOW_DEFAULT = "read the opcheck error and https://pytorch.org/docs/stable/library.html#testing-custom-ops"


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


_NEEDS_FAKE = frozenset({"test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"})


def opcheck_findings(
    shown: str, op: torch._ops.OpOverload, source: SampleInputs, *, has_fake: bool = True
) -> list[Finding]:
    """One `opcheck_failed` finding per root cause: per failed opcheck test, its samples together.

    Without a fake implementation the fake-tensor and AOT tests fail for that reason alone, which the
    `no_fake_impl` finding already reports with its fix; they are not repeated here.
    """
    failed: dict[str, list[tuple[int, str]]] = {}
    for index, (args, kwargs) in enumerate(_samples(shown, source)):
        try:
            results: dict[str, Any] = torch.library.opcheck(op, args, kwargs, raise_exception=False)
        except Exception as exc:  # opcheck itself could not run the sample
            failed.setdefault("setup", []).append((index, describe_exception(exc)))
            continue
        for test, result in sorted(results.items()):
            if isinstance(result, BaseException) and (has_fake or test not in _NEEDS_FAKE):
                failed.setdefault(test, []).append((index, describe_exception(result)))
    out: list[Finding] = []
    for test, fails in failed.items():
        how = "pass arguments the op accepts" if test == "setup" else _HOW.get(test, _HOW_DEFAULT)
        samples = samples_text([i for i, _ in fails])
        out.append(finding("opcheck_failed", shown, test=test, samples=samples, error=fails[0][1], how=how))
    return out
