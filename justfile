# compactbench tasks. `just --list` shows them all.

# Run the main job: every strategy over the shipped datasets (no API key, no network).
run *ARGS:
    cargo run --release -p compactbench -- run {{ARGS}}

# Pass the tests.
test:
    cargo test --workspace

# Format check and clippy with the workspace lints.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Regenerate the synthetic datasets (byte-identical for the same seed).
synth:
    cargo run --release -p compactbench -- synth --seed 42 --out datasets/synthetic

# Install the local model for the end-to-end LLM tests (SmolLM2-135M + llama-cpp-python server, into .venv-llm/).
setup-llm:
    bash scripts/setup-llm.sh

# The end-to-end LLM tests against the local SmolLM2 server (installs it first when needed).
test-llm:
    bash scripts/test-llm.sh
