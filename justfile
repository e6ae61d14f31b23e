# compactlens tasks. `just --list` shows them all.

# Run the main job: every strategy over the shipped datasets (no API key, no network).
run *ARGS:
    cargo run --release -p compactlens -- run {{ARGS}}

# Pass the tests.
test:
    cargo test --workspace

# Format check and clippy with the workspace lints.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Regenerate the synthetic datasets (byte-identical for the same seed).
synth:
    cargo run --release -p compactlens -- synth --seed 42 --out datasets/synthetic

# Criterion benches, short runs sized for two cores (figures in benches/RESULTS.md).
bench *ARGS:
    cargo bench -p compactlens-benches -- {{ARGS}}

# compactlens side by side with Python tiktoken and LangChain's trim_messages (creates .venv-peers/).
bench-peers:
    bash benches/peers/run.sh

# Install the local model for the end-to-end LLM tests (SmolLM2-135M + llama-cpp-python server, into .venv-llm/).
setup-llm:
    bash scripts/setup-llm.sh

# The end-to-end LLM tests against the local SmolLM2 server (installs it first when needed).
test-llm:
    bash scripts/test-llm.sh

# Install Debian's Chromium, which the report's browser test drives (needs root or sudo).
setup-browser:
    command -v chromium >/dev/null 2>&1 || (apt-get update && apt-get install -y chromium) || (sudo apt-get update && sudo apt-get install -y chromium)

# Import ../shared/corpora (with derived probes) into target/corpora/, then run experiments/corpora.toml.
corpora *ARGS:
    bash scripts/corpora.sh run {{ARGS}}

# The CI slice of the corpora experiment (experiments/ci-corpora.toml); skips when ../shared/corpora is absent.
corpora-ci *ARGS:
    bash scripts/corpora.sh ci {{ARGS}}

# Re-render report.html of a run folder.
report DIR:
    cargo run --release -p compactlens -- report {{DIR}}

# Run the gate's experiment and compare it pair by pair with the committed baseline (exit 1 on a regression).
gate *ARGS:
    rm -rf target/ci-gate-run
    cargo run --release -p compactlens -- run --config experiments/ci.toml --out target/ci-gate-run
    cargo run --release -p compactlens -- gate --baseline reports/baseline --current target/ci-gate-run {{ARGS}}

# Refresh the gate's baseline on purpose (after a change meant to move the numbers): commit the result.
baseline:
    rm -rf target/ci-baseline-run
    cargo run --release -p compactlens -- run --config experiments/ci.toml --out target/ci-baseline-run
    mkdir -p reports/baseline
    cp target/ci-baseline-run/summary.csv reports/baseline/summary.csv
    cp target/ci-baseline-run/results.csv reports/baseline/results.csv

# Rewrite every file generated from the strategy catalog (experiments/README.md's parameter
# tables, the experiment files' strategy tables, the gate's baseline when a strategy is added).
regenerate:
    bash scripts/regenerate.sh

# Rewrite the generated parameter tables in experiments/README.md and the experiment files'
# strategy tables from the strategy catalog (no run; `just regenerate` also refreshes the baseline).
docs:
    cargo run -q -p compactlens -- generated --write
