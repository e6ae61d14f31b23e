//! The conformance suite every strategy of the catalog must pass.
//!
//! For each name in [`compaction::strategies::NAMES`], with no per-strategy code: parameters
//! are jittered from the strategy's defaults (numbers scaled by 0.25x..2x, integers kept
//! integral, fractions kept in (0, 1], booleans flipped; combinations `build()` rejects fall
//! back to the defaults), a realistic conversation is generated, and the window is set to a
//! random 20%..90% of its exact o200k size (never below [`MIN_WINDOW`]) so that compaction is
//! forced. Then:
//!
//! - when `should_compact`, a proactive plan is fulfilled with offline summaries (short or long)
//!   and applied, and again with every summary failing (the fallback path); `check_compaction`
//!   and `check_context` must find nothing outside the strategy's documented deviations;
//! - when not, a proactive plan must be `None` or a no-op (also checked at a generous window);
//! - the reactive triggers the strategy reacts to (`Overflow`, `LengthStop`) are checked the
//!   same way;
//! - compacting, appending a few turns and compacting again keeps at most one live summary.
//!
//! Cases per strategy: 256, or `COMPACTBENCH_PROPTEST_CASES`. Failures are persisted in
//! `tests/proptest-regressions/conformance.txt` and replayed first on every run.

use compaction::strategies::NAMES;
use compaction::{
    check_compaction, check_context, Budget, Compacted, Context, Exact, Fallback, Plan, Slot, StrategyConfig, Trigger,
    ViolationKind,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestError, TestRunner};
use testkit::gen::{self, ConversationSpec, Turn};
use testkit::shape::before_after;
use testkit::summaries::{fail_all, fulfil, Length};

/// No window is smaller than this, whatever the fraction.
const MIN_WINDOW: u64 = 300;
/// How many jitter values a case carries (parameters beyond this reuse them cyclically).
const JITTER: usize = 24;

fn cases() -> u32 {
    std::env::var("COMPACTBENCH_PROPTEST_CASES").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(256)
}

fn config() -> Config {
    Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/proptest-regressions/conformance.txt"
        )))),
        // Bound shrinking: generated conversations can be large.
        max_shrink_iters: 2_048,
        ..Config::with_cases(cases())
    }
}

/// One generated test case, strategy-agnostic.
#[derive(Debug, Clone)]
struct Case {
    conversation: ConversationSpec,
    /// Per parameter, in the order of the defaults' JSON: a scale factor and whether to flip
    /// a boolean.
    jitter: Vec<(f64, bool)>,
    /// The window as a fraction of the context's exact o200k size.
    window_fraction: f64,
    summaries: Length,
    /// Turns appended after the first compaction.
    more: Vec<Turn>,
}

fn arb_case() -> impl Strategy<Value = Case> {
    (
        gen::arb_conversation(),
        prop::collection::vec((0.25f64..2.0, any::<bool>()), JITTER),
        0.2f64..0.9,
        prop_oneof![Just(Length::Short), Just(Length::Long)],
        gen::arb_turns(1..4),
    )
        .prop_map(|(conversation, jitter, window_fraction, summaries, more)| Case {
            conversation,
            jitter,
            window_fraction,
            summaries,
            more,
        })
}

/// Scale every number and flip booleans of `value` (recursively), taking jitter values in turn.
fn jitter_value(value: &mut serde_json::Value, jitter: &[(f64, bool)], k: &mut usize) {
    use serde_json::Value;
    let mut next = || {
        let j = jitter.get(*k % jitter.len().max(1)).copied().unwrap_or((1.0, false));
        *k += 1;
        j
    };
    match value {
        Value::Bool(b) => {
            if next().1 {
                *b = !*b;
            }
        }
        Value::Number(n) => {
            let (f, _) = next();
            const EXACT: u64 = 1 << 53;
            if let Some(u) = n.as_u64() {
                if u < EXACT {
                    *value = Value::from((u as f64 * f).round() as u64);
                }
            } else if let Some(i) = n.as_i64() {
                if i.unsigned_abs() < EXACT {
                    *value = Value::from((i as f64 * f).round() as i64);
                }
            } else if let Some(x) = n.as_f64() {
                let y = if x > 0.0 && x <= 1.0 { (x * f).clamp(1e-3, 1.0) } else { x * f };
                if let Some(num) = serde_json::Number::from_f64(y) {
                    *value = Value::Number(num);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| jitter_value(v, jitter, k)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key != "name" {
                    jitter_value(v, jitter, k);
                }
            }
        }
        Value::Null | Value::String(_) => {}
    }
}

/// The strategy's defaults with `jitter` applied, or the defaults when `build()` (or the
/// params' own deserialization) rejects the combination.
fn jittered(name: &str, jitter: &[(f64, bool)]) -> StrategyConfig {
    let defaults = StrategyConfig::default_for(name).expect("every catalog name has defaults");
    let Ok(mut value) = serde_json::to_value(&defaults) else { return defaults };
    jitter_value(&mut value, jitter, &mut 0);
    match serde_json::from_value::<StrategyConfig>(value) {
        Ok(config) if config.build().is_ok() => config,
        _ => defaults,
    }
}

/// What a failure message shows about the case.
struct Scene<'a> {
    config: &'a StrategyConfig,
    budget: Budget,
    what: &'a str,
}

impl Scene<'_> {
    fn header(&self) -> String {
        format!(
            "{} {} at window {}: params {}",
            self.config.name(),
            self.what,
            self.budget.context_window,
            self.config.params_json()
        )
    }
}

/// The plan only refers to entries and requests that exist, and carries its trigger.
fn check_plan(plan: &Plan, ctx: &Context, trigger: Trigger, scene: &Scene) -> Result<(), TestCaseError> {
    prop_assert_eq!(plan.trigger, trigger, "{}: plan carries another trigger", scene.header());
    let layouts: Vec<&[Slot]> = match &plan.fallback {
        Fallback::Unchanged => vec![&plan.layout],
        Fallback::Layout { layout, .. } => vec![&plan.layout, layout],
    };
    for slot in layouts.into_iter().flatten() {
        match slot {
            Slot::Keep { index } | Slot::Mask { index, .. } => {
                prop_assert!(*index < ctx.len(), "{}: slot {:?} outside the context", scene.header(), slot)
            }
            Slot::Summary { request, .. } => {
                prop_assert!(*request < plan.requests.len(), "{}: slot {:?} names no request", scene.header(), slot)
            }
            Slot::Insert { .. } => {}
        }
    }
    for r in &plan.requests {
        prop_assert!(r.span.iter().all(|i| *i < ctx.len()), "{}: request span {:?} outside", scene.header(), r.span);
    }
    Ok(())
}

/// `check_compaction` and `check_context` find nothing the strategy does not document.
fn check_result(
    strategy: &dyn compaction::Strategy,
    ctx: &Context,
    budget: &Budget,
    trigger: Trigger,
    out: &Compacted,
    scene: &Scene,
) -> Result<(), TestCaseError> {
    let allowed = strategy.promises(ctx, budget).documented_deviations;
    let shape = || before_after(ctx, out);
    let unexpected: Vec<_> = check_compaction(strategy, ctx, budget, trigger, out)
        .into_iter()
        .filter(|v| !allowed.contains(&v.kind()))
        .collect();
    prop_assert!(unexpected.is_empty(), "{}: {:?}\n{}", scene.header(), unexpected, shape());
    let structural: Vec<_> = check_context(&out.context).into_iter().filter(|v| !allowed.contains(&v.kind())).collect();
    prop_assert!(structural.is_empty(), "{}: check_context: {:?}\n{}", scene.header(), structural, shape());
    prop_assert_eq!(out.event.messages_before, ctx.len(), "{}: event messages_before", scene.header());
    prop_assert_eq!(out.event.messages_after, out.context.len(), "{}: event messages_after", scene.header());
    prop_assert_eq!(out.event.trigger, trigger, "{}: event trigger", scene.header());
    Ok(())
}

/// Plan for `trigger`, apply with summaries, then with every summary failing; check both.
/// Returns the compacted context when there was a plan.
fn compact(
    strategy: &dyn compaction::Strategy,
    ctx: &Context,
    budget: &Budget,
    trigger: Trigger,
    length: Length,
    scene: &Scene,
) -> Result<Option<Context>, TestCaseError> {
    let Some(plan) = strategy.plan(ctx, budget, trigger) else { return Ok(None) };
    check_plan(&plan, ctx, trigger, scene)?;
    let out = strategy.apply(ctx, budget, &plan, &fulfil(ctx, &plan, length));
    check_result(strategy, ctx, budget, trigger, &out, scene)?;
    if !plan.requests.is_empty() {
        let failed = strategy.apply(ctx, budget, &plan, &fail_all(&plan));
        let fb = Scene { what: &format!("{} (every summary failed)", scene.what), ..*scene };
        check_result(strategy, ctx, budget, trigger, &failed, &fb)?;
        prop_assert!(
            failed.event.fallback.is_some(),
            "{}: summaries failed but the event reports no fallback\n{}",
            fb.header(),
            before_after(ctx, &failed)
        );
    }
    Ok(Some(out.context))
}

/// The proactive path at `budget`: compact when the strategy says so, otherwise a plan must be
/// `None` or a no-op.
fn proactive(
    strategy: &dyn compaction::Strategy,
    ctx: &Context,
    budget: &Budget,
    length: Length,
    scene: &Scene,
) -> Result<Option<Context>, TestCaseError> {
    if strategy.should_compact(ctx, budget) {
        return compact(strategy, ctx, budget, Trigger::Proactive, length, scene);
    }
    if let Some(plan) = strategy.plan(ctx, budget, Trigger::Proactive) {
        check_plan(&plan, ctx, Trigger::Proactive, scene)?;
        let out = strategy.apply(ctx, budget, &plan, &fulfil(ctx, &plan, length));
        prop_assert!(
            out.event.is_noop(),
            "{}: proactive plan below the trigger changed the context\n{}",
            scene.header(),
            before_after(ctx, &out)
        );
    }
    Ok(None)
}

fn check_case(name: &str, case: &Case) -> Result<(), TestCaseError> {
    let config = jittered(name, &case.jitter);
    let strategy = config.build().expect("jittered() only returns configurations that build");
    let strategy = strategy.as_ref();
    let ctx = case.conversation.build();
    let exact = ctx.tokens(&Exact::o200k());
    let budget = Budget::new(((exact as f64 * case.window_fraction) as u64).max(MIN_WINDOW));
    let scene = Scene { config: &config, budget, what: "proactive" };

    let first = proactive(strategy, &ctx, &budget, case.summaries, &scene)?;

    for trigger in [Trigger::Overflow, Trigger::LengthStop] {
        if strategy.reacts_to(trigger) {
            let scene = Scene { what: trigger.as_str(), ..scene };
            compact(strategy, &ctx, &budget, trigger, case.summaries, &scene)?;
        }
    }

    let generous = Budget::new(exact.saturating_mul(8).saturating_add(1_000_000));
    proactive(
        strategy,
        &ctx,
        &generous,
        case.summaries,
        &Scene { budget: generous, what: "generous window", ..scene },
    )?;

    // Compact, append a few turns, compact again: still at most one live summary.
    let base = first.unwrap_or_else(|| ctx.clone());
    let longer = gen::append(&base, &case.more);
    let scene = Scene { what: "second compaction", ..scene };
    let second = proactive(strategy, &longer, &budget, case.summaries, &scene)?;
    let last = second.unwrap_or(longer);
    let allowed = strategy.promises(&last, &budget).documented_deviations;
    if !allowed.contains(&ViolationKind::MultipleSummaries) {
        prop_assert!(last.summaries().count() <= 1, "{}: {} live summaries", scene.header(), last.summaries().count());
    }
    Ok(())
}

fn run(name: &'static str) {
    let mut runner = TestRunner::new(config());
    match runner.run(&arb_case(), |case| check_case(name, &case)) {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => {
            let config = jittered(name, &case.jitter);
            panic!(
                "{name} fails conformance: {reason}\nparams: {}\nminimal case: {case:#?}\ncontext:\n{}",
                config.params_json(),
                testkit::shape::render(&case.conversation.build(), &Exact::o200k())
            )
        }
        Err(TestError::Abort(reason)) => panic!("{name}: conformance run aborted: {reason}"),
    }
}

macro_rules! conformance {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                run($name);
            }
        )*
        /// The strategies with a conformance test above.
        const COVERED: &[&str] = &[$($name),*];
    };
}

conformance! {
    priority_chain => "priority-chain",
    keep_last_n => "keep-last-n",
    cut_point => "cut-point",
    split_fraction => "split-fraction",
    prune_then_summarize => "prune-then-summarize",
    none => "none",
    truncate => "truncate",
    observation_mask => "observation-mask",
}

#[test]
fn every_catalog_strategy_has_a_conformance_test() {
    let mut covered = COVERED.to_vec();
    let mut names = NAMES.to_vec();
    covered.sort_unstable();
    names.sort_unstable();
    assert_eq!(covered, names, "add the new strategy to the conformance! list");
}

#[test]
fn defaults_build_and_jitter_moves_numeric_params() {
    for name in NAMES {
        let defaults = StrategyConfig::default_for(name).expect("defaults");
        assert!(defaults.build().is_ok(), "{name}: defaults do not build");
        // Identity jitter keeps the defaults.
        assert_eq!(jittered(name, &[(1.0, false)]), defaults, "{name}");
        let mut value = serde_json::to_value(&defaults).expect("serializes");
        jitter_value(&mut value, &[(2.0, true)], &mut 0);
        let moved = value != serde_json::to_value(&defaults).expect("serializes");
        let has_params = defaults
            .params_json()
            .as_object()
            .is_some_and(|o| o.values().any(|v| v.is_number() && v.as_f64() != Some(0.0) || v.is_boolean()));
        assert!(moved || !has_params, "{name}: jitter left {} unchanged", defaults.params_json());
    }
}

#[test]
fn jitter_keeps_integers_integral_and_fractions_in_unit_interval() {
    let mut v = serde_json::json!({"name": "x", "n": 10, "f": 0.8, "big": 2.5, "b": true, "s": "keep", "o": {"m": 3}});
    jitter_value(&mut v, &[(2.0, true)], &mut 0);
    assert_eq!(
        v,
        serde_json::json!({"name": "x", "n": 20, "f": 1.0, "big": 5.0, "b": false, "s": "keep", "o": {"m": 6}})
    );
    let mut w = serde_json::json!({"n": 10, "f": 0.8});
    jitter_value(&mut w, &[(0.25, false)], &mut 0);
    assert_eq!(w, serde_json::json!({"n": 3, "f": 0.2}));
}
