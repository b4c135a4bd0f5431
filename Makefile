# One command to set up and run the demo, one to run the tests. Both create ./.venv if needed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch, installed before anything that depends on torch so that no install ever
# pulls a multi-GB CUDA build. Elsewhere: TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu".
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: setup
	$(BIN)/ragpulse demo

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest

bench: setup
	$(BIN)/python bench/bench_metrics.py
	$(BIN)/python bench/bench_flow.py
	$(BIN)/python bench/bench_validation.py
	$(BIN)/python bench/bench_publish.py

clean:
	rm -rf $(VENV) ragpulse-demo .ragpulse ragpulse.duckdb
