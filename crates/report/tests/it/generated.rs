//! A generated run the size of a real comparison: 36 configurations (12 strategies at 16k,
//! 32k and 128k) over 120 conversations in 8 datasets, summaries written by the stand-in. The
//! records are built in memory with the shapes real runs have (long sawtooth timelines,
//! compactions with multi-kilobyte summaries, a dozen tiered probes per conversation with
//! lost facts and the judge's evidence), so the report is rendered from a run as large as the
//! one issue readers hit, without replaying 4,320 pairs in a test.
//!
//! The report of such a run must stay under its size bound, [`report::html::MAX_REPORT_BYTES`].

use std::path::{Path, PathBuf};

use compaction::{ProbeKind, Tier, Trigger};
use runlog::experiment::Experiment;
use runlog::log::{Counts, Manifest, RunData, Timings, MANIFEST_FORMAT};
use runlog::record::{
    CallPoint, CompactionRecord, Evidence, FoundIn, PairMetrics, PairOutcome, PairRecord, ProbeScore,
};

pub const NAME: &str = "generated-36x120";
pub const CONVERSATIONS: usize = 120;
pub const DATASETS: usize = 8;

const STRATEGIES: [&str; 12] = [
    "priority-chain",
    "keep-last-n",
    "cut-point",
    "split-fraction",
    "none",
    "truncate",
    "observation-mask",
    "opencode",
    "codex",
    "goose",
    "openhands",
    "anthropic-compaction",
];

/// Strategies whose compactions insert a summary.
const SUMMARIZING: [&str; 7] =
    ["priority-chain", "cut-point", "split-fraction", "opencode", "codex", "goose", "openhands"];

fn experiment() -> Experiment {
    let mut toml = format!(
        "name = \"{NAME}\"\ndatasets = [{}]\nwindows = [16000, 32000, 128000]\nseed = 3\n\
         price = {{ input = 2.0, cached_input = 0.5, output = 8.0 }}\n",
        (0..DATASETS).map(|d| format!("\"set-{d}.jsonl\"")).collect::<Vec<_>>().join(", ")
    );
    for s in STRATEGIES {
        toml.push_str(&format!("\n[[strategy]]\nname = \"{s}\"\n"));
    }
    Experiment::parse(&toml, Path::new("experiments/generated.toml"), &runner::catalog::Catalog)
        .expect("a valid experiment")
}

/// A deterministic spread of small numbers.
fn mix(a: usize, b: usize, c: usize) -> usize {
    let mut x =
        (a as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (b as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ c as u64;
    x ^= x >> 29;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 32)) as usize
}

/// A summary as the stand-in writes one: sections of status lines, files, errors, next step.
fn summary(conversation: usize, call: u32) -> String {
    let mut s =
        format!("## Task\nFix the failing import in conversation {conversation}, then run the tests.\n## Status\n");
    for k in 0..12 {
        s.push_str(&format!("- step {k}: edited src/module_{k}.rs (call {call}); tests pass for module_{k}\n"));
    }
    s.push_str("## Files\n");
    for k in 0..20 {
        s.push_str(&format!("- src/module_{k}.rs: renamed parse_item_{k} to read_item_{k}\n"));
    }
    s.push_str("## Errors and fixes\n- ImportError: cannot import name 'read_item' -> fixed the re-export\n");
    s.push_str("## Next step\nRun the full test suite and commit.\n");
    s
}

fn metrics(conversation: usize, strategy: &str, window: u64) -> PairMetrics {
    let calls = 60 + mix(conversation, 1, 0) % 400;
    let base = 3_000 + (mix(conversation, 2, 0) % 4_000) as u64;
    let growth = 150 + (mix(conversation, 3, 0) % 600) as u64;
    let never = strategy == "none";
    let trigger = window * 8 / 10;
    let mut timeline = Vec::with_capacity(calls);
    let mut events = Vec::new();
    let mut tokens = base;
    for call in 0..calls as u32 {
        if !never && tokens > trigger {
            let after = base + tokens / 5;
            events.push(CompactionRecord {
                call,
                trigger: Trigger::Proactive,
                step: if SUMMARIZING.contains(&strategy) { "summarize".into() } else { "mask".into() },
                tokens_before: tokens,
                tokens_after: after,
                estimate_before: tokens * 98 / 100,
                estimate_after: after * 98 / 100,
                messages_before: call as usize * 2,
                messages_after: 8,
                removed: call as usize * 2 - 8,
                masked: 0,
                round: Some(events.len() as u32 + 1),
                fallback: None,
                shortfall: None,
                summary: if SUMMARIZING.contains(&strategy) { summary(conversation, call) } else { String::new() },
                violations: vec![],
                next_action: None,
                agreement: None,
            });
            tokens = after;
        }
        timeline.push(CallPoint {
            call,
            message_index: call as usize * 2 + 1,
            request_tokens: tokens,
            estimate: tokens * 98 / 100,
            cached_tokens: tokens / 2,
            compacted: events.last().is_some_and(|e| e.call == call),
            overflow: tokens > window,
            check_tokens: tokens,
            check_estimate: tokens * 98 / 100,
        });
        tokens += growth + (mix(conversation, call as usize, 4) % 200) as u64;
    }
    let compacted = !events.is_empty();
    let overflows = timeline.iter().filter(|p| p.overflow).count() as u64;
    let probes: Vec<ProbeScore> = (0..12)
        .map(|p| {
            let facts: Vec<FoundIn> = (0..2)
                .map(|f| {
                    let lost = compacted && mix(conversation, p * 2 + f, strategy.len()).is_multiple_of(3);
                    if lost {
                        FoundIn::Lost
                    } else if compacted {
                        FoundIn::Summary
                    } else {
                        FoundIn::Verbatim
                    }
                })
                .collect();
            let kept = facts.iter().filter(|f| **f != FoundIn::Lost).count();
            ProbeScore {
                probe_id: format!("probe-{p:02}"),
                kind: ProbeKind::CLASSIC[p % ProbeKind::CLASSIC.len()],
                tier: Some([Tier::Critical, Tier::Useful, Tier::Detail][p % 3]),
                asked_at: calls * 2,
                written: false,
                checkpoint: 100,
                at_risk: compacted,
                score: kept as f64 / 2.0,
                evidence: facts
                    .iter()
                    .enumerate()
                    .map(|(f, found)| {
                        (*found != FoundIn::Lost).then(|| Evidence {
                            alias: format!("fact-{p}-{f}"),
                            entry: 3,
                            message: Some(p * 4),
                            start: 10,
                            end: 20,
                        })
                    })
                    .collect(),
                facts,
                judge: "offline".into(),
                llm: None,
                if_sent: None,
                verdict: Default::default(),
            }
        })
        .collect();
    let retention = probes.iter().map(|p| p.score).sum::<f64>() / probes.len() as f64;
    let input: u64 = timeline.iter().map(|p| p.request_tokens).sum();
    PairMetrics {
        calls: calls as u64,
        compactions: events.len() as u64,
        overflows,
        peak_tokens: timeline.iter().map(|p| p.request_tokens).max().unwrap_or(0),
        input_tokens: input,
        cached_tokens: input / 2,
        uncompacted_input_tokens: input + events.len() as u64 * 10_000,
        output_tokens: calls as u64 * 300,
        thresholds: if never { vec![] } else { vec![("trigger".into(), trigger)] },
        cost_usd: Some(input as f64 * 1.5e-6),
        retention: Some(retention),
        retention_if_sent: Some(retention),
        at_risk_retention: compacted.then_some(retention),
        first_rejected_call: timeline.iter().find(|p| p.overflow).map(|p| p.call),
        compaction_events: events,
        timeline,
        probes,
        ..PairMetrics::default()
    }
}

/// The generated run in memory.
pub fn run() -> RunData {
    let experiment = experiment();
    assert_eq!(experiment.configurations.len(), 36);
    let mut records = Vec::with_capacity(36 * CONVERSATIONS);
    for i in 0..CONVERSATIONS {
        for c in &experiment.configurations {
            let window = c.window.expect("a window");
            records.push(PairRecord {
                content_hash: None,
                failure: None,
                conversation_id: format!("session-{i:03}-{:08x}", mix(i, 9, 9) as u32),
                dataset: format!("set-{}.jsonl", i % DATASETS),
                config_id: c.config_id.clone(),
                strategy: c.strategy.clone(),
                params: c.params.clone(),
                window,
                judge: "offline".into(),
                outcome: PairOutcome::Ok(Box::new(metrics(i, &c.strategy, window))),
            });
        }
    }
    let pairs = records.len();
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        experiment_id: format!("{NAME}-00000000"),
        experiment,
        probes: Vec::new(),
        versions: Default::default(),
        tool_version: "0.0.0-test".into(),
        git_commit: None,
        started_at: "2025-01-01T00:00:00Z".into(),
        seed: 3,
        tokenizer: compaction::Encoding::O200kBase,
        cache: runlog::settings::CacheProfile::None,
        target_provider: None,
        refusals: runlog::settings::CacheProfile::None.refusals(),
        summarizer: "offline".into(),
        judge: "offline".into(),
        stand_in_summary: true,
        shard: None,
        merged_from: Vec::new(),
        jobs: None,
        conversations: CONVERSATIONS,
        counts: Counts { pairs_total: pairs, pairs_planned: pairs, ok: pairs, ..Counts::default() },
        timings: Timings::default(),
        dataset_problems: Vec::new(),
        complete: true,
        llm: None,
        stopped: None,
        external: Vec::new(),
    };
    RunData { manifest, records }
}

/// The generated run's report.html written into `root/run`.
pub fn run_folder(root: &Path) -> (PathBuf, RunData) {
    let data = run();
    let dir = root.join("run");
    std::fs::create_dir_all(&dir).expect("run folder");
    report::html::write_report_for(&dir, &data, compaction_strategies::family).expect("report.html");
    (dir, data)
}

#[test]
fn the_report_of_36_configurations_by_120_conversations_stays_under_its_bound() {
    let data = run();
    let html = report::html::render(&data, &report::html::ProbeTexts::default(), compaction_strategies::family);
    assert!(
        html.len() < report::html::MAX_REPORT_BYTES,
        "report.html is {} bytes, over its bound of {}",
        html.len(),
        report::html::MAX_REPORT_BYTES
    );
    assert!(html.len() < 4_000_000, "under 4 MB: {} bytes", html.len());
    // What did not fit is named, and what fit is there: the page does not drop detail silently.
    let embedded = html.matches("<details class=\"events\" data-detail=").count();
    assert!(embedded > 0, "some conversations' events are embedded");
    if embedded < CONVERSATIONS {
        assert!(html.contains(&format!("Embedded: {embedded} of {CONVERSATIONS} conversations, taken in turn")));
        // Every dataset keeps some of its conversations.
        for d in 0..DATASETS {
            let events = format!("data-of=\"set-{d}.jsonl\"><summary>");
            assert!(html.contains(&events), "set-{d}.jsonl has no embedded conversation");
        }
    }
    // Every configuration is ranked in the pooled leaderboard and the verdict opens the page.
    let table = &html[html.find("id=\"leaderboard-table\"").expect("table")..];
    let table = &table[..table.find("</table>").expect("end")];
    assert!(table.matches("<tr>").count() > 30, "the leaderboard lists the configurations");
    assert!(html.find("id=\"verdict\"") < html.find("id=\"leaderboard\""));
}
