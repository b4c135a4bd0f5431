# One command to set up and run the demo, one to run the tests. Both create ./.venv if needed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch, installed before anything that depends on torch so that no install ever
# pulls a multi-GB CUDA build. Elsewhere: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu (or the old
# TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu").
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=

.PHONY: setup demo test test-fast lint typecheck bench wheel clean

# Traces in bench_floor's day (issue 17): 100k takes about 1.5 minutes here; FLOOR_N=1000000 for the 1M figure.
FLOOR_N ?= 100000

setup: $(VENV)/.installed

# infra/install.sh is the one install recipe: the flow image (infra/Dockerfile) runs it too, without the test extras.
$(VENV)/.installed: pyproject.toml infra/install.sh
	$(PYTHON) -m venv $(VENV)
	TORCH_SPEC="$(TORCH_SPEC)" TORCH_INDEX_URL="$(TORCH_INDEX_URL)" PIP_ARGS=--quiet \
		bash infra/install.sh --python $(BIN)/python --extras test --editable
	touch $@

demo: setup
	$(BIN)/ragpulse demo

# The whole suite, as CI runs it (.ci/run): lint, types, then every test; about 30 minutes here (pytest prints the
# slowest 25 tests: the docs recipes lead).
test: lint typecheck
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Strict mypy over the package as it is imported (pyproject.toml's [tool.mypy]): ragpulse.<room> is the folder <room>/
# (its [tool.setuptools.package-dir]), which mypy cannot find through the editable install, so the rooms are linked
# under build/typecheck/ragpulse.
ROOMS := cli flows tasks metrics
TYPECHECK_DIR := build/typecheck/ragpulse

typecheck: setup
	rm -rf $(TYPECHECK_DIR)
	mkdir -p $(TYPECHECK_DIR)
	ln -s $(abspath ragpulse/__init__.py) $(TYPECHECK_DIR)/__init__.py
	for room in $(ROOMS); do ln -s $(abspath .)/$$room $(TYPECHECK_DIR)/$$room; done
	$(BIN)/mypy

# The edit loop: every test not marked slow (pyproject.toml's marker: no Prefect or S3 server, no PostgreSQL, no
# browser, no other process or model), under two minutes here.
test-fast: setup
	$(BIN)/pytest -m "not slow"

bench: setup
	$(BIN)/python bench/bench_metrics.py
	$(BIN)/python bench/bench_flow.py
	$(BIN)/python bench/bench_validation.py
	$(BIN)/python bench/bench_publish.py
	$(BIN)/python bench/bench_duckdb_text.py
	$(BIN)/python bench/bench_duckdb_reader.py
	$(BIN)/python bench/bench_drift.py
	$(BIN)/python bench/bench_floor.py --n $(FLOOR_N)

# The wheel, built from a fresh copy of the files git tracks or would track (uncommitted work included), so
# setuptools' build/ and ragpulse.egg-info land in the copy, not here, and no stale build/lib file can reach the
# wheel. A plain `pip wheel .` still works; its leftovers are ignored by .gitignore.
WHEEL_DIR ?= dist

wheel:
	@set -e; src="$$(mktemp -d)"; trap 'rm -rf "$$src"' EXIT; \
	git -c core.quotePath=false ls-files --cached --others --exclude-standard \
		| while IFS= read -r f; do if [ -f "$$f" ]; then printf '%s\n' "$$f"; fi; done \
		| tar -cf - -T - | tar -xf - -C "$$src"; \
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation -w "$(abspath $(WHEEL_DIR))" "$$src"; \
	ls "$(abspath $(WHEEL_DIR))"/ragpulse-*.whl

clean:
	rm -rf $(VENV) ragpulse-demo .ragpulse ragpulse.duckdb
