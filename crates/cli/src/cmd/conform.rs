//! `compactlens conform --config FILE [--cases N] [--seed S] [--out DIR]`: every strategy the
//! experiment names, external ones included, through generated conversations, every
//! compaction checked.
//!
//! The conversations are the conformance suite's (`testkit::gen`: parallel tool calls, calls
//! in flight at the end, huge tool outputs, previous summaries, unicode, from a few messages to
//! a few hundred), each replayed at a window of 20% to 90% of its own size with the offline
//! summarizer, so every strategy compacts. A strategy fails when a compaction leaves a tool
//! result without its call or a call without its result, when either provider would refuse a
//! request for a rule the strategy's document does not break on purpose (Anthropic's included:
//! the thinking blocks of a running tool loop's latest assistant message lost or changed, on the
//! generated conversations recorded with extended thinking), or when an external
//! program fails. The failing case is shrunk (fewer turns, shorter texts) and the smallest one
//! is written as a dataset line (`context_window` set to the failing window) that `run`
//! replays. Exit code 1 when any strategy fails, 2 for a bad experiment.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use compaction::{Context, Conversation, Exact, TokenCounter};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use runlog::experiment::Experiment;
use runlog::settings::{CacheProfile, OverflowPolicy};
use runner::judge::OfflineJudge;
use runner::replay::{replay_built, ReplayError, ReplaySettings};
use runner::session::Compactor;
use runner::summarize::offline::OfflineSummarizer;

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment whose strategies are checked (its datasets and windows are not used).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Generated conversations per strategy.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    cases: u32,
    /// The generator's seed: the same seed, the same conversations.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Where the smallest failing conversation of each failing strategy is written.
    #[arg(long, value_name = "DIR", default_value = "conform-failures")]
    out: PathBuf,
}

/// What one case showed.
struct Checked {
    compactions: u64,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let experiment =
        match Experiment::load_with_env(&args.config, &|name| std::env::var(name).ok(), &runner::catalog::Catalog) {
            Ok(e) => e,
            Err(e) => {
                tell!("error: {e}");
                return Ok(exit::USAGE);
            }
        };
    let built = runner::run::build_strategies(&experiment);
    // One check per strategy as configured; the experiment's windows are not the point here.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut failed = 0usize;
    for (config, b) in experiment.configurations.iter().zip(&built) {
        let key = format!("{}\u{1f}{}", config.strategy, config.params);
        if !seen.insert(key) {
            continue;
        }
        let compactor = match b.compactor() {
            Ok(c) => c,
            Err(e) => {
                say!("FAIL {}: does not build: {e}", config.strategy);
                failed += 1;
                continue;
            }
        };
        let settings = ReplaySettings {
            strategy: b.config.clone(),
            window: 0,
            encoding: experiment.tokenizer,
            cache: CacheProfile::None,
            price: None,
            overflow: OverflowPolicy::Continue,
        };
        let mut rng_seed = [0u8; 32];
        rng_seed[..8].copy_from_slice(&args.seed.to_le_bytes());
        let mut runner = TestRunner::new_with_rng(
            Config { cases: args.cases, failure_persistence: None, max_shrink_iters: 1_024, ..Config::default() },
            TestRng::from_seed(RngAlgorithm::ChaCha, &rng_seed),
        );
        let exact = Exact::new(experiment.tokenizer);
        let compactions = std::cell::Cell::new(0u64);
        let cases = (testkit::gen::arb_conversation(), 0.2f64..0.9);
        let result = runner.run(&cases, |(spec, fraction)| {
            let (conversation, window) = case(&spec.build(), fraction, &exact);
            let checked = check(compactor, &conversation, ReplaySettings { window, ..settings.clone() })
                .map_err(TestCaseError::fail)?;
            compactions.set(compactions.get() + checked.compactions);
            Ok(())
        });
        match result {
            Ok(()) if compactions.get() == 0 => {
                say!(
                    "ok   {}: {} conversations, but it never compacted: nothing was checked",
                    config.strategy,
                    args.cases
                );
            }
            Ok(()) => say!(
                "ok   {}: {} conversations, {} compactions checked",
                config.strategy,
                args.cases,
                compactions.get()
            ),
            Err(TestError::Fail(reason, (spec, fraction))) => {
                failed += 1;
                let (mut conversation, window) = case(&spec.build(), fraction, &exact);
                conversation.id = format!("conform-{}", config.strategy);
                conversation.context_window = Some(window);
                fs::create_dir_all(&args.out)?;
                let path = args.out.join(format!("{}.jsonl", config.strategy));
                fs::write(&path, format!("{}\n", serde_json::to_string(&conversation)?))?;
                say!("FAIL {}: {reason}", config.strategy);
                say!(
                    "     smallest failing conversation: {} messages at a {window}-token window, written to {}",
                    conversation.messages.len(),
                    path.display()
                );
                if !dataset::check_conversation(&conversation).is_empty() {
                    // The generator's texts may be empty, which `validate` rejects.
                    say!("     (it breaks a dataset rule the generator allows: replay it with `run --allow-invalid`)");
                }
            }
            Err(TestError::Abort(why)) => {
                failed += 1;
                say!("FAIL {}: the generator gave up: {why}", config.strategy);
            }
        }
    }
    Ok(if failed > 0 { exit::FAILED } else { exit::OK })
}

/// The conversation of a generated context, and its window.
fn case(ctx: &Context, fraction: f64, exact: &Exact) -> (Conversation, u64) {
    let size = ctx.tokens(exact as &dyn TokenCounter);
    let window = ((size as f64 * fraction) as u64).max(64);
    (Conversation::new("conform", ctx.messages().cloned().collect()), window)
}

/// Replay one case and say what it broke.
fn check(compactor: Compactor<'_>, conversation: &Conversation, settings: ReplaySettings) -> Result<Checked, String> {
    let strategy = compactor.strategy();
    let m = match replay_built(conversation, compactor, &settings, &OfflineSummarizer::new(), &OfflineJudge) {
        Ok(m) => m,
        Err(ReplayError::Strategy(e)) => return Err(e),
        Err(e) => return Err(format!("the replay failed: {e}")),
    };
    for kind in ["orphan_tool_result", "unanswered_tool_call"] {
        if m.violations_by_kind.get(kind).is_some_and(|n| *n > 0) {
            let event = m.compaction_events.iter().find(|e| e.violations.iter().any(|v| v.starts_with(kind)));
            let at = match event {
                Some(e) => format!("the compaction at call {}: {}", e.call, e.violations.join("; ")),
                None => "a compaction".to_string(),
            };
            return Err(format!("rule {kind} broken by {at}"));
        }
    }
    let allowed: Vec<String> =
        strategy.profile().documented_rejections.iter().map(|(p, r)| format!("{p}/{r}")).collect();
    let refused: Vec<&String> = m.rejections_by_rule.keys().filter(|k| !allowed.contains(k)).collect();
    if !refused.is_empty() {
        let at = match &m.first_rule_rejection {
            Some((call, rules)) if rules.iter().any(|r| refused.contains(&r)) => format!("call {call}"),
            _ => "a call".to_string(),
        };
        let rules: Vec<&str> = refused.iter().map(|s| s.as_str()).collect();
        return Err(format!("a provider refuses the request at {at}: {}", rules.join(", ")));
    }
    Ok(Checked { compactions: m.compactions })
}
