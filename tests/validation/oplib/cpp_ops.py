"""A C++ op library built with torch.utils.cpp_extension.load_inline (namespace `opwire_cpp`)."""

from __future__ import annotations

from pathlib import Path

SOURCE = r"""
#include <torch/library.h>
#include <ATen/ATen.h>

at::Tensor scaled_add(const at::Tensor& x, const at::Tensor& y, double alpha) { return x + y * alpha; }
at::Tensor scaled_add_meta(const at::Tensor& x, const at::Tensor& y, double alpha) { return at::empty_like(x); }
at::Tensor cpu_only(const at::Tensor& x) { return x * 2; }

TORCH_LIBRARY(opwire_cpp, m) {
  m.def("scaled_add(Tensor x, Tensor y, float alpha=1.0) -> Tensor");
  m.def("cpu_only(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL(opwire_cpp, CPU, m) {
  m.impl("scaled_add", &scaled_add);
  m.impl("cpu_only", &cpu_only);
}
TORCH_LIBRARY_IMPL(opwire_cpp, Meta, m) {
  m.impl("scaled_add", &scaled_add_meta);
}
"""


def build(build_dir: Path) -> str:
    """Compile the library into `build_dir` and return the path of the shared object (not loaded)."""
    from torch.utils.cpp_extension import load_inline

    build_dir.mkdir(parents=True, exist_ok=True)
    load_inline(
        name="opwire_cpp_ops",
        cpp_sources=[SOURCE],
        is_python_module=False,
        build_directory=str(build_dir),
        extra_cflags=["-O0"],
        verbose=False,
    )
    return str(build_dir / "opwire_cpp_ops.so")
