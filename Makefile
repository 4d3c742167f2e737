# agl developer tasks. `make demo` runs the main job; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1

PLUGINS := $(notdir $(wildcard plugins/*))

.PRECIOUS: .venv-%/.installed

.PHONY: help venv demo test test-core test-plugins lint format bench clean

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

# The main job (offline): APO improves a room-booking agent's prompt against scripted models on a local
# OpenAI-compatible server -- store, runners, tracer, adapter and algorithm all run for real.
demo: .venv-agl-apo/.installed
	.venv-agl-apo/bin/agl plugins list
	.venv-agl-apo/bin/python examples/apo/train.py --offline --store sqlite:///.agl/demo/store.db --output-dir .agl/demo

test: venv test-core test-plugins

test-core: venv
	$(PY) -m pytest -q

# Every plugin is tested alone, with only agl-core and that plugin installed, in its own venv
# (.venv-<plugin>). A plugin may list packages to install first (e.g. the CPU torch build) in
# plugins/<plugin>/requirements-pre.txt.
.venv-%/.installed: pyproject.toml plugins/%/pyproject.toml
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install -q --upgrade pip
	@if [ -f plugins/$*/requirements-pre.txt ]; then \
	  .venv-$*/bin/python -m pip install -q -r plugins/$*/requirements-pre.txt; fi
	.venv-$*/bin/python -m pip install -q -e . -e 'plugins/$*[test]'
	@touch $@

test-plugin-%: .venv-%/.installed
	cd plugins/$* && ../../.venv-$*/bin/python -m pytest -q

test-plugins: $(addprefix test-plugin-,$(PLUGINS))

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv
	$(PY) bench/import_bench.py
	$(PY) bench/store_bench.py --store memory
	$(PY) bench/store_bench.py --store sqlite
	$(PY) bench/store_bench.py --store http
	$(PY) bench/tracer_bench.py
	$(PY) bench/proxy_bench.py
	$(PY) bench/loop_bench.py

clean:
	rm -rf $(VENV) .venv-* .agl build dist *.egg-info
