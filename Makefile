# opwire: `make demo` and `make test` bootstrap .venv on first use.
# torch is installed explicitly first (the CPU build on this disk); nothing may pull a CUDA build.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.opwire-installed
TORCH_PIN := torch==2.13.0

.PHONY: demo test suite lint docs bench coverage fuzz regen clean thrift-compiler

# the C model builder (opwire/serde/_cbuild_src) is built by `pip install -e .`: a change to it reinstalls
CBUILD_SRC := $(wildcard opwire/serde/_cbuild_src/*.c opwire/serde/_cbuild_src/*.h)

# Two steps, torch first. setuptools (a requirement of torch 2.13, named here too) is then in the venv, so opwire's
# build runs without build isolation: no second, temporary environment fetching setuptools again (~5 CPU-s).
# Bytecode stays compiled at install (not --no-compile): under PYTHONDONTWRITEBYTECODE=1 every process of the
# suite would compile numpy, pytest, pydantic... from source again.
$(STAMP): pyproject.toml setup.py $(CBUILD_SRC)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(TORCH_PIN) 'setuptools>=68'
	$(PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation -e '.[dev,docs]' $(TORCH_PIN)
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

# opwire is installed editable, so pip compiled none of its bytecode; where PYTHONDONTWRITEBYTECODE=1 is set (as on
# these machines), every process the suite starts (CLI runs, torchrun ranks, replay workers) would compile opwire
# from source again: ~0.35 CPU-s each, hundreds of times. One compile up front (~1 s) writes it once.
suite: $(STAMP)
	$(PY) -m compileall -q -j 2 opwire tests/support >/dev/null
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -n 2 --dist loadgroup --durations=15

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
