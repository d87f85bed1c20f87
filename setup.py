"""The C model builder (opwire/serde/_cbuild_src, see plan.c for why); everything else is in pyproject.toml.

`pip install -e .` (what `make` runs) builds it; a worktree can build it in place with
`python setup.py build_ext --inplace`.
"""

from setuptools import Extension, setup

SOURCES = ["plan.c", "gc.c", "json_parse.c", "json_walk.c", "thrift_read.c", "thrift_plain.c", "thrift_skip.c", "thrift_check.c", "json_write.c"]

setup(
    ext_modules=[
        Extension(
            "opwire.serde._cbuild",
            sources=[f"opwire/serde/_cbuild_src/{name}" for name in SOURCES],
            depends=["opwire/serde/_cbuild_src/cbuild.h", "opwire/serde/_cbuild_src/thrift_wire.h",
                 "opwire/serde/_cbuild_src/thrift_strings.h"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
        )
    ]
)
