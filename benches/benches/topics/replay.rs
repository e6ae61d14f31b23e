//! Full replays through the replay engine, and how their cost grows with the conversation.
//!
//! `replay/{strategy}/{n}`: one replay (`runner::replay::replay`) of a generated conversation
//! of `n` messages through `strategy` at a 32k window, exact `o200k_base` metering, the OpenAI
//! prefix cache, the offline summarizer and judge. Throughput counts the conversation's
//! messages, so the figure is replay messages per second: the growth benchmark. One step costs
//! O(new messages) (cached counts, running totals, incremental request checks, masking in
//! place), so messages per second should not fall as `n` goes from 1k to 100k, for every
//! strategy, those that never drop a message included; `benches/RESULTS.md` holds the target
//! (flat within 2x) and the figures (`replay-growth` prints the same table in one pass).
//!
//! The conversations are testkit's generated ones with turns over 16 KB left out (as in the
//! peer comparison), which keeps the 100k-message replay at about a second per strategy; the
//! 10k one is "one long conversation" replayed through each strategy.

use compaction::{Conversation, Encoding};
use compaction_strategies::StrategyConfig;
use compaction_strategies::NAMES;
use compactlens_benches::conversations::{generate, Shape};
use criterion::{BenchmarkId, Criterion, Throughput};
use runlog::settings::CacheProfile;
use runner::judge::OfflineJudge;
use runner::replay::{replay, ReplaySettings};
use runner::summarize::OfflineSummarizer;

use super::quick;

/// Conversation sizes, in messages.
pub const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// The replay window: small enough that every strategy compacts many times.
pub const WINDOW: u64 = 32_000;
/// Turns over this many bytes are left out of the generated conversations.
pub const TURN_BYTES: usize = 16_000;

pub fn conversation(n: usize) -> Conversation {
    generate(Shape { messages: n, seed: compactlens_benches::SEED, max_turn_bytes: Some(TURN_BYTES) })
}

pub fn settings(name: &str) -> Option<ReplaySettings> {
    Some(ReplaySettings {
        strategy: StrategyConfig::default_for(name)?,
        window: WINDOW,
        encoding: Encoding::O200kBase,
        cache: CacheProfile::Openai,
        price: None,
        overflow: runlog::settings::OverflowPolicy::Continue,
    })
}

pub fn bench(c: &mut Criterion) {
    let summarizer = OfflineSummarizer::new();
    let judge = OfflineJudge;
    let mut group = c.benchmark_group("replay");
    quick(&mut group, 10, 3);
    for n in SIZES {
        let convo = conversation(n);
        group.throughput(Throughput::Elements(convo.messages.len() as u64));
        for name in NAMES {
            let Some(settings) = settings(name) else { continue };
            group.bench_with_input(BenchmarkId::new(name, n), &convo, |b, convo| {
                b.iter(|| replay(convo, &settings, &summarizer, &judge).map(|m| m.calls))
            });
        }
    }
    group.finish();
}
