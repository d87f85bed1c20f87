"""validate_op on an op library written in C++ (TORCH_LIBRARY), compiled with torch.utils.cpp_extension: slow (~10 s build)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from opwire.cli import main
from opwire.validation.snapshot import snapshot_ops
from opwire.validation.validate import validate_op

# both tests share one build: keep them on one xdist worker (make test runs --dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cpp_build")]


@pytest.fixture(scope="module")
def cpp_library(tmp_path_factory: pytest.TempPathFactory) -> str:
    from oplib import cpp_ops

    return cpp_ops.build(tmp_path_factory.mktemp("opwire_cpp_build"))  # also loads it into this process


def test_cpp_ops(cpp_library: str) -> None:
    reports = {r.op: r for r in validate_op("opwire_cpp")}
    assert sorted(reports) == ["opwire_cpp::cpu_only.default", "opwire_cpp::scaled_add.default"]
    scaled = reports["opwire_cpp::scaled_add.default"]
    assert scaled.fake_impl == "Meta kernel"  # a C++ Meta kernel is the fake implementation of a C++ op
    assert [f.code for f in scaled.findings] == ["vmap_fallback"]
    kernels = {k.key: k for k in scaled.kernels}
    assert (
        kernels["CPU"].registered and kernels["Meta"].registered and not kernels["CompositeExplicitAutograd"].registered
    )
    cpu_only = reports["opwire_cpp::cpu_only.default"]
    (no_fake,) = [f for f in cpu_only.findings if f.code == "no_fake_impl"]
    assert no_fake.fix == (
        'register one with torch.library.register_fake("opwire_cpp::cpu_only"), or a Meta kernel '
        "(TORCH_LIBRARY_IMPL(ns, Meta, m) in C++)"
    )
    snap = snapshot_ops("opwire_cpp")
    assert [o.schema_str for o in snap.ops] == [
        "opwire_cpp::cpu_only(Tensor x) -> Tensor",
        "opwire_cpp::scaled_add(Tensor x, Tensor y, float alpha=1.) -> Tensor",
    ]
    assert torch.equal(torch.ops.opwire_cpp.scaled_add(torch.ones(2), torch.ones(2), 2.0), torch.full((2,), 3.0))


def test_cli_load_library(cpp_library: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert Path(cpp_library).is_file()
    assert main(["ops", "validate", "opwire_cpp::cpu_only", "--load-library", cpp_library]) == 1
    assert "error no_fake_impl: opwire_cpp::cpu_only.default" in capsys.readouterr().out
