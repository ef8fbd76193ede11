# LinkStream developer targets.  `make demo` and `make test` work on a fresh Debian 12 machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
SHARED ?= ../shared
PYTEST_ARGS ?=

.PHONY: venv demo cluster-demo test lint typecheck format bench clean system-deps

# (the install also builds the compiled kernels, platform/operators/_kernels.c, and the
# N-Triples scanner, platform/rdf/_ntparse.c, and the report renderer, platform/engine/_render.c,
# when a C compiler is there: an edit of the C source rebuilds the venv)
$(VENV)/.installed: pyproject.toml platform/operators/_kernels.c platform/operators/_chain.c platform/operators/_chain_rest.c platform/operators/_chain.h platform/rdf/_ntparse.c platform/rdf/_termindex.c platform/rdf/_termindex.h platform/engine/_render.c
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	# an editable install compiles no bytecode for the package (pip does for a regular one):
	# without it every command compiles the modules it imports (~0.09 s of a short replay)
	$(PY) -m compileall -q platform
	touch $@

venv: $(VENV)/.installed

system-deps:
	@bash infra/install-system-deps.sh

demo: venv
	$(VENV)/bin/linkstream demo

# the same demo through the HTTP API of a local cluster (ZooKeeper, 2 coordinators, 3 containers)
cluster-demo: venv
	$(VENV)/bin/linkstream demo --cluster 3

# import-linter finds the package by name: a symlink gives platform/ its installed name
LAYERS_PATH := build/layers

lint: venv
	$(VENV)/bin/ruff check platform tests bench dashboards
	$(VENV)/bin/ruff format --check platform tests bench dashboards
	@mkdir -p $(LAYERS_PATH) && ln -sfn ../../platform $(LAYERS_PATH)/linkstream
	PYTHONPATH=$(LAYERS_PATH) $(VENV)/bin/lint-imports pyproject.toml --no-cache

# mypy sees the package as ``linkstream``: .typecheck/linkstream links to platform/ ([tool.mypy] mypy_path)
typecheck: venv
	@mkdir -p .typecheck && ln -sfn ../platform .typecheck/linkstream
	$(VENV)/bin/mypy -p linkstream

format: venv
	$(VENV)/bin/ruff format platform tests bench dashboards
	$(VENV)/bin/ruff check --fix platform tests bench dashboards

# `make test` runs the in-process suites on TEST_WORKERS pytest-xdist workers (a file stays on one
# worker), then the suites that start clusters, Spark and kill -9 processes one test at a time: they
# time ZooKeeper sessions and container deaths, and each already runs several processes.
# `make test PYTEST_ARGS="..."` runs one plain pytest with those arguments instead.
TEST_WORKERS ?= 2
SERIAL_TESTS := tests/cluster tests/durability tests/bulk

test: venv system-deps lint typecheck
ifeq ($(strip $(PYTEST_ARGS)),)
	LINKSTREAM_SHARED=$(SHARED) $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile $(addprefix --ignore=,$(SERIAL_TESTS))
	LINKSTREAM_SHARED=$(SHARED) $(VENV)/bin/pytest $(SERIAL_TESTS)
else
	LINKSTREAM_SHARED=$(SHARED) $(VENV)/bin/pytest $(PYTEST_ARGS)
endif

bench: venv
	LINKSTREAM_SHARED=$(SHARED) $(PY) bench/citybench.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache .typecheck .hypothesis
