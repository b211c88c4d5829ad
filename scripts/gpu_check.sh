#!/usr/bin/env bash
# GPU check of arlkit's own trainer and hf backend (scripts/gpu_check.py says what it runs and checks): on one
# CUDA GPU with only torch and transformers installed (no vLLM, no network), a few GRPO, BudgetMix and LoRA
# steps on the ~100M-parameter `small` model built offline, an `arlkit eval` with the hf backend, and a timing
# table; meant to take under 8 minutes. Without a GPU, or with DEVICE=cpu, the same on the CPU with the nano
# model (make test runs that). Usage: bash scripts/gpu_check.sh [WORK_DIR]
set -euo pipefail
WORK=$(realpath -m "${1:-$(mktemp -d -t arlkit-gpu-check-XXXXXX)}")
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
for module in arlkit torch transformers peft; do
  "$PYTHON" -c "import $module" 2>/dev/null || {
    echo "gpu_check: $PYTHON cannot import $module; install arlkit with its lora extra first" >&2; exit 2; }
done
exec "$PYTHON" scripts/gpu_check.py "$WORK"
