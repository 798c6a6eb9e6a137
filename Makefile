# Two entry points for a fresh machine (see README): `make run` and `make test`.
# Each creates .venv itself; re-running skips what is already installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: run test test-fast bench eval clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

# make run ARGS="--port 8502" passes options on to `jaxmem web`.
run: $(VENV)/.installed
	$(BIN)/jaxmem web $(ARGS)

test: $(VENV)/.installed-dev
	bash scripts/install-system-packages.sh
	$(BIN)/python -m pytest

test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m "not slow"

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_review.py
	$(BIN)/python benchmarks/bench_verify.py

eval: $(VENV)/.installed-dev
	$(BIN)/jaxmem eval

clean:
	rm -rf $(VENV) artifacts .pytest_cache
