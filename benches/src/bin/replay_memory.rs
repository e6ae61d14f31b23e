//! Peak memory of one long replay: `replay-memory STRATEGY [MESSAGES]` replays one generated
//! conversation (100,000 messages unless given; turns over 16 KB left out, as in the `replay/`
//! bench) through STRATEGY at a 32k window with the offline summarizer and judge, and prints
//! what it did. Run it under `/usr/bin/time -v` for the peak resident set (benches/RESULTS.md):
//!
//! ```text
//! cargo build --release -p compactlens-benches --bin replay-memory
//! /usr/bin/time -v target/release/replay-memory keep-last-n 100000
//! ```

#![allow(clippy::print_stdout)]

use compaction::Encoding;
use compaction_strategies::StrategyConfig;
use compactlens_benches::conversations::{generate, Shape};
use runlog::settings::{CacheProfile, OverflowPolicy};
use runner::judge::OfflineJudge;
use runner::replay::{replay, ReplaySettings};
use runner::summarize::OfflineSummarizer;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "keep-last-n".into());
    let messages: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let strategy = StrategyConfig::default_for(&name).ok_or_else(|| anyhow::anyhow!("unknown strategy {name}"))?;
    let convo = generate(Shape { messages, seed: compactlens_benches::SEED, max_turn_bytes: Some(16_000) });
    let settings = ReplaySettings {
        strategy,
        window: 32_000,
        encoding: Encoding::O200kBase,
        cache: CacheProfile::Openai,
        price: None,
        overflow: OverflowPolicy::Continue,
    };
    let started = std::time::Instant::now();
    let m = replay(&convo, &settings, &OfflineSummarizer::new(), &OfflineJudge)?;
    println!(
        "{name}: {} messages, {} calls, {} compactions, peak {} tokens, {:.1} s",
        convo.messages.len(),
        m.calls,
        m.compactions,
        m.peak_tokens,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
