#!/usr/bin/env bash
# GPU smoke test of agl-unsloth (under 10 minutes on one GPU, no network): builds a tiny model locally and
# runs two SFT iterations with engine=unsloth, printing reward and loss per iteration.
# Needs a venv with agl-core and 'agl-unsloth[gpu]' (CUDA torch + unsloth). Usage: scripts/gpu_smoke.sh [engine]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${PYTHON:-python}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 UNSLOTH_DISABLE_CPU_FALLBACK=1
"$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA GPU visible'; print(torch.cuda.get_device_name(0))"
timeout 600 "$PYTHON" "$here/gpu_smoke.py" "${1:-unsloth}"
