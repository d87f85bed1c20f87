"""The real-data test corpus: varied `torch.export` programs, each in training IR and decomposed.

Every model of tests/support/corpus_models.py is exported with `torch.export.export` (the training IR) and then
`.run_decompositions()` (core ATen); each result is serialized with torch's own serializer, so the
tests see exactly the JSON torch writes. Building is lazy and cached per process: a program is
exported the first time somebody asks for it.

Two views of a program:

- `get_serialized(name)` (`SerializedProgram`): torch's bytes, what most tests read. Once `share(directory)`
  was called (tests/conftest.py does, with the run's temp directory), the first process to ask for a model's
  bytes, or to export it live, writes them there under a lock; every other pytest-xdist worker reads them (an
  export of the whole corpus costs ~10 CPU-s, once per run instead of once per worker).
- `get_program(name)` (`CorpusProgram`): the same plus the live `ExportedProgram` torch.export returned, and the
  eager module and inputs exported, always built in this process. Its bytes are its own export's: a program
  torch loads from bytes is not the object torch.export returns (torch's serializer does not round-trip some
  programs byte for byte), and two processes' exports of one model may name things differently, so a test that
  compares the live program with bytes takes both from here.

From tests: use the session fixtures in tests/conftest.py (`corpus_program`, `corpus_programs` for the bytes,
`corpus_export` for a live program) or `from support import corpus` (pytest puts tests/ on sys.path through
`pythonpath` in pyproject.toml).
From benchmarks: put tests/ on sys.path and import the support package::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support import corpus
    for prog in corpus.programs(): ...   # prog.json_bytes, prog.ep, prog.fresh(), ...

The custom operators live in the `opwire_test` namespace (see `corpus_ops.py` beside this file;
importing this module registers them, which torch's deserializer needs for the custom_op programs).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from support import corpus_ops  # noqa: F401  (registers the opwire_test ops)
from support.corpus_models import MODELS, Made, ModelSpec

if TYPE_CHECKING:
    from torch._export.serde.serialize import SerializedArtifact

__all__ = [
    "IRS",
    "MODELS",
    "CorpusProgram",
    "ModelSpec",
    "SerializedProgram",
    "build_times",
    "get_program",
    "get_serialized",
    "model_names",
    "program_names",
    "programs",
    "serialized",
    "share",
]

IRS = ("training", "decomposed")


@dataclass(frozen=True)
class SerializedProgram:
    """One program of the corpus as torch serialized it (the bytes every process of a run shares)."""

    name: str  # "<model>/<ir>"
    spec: ModelSpec
    ir: str  # "training" | "decomposed"
    json_bytes: bytes  # torch's `serialize(ep).exported_program`
    state_dict: bytes  # torch's serialized weights and buffers
    constants: bytes  # torch's serialized constants
    example_inputs: bytes
    seconds: float  # wall time to export (or decompose) and serialize

    @property
    def model(self) -> str:
        """The model's name (without the IR)."""
        return self.spec.name

    def fresh(self) -> Made:
        """A new eager module and inputs equal to the ones exported (use for buffer-mutating models)."""
        return self.spec.fresh()

    def artifact(self, exported_program: bytes | None = None) -> SerializedArtifact:
        """torch's SerializedArtifact, optionally with other program bytes (e.g. opwire's)."""
        # deferred: torch's serializer imports Dynamo (~3 CPU-s), which pytest's xdist controller, importing
        # conftest and so this module before it starts the workers, never uses
        from torch._export.serde.serialize import SerializedArtifact

        program = self.json_bytes if exported_program is None else exported_program
        return SerializedArtifact(program, self.state_dict, self.constants, self.example_inputs)


@dataclass(frozen=True)
class CorpusProgram(SerializedProgram):
    """One exported program of the corpus, live, and everything torch serialized for it (built in this process)."""

    ep: torch.export.ExportedProgram
    module: nn.Module = field(repr=False)  # the eager module exported (shared by both IRs; see `fresh`)
    args: tuple[Any, ...] = field(repr=False)  # the example inputs exported
    kwargs: dict[str, Any] = field(repr=False)


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
    from torch._export.serde.serialize import serialize  # deferred: as in CorpusProgram.artifact

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
    _offer(model)  # the live export is done: the other workers need not export the model for its bytes
    return training if ir == "training" else decomposed


def programs() -> list[CorpusProgram]:
    """Every corpus program (exports whatever is not built yet)."""
    return [get_program(n) for n in program_names()]


def build_times() -> dict[str, float]:
    """Seconds spent building each program built so far in this process (export+serialize; decompose+serialize)."""
    return dict(_TIMES)


_FIELDS = ("json_bytes", "state_dict", "constants", "example_inputs")
_SHARED: dict[str, Path] = {}


def share(directory: Path) -> None:
    """Serve `get_serialized` through `directory`: the first process to ask for a model, or to export it live for
    `get_program`, writes its bytes there."""
    _SHARED["dir"] = directory


def _write(dst: Path, built: tuple[CorpusProgram, ...]) -> None:
    """Write both IRs' bytes to `dst` (through a `.part` directory renamed at the end; the caller holds the lock)."""
    part = dst.with_name(f"{dst.name}.part")
    part.mkdir(parents=True)
    for prog in built:
        for name in _FIELDS:
            (part / f"{prog.ir}.{name}").write_bytes(getattr(prog, name))
    (part / "seconds.json").write_text(json.dumps({prog.ir: prog.seconds for prog in built}))
    part.rename(dst)


def _publish(model: str, *, wait: bool) -> Path | None:
    """The shared directory of `model`'s bytes, written from this process's export unless a process wrote them
    already; None without a shared directory, or when another process holds the model's lock and not `wait`."""
    root = _SHARED.get("dir")
    if root is None:
        return None
    dst = root / "corpus" / model
    with open(root / f"corpus-{model}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when it closes
        except BlockingIOError:
            return None
        if not dst.exists():
            _write(dst, _export(model))
    return dst


@functools.cache
def _serialized(model: str) -> tuple[SerializedProgram, ...]:
    """Both IRs of one model as bytes: from the shared directory (written by whoever asked first), else exported."""
    dst = _publish(model, wait=True)
    if dst is None:
        return _export(model)
    seconds = json.loads((dst / "seconds.json").read_text())
    return tuple(
        SerializedProgram(
            f"{model}/{ir}", MODELS[model], ir, *((dst / f"{ir}.{name}").read_bytes() for name in _FIELDS), seconds[ir]
        )
        for ir in IRS
    )


@functools.cache
def _offer(model: str) -> None:
    """Share the bytes of this process's live export, unless some process shared (or is sharing) the model's."""
    _publish(model, wait=False)  # another process writing them: no need to wait


def get_serialized(name: str) -> SerializedProgram:
    """The bytes of corpus program "<model>/<ir>" (shared by every process once `share` was called)."""
    model, _, ir = name.partition("/")
    if model not in MODELS or ir not in IRS:
        raise KeyError(f"no corpus program {name!r}; known: {', '.join(program_names())}")
    return _serialized(model)[IRS.index(ir)]


def serialized() -> list[SerializedProgram]:
    """Every corpus program's bytes (exports or reads whatever is not at hand yet)."""
    return [get_serialized(n) for n in program_names()]
