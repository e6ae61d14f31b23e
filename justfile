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
