"""Shared pytest fixtures. The export corpus (tests/support/corpus.py) is built lazily: its bytes once per run for
every worker (in the run's temp directory), its live programs once per worker that asks for one.

One fixture per axis, as msgspec's tests use one `proto` fixture: a test that takes `fmt` runs once per
format, `codec` once per Thrift codec, `engine` once per Thrift engine, `replay_mode` once per replay mode.
The axes are read from opwire itself, so a format added there is tested everywhere.
"""

from __future__ import annotations

import gc
import os

# One intra-op thread per process, before torch loads (inherited by every child a test starts): `make test`
# runs two workers on two cores, and two OpenMP pools per core spin on each other's time (-11% wall on the
# executor's tests). A test about threads sets its own count (tests/proxy_executor/test_isolate.py).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import typing
from pathlib import Path

import pytest
from support import corpus, hypothesis_cache, inductor
from support.clirun import Cli, run_cli

import opwire
from opwire.recording import replay
from opwire.serde import FORMATS, framing, thrift

REPLAY_MODES = typing.get_args(typing.get_type_hints(replay)["mode"])


@pytest.hookimpl(trylast=True)  # after Hypothesis's own hook, which ends its initialization (no storage before)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The main process (not an xdist worker) fills Hypothesis's caches while the workers import
    (tests/support/hypothesis_cache.py: the same tables every worker would build, built once)."""
    if not hasattr(session.config, "workerinput"):
        hypothesis_cache.fill_in_background(Path(opwire.__file__).parent)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Ungrouped `slow` tests first, so that a 30 s test never starts last while the other worker idles.

    pytest-xdist hands out the xdist groups first (largest first), then single tests in collection order;
    the sort is stable and the same on every worker.
    """
    items.sort(key=lambda item: not (item.get_closest_marker("slow") and not item.get_closest_marker("xdist_group")))


_UNGROUPED: list[str] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note the tests `--dist loadgroup` would not group (each worker would rebuild the slow tables); then set the
    collector aside for what collection imported.

    A worker's heap after collection (torch, Dynamo, the test modules: millions of objects) lives until it exits,
    and every full collection walked it again: 12-19% of a serde or executor file's CPU went to the collector, at
    Python's default thresholds, one young collection per 700 allocations. Frozen (`gc.freeze`), that heap is no
    longer walked; young collections every 20,000 allocations cost no more in all, and far fewer of them promote
    into full ones. The collector's share falls to ~7%. A test that needs a collection still calls `gc.collect()`,
    which collects everything made since (what a leak or cycle test looks at); a test that thaws the heap freezes
    it again (test_young_heap, test_cbuild's leak measure: `gc.get_freeze_count()` walks the whole frozen heap,
    ~36 ms, so no hook asks it after every test). The test process only: opwire itself never changes the
    collector's settings.
    """
    if getattr(session.config.option, "loadgroup", False):
        _UNGROUPED.extend(
            i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid
        )
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 50)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail every grouped test, loudly, when pytest-xdist lost the groups (a worker's own error would not show)."""
    if _UNGROUPED and item.get_closest_marker("xdist_group"):
        pytest.fail(
            f"pytest-xdist did not group {_UNGROUPED[0]} (and {len(_UNGROUPED) - 1} more): pin a pytest it supports",
            pytrace=False,
        )


@pytest.fixture(scope="session", params=FORMATS)
def fmt(request: pytest.FixtureRequest) -> str:
    """Every wire format of `opwire.dumps`/`loads`: json, binary, compact."""
    return str(request.param)


@pytest.fixture(scope="session", params=sorted(framing.CODECS))
def codec(request: pytest.FixtureRequest) -> str:
    """Every Thrift codec: binary, compact."""
    return str(request.param)


@pytest.fixture(scope="session", params=thrift.ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Every Thrift engine, alone: fastbinary (Apache Thrift's C codec, canonical input) and python (the checking one)."""
    return str(request.param)


@pytest.fixture(scope="session", params=REPLAY_MODES)
def replay_mode(request: pytest.FixtureRequest) -> str:
    """Every replay mode: isolated (each call from its recorded inputs) and chained."""
    return str(request.param)


def _run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every xdist worker of this run shares (the parent of the workers' own base temp dirs)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def corpus_shared(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The corpus's bytes are exported once per run, by the first worker to ask, and read by the others."""
    corpus.share(_run_dir(tmp_path_factory))


@pytest.fixture(scope="session", autouse=True)
def inductor_shared(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Inductor's caches are the run's, shared by every worker and child (tests/support/inductor.py), never a user's."""
    inductor.share(_run_dir(tmp_path_factory))


@pytest.fixture(scope="session")
def corpus_programs(corpus_shared: None) -> list[corpus.SerializedProgram]:
    """Every corpus program's bytes, both IRs ("<model>/training", "<model>/decomposed")."""
    return corpus.serialized()


@pytest.fixture(scope="session", params=corpus.program_names())
def corpus_program(request: pytest.FixtureRequest, corpus_shared: None) -> corpus.SerializedProgram:
    """One corpus program's bytes per test instance (parametrized over every model and IR)."""
    return corpus.get_serialized(request.param)


@pytest.fixture(scope="session", params=corpus.program_names())
def corpus_export(request: pytest.FixtureRequest) -> corpus.CorpusProgram:
    """One live corpus program (torch.export's own object, exported in this worker) per test instance.

    Its tests share xdist_group("corpus_export"), so that one worker exports the corpus live, not each.
    """
    return corpus.get_program(request.param)


@pytest.fixture(scope="session")
def aoti_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite's AOTInductor package (tests/support/aoti_model.py), compiled once per run for every worker."""
    from support import aoti_model

    return aoti_model.package(_run_dir(tmp_path_factory))


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """`cli("run", "prog.opw", ..., cwd=None)`: run `opwire` in a child process (default cwd: the test's tmp_path)."""
    return lambda *args, cwd=None: run_cli(*args, cwd=cwd or tmp_path)
