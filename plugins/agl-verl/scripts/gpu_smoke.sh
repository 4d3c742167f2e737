#!/usr/bin/env bash
# GPU smoke test of agl-verl: a tiny Qwen2 model built locally (no network), a few GRPO steps with
# vLLM rollouts through the agl LLM proxy and an FSDP update, reward printed per step.
#
# Needs: one CUDA GPU, a venv with agl-core + agl-verl + verl[vllm] (vllm, flash-attn per verl's docs).
# Budget: under 10 minutes on one GPU. Usage: plugins/agl-verl/scripts/gpu_smoke.sh [python]
# STATUS: written against verl 0.9.1's source; it has NOT been run on a GPU yet.
set -euo pipefail
PY="${1:-python}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/agl-verl-smoke.XXXXXX")"
export RAY_AUTH_MODE=disabled RAY_TMPDIR="$WORK/ray" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled
mkdir -p "$RAY_TMPDIR"
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "gpu_smoke.sh needs a CUDA GPU")'
timeout 600 "$PY" "$HERE/gpu_smoke.py" "$WORK"
