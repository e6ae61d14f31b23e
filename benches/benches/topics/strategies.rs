//! Per-strategy costs on generated conversations of 1k, 10k and 100k messages, in messages
//! per second.
//!
//! - `should_compact/{strategy}/{n}`: one replay step on a context of `n` messages: append a
//!   message (already metered, as the replay meters a message once when it arrives) and ask
//!   `should_compact`. Steps run in batches of `n - 1` on a copy of the `n`-message context (the
//!   copy is not timed), so the context holds `n` to `2n` messages. A trigger that reads the
//!   context's running totals costs the same per step at every `n`; one that scans the context
//!   costs O(n) per step and its steps per second fall tenfold from one size to the next.
//! - `plan_apply/{strategy}/{n}`: one compaction of the whole `n`-message context at a 128k
//!   window: `plan`, then `apply` with the summaries the plan asks for (written once, outside
//!   the timer, by testkit's offline summaries). Throughput counts the context's messages.
//!   `none` never plans and is left out. Each compaction gets its own copy of the context
//!   (made and dropped outside the timer): a copy has no index kept with it
//!   ([`compaction::Context::memo`]), so a strategy that keeps one (`priority-chain`) reads the
//!   whole context, as on its first request.
//! - `mask_in_place/{strategy}/{n}`: the same first compaction through the in-place path
//!   ([`compaction::masking`]: `plan_masks` from nothing settled, then `mask_in_place`), for
//!   the strategies that have one; the copy of the context it masks is made outside the timer.
//!
//! Token units are cached per message, and the contexts are metered before timing starts, so
//! these benches measure the strategies, not the tokenizers (see `tokens/`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use compaction::{mask_in_place, Budget, Context, Entry, MaskAnswer, Strategy, Trigger};
use compaction_strategies::StrategyConfig;
use compaction_strategies::NAMES;
use compactlens_benches::conversations;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use testkit::summaries::{fulfil, Length};

use super::quick;

/// Conversation sizes, in messages.
pub const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// The window of `plan_apply`.
pub const WINDOW: u64 = 128_000;

fn strategies() -> Vec<(&'static str, Box<dyn Strategy>)> {
    NAMES.iter().filter_map(|name| Some((*name, StrategyConfig::default_for(name)?.build().ok()?))).collect()
}

/// The plan a strategy makes for `ctx`: proactive, or forced when its trigger does not fire.
fn plan_for(s: &dyn Strategy, ctx: &Context, budget: &Budget) -> Option<(Trigger, compaction::Plan)> {
    [Trigger::Proactive, Trigger::Overflow].into_iter().find_map(|t| s.plan(ctx, budget, t).map(|p| (t, p)))
}

/// `iters` replay steps on `base` and its growth: push one entry of `pool`, ask `should_compact`.
/// Each batch starts from an untimed copy of `base` with its running totals known.
fn steps(s: &dyn Strategy, base: &Context, pool: &[Entry], budget: &Budget, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let k = left.min(pool.len().max(1) as u64) as usize;
        let mut ctx = base.clone();
        black_box(s.should_compact(&ctx, budget));
        let start = Instant::now();
        for e in pool.iter().take(k) {
            ctx.push(e.clone());
            black_box(s.should_compact(&ctx, budget));
        }
        total += start.elapsed();
        left -= k as u64;
    }
    total
}

pub fn bench(c: &mut Criterion) {
    let strategies = strategies();
    let budget = Budget::new(WINDOW);
    let contexts: Vec<(usize, Context)> = SIZES
        .iter()
        .map(|&n| {
            let ctx = Context::from_messages(conversations::generated(n, compactlens_benches::SEED).messages);
            // Meter every message with every estimator before any timer starts.
            for (_, s) in &strategies {
                s.estimate(&ctx);
            }
            (n, ctx)
        })
        .collect();

    let mut group = c.benchmark_group("should_compact");
    quick(&mut group, 10, 2);
    // One element is one step: one message appended and checked.
    group.throughput(Throughput::Elements(1));
    for (n, ctx) in &contexts {
        let pool: Vec<Entry> = ctx.entries()[1..].to_vec();
        for (name, s) in &strategies {
            group.bench_with_input(BenchmarkId::new(*name, n), ctx, |b, ctx| {
                b.iter_custom(|iters| steps(s.as_ref(), ctx, &pool, &budget, iters))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("plan_apply");
    quick(&mut group, 10, 2);
    for (n, ctx) in &contexts {
        group.throughput(Throughput::Elements(ctx.len() as u64));
        for (name, s) in &strategies {
            let Some((trigger, plan)) = plan_for(s.as_ref(), ctx, &budget) else { continue };
            let summaries = fulfil(ctx, &plan, Length::Short);
            group.bench_with_input(BenchmarkId::new(*name, n), ctx, |b, ctx| {
                b.iter_batched(
                    || ctx.clone(),
                    |ctx| {
                        let plan = s.plan(&ctx, &budget, trigger);
                        black_box(plan.map(|p| s.apply(&ctx, &budget, &p, &summaries).context.len()));
                        // Dropped outside the timer.
                        ctx
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("mask_in_place");
    quick(&mut group, 10, 2);
    for (n, ctx) in &contexts {
        group.throughput(Throughput::Elements(ctx.len() as u64));
        for (name, s) in &strategies {
            let in_place = [Trigger::Proactive, Trigger::Overflow]
                .into_iter()
                .find(|t| matches!(s.plan_masks(ctx, &budget, *t, 0), MaskAnswer::Masks(_)));
            let Some(trigger) = in_place else { continue };
            group.bench_with_input(BenchmarkId::new(*name, n), ctx, |b, ctx| {
                b.iter_batched(
                    || ctx.clone(),
                    |mut ctx| {
                        if let MaskAnswer::Masks(plan) = s.plan_masks(&ctx, &budget, trigger, 0) {
                            black_box(mask_in_place(s.as_ref(), &mut ctx, &budget, &plan, &[]).event.masked);
                        }
                        // Dropped outside the timer.
                        ctx
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}
