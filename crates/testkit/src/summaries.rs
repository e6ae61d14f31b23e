//! Deterministic offline summaries for tests: a text built from the requested span itself,
//! short (one line) or long (a line per message, a few kilobytes), and a failing summarizer
//! for the fallback paths.

use compaction::{Context, Plan, SummaryFailure, SummaryOutcome, SummaryRequest};

use crate::shape::describe;

/// How long an offline summary is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Length {
    /// One line, a few dozen tokens.
    Short,
    /// A line per summarized message, capped near 6 KB (may exceed the request's `max_tokens`).
    Long,
}

const LONG_CAP: usize = 6_000;

fn words(text: &str, n: usize) -> String {
    text.split_whitespace().take(n).collect::<Vec<_>>().join(" ")
}

/// The summary text for `req` over `ctx`. Deterministic.
pub fn offline_text(ctx: &Context, req: &SummaryRequest, length: Length) -> String {
    let first = req
        .span
        .iter()
        .filter_map(|&i| ctx.get(i))
        .find(|e| e.role() == compaction::Role::User && !e.message().content.trim().is_empty())
        .map(|e| words(&e.message().content, 12))
        .unwrap_or_default();
    let head = format!(
        "Round {} summary ({}) of {} messages. First request: {first}",
        req.round,
        req.prompt.name(),
        req.span.len()
    );
    match length {
        Length::Short => head,
        Length::Long => {
            let mut out = format!("{head}\n要約 ✅\n");
            if let Some(prev) = &req.previous {
                out.push_str(&format!("Previously: {}\n", words(prev, 40)));
            }
            if let Some(task) = &req.task {
                out.push_str(&format!("Task: {}\n", words(task, 40)));
            }
            for &i in &req.span {
                let Some(e) = ctx.get(i) else { continue };
                let line = format!("- {}: {}\n", describe(e), words(&e.message().content, 30));
                if out.len() + line.len() > LONG_CAP {
                    break;
                }
                out.push_str(&line);
            }
            out
        }
    }
}

/// One successful outcome per request of `plan`.
pub fn fulfil(ctx: &Context, plan: &Plan, length: Length) -> Vec<SummaryOutcome> {
    plan.requests.iter().map(|r| Ok(offline_text(ctx, r, length))).collect()
}

/// One failed outcome per request of `plan`.
pub fn fail_all(plan: &Plan) -> Vec<SummaryOutcome> {
    plan.requests.iter().map(|_| Err(SummaryFailure { reason: "summarizer unavailable".to_string() })).collect()
}

/// The plan the [`compaction::compact`] driver applies for a proactive call, with short
/// offline summaries: `None` below the strategy's trigger (the driver's gate) or when the
/// strategy has nothing to do.
pub fn proactive_plan(strategy: &dyn compaction::Strategy, ctx: &Context, budget: &compaction::Budget) -> Option<Plan> {
    compaction::compact(strategy, ctx, budget, compaction::Trigger::Proactive, |c, requests| {
        compaction::Summaries::of(requests.iter().map(|r| Ok(offline_text(c, r, Length::Short))).collect())
    })
    .map(|step| step.plan)
}
