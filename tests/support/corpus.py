"""The real-data test corpus: varied `torch.export` programs, each in training IR and decomposed.

Every model of tests/support/corpus_models.py is exported with `torch.export.export` (the training IR) and then
`.run_decompositions()` (core ATen); each result is serialized with torch's own serializer, so the
tests see exactly the JSON torch writes. Building is lazy and cached per process: a program is
exported the first time somebody asks for it (each pytest-xdist worker builds its own copy).

From tests: use the session fixtures in tests/conftest.py (`corpus_program`, `corpus_programs`) or
`from support import corpus` (pytest puts tests/ on sys.path through `pythonpath` in pyproject.toml).
From benchmarks: put tests/ on sys.path and import the support package::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support import corpus
    for prog in corpus.programs(): ...   # prog.json_bytes, prog.ep, prog.fresh(), ...

The custom operators live in the `opwire_test` namespace (see `corpus_ops.py` beside this file;
importing this module registers them, which torch's deserializer needs for the custom_op programs).
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch._export.serde.serialize import SerializedArtifact, serialize

from support import corpus_ops  # noqa: F401  (registers the opwire_test ops)
from support.corpus_models import MODELS, Made, ModelSpec

__all__ = [
    "IRS",
    "MODELS",
    "CorpusProgram",
    "ModelSpec",
    "build_times",
    "get_program",
    "model_names",
    "program_names",
    "programs",
]

IRS = ("training", "decomposed")


@dataclass(frozen=True)
class CorpusProgram:
    """One exported program of the corpus and everything torch serialized for it."""

    name: str  # "<model>/<ir>"
    spec: ModelSpec
    ir: str  # "training" | "decomposed"
    ep: torch.export.ExportedProgram
    json_bytes: bytes  # torch's `serialize(ep).exported_program`
    state_dict: bytes  # torch's serialized weights and buffers
    constants: bytes  # torch's serialized constants
    example_inputs: bytes
    seconds: float  # wall time to export (or decompose) and serialize
    module: nn.Module = field(repr=False)  # the eager module exported (shared by both IRs; see `fresh`)
    args: tuple[Any, ...] = field(repr=False)  # the example inputs exported
    kwargs: dict[str, Any] = field(repr=False)

    @property
    def model(self) -> str:
        """The model's name (without the IR)."""
        return self.spec.name

    def fresh(self) -> Made:
        """A new eager module and inputs equal to the ones exported (use for buffer-mutating models)."""
        return self.spec.fresh()

    def artifact(self, exported_program: bytes | None = None) -> SerializedArtifact:
        """torch's SerializedArtifact, optionally with other program bytes (e.g. opwire's)."""
        program = self.json_bytes if exported_program is None else exported_program
        return SerializedArtifact(program, self.state_dict, self.constants, self.example_inputs)


def model_names() -> tuple[str, ...]:
    """Names of the corpus models, in a fixed order."""
    return tuple(MODELS)


def program_names() -> tuple[str, ...]:
    """Names of all corpus programs ("<model>/<ir>"), known without exporting anything."""
    return tuple(f"{m}/{ir}" for m in MODELS for ir in IRS)


_TIMES: dict[str, float] = {}
# Warnings torch itself raises while exporting/serializing the corpus (nothing opwire can act on).
_TORCH_NOISE = (
    r"The tensor attributes self\.lstm\._flat_weights",  # nn.LSTM re-assigns its flat weights
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # torch's pickling of example inputs
)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        for message in _TORCH_NOISE:
            warnings.filterwarnings("ignore", message=message)
        yield


@functools.cache
def _export(model: str) -> tuple[CorpusProgram, CorpusProgram]:
    """Export one model in both IRs and serialize each with torch (cached for the process)."""
    spec = MODELS[model]
    module, args, kwargs = spec.fresh()
    shapes = spec.dynamic_shapes() if spec.dynamic_shapes is not None else None
    built: dict[str, CorpusProgram] = {}
    for ir in IRS:
        start = time.perf_counter()
        with _quiet():
            if ir == "training":
                ep = torch.export.export(module, args, kwargs, dynamic_shapes=shapes)
            else:
                ep = built["training"].ep.run_decompositions()
            art = serialize(ep)
        name = f"{model}/{ir}"
        _TIMES[name] = seconds = time.perf_counter() - start
        built[ir] = CorpusProgram(
            name=name,
            spec=spec,
            ir=ir,
            ep=ep,
            json_bytes=art.exported_program,
            state_dict=art.state_dict,
            constants=art.constants,
            example_inputs=art.example_inputs,
            seconds=seconds,
            module=module,
            args=args,
            kwargs=kwargs,
        )
    return built["training"], built["decomposed"]


def get_program(name: str) -> CorpusProgram:
    """The corpus program called "<model>/<ir>" (exported on first use, then cached)."""
    model, _, ir = name.partition("/")
    if model not in MODELS or ir not in IRS:
        raise KeyError(f"no corpus program {name!r}; known: {', '.join(program_names())}")
    training, decomposed = _export(model)
    return training if ir == "training" else decomposed


def programs() -> list[CorpusProgram]:
    """Every corpus program (exports whatever is not built yet)."""
    return [get_program(n) for n in program_names()]


def build_times() -> dict[str, float]:
    """Seconds spent building each program built so far in this process (export+serialize; decompose+serialize)."""
    return dict(_TIMES)
