//! The CSV outputs of a run folder: pinned headers, and byte-identical files for an
//! uninterrupted run, a run resumed after a kill, and a merge of shards. A stand-in replay
//! gives deterministic metrics with compaction events and probe scores, so these tests check
//! the orchestration and the views, not the replay engine.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use compaction::{Context, Conversation, Message, Probe, ProbeKind, SummaryFailure, SummaryRequest, Trigger};
use runlog::experiment::Experiment;
use runlog::log::RunData;
use runlog::record::{CompactionRecord, FoundIn, PairMetrics, ProbeScore};
use runner::replay::{Judge, ReplayError, ReplaySettings, Summarizer, Summary};
use runner::run::{self, Engine, Plan, PlannedConversation, Provenance, RunOptions, Shard};

struct NoSummarizer;

impl Summarizer for NoSummarizer {
    fn name(&self) -> String {
        "none".into()
    }
    fn summarize(&self, _ctx: &Context, _request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        Err(SummaryFailure { reason: "no summaries here".into() })
    }
}

/// A fact is found when its alias is in a kept message.
struct KeptJudge;

impl Judge for KeptJudge {
    fn name(&self) -> String {
        "kept".into()
    }
    fn score(&self, _conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore {
        let facts: Vec<FoundIn> = probe
            .facts
            .iter()
            .map(|aliases| {
                let kept =
                    ctx.entries().iter().any(|e| aliases.iter().any(|a| e.message().content.contains(a.as_str())));
                if kept {
                    FoundIn::Verbatim
                } else {
                    FoundIn::Lost
                }
            })
            .collect();
        let retained = facts.iter().filter(|f| **f != FoundIn::Lost).count();
        ProbeScore {
            probe_id: probe.id.clone(),
            kind: probe.kind,
            tier: Some(probe.tier()),
            asked_at: ctx.len(),
            checkpoint: 100,
            at_risk: retained < facts.len(),
            score: retained as f64 / facts.len() as f64,
            facts,
            judge: self.name(),
            llm: None,
            if_sent: None,
            verdict: Default::default(),
            evidence: Vec::new(),
            written: false,
        }
    }
}

/// Keeps the last `window / 1000` messages; fails for ids starting with `bad`.
fn stand_in_replay(
    conversation: &Conversation,
    _strategy: runner::session::Compactor<'_>,
    settings: &ReplaySettings,
    models: runner::replay::Models<'_>,
) -> Result<PairMetrics, ReplayError> {
    let judge = models.judge;
    if conversation.id.starts_with("bad") {
        return Err(ReplayError::Conversation {
            id: conversation.id.clone(),
            problem: "unreplayable, \"quoted\"".into(),
        });
    }
    let keep = (settings.window / 1000) as usize;
    let n = conversation.messages.len();
    let ctx = Context::from_messages(conversation.messages[n.saturating_sub(keep)..].to_vec());
    let probes: Vec<ProbeScore> = conversation.probes.iter().map(|p| judge.score(conversation, &ctx, p)).collect();
    let mean = |s: &[&ProbeScore]| (!s.is_empty()).then(|| s.iter().map(|p| p.score).sum::<f64>() / s.len() as f64);
    let all: Vec<&ProbeScore> = probes.iter().collect();
    let at_risk: Vec<&ProbeScore> = probes.iter().filter(|p| p.at_risk).collect();
    let events = if n > keep {
        vec![CompactionRecord {
            call: 1,
            trigger: Trigger::Proactive,
            step: "drop".into(),
            tokens_before: (n * 10) as u64,
            tokens_after: (keep * 10) as u64,
            estimate_before: (n * 9) as u64,
            estimate_after: (keep * 9) as u64,
            messages_before: n,
            messages_after: keep,
            removed: n - keep,
            masked: 0,
            round: Some(1),
            fallback: None,
            shortfall: None,
            summary: format!("dropped {},\nkept \"{keep}\"", n - keep),
            violations: Vec::new(),
            next_action: None,
            agreement: None,
        }]
    } else {
        Vec::new()
    };
    Ok(PairMetrics {
        calls: (n / 2) as u64,
        compactions: events.len() as u64,
        peak_tokens: (n.min(keep) * 10) as u64,
        input_tokens: (n.min(keep) * 100) as u64,
        cached_tokens: (n.min(keep) * 40) as u64,
        uncompacted_input_tokens: (n * 100) as u64,
        cost_usd: Some(n as f64 * 1.7e-6),
        retention: mean(&all),
        at_risk_retention: mean(&at_risk),
        probes,
        compaction_events: events,
        ..PairMetrics::default()
    })
}

fn conversation(id: &str, turns: usize) -> Conversation {
    let mut messages = vec![Message::system("sys")];
    for i in 0..turns {
        messages.push(Message::user(format!("step {i}: fact-{id}-{i}")));
        messages.push(Message::assistant(format!("ok {i}")));
    }
    let mut c = Conversation::new(id, messages);
    let kinds = ProbeKind::CLASSIC;
    c.probes = (0..turns)
        .step_by(2)
        .map(|i| Probe {
            id: format!("p{i}"),
            kind: kinds[i % kinds.len()],
            question: "?".into(),
            answer: "a".into(),
            facts: vec![vec![format!("fact-{id}-{i}")], vec![format!("fact-{id}-{}", turns - 1)]],
            source_message: 2 * i + 1,
            asked_at: None,
            tier: None,
            ..Default::default()
        })
        .collect();
    c
}

const EXPERIMENT: &str = r#"
name = "views"
datasets = ["unused"]
windows = [6000, 60000]
seed = 11

[[strategy]]
name = "none"

[[strategy]]
name = "truncate"
target_ratio = [0.5, 0.8]
"#;

fn plan() -> Plan {
    let exp =
        Experiment::parse(EXPERIMENT, Path::new("views.toml"), &runner::catalog::Catalog).expect("valid experiment");
    let conversations = ["c01", "c02", "bad03", "c04", "c05", "c06", "c07"]
        .iter()
        .enumerate()
        .map(|(i, id)| PlannedConversation {
            dataset: format!("set{}.jsonl", i % 2),
            conversation: Arc::new(conversation(id, 3 + i)),
        })
        .collect();
    Plan::from_conversations(exp, conversations, Vec::new())
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-report-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn run_into(dir: &Path, resume: bool, shard: Option<Shard>) -> RunData {
    let engine = Engine {
        summarizer: &NoSummarizer,
        judge: &KeptJudge,
        next_action: None,
        replay: stand_in_replay,
        budget: None,
    };
    let options = RunOptions { out: dir.to_path_buf(), resume, jobs: Some(2), shard };
    let provenance = Provenance { tool_version: "test".into(), git_commit: None, started_at: "t".into() };
    let data = run::run(&plan(), &engine, &options, &provenance, &|_| {}).expect("runs");
    report::write_outputs(dir, &data).expect("writes outputs");
    data
}

const CSVS: [&str; 4] = [report::RESULTS_CSV, report::SUMMARY_CSV, report::PROBES_CSV, report::COMPACTIONS_CSV];

fn assert_same_outputs(a: &Path, b: &Path) {
    for name in CSVS {
        let x = fs::read(a.join(name)).expect("csv a");
        let y = fs::read(b.join(name)).expect("csv b");
        assert!(
            x == y,
            "{name} differs:\n--- {}\n{}\n--- {}\n{}",
            a.display(),
            String::from_utf8_lossy(&x),
            b.display(),
            String::from_utf8_lossy(&y)
        );
    }
}

#[test]
fn headers_are_pinned() {
    use report::csv::*;
    assert_eq!(
        RESULTS_HEADER.join(","),
        "conversation_id,dataset,strategy,config_id,params,window,status,error,calls,compactions,overflows,\
         violations,peak_tokens,input_tokens,cached_tokens,output_tokens,uncompacted_input_tokens,final_tokens,\
         summarizer_calls,summarizer_failures,cost_usd,summary_cost_usd,probes,retention,at_risk_probes,at_risk_retention,\
         cache_hit_rate,judge,rejected_requests_openai,rejected_requests_anthropic,findings,completed,first_rejected_call,recording_violations,\
         rejected_because,applicable,latest_user_message_dropped,fabricated_directives,\
         next_action_ready,next_action_compactions,repeat_risk_failed,repeat_risk_reread,\
         next_action_agree_recorded,next_action_agree_recorded_compactions,next_action_agree_full,\
         next_action_agree_full_compactions,next_action_unparsed"
    );
    assert_eq!(
        SUMMARY_HEADER.join(","),
        "config_id,strategy,params,window,conversations,failed,retention_mean,retention_ci_low,retention_ci_high,\
         at_risk_conversations,at_risk_retention_mean,at_risk_retention_ci_low,at_risk_retention_ci_high,\
         retention_task,retention_recall,retention_artifact,retention_decision,retention_continuation,\
         compression_ratio,overflow_rate,calls,compactions_mean,violations,peak_tokens_max,cost_usd_mean,cache_hit_rate,\
         at_risk_retention_task,at_risk_retention_recall,at_risk_retention_artifact,at_risk_retention_decision,\
         at_risk_retention_continuation,judge,rejected_requests_openai,rejected_requests_anthropic,findings,\
         summary_cost_usd_mean,dataset,completion_rate,compacted_conversations,retention_if_sent_mean,\
         paired_at_risk_retention,paired_at_risk_probes,estimate_error_p50,estimate_error_p95,\
         applicable,inapplicable_reason,latest_user_message_dropped,fabricated_directives,post_compaction_growth,\
         median_calls_between_compactions,\
         retention_critical,retention_useful,retention_detail,probes_critical,probes_useful,probes_detail,\
         state_retention,state_retention_ci_low,state_retention_ci_high,state_conversations,state_keys,\
         state_retention_critical,state_keys_critical,state_retention_useful,state_keys_useful,state_at_risk_retention,\
         state_at_risk_keys,next_action_ready,next_action_ready_ci_low,next_action_ready_ci_high,next_action_conversations,\
         next_action_compactions,repeat_risk_failed,repeat_risk_reread,\
         next_action_agree_recorded,next_action_agree_recorded_ci_low,next_action_agree_recorded_ci_high,\
         next_action_agree_recorded_compactions,next_action_agree_full,next_action_agree_full_ci_low,\
         next_action_agree_full_ci_high,next_action_agree_full_compactions,next_action_unparsed"
    );
    assert_eq!(
        PROBES_HEADER.join(","),
        "conversation_id,dataset,config_id,strategy,window,probe_id,kind,asked_at,checkpoint,at_risk,score,facts_retained,\
         facts_total,found_in,judge,score_spread,scored_repeats,evidence,tier,written"
    );
    assert_eq!(
        COMPACTIONS_HEADER.join(","),
        "conversation_id,dataset,config_id,strategy,window,call,trigger,step,tokens_before,tokens_after,\
         estimate_before,estimate_after,messages_before,messages_after,removed,masked,round,fallback,shortfall,\
         violations,summary,next_action_message,next_action_tools,next_action_needed,next_action_ready,\
         next_action_missing,repeat_risk,next_action_model_compacted,next_action_model_full,\
         next_action_agrees_recorded,next_action_agrees_full"
    );
}

#[test]
fn outputs_have_a_row_per_pair_and_per_configuration() {
    let dir = temp_dir("rows");
    let data = run_into(&dir, false, None);
    let configs = data.manifest.experiment.configurations.len();
    let mut results = csv::Reader::from_path(dir.join(report::RESULTS_CSV)).expect("results.csv");
    let rows: Vec<csv::StringRecord> = results.records().map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), 7 * configs);
    let status = results.headers().expect("header").iter().position(|h| h == "status").expect("status");
    let error = status + 1;
    let failed: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[status] == "failed").collect();
    assert_eq!(failed.len(), configs);
    assert!(failed[0][error].contains("unreplayable, \"quoted\""), "errors survive CSV quoting");
    assert_eq!(&failed[0][status + 2], "", "a failed pair has no metrics");
    let rh = results.headers().expect("header").clone();
    let rcol = |name: &str| rh.iter().position(|x| x == name).expect("column");
    for r in &rows {
        assert_eq!(&r[rcol("judge")], "kept", "every row names its judge");
        if &r[status] == "ok" {
            let input: f64 = r[rcol("input_tokens")].parse().expect("tokens");
            let cached: f64 = r[rcol("cached_tokens")].parse().expect("tokens");
            let rate: f64 = r[rcol("cache_hit_rate")].parse().expect("a rate");
            assert!((rate - cached / input).abs() < 1e-6, "cache_hit_rate is cached / input per pair");
        } else {
            assert_eq!(&r[rcol("cache_hit_rate")], "");
        }
    }

    let mut summary = csv::Reader::from_path(dir.join(report::SUMMARY_CSV)).expect("summary.csv");
    let h = summary.headers().expect("header").clone();
    let col = |name: &str| h.iter().position(|x| x == name).expect("column");
    let all_rows: Vec<csv::StringRecord> = summary.records().map(|r| r.expect("row")).collect();
    // A pooled row per configuration, then one per configuration and dataset (two datasets).
    assert_eq!(all_rows.len(), 3 * configs);
    let rows: Vec<csv::StringRecord> = all_rows.iter().filter(|r| &r[col("dataset")] == "all").cloned().collect();
    assert_eq!(rows.len(), configs);
    assert!(all_rows[..configs].iter().all(|r| &r[col("dataset")] == "all"), "the pooled rows come first");
    for r in &rows {
        assert_eq!(&r[col("conversations")], "6");
        assert_eq!(&r[col("failed")], "1");
        assert_eq!(&r[col("completion_rate")], "1", "the stand-in replay rejects no call");
        let mean: f64 = r[col("retention_mean")].parse().expect("a mean");
        let low: f64 = r[col("retention_ci_low")].parse().expect("a bound");
        let high: f64 = r[col("retention_ci_high")].parse().expect("a bound");
        assert!(low <= mean && mean <= high, "{low} <= {mean} <= {high}");
        let cache: f64 = r[col("cache_hit_rate")].parse().expect("a rate");
        assert!((cache - 0.4).abs() < 1e-9);
        assert_eq!(&r[col("judge")], "kept");
        // At-risk retention per kind: each a share, and the overall one lies among them.
        let per_kind: Vec<f64> = ["task", "recall", "artifact", "decision", "continuation"]
            .iter()
            .filter_map(|k| r[col(&format!("at_risk_retention_{k}"))].parse().ok())
            .collect();
        assert!(per_kind.iter().all(|v| (0.0..=1.0).contains(v)), "{per_kind:?}");
        if let Ok(all) = r[col("at_risk_retention_mean")].parse::<f64>() {
            assert!(!per_kind.is_empty(), "at-risk probes have a kind");
            let (lo, hi) = per_kind.iter().fold((1.0f64, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
            assert!(lo <= all + 1e-6 && all <= hi + 1e-6, "{lo} <= {all} <= {hi}");
        }
    }
    assert!(
        rows.iter()
            .any(|r| !r[col("at_risk_retention_recall")].is_empty() || !r[col("at_risk_retention_task")].is_empty()),
        "some configuration has at-risk probes of a kind"
    );
    // At 60k tokens the stand-in keeps everything: nothing compacted, nothing at risk.
    let big = rows.iter().find(|r| r[col("config_id")].contains("-60k-")).expect("a 60k row");
    assert_eq!(&big[col("compacted_conversations")], "0", "never compacted: not exercised");
    let small = rows.iter().find(|r| r[col("config_id")].contains("-6k-")).expect("a 6k row");
    assert_eq!(&small[col("compacted_conversations")], "6", "every conversation is longer than 6 messages");
    assert_eq!(&big[col("compression_ratio")], "1");
    assert_eq!(&big[col("at_risk_retention_mean")], "", "no probe at risk: not applicable");
    assert_eq!(&big[col("retention_mean")], "1");
    let text = fs::read_to_string(dir.join(report::SUMMARY_CSV)).expect("summary text");
    assert!(!text.contains("NaN"));

    let compactions = fs::read_to_string(dir.join(report::COMPACTIONS_CSV)).expect("compactions.csv");
    assert!(compactions.contains("\"dropped"), "summary text is quoted: {compactions}");
    let mut probes_csv = csv::Reader::from_path(dir.join(report::PROBES_CSV)).expect("probes.csv");
    let ph = probes_csv.headers().expect("header").clone();
    let pcol = |name: &str| ph.iter().position(|x| x == name).expect("column");
    let probe_rows: Vec<csv::StringRecord> = probes_csv.records().map(|r| r.expect("row")).collect();
    for r in &probe_rows {
        // A judge without repeats: one deterministic score, no spread.
        assert_eq!((&r[pcol("score_spread")], &r[pcol("scored_repeats")]), ("0", "1"));
    }
    let probes = probe_rows.len();
    let expected: usize = data
        .records
        .iter()
        .filter_map(|r| match &r.outcome {
            runlog::record::PairOutcome::Ok(m) => Some(m.probes.len()),
            runlog::record::PairOutcome::Failed { .. } => None,
        })
        .sum();
    assert_eq!(probes, expected);
}

/// The pooled row of a configuration is the conversation-weighted mean of its per-dataset
/// rows, for every mean over conversations; counts add up.
#[test]
fn the_pooled_row_is_the_conversation_weighted_mean_of_the_dataset_rows() {
    let dir = temp_dir("pooled");
    run_into(&dir, false, None);
    let mut summary = csv::Reader::from_path(dir.join(report::SUMMARY_CSV)).expect("summary.csv");
    let h = summary.headers().expect("header").clone();
    let col = |name: &str| h.iter().position(|x| x == name).expect("column");
    let rows: Vec<csv::StringRecord> = summary.records().map(|r| r.expect("row")).collect();
    let num = |r: &csv::StringRecord, c: &str| -> Option<f64> { r[col(c)].parse().ok() };
    let pooled: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[col("dataset")] == "all").collect();
    assert!(!pooled.is_empty());
    for p in pooled {
        let id = &p[col("config_id")];
        let parts: Vec<&csv::StringRecord> =
            rows.iter().filter(|r| &r[col("config_id")] == id && &r[col("dataset")] != "all").collect();
        assert_eq!(parts.len(), 2, "{id}: one row per dataset");
        for count in ["conversations", "failed", "compacted_conversations", "calls", "violations"] {
            let sum: f64 = parts.iter().map(|r| num(r, count).expect("a count")).sum();
            assert_eq!(num(p, count), Some(sum), "{id}: {count} adds up");
        }
        let n = |r: &csv::StringRecord| num(r, "conversations").expect("conversations");
        for mean in ["retention_mean", "retention_if_sent_mean", "completion_rate", "compactions_mean", "cost_usd_mean"]
        {
            let weighted: f64 = parts.iter().map(|r| n(r) * num(r, mean).expect("a mean")).sum::<f64>()
                / parts.iter().map(|r| n(r)).sum::<f64>();
            let pooled = num(p, mean).expect("a pooled mean");
            // The CSV rounds to 6 (dollars 8) decimals.
            assert!((pooled - weighted).abs() < 2e-6, "{id}: {mean} pooled {pooled}, weighted {weighted}");
        }
        let probes: f64 = parts.iter().map(|r| num(r, "paired_at_risk_probes").expect("a count")).sum();
        assert_eq!(num(p, "paired_at_risk_probes"), Some(probes), "{id}: the pooled pairing is the union");
    }
}

#[test]
fn a_run_resumed_after_a_kill_writes_the_same_csvs_as_an_uninterrupted_one() {
    let whole = temp_dir("whole");
    run_into(&whole, false, None);

    let killed = temp_dir("killed");
    run_into(&killed, false, None);
    for name in CSVS {
        fs::remove_file(killed.join(name)).expect("remove csv");
    }
    let log = killed.join(runlog::log::RESULTS_FILE);
    let text = fs::read_to_string(&log).expect("log");
    let keep: usize = text.lines().count() / 3;
    let mut cut: String = text.lines().take(keep).map(|l| format!("{l}\n")).collect();
    let next = text.lines().nth(keep).expect("a line to cut");
    cut.push_str(&next[..next.len() / 3]);
    fs::write(&log, cut).expect("simulate a kill");

    let resumed = run_into(&killed, true, None);
    assert_eq!(resumed.manifest.counts.resumed, keep);
    assert_same_outputs(&whole, &killed);
}

#[test]
fn merging_two_shards_writes_the_same_csvs_as_the_whole_run() {
    let whole = temp_dir("merge-whole");
    run_into(&whole, false, None);
    let s1 = temp_dir("merge-1");
    let s2 = temp_dir("merge-2");
    run_into(&s1, false, Some(Shard { index: 1, count: 2 }));
    run_into(&s2, false, Some(Shard { index: 2, count: 2 }));
    let out = temp_dir("merge-out");
    let merged = runlog::merge::merge(&[s2, s1], &out).expect("merges");
    report::write_outputs(&out, &merged).expect("writes");
    assert_same_outputs(&whole, &out);
    // The merged folder reads back to the same outputs.
    let again = temp_dir("merge-again");
    report::write_outputs(&again, &RunData::read(&out).expect("reads")).expect("writes");
    assert_same_outputs(&whole, &again);
}
