"""Shared pytest fixtures. The export corpus (tests/corpus.py) is built lazily, once per worker process."""

from __future__ import annotations

from pathlib import Path

import corpus
import pytest
from clirun import Cli, run_cli


@pytest.fixture(scope="session")
def corpus_programs() -> list[corpus.CorpusProgram]:
    """Every corpus program, both IRs ("<model>/training", "<model>/decomposed")."""
    return corpus.programs()


@pytest.fixture(scope="session", params=corpus.program_names())
def corpus_program(request: pytest.FixtureRequest) -> corpus.CorpusProgram:
    """One corpus program per test instance (parametrized over every model and IR)."""
    return corpus.get_program(request.param)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """`cli("run", "prog.opw", ..., cwd=None)`: run `opwire` in a child process (default cwd: the test's tmp_path)."""
    return lambda *args, cwd=None: run_cli(*args, cwd=cwd or tmp_path)
