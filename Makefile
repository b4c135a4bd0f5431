# One command to set up and run the demo, one to run the tests. Both create ./.venv if needed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
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

clean:
	rm -rf $(VENV) ragpulse-demo .ragpulse ragpulse.duckdb
