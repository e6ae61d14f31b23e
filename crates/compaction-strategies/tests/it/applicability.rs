//! Whether a strategy can operate at a window ([`Strategy::can_operate`]).

use compaction::Budget;
use compaction_strategies::{StrategyConfig, NAMES};

fn answer(name: &str, window: u64) -> Result<(), String> {
    let strategy = StrategyConfig::default_for(name).expect("in the catalog").build().expect("defaults build");
    strategy.can_operate(&Budget::new(window))
}

#[test]
fn split_fraction_cannot_operate_when_its_output_reserve_fills_the_window() {
    let why = answer("split-fraction", 16_000).expect_err("16,384 reserved of a 16k window");
    assert!(why.contains("max_output_tokens (16384)"), "{why}");
    assert_eq!(answer("split-fraction", 32_000), Ok(()));
    // Lowering the reserve makes it applicable again.
    let lowered: StrategyConfig =
        serde_json::from_value(serde_json::json!({"name": "split-fraction", "max_output_tokens": 4096}))
            .expect("params");
    let lowered = lowered.build().expect("builds");
    assert_eq!(lowered.can_operate(&Budget::new(16_000)), Ok(()));
}

#[test]
fn prune_then_summarize_cannot_operate_when_its_protected_tail_fills_the_usable_window() {
    let why = answer("prune-then-summarize", 16_000).expect_err("40,000 protected of 11,904 usable");
    assert!(why.contains("prune_protect (40000)") && why.contains("11904"), "{why}");
    assert!(answer("prune-then-summarize", 32_000).is_err(), "27,904 usable is still under 40,000");
    assert_eq!(answer("prune-then-summarize", 128_000), Ok(()));
}

#[test]
fn every_built_in_strategy_operates_at_128k_and_the_baselines_everywhere() {
    for name in NAMES {
        assert_eq!(answer(name, 128_000), Ok(()), "{name} at 128k");
    }
    for name in ["none", "truncate", "observation-mask"] {
        for window in [4_000, 16_000, 32_000] {
            assert_eq!(answer(name, window), Ok(()), "{name} at {window}");
        }
    }
}
