# agl developer tasks. `make demo` runs the main job; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1

.PHONY: help venv demo test test-core lint format bench clean

help:
	@echo "make demo   - run the main job (offline, embedded defaults)"
	@echo "make test   - install everything needed and run all tests"
	@echo "make lint   - ruff lint + format check"
	@echo "make bench  - run the benchmarks (JSON output)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

demo: venv
	$(VENV)/bin/agl plugins list --all

test: venv test-core

test-core: venv
	$(PY) -m pytest -q

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv
	$(PY) bench/import_bench.py

clean:
	rm -rf $(VENV) .agl build dist *.egg-info
