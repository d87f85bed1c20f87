"""Fixtures for the `opwire view` tests: the programs of tests/support/view_programs.py, exported once per session."""

from __future__ import annotations

from typing import Any

import pytest
from support import view_programs


@pytest.fixture(scope="session")
def hops_json() -> bytes:
    """torch's JSON of the `Hops` program (cond, map_impl, while_loop)."""
    return view_programs.hops_program()


@pytest.fixture(scope="session")
def stack_json() -> bytes:
    """A 3-layer `Stack`, decomposed."""
    return view_programs.stack_program(3)


@pytest.fixture(scope="session")
def resnet_eps() -> dict[str, Any]:
    """The `ResNet` (20 batch norms, dynamic batch) exported by torch: {"decomposed": ep, "training": ep}."""
    return {ir: view_programs.resnet_export(ir == "decomposed") for ir in ("decomposed", "training")}
