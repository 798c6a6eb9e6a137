# Two entry points for a fresh machine (see README): `make run` and `make test`.
# Each creates .venv itself; re-running skips what is already installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: run test test-fast lint bench eval clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# constraints.txt pins what these machines need pinned (the local CPU torch); the package's own
# requirements stay ranges.
$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt -e '.[chat]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@ $(VENV)/.installed

# make run ARGS="--port 8502" passes options on to `jaxmem web`.
run: $(VENV)/.installed
	$(BIN)/jaxmem web $(ARGS)

# The habits first (seconds): lint and the import-layer contract; then the whole suite in one run.
# Three workers on a two-core machine: a third of the suite's time is spent waiting (servers and
# browsers starting, sandboxed children, the loopback cluster), and a third worker fills it. A file's
# tests stay on one worker; the loopback-cluster tests are one group (one Ray cluster and one
# PostgreSQL; no other test starts Ray, so their `ray stop --force` ends nobody else's processes).
test: $(VENV)/.installed-dev
	bash scripts/install-system-packages.sh
	$(MAKE) --no-print-directory lint
	$(BIN)/python -m pytest -n 3 --dist loadgroup

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_layers.py

test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m "not slow" -n 2 --dist loadgroup

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_review.py --tree benchmarks/review/realcode
	$(BIN)/python benchmarks/bench_verify.py

eval: $(VENV)/.installed-dev
	$(BIN)/jaxmem eval

clean:
	rm -rf $(VENV) artifacts .pytest_cache
