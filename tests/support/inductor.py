"""The suite's Inductor settings: one cache directory per run, and no build work a test's compile does not need.

A run compiles two AOTInductor packages (the `aoti_package` fixture's model, tests/support/aoti_model.py, and the
AOTInductor tutorial's own, docs/tutorials/aoti-extern-nodes.md), each ~10 CPU-s on a cold machine, which is what
CI is. Around them Inductor, left to its defaults, does more work than the compiles (~42 CPU-s cold for both):

- it dry-compiles `ATen/cpu/vec/vec.h` once per vector ISA the CPU has (AVX2, AVX-512, AVX-512 VNNI: ~8 CPU-s)
  to check that the compiler builds code torch's kernels link with. `cpp.vec_isa_ok` skips that check only; the
  ISA picked is the same (the CPU's flags still choose it), and were the compiler unable to build it, the
  compile would fail loudly rather than fall back;
- it precompiles the wrapper's and the kernels' headers (~16 CPU-s) into `/tmp/torchinductor_<user>`, whatever
  `TORCHINDUCTOR_CACHE_DIR` says: that pays from the third compile on a machine, and a run has two;
- its caches live in `/tmp/torchinductor_<user>` unless told otherwise: warm on a developer's machine, cold on
  CI, so a run's CPU would depend on the runs before it. `share` puts them in the run's temp directory, shared by
  every xdist worker and child process, and empty at the start of every run, as on CI.

The tests check what the compiled packages hold and how opwire reads and runs them, not how Inductor builds them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SETTINGS", "settings", "share"]

SETTINGS = {"cpp.vec_isa_ok": True, "aot_inductor.precompile_headers": False}


def share(run_dir: Path) -> None:
    """Point Inductor's caches (every process of the run inherits the variable) at `run_dir`/inductor-cache."""
    cache = run_dir / "inductor-cache"
    cache.mkdir(exist_ok=True)  # a sandboxed child's Dynamo makes the directory: it must exist already
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)


@contextlib.contextmanager
def settings() -> Iterator[None]:
    """Compile with `SETTINGS` inside the block (this process only; Inductor's config is imported here)."""
    import torch._inductor.config  # deferred: ~2 CPU-s of imports, paid only by a process that compiles

    with torch._inductor.config.patch(SETTINGS):
        yield
