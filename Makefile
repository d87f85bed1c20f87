# opwire: `make demo` and `make test` bootstrap .venv on first use.
# torch is installed explicitly first (the CPU build on this disk); nothing may pull a CUDA build.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.opwire-installed
TORCH_PIN := torch==2.13.0
# The pip that `python -m venv` bundles (23.2 with Python 3.11) spends ~20 CPU-s of the bootstrap's ~45 matching the
# tags of every file on every index page it reads (set.isdisjoint over a list rebuilt per link); 26.3 resolves the
# same set in ~8. Pinned, so that a new pip cannot change the bootstrap under CI
PIP_PIN := pip==26.3
# The venv is made without pip, and pip 26.3 is installed by the pip wheel Python bundles (ensurepip's), run from
# the wheel itself: `python -m venv` would install that pip (23.2) and compile its ~1,000 files, only for it to be
# replaced at once (~4 CPU-s, ~5 s of the bootstrap's wall on one core)
BUNDLED_PIP := import ensurepip, pathlib; print(*pathlib.Path(ensurepip.__file__).parent.glob("_bundled/pip-*.whl"))

# Python's bytecode cache on, whatever the machine sets (these machines set PYTHONDONTWRITEBYTECODE=1): nothing is
# compiled at install, and without the cache every process the suite starts (CLI runs, torchrun ranks, replay
# workers) would compile torch, numpy, pytest and opwire from source again (`import torch` 2.1 -> 5.3 CPU-s)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test suite lint docs bench coverage fuzz regen clean thrift-compiler

# the C model builder (opwire/serde/_cbuild_src) is built by `pip install -e .`: a change to it reinstalls
CBUILD_SRC := $(wildcard opwire/serde/_cbuild_src/*.c opwire/serde/_cbuild_src/*.h)

# Two steps, torch first. setuptools (a requirement of torch 2.13, named here too) is then in the venv, so opwire's
# build runs without build isolation: no second, temporary environment fetching setuptools again (~5 CPU-s).
# No bytecode is compiled at install (--no-compile): pip compiles every file of every package on one core (torch's
# alone ~20 CPU-s, transformers' and diffusers' as much again), and the suite imports a fraction of them. Python's
# own cache writes a module's bytecode the first time any process imports it, so each file is compiled once, when
# used; see `unexport` below. That first use would be `make test`'s, when every core is wanted: the last install
# (one core: resolving, downloading, unpacking) runs beside tools/warm_bytecode.py, which writes the bytecode of the
# torch modules the suite imports on the other core.
$(STAMP): pyproject.toml setup.py $(CBUILD_SRC)
	test -x $(PY) || $(PYTHON) -m venv --without-pip $(VENV)
	test -x $(VENV)/bin/pip || $(PY) "$$($(PY) -c '$(BUNDLED_PIP)')/pip" install --quiet --disable-pip-version-check \
		--no-compile $(PIP_PIN)
	$(PY) -m pip --version | grep -q '^$(subst ==, ,$(PIP_PIN)) ' || \
		$(PY) -m pip install --quiet --disable-pip-version-check --no-compile $(PIP_PIN)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile $(TORCH_PIN) 'setuptools>=77'
	$(PY) tools/warm_bytecode.py & warm=$$!; \
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile --no-build-isolation -e '.[dev,docs]' \
		$(TORCH_PIN) || { kill $$warm 2>/dev/null; exit 1; }; \
	wait $$warm || echo "note: tools/warm_bytecode.py failed; the suite compiles torch's bytecode itself"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m opwire.demo

lint: $(STAMP)
	$(PY) -m ruff check opwire tests benchmarks fuzz
	$(PY) -m ruff format --check opwire tests benchmarks fuzz
	$(PY) -m mypy
	$(PY) -m opwire.schema.codegen --check
	$(VENV)/bin/lint-imports --no-cache

# the site (tutorials, concepts, API reference from docstrings) in strict mode: a broken link or reference fails
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --site-dir $${DOCS_SITE:-site}

# lint, docs and the suite run side by side (mypy alone takes ~25 s and the suite leaves a core idle at times);
# each one's output is printed whole when it ends, and any failure fails `make test`
test: $(STAMP) thrift-compiler
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint docs suite

# One compile of opwire up front (~1 s, both cores) rather than by the first processes of the workers at once.
# Three workers on two cores: a third of the suite's wall time is waiting (torchrun rendezvous, children's timeouts,
# Chromium, subprocesses), which a third worker fills (whole suite 5:36 -> 4:48 on a quiet 2-core machine; four
# workers: 5:34, their module fixtures built once more)
suite: $(STAMP)
	$(PY) -m compileall -q -j 2 opwire tests/support >/dev/null
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -n 3 --dist loadgroup --durations=15

# Apache Thrift's compiler, for the interop test: installed from Debian when we may (root), else the test skips.
thrift-compiler:
	@command -v thrift >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		(apt-get update -qq && apt-get install -y -qq thrift-compiler >/dev/null); } || \
		echo "note: thrift-compiler not installed; the Apache Thrift interop test will be skipped"

# the op policy's coverage corpus, whole (~17 min on 2 loaded cores): every torch.nn module and loss, every
# functional, a training step of every optimizer, 64 transformers/diffusers architectures (both IRs, and a recorded
# forward and backward); prints the table of docs/coverage.md (--write updates it and the ops-seen data)
coverage: $(STAMP)
	$(PY) tests/support/coverage_run.py $${COVERAGE_ARGS:-}

bench: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

fuzz: $(STAMP)
	$(PY) -c 'import atheris' 2>/dev/null || $(PY) -m pip install --quiet --disable-pip-version-check 'atheris>=2.3'
	$(PY) fuzz/fuzz_decoders.py $${FUZZ_CORPUS:-/tmp/opwire-fuzz-corpus} -runs=$${FUZZ_RUNS:-200000} -rss_limit_mb=2048 -timeout=10 -print_final_stats=1

regen: $(STAMP)
	$(PY) -m opwire.schema.codegen

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site build opwire/serde/_cbuild*.so
