# The whole set-up is two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run test check chaos badinput bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/desk up

# Test files run in parallel on PYTEST_WORKERS processes (each file on one worker, so its
# module-scoped servers are shared); PYTEST_WORKERS=0 runs them in this process.
PYTEST_WORKERS ?= 2

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

check: $(VENV)/.installed-test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy shared services desk chaos benchmarks

chaos: $(VENV)/.installed-test
	$(BIN)/python -m chaos $(CHAOS_ARGS)

badinput: $(VENV)/.installed-test
	$(BIN)/python -m chaos.badinput $(BADINPUT_ARGS)

bench: $(VENV)/.installed-test
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache
