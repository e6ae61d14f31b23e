//! The `compact` driver on real strategies: the re-plan on a context-length error.

use compaction::{compact, Budget, Context, Message, Summaries, SummaryFailure, Trigger};
use compaction_strategies::StrategyConfig;

fn long_context() -> Context {
    let mut messages = vec![Message::system("system")];
    for i in 0..60 {
        messages.push(Message::user(format!("step {i}: {}", "lorem ipsum ".repeat(150))));
        messages.push(Message::assistant(format!("done {i}")));
    }
    Context::from_messages(messages)
}

#[test]
fn a_context_length_error_replans_once_on_overflow() {
    let strategy = StrategyConfig::default_for("codex").unwrap().build().unwrap();
    let ctx = long_context();
    let budget = Budget::new(16_000);
    let mut calls: Vec<usize> = Vec::new();
    let step = compact(strategy.as_ref(), &ctx, &budget, Trigger::Proactive, |_, requests| {
        calls.push(requests.len());
        if calls.len() == 1 {
            let fail = || Err(SummaryFailure { reason: "context length exceeded".into() });
            Summaries { outcomes: requests.iter().map(|_| fail()).collect(), too_long: true }
        } else {
            Summaries::of(requests.iter().map(|_| Ok("summary".to_string())).collect())
        }
    })
    .expect("the context is over the threshold");
    assert_eq!(calls.len(), 2, "asked once, then again for the overflow plan");
    assert!(step.replanned);
    assert_eq!(step.trigger, Trigger::Overflow);
    assert_eq!(step.compacted.event.trigger, Trigger::Overflow);
    assert!(step.compacted.event.fallback.is_none(), "{:?}", step.compacted.event);
    assert!(step.compacted.context.len() < ctx.len());
}

#[test]
fn an_outage_is_not_a_context_length_error() {
    let strategy = StrategyConfig::default_for("split-fraction").unwrap().build().unwrap();
    let ctx = long_context();
    let budget = Budget::new(32_000);
    let mut calls = 0;
    let step = compact(strategy.as_ref(), &ctx, &budget, Trigger::Proactive, |_, requests| {
        calls += 1;
        let fail = || Err(SummaryFailure { reason: "connection refused".into() });
        Summaries::of(requests.iter().map(|_| fail()).collect())
    })
    .expect("a plan");
    assert_eq!(calls, 1, "no re-plan without a context-length error");
    assert!(!step.replanned);
    assert!(step.compacted.event.fallback.is_some(), "the strategy's failure path ran");
}

#[test]
fn nothing_to_do_is_none() {
    let strategy = StrategyConfig::default_for("keep-last-n").unwrap().build().unwrap();
    let ctx = Context::from_messages(vec![Message::system("s"), Message::user("hi")]);
    let step = compact(strategy.as_ref(), &ctx, &Budget::new(128_000), Trigger::Proactive, |_, _| {
        panic!("no plan, no summary")
    });
    assert!(step.is_none());
}
