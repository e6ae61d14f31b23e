//! How a replay's cost per message grows with the conversation: `replay-growth [STRATEGY ...]`
//! replays the `replay/` bench's generated conversations (1k, 10k and 100k messages, turns
//! over 16 KB left out) through each strategy (every one by default) at a 32k window, exact
//! `o200k_base` metering, the OpenAI prefix cache and the offline summarizer and judge, and
//! prints a Markdown table of microseconds per message, the 100k/1k ratio and how often the
//! strategy compacted at each size (benches/RESULTS.md):
//!
//! ```text
//! cargo run --release -p compactlens-benches --bin replay-growth
//! ```
//!
//! The conversation is generated once per size, outside the timer. A size whose replay takes
//! under a second is replayed again until a second has passed, and the mean is reported; every
//! strategy's row is measured in the same process, so the ratios are what to read.

#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use compaction::Encoding;
use compaction_strategies::StrategyConfig;
use compaction_strategies::NAMES;
use compactlens_benches::conversations::{generate, Shape};
use runlog::settings::{CacheProfile, OverflowPolicy};
use runner::judge::OfflineJudge;
use runner::replay::{replay, ReplaySettings};
use runner::summarize::OfflineSummarizer;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

fn main() -> anyhow::Result<()> {
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        names = NAMES.iter().map(|s| s.to_string()).collect();
    }
    let conversations: Vec<_> = SIZES
        .iter()
        .map(|&n| generate(Shape { messages: n, seed: compactlens_benches::SEED, max_turn_bytes: Some(16_000) }))
        .collect();
    println!(
        "| strategy | 1k | 10k | 100k | 100k vs 1k per message | compactions per 1,000 messages at 1k / 10k / 100k |"
    );
    println!("|---|---|---|---|---|---|");
    for name in &names {
        let strategy = StrategyConfig::default_for(name).ok_or_else(|| anyhow::anyhow!("unknown strategy {name}"))?;
        let settings = ReplaySettings {
            strategy,
            window: 32_000,
            encoding: Encoding::O200kBase,
            cache: CacheProfile::Openai,
            price: None,
            overflow: OverflowPolicy::Continue,
        };
        let mut per_message = Vec::new();
        let mut rates = Vec::new();
        for convo in &conversations {
            let started = Instant::now();
            let mut runs = 0u32;
            let mut compactions = 0;
            while runs == 0 || started.elapsed() < Duration::from_secs(1) {
                let m = replay(convo, &settings, &OfflineSummarizer::new(), &OfflineJudge)?;
                compactions = m.compactions;
                runs += 1;
            }
            rates.push(compactions as f64 * 1000.0 / convo.messages.len() as f64);
            per_message.push(started.elapsed().as_secs_f64() * 1e6 / f64::from(runs) / convo.messages.len() as f64);
        }
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.1} µs | {:.2}x | {:.0} / {:.0} / {:.0} |",
            per_message[0],
            per_message[1],
            per_message[2],
            per_message[2] / per_message[0],
            rates[0],
            rates[1],
            rates[2]
        );
    }
    Ok(())
}
