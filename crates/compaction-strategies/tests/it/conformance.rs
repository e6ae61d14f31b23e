//! The conformance suite every strategy of the catalog must pass.
//!
//! For each name in [`compaction_strategies::NAMES`], with no per-strategy code: parameters
//! are jittered from the strategy's defaults, driven by the catalog's parameter types
//! ([`compaction_strategies::catalog`], read from the params' JSON schema): numbers scaled by 0.25x..2x
//! (integers kept integral, fractions kept in (0, 1]), booleans flipped, enumerations set to
//! one of their allowed values, optional parameters filled when unset (a nullable number is a
//! fraction in (0, 1], a nullable integer a token count of 1/8 to the whole window) or unset when
//! set; a parameter `build()` rejects goes back to its default. A realistic conversation is
//! generated (sometimes ending with a call round in flight), and the window is set to a random
//! 20%..90% of its exact o200k size (never below [`MIN_WINDOW`]) so that compaction is forced.
//! Then:
//!
//! - when `should_compact`, a proactive plan is fulfilled with offline summaries (short or long)
//!   and applied, and again with every summary failing (the fallback path); `check_compaction`
//!   and `check_context` must find nothing outside the strategy's documented deviations, and
//!   the recent window its document states (computed here from the parameters, independently
//!   of the strategy's code, see [`stated_window`]) must be kept verbatim;
//! - when not, a proactive plan must be `None` or a no-op (also checked at a generous window);
//! - the same proactive checks on the context cut right after its last user message (a user
//!   message has just arrived, where a strategy that checks its trigger once per user message
//!   checks it); a compaction there counts towards the share below too;
//! - the reactive triggers the strategy reacts to (`Overflow`, `LengthStop`) are checked the
//!   same way;
//! - compacting, appending a few turns and compacting again keeps at most one live summary.
//!
//! The suite is not vacuous: for every compacting strategy at least [`MIN_COMPACTING_SHARE`]
//! of the cases compact proactively (or take the failure path); `none` never does.
//!
//! Cases per strategy: 256, or `COMPACTLENS_PROPTEST_CASES` when larger. Failures are
//! persisted in `tests/proptest-regressions/conformance.txt` and replayed first on every run.

use std::cell::Cell;

use compaction::{
    check_compaction, check_context, check_request, Budget, Compacted, Context, Exact, Fallback, Plan, Provider,
    Rejection, Role, Slot, Trigger, ViolationKind,
};
use compaction_strategies::{catalog, ParamInfo, StrategyConfig, NAMES};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestError, TestRunner};
use testkit::gen::{self, ConversationSpec, Turn};
use testkit::shape::before_after;
use testkit::summaries::{fail_all, fulfil, offline_text, Length};

/// No window is smaller than this, whatever the fraction.
const MIN_WINDOW: u64 = 300;
/// How many jitter values a case carries (parameters beyond this reuse them cyclically).
const JITTER: usize = 24;

/// Cases per strategy without `COMPACTLENS_PROPTEST_CASES`, and the least with it.
const MIN_CASES: u32 = 256;
/// The least share of cases in which a compacting strategy must compact proactively.
const MIN_COMPACTING_SHARE: f64 = 0.25;

/// `COMPACTLENS_PROPTEST_CASES` may raise the case count, never lower it.
fn cases_from(var: Option<&str>) -> u32 {
    var.and_then(|v| v.trim().parse::<u32>().ok()).unwrap_or(MIN_CASES).max(MIN_CASES)
}

fn cases() -> u32 {
    cases_from(std::env::var("COMPACTLENS_PROPTEST_CASES").ok().as_deref())
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
    /// Per parameter, in catalog order: a scale factor, whether to flip (a boolean, an
    /// enumeration, whether an optional parameter is set), and which enumeration value to take.
    jitter: Vec<Jitter>,
    /// The window as a fraction of the context's exact o200k size.
    window_fraction: f64,
    summaries: Length,
    /// Turns appended after the first compaction.
    more: Vec<Turn>,
}

fn arb_case() -> impl Strategy<Value = Case> {
    (
        gen::arb_conversation(),
        prop::collection::vec((0.25f64..2.0, any::<bool>(), any::<u8>()), JITTER),
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

/// One parameter's jitter: scale, flip, pick.
type Jitter = (f64, bool, u8);

/// A number scaled by `f`: integers stay integral, fractions in (0, 1] stay there.
fn scale_number(value: &serde_json::Value, f: f64) -> serde_json::Value {
    use serde_json::Value;
    const EXACT: u64 = 1 << 53;
    let Value::Number(n) = value else { return value.clone() };
    if let Some(u) = n.as_u64() {
        if u < EXACT {
            return Value::from((u as f64 * f).round() as u64);
        }
    } else if let Some(i) = n.as_i64() {
        if i.unsigned_abs() < EXACT {
            return Value::from((i as f64 * f).round() as i64);
        }
    } else if let Some(x) = n.as_f64() {
        let y = if x > 0.0 && x <= 1.0 { (x * f).clamp(1e-3, 1.0) } else { x * f };
        if let Some(num) = serde_json::Number::from_f64(y) {
            return Value::Number(num);
        }
    }
    value.clone()
}

/// `value` of parameter `param` jittered by `(f, flip, pick)`, at context window `window`.
fn jitter_param(
    param: &ParamInfo,
    value: &serde_json::Value,
    (f, flip, pick): Jitter,
    window: u64,
) -> serde_json::Value {
    use serde_json::Value;
    if !param.allowed.is_empty() {
        return match flip {
            true => Value::from(param.allowed[pick as usize % param.allowed.len()].clone()),
            false => value.clone(),
        };
    }
    match (param.ty.as_str(), value) {
        ("boolean", Value::Bool(b)) => Value::Bool(*b != flip),
        ("integer" | "number", _) => scale_number(value, f),
        // An unset option, filled: a nullable number is a ratio, a nullable integer a token count.
        ("number|null", Value::Null) if flip => Value::from((f / 2.0).clamp(1e-3, 1.0)),
        ("integer|null", Value::Null) if flip => Value::from(((window as f64 * f / 2.0).round() as u64).max(1)),
        ("number|null" | "integer|null", v) if !v.is_null() && flip => Value::Null,
        ("number|null" | "integer|null", v) => scale_number(v, f),
        _ => value.clone(),
    }
}

/// The catalog's parameters of `name`.
fn params_of(name: &str) -> Vec<ParamInfo> {
    catalog().into_iter().find(|s| s.name == name).map(|s| s.params).unwrap_or_default()
}

/// The strategy's defaults with `jitter` applied (one entry per catalog parameter, reused
/// cyclically). A parameter `build()` rejects (its [`compaction::ParamError`] names it) goes back
/// to its default and the rest is kept; when the params do not deserialize, or still do not
/// build, the defaults are returned.
fn jittered(name: &str, jitter: &[Jitter], window: u64) -> StrategyConfig {
    let defaults = StrategyConfig::default_for(name).expect("every catalog name has defaults");
    let serde_json::Value::Object(original) = defaults.params_json() else { return defaults };
    let mut params = original.clone();
    let catalog = params_of(name);
    for (k, param) in catalog.iter().enumerate() {
        let j = jitter.get(k % jitter.len().max(1)).copied().unwrap_or((1.0, false, 0));
        if let Some(v) = params.get_mut(&param.name) {
            *v = jitter_param(param, v, j, window);
        }
    }
    params.insert("name".into(), name.into());
    for _ in 0..=catalog.len() {
        let Ok(config) = serde_json::from_value::<StrategyConfig>(serde_json::Value::Object(params.clone())) else {
            return defaults;
        };
        match config.build() {
            Ok(_) => return config,
            Err(e) => match original.get(e.param) {
                Some(default) if params.get(e.param) != Some(default) => {
                    params.insert(e.param.to_string(), default.clone());
                }
                _ => return defaults,
            },
        }
    }
    defaults
}

/// A parameter of `config` as a number (0 when unset).
fn param_u64(config: &StrategyConfig, name: &str) -> u64 {
    config.params_json().get(name).and_then(|v| v.as_f64()).map_or(0, |x| x.max(0.0) as u64)
}

/// The trailing entries of `ctx` that the strategy's document says are kept verbatim, computed
/// from the parameters alone (not from the strategy's code); 0 where the document states none.
///
/// - `keep-last-n` (001): the `recentMessagesToKeep` newest messages, at most all but message 0;
/// - `split-fraction` (003): `floor(body x preserve_percent / 100)` messages of the body (the
///   messages after the system prompt);
/// - `prune-then-summarize` (004): the last `min_turns_to_keep` turns ("keep the last 2 turns";
///   a turn starts at a user message), none claimed when there are fewer;
/// - `observation-mask`: the `keep_last` newest tool outputs and everything after them.
fn stated_window(config: &StrategyConfig, ctx: &Context) -> usize {
    let len = ctx.len();
    let entries = ctx.entries();
    match config.name() {
        "keep-last-n" => (param_u64(config, "recent_messages_to_keep") as usize).min(len.saturating_sub(1)),
        "split-fraction" => {
            let body = len - usize::from(ctx.system_prompt().is_some());
            body * param_u64(config, "preserve_percent") as usize / 100
        }
        "prune-then-summarize" => {
            let turns = param_u64(config, "min_turns_to_keep") as usize;
            if turns == 0 {
                return 0;
            }
            let users: Vec<usize> = (0..len).rev().filter(|&i| entries[i].role() == Role::User).collect();
            users.get(turns - 1).map_or(0, |&start| len - start)
        }
        "observation-mask" => {
            let keep = param_u64(config, "keep_last") as usize;
            let tools: Vec<usize> = (0..len).rev().filter(|&i| entries[i].role() == Role::Tool).collect();
            match tools.get(keep) {
                Some(&first_masked) => len - first_masked - 1,
                None => len,
            }
        }
        _ => 0,
    }
}

/// How many trailing entries of `before` end `after` unchanged (message and origin).
fn verbatim_tail(before: &Context, after: &Context) -> usize {
    before
        .entries()
        .iter()
        .rev()
        .zip(after.entries().iter().rev())
        .take_while(|(x, y)| x.message() == y.message() && x.origin() == y.origin())
        .count()
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
    let name = scene.config.name();
    for r in &plan.requests {
        prop_assert!(r.span.iter().all(|i| *i < ctx.len()), "{}: request span {:?} outside", scene.header(), r.span);
        // A strategy asks only for its own prompts, each listed by its module's `prompts()`.
        let listed = compaction_strategies::prompts()
            .into_iter()
            .any(|(owner, p)| owner == name && p.name == r.prompt.name && p.template == r.prompt.template);
        prop_assert!(
            listed,
            "{}: asks for prompt {}, which its module's prompts() does not list",
            scene.header(),
            r.prompt.name
        );
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
    // What a provider refuses: no rule of either provider newly broken, beyond those the
    // strategy's document breaks as written (declared in `documented_rejections`).
    let documented = strategy.profile().documented_rejections;
    for provider in Provider::ALL {
        let key = |r: &Rejection| (r.rule, r.call_id.clone());
        let known: Vec<_> = check_request(ctx, provider).iter().map(key).collect();
        let refused: Vec<Rejection> = check_request(&out.context, provider)
            .into_iter()
            .filter(|r| !known.contains(&key(r)) && !documented.contains(&(provider, r.rule)))
            .collect();
        prop_assert!(refused.is_empty(), "{}: {provider} refuses: {:?}\n{}", scene.header(), refused, shape());
    }
    if !allowed.contains(&ViolationKind::RecentWindowNotVerbatim) {
        let stated = stated_window(scene.config, ctx).min(ctx.len());
        let promised = strategy.promises(ctx, budget).recent_window;
        prop_assert!(
            promised >= stated,
            "{}: promises a recent window of {promised}, its document states {stated}",
            scene.header()
        );
        let kept = verbatim_tail(ctx, &out.context);
        prop_assert!(
            kept >= stated,
            "{}: only the last {kept} entries kept verbatim, the document states {stated}\n{}",
            scene.header(),
            shape()
        );
    }
    prop_assert_eq!(out.event.messages_before, ctx.len(), "{}: event messages_before", scene.header());
    prop_assert_eq!(out.event.messages_after, out.context.len(), "{}: event messages_after", scene.header());
    prop_assert_eq!(out.event.trigger, trigger, "{}: event trigger", scene.header());
    Ok(())
}

/// A compaction that happened: the new context, and whether it changed anything or took the
/// failure path.
struct Done {
    context: Context,
    compacted: bool,
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
) -> Result<Option<Done>, TestCaseError> {
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
    let compacted = !out.event.is_noop() || out.event.fallback.is_some() || !plan.requests.is_empty();
    Ok(Some(Done { context: out.context, compacted }))
}

/// The proactive path at `budget`: compact when the strategy says so. Below its trigger the
/// driver never asks for a plan, and says so.
fn proactive(
    strategy: &dyn compaction::Strategy,
    ctx: &Context,
    budget: &Budget,
    length: Length,
    scene: &Scene,
) -> Result<Option<Done>, TestCaseError> {
    if strategy.should_compact(ctx, budget) {
        return compact(strategy, ctx, budget, Trigger::Proactive, length, scene);
    }
    let step = compaction::compact(strategy, ctx, budget, Trigger::Proactive, |c, requests| {
        compaction::Summaries::of(requests.iter().map(|r| Ok(offline_text(c, r, length))).collect())
    });
    prop_assert!(step.is_none(), "{}: the driver compacted below the proactive trigger", scene.header());
    Ok(None)
}

/// The case's context and window.
fn setting(case: &Case) -> (Context, u64, Budget) {
    let ctx = case.conversation.build();
    let exact = ctx.tokens(&Exact::o200k());
    let budget = Budget::new(((exact as f64 * case.window_fraction) as u64).max(MIN_WINDOW));
    (ctx, exact, budget)
}

/// Check one case; returns whether the proactive compaction at the case's window compacted.
fn check_case(name: &str, case: &Case) -> Result<bool, TestCaseError> {
    let (ctx, exact, budget) = setting(case);
    let config = jittered(name, &case.jitter, budget.context_window);
    let strategy = config.build().expect("jittered() only returns configurations that build");
    let strategy = strategy.as_ref();
    let scene = Scene { config: &config, budget, what: "proactive" };

    let first = proactive(strategy, &ctx, &budget, case.summaries, &scene)?;
    // A user message has just arrived: the context up to the last user message, where a
    // strategy that checks its trigger once per user message (Goose's `Agent::reply`) checks it.
    let at_user = match last_user_prefix(&ctx) {
        Some(prefix) => {
            let scene = Scene { what: "proactive at a user message", ..scene };
            proactive(strategy, &prefix, &budget, case.summaries, &scene)?.is_some_and(|d| d.compacted)
        }
        None => false,
    };

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
    let compacted = first.as_ref().is_some_and(|d| d.compacted) || at_user;
    let base = first.map_or_else(|| ctx.clone(), |d| d.context);
    let longer = gen::append(&base, &case.more);
    let scene = Scene { what: "second compaction", ..scene };
    let second = proactive(strategy, &longer, &budget, case.summaries, &scene)?;
    let last = second.map_or(longer, |d| d.context);
    let allowed = strategy.promises(&last, &budget).documented_deviations;
    if !allowed.contains(&ViolationKind::MultipleSummaries) {
        prop_assert!(last.summaries().count() <= 1, "{}: {} live summaries", scene.header(), last.summaries().count());
    }
    Ok(compacted)
}

/// The context up to and including its last user message, when one follows the first entry.
fn last_user_prefix(ctx: &Context) -> Option<Context> {
    let last = ctx.entries().iter().rposition(|e| e.role() == Role::User).filter(|&i| i > 0)?;
    (last + 1 < ctx.len()).then(|| Context::from_entries(ctx.entries()[..=last].to_vec()))
}

fn run(name: &'static str) {
    let mut runner = TestRunner::new(config());
    let (total, compacted) = (Cell::new(0usize), Cell::new(0usize));
    let result = runner.run(&arb_case(), |case| {
        let did = check_case(name, &case)?;
        total.set(total.get() + 1);
        compacted.set(compacted.get() + usize::from(did));
        Ok(())
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => {
            let (ctx, _, budget) = setting(&case);
            let config = jittered(name, &case.jitter, budget.context_window);
            panic!(
                "{name} fails conformance: {reason}\nparams: {}\nminimal case: {case:#?}\ncontext:\n{}",
                config.params_json(),
                testkit::shape::render(&ctx, &Exact::o200k())
            )
        }
        Err(TestError::Abort(reason)) => panic!("{name}: conformance run aborted: {reason}"),
    }
    // Not vacuous: the compacting strategies really compact in a fair share of the cases.
    let (total, compacted) = (total.get(), compacted.get());
    if name == "none" {
        assert_eq!(compacted, 0, "none compacted in {compacted} of {total} cases");
    } else {
        let share = compacted as f64 / total.max(1) as f64;
        assert!(
            share >= MIN_COMPACTING_SHARE,
            "{name} compacted proactively in only {compacted} of {total} cases ({:.0}%)",
            share * 100.0
        );
    }
}

/// One conformance test per strategy of the catalog (its rows, [`compaction_strategies::catalog_rows`]),
/// named after the strategy's module: a new row is covered with no line here.
macro_rules! conformance {
    (
        seed { $( $sv:ident => $sn:literal, $sm:ident :: $st:ident, $ss:literal; )* }
        baseline { $( $bv:ident => $bn:literal, $bm:ident :: $bt:ident; )* }
        production { $( $pv:ident => $pn:literal, $pm:ident :: $pt:ident, $ps:literal; )* }
        reference { $( $rest:tt )* }
    ) => {
        $( #[test] fn $sm() { run($sn); } )*
        $( #[test] fn $bm() { run($bn); } )*
        $( #[test] fn $pm() { run($pn); } )*
    };
}

compaction_strategies::catalog_rows!(conformance);

#[test]
fn defaults_build_and_identity_jitter_keeps_them() {
    for name in NAMES {
        let defaults = StrategyConfig::default_for(name).expect("defaults");
        assert!(defaults.build().is_ok(), "{name}: defaults do not build");
        assert_eq!(jittered(name, &[(1.0, false, 0)], 100_000), defaults, "{name}");
        assert_eq!(jittered(name, &[(1.0, false, 7)], 100_000), defaults, "{name}");
    }
}

/// Every parameter but free text is varied by some jitter, alone, into a configuration that
/// builds: numbers, booleans, enumerations, and optional parameters unset by default.
#[test]
fn jitter_varies_every_parameter() {
    let window = 100_000;
    for name in NAMES {
        let defaults = StrategyConfig::default_for(name).expect("defaults").params_json();
        let params = params_of(name);
        for (k, param) in params.iter().enumerate() {
            if param.ty == "string" && param.allowed.is_empty() {
                continue;
            }
            let mut seen = std::collections::BTreeSet::new();
            for f in [0.25, 0.5, 0.9, 1.5, 2.0] {
                for flip in [false, true] {
                    for pick in 0..4u8 {
                        let mut jitter = vec![(1.0, false, 0); params.len()];
                        jitter[k] = (f, flip, pick);
                        let got = jittered(name, &jitter, window).params_json();
                        seen.insert(got[&param.name].to_string());
                    }
                }
            }
            seen.remove(&defaults[&param.name].to_string());
            assert!(!seen.is_empty(), "{name}.{}: jitter never moves it from {}", param.name, defaults[&param.name]);
            if !param.allowed.is_empty() {
                // Every other allowed value is reached.
                assert_eq!(seen.len(), param.allowed.len() - 1, "{name}.{}: {seen:?}", param.name);
            }
            if param.ty.ends_with("|null") && defaults[&param.name].is_null() {
                assert!(seen.iter().all(|v| v != "null"), "{name}.{}", param.name);
            }
        }
    }
}

#[test]
fn jitter_keeps_integers_integral_and_fractions_in_unit_interval() {
    let info = |ty: &str| ParamInfo {
        name: "p".into(),
        ty: ty.into(),
        allowed: Vec::new(),
        default: serde_json::Value::Null,
        meaning: String::new(),
    };
    let j = |v: serde_json::Value, ty: &str, jit: Jitter| jitter_param(&info(ty), &v, jit, 10_000);
    use serde_json::json;
    assert_eq!(j(json!(10), "integer", (2.0, true, 0)), json!(20));
    assert_eq!(j(json!(10), "integer", (0.25, false, 0)), json!(3));
    assert_eq!(j(json!(0.8), "number", (2.0, true, 0)), json!(1.0));
    assert_eq!(j(json!(0.8), "number", (0.25, false, 0)), json!(0.2));
    assert_eq!(j(json!(2.5), "number", (2.0, false, 0)), json!(5.0));
    assert_eq!(j(json!(true), "boolean", (2.0, true, 0)), json!(false));
    assert_eq!(j(json!(true), "boolean", (2.0, false, 0)), json!(true));
    assert_eq!(j(json!("keep"), "string", (2.0, true, 3)), json!("keep"));
    // Optional parameters: filled when unset (a ratio, or a share of the window), unset when set.
    assert_eq!(j(json!(null), "number|null", (1.5, true, 0)), json!(0.75));
    assert_eq!(j(json!(null), "number|null", (1.5, false, 0)), json!(null));
    assert_eq!(j(json!(null), "integer|null", (0.5, true, 0)), json!(2_500));
    assert_eq!(j(json!(400), "integer|null", (0.5, false, 0)), json!(200));
    assert_eq!(j(json!(400), "integer|null", (0.5, true, 0)), json!(null));
    // Enumerations take one of their values when flipped.
    let e = ParamInfo { allowed: vec!["a".into(), "b".into(), "c".into()], ..info("string") };
    assert_eq!(jitter_param(&e, &json!("a"), (1.0, true, 5), 10), json!("c"));
    assert_eq!(jitter_param(&e, &json!("a"), (1.0, false, 5), 10), json!("a"));
}

#[test]
fn the_case_count_can_only_be_raised() {
    assert_eq!(cases_from(None), 256);
    assert_eq!(cases_from(Some("16")), 256);
    assert_eq!(cases_from(Some("not a number")), 256);
    assert_eq!(cases_from(Some(" 1000 ")), 1_000);
}

#[test]
fn stated_windows_follow_the_parameters() {
    // 0 system, 1 user, 2 assistant calling, 3 result, 4 user, 5 assistant calling, 6 result,
    // 7 assistant, 8 user, 9 assistant.
    let ctx = testkit::builder::ContextBuilder::new()
        .system("s")
        .user("a")
        .tool_call("read", "{}", "x")
        .user("b")
        .tool_call("read", "{}", "y")
        .assistant("c")
        .user("d")
        .assistant("e")
        .build();
    assert_eq!(ctx.len(), 10);
    let with = |name: &str, params: serde_json::Value| {
        let mut v = params;
        v["name"] = name.into();
        serde_json::from_value::<StrategyConfig>(v).expect("valid config")
    };
    use serde_json::json;
    assert_eq!(stated_window(&with("keep-last-n", json!({"recent_messages_to_keep": 4})), &ctx), 4);
    assert_eq!(stated_window(&with("keep-last-n", json!({"recent_messages_to_keep": 40})), &ctx), 9);
    assert_eq!(stated_window(&with("split-fraction", json!({"preserve_percent": 30})), &ctx), 2);
    // 004, "keep the last 2 turns": both whole turns (user 4 on), not half of them.
    assert_eq!(stated_window(&with("prune-then-summarize", json!({"min_turns_to_keep": 2})), &ctx), 6);
    assert_eq!(stated_window(&with("prune-then-summarize", json!({"min_turns_to_keep": 3})), &ctx), 9);
    assert_eq!(stated_window(&with("prune-then-summarize", json!({"min_turns_to_keep": 1})), &ctx), 2);
    assert_eq!(stated_window(&with("prune-then-summarize", json!({"min_turns_to_keep": 4})), &ctx), 0);
    assert_eq!(stated_window(&with("observation-mask", json!({"keep_last": 1})), &ctx), 6);
    assert_eq!(stated_window(&with("observation-mask", json!({"keep_last": 2})), &ctx), 10);
    assert_eq!(stated_window(&with("cut-point", json!({})), &ctx), 0);
}
