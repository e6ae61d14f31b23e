//! Orchestration tests with a stand-in replay: they check planning, sharding, the log,
//! resume and merge, not the replay engine's numbers.

use std::path::Path;
use std::sync::Mutex;

use compaction::{Context, Conversation, Message, Probe, ProbeKind, SummaryFailure, SummaryRequest};

use super::*;
use crate::replay::Summary;
use runlog::merge::merge;
use runlog::record::{FoundIn, ProbeScore};

struct TestSummarizer;

impl Summarizer for TestSummarizer {
    fn name(&self) -> String {
        "test-summarizer".into()
    }
    fn summarize(&self, _ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        Ok(Summary {
            text: format!("summary of {:?}", request.span),
            input_tokens: 10,
            output_tokens: 2,
            cached_tokens: 0,
        })
    }
}

/// Scores a probe 1 when its first alias occurs in the last `window / 1000` messages.
struct TestJudge;

impl Judge for TestJudge {
    fn name(&self) -> String {
        "test-judge".into()
    }
    fn score(&self, _conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore {
        let alias = &probe.facts[0][0];
        let found = ctx.entries().iter().any(|e| e.message().content.contains(alias.as_str()));
        ProbeScore {
            probe_id: probe.id.clone(),
            kind: probe.kind,
            tier: Some(probe.tier()),
            asked_at: ctx.len(),
            checkpoint: 100,
            at_risk: !found,
            score: if found { 1.0 } else { 0.0 },
            facts: vec![if found { FoundIn::Verbatim } else { FoundIn::Lost }],
            judge: self.name(),
            llm: None,
            if_sent: None,
            verdict: Default::default(),
            evidence: Vec::new(),
            written: probe.is_written(),
        }
    }
}

/// A deterministic stand-in for the replay: keeps the last `window / 1000` messages, fails
/// for conversations whose id starts with `bad`, panics for `panic`.
fn fake_replay(
    conversation: &Conversation,
    _strategy: Compactor<'_>,
    settings: &ReplaySettings,
    models: crate::replay::Models<'_>,
) -> Result<PairMetrics, ReplayError> {
    let judge = models.judge;
    if conversation.id.starts_with("bad") {
        return Err(ReplayError::Conversation { id: conversation.id.clone(), problem: "cannot replay".into() });
    }
    if conversation.id.starts_with("panic") {
        panic!("strategy bug on {}", conversation.id);
    }
    let keep = (settings.window / 1000) as usize;
    let n = conversation.messages.len();
    let kept = conversation.messages[n.saturating_sub(keep)..].to_vec();
    let ctx = Context::from_messages(kept);
    let probes: Vec<ProbeScore> = conversation.probes.iter().map(|p| judge.score(conversation, &ctx, p)).collect();
    let retention = (!probes.is_empty()).then(|| probes.iter().map(|p| p.score).sum::<f64>() / probes.len() as f64);
    Ok(PairMetrics {
        calls: conversation.messages.iter().filter(|m| m.role == compaction::Role::Assistant).count() as u64,
        compactions: u64::from(n > keep),
        input_tokens: (ctx.len() * 100) as u64,
        uncompacted_input_tokens: (n * 100) as u64,
        retention,
        probes,
        ..PairMetrics::default()
    })
}

fn conversation(id: &str, turns: usize, window: Option<u64>) -> Conversation {
    let mut messages = vec![Message::system("sys")];
    for i in 0..turns {
        messages.push(Message::user(format!("{id} question {i} token-{id}-{i}")));
        messages.push(Message::assistant(format!("answer {i}")));
    }
    let mut c = Conversation::new(id, messages);
    c.context_window = window;
    c.probes = vec![
        Probe {
            id: "p-early".into(),
            kind: ProbeKind::Recall,
            question: "?".into(),
            answer: "x".into(),
            facts: vec![vec![format!("token-{id}-0")]],
            source_message: 1,
            asked_at: None,
            tier: None,
            ..Default::default()
        },
        Probe {
            id: "p-late".into(),
            kind: ProbeKind::Task,
            question: "?".into(),
            answer: "x".into(),
            facts: vec![vec![format!("token-{id}-{}", turns - 1)]],
            source_message: 2 * turns - 1,
            asked_at: None,
            tier: None,
            ..Default::default()
        },
    ];
    c
}

const EXPERIMENT: &str = r#"
name = "unit"
datasets = ["unused"]
windows = [4000, 40000]
seed = 3

[[strategy]]
name = "none"

[[strategy]]
name = "truncate"
target_ratio = [0.5, 0.8]
"#;

fn plan_with(ids: &[&str]) -> Plan {
    let exp =
        Experiment::parse(EXPERIMENT, Path::new("unit.toml"), &crate::catalog::Catalog).expect("valid experiment");
    let conversations = ids
        .iter()
        .enumerate()
        .map(|(i, id)| PlannedConversation {
            dataset: if i % 2 == 0 { "a.jsonl".into() } else { "b.jsonl".into() },
            conversation: Arc::new(conversation(id, 6 + i, None)),
        })
        .collect();
    Plan::from_conversations(exp, conversations, Vec::new())
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-run-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn provenance() -> Provenance {
    Provenance { tool_version: "0.0.0-test".into(), git_commit: Some("abc".into()), started_at: "t0".into() }
}

fn options(out: &Path) -> RunOptions {
    RunOptions { out: out.to_path_buf(), resume: false, jobs: Some(2), shard: None }
}

fn run_fake(plan: &Plan, options: &RunOptions) -> Result<RunData, RunError> {
    let engine =
        Engine { summarizer: &TestSummarizer, judge: &TestJudge, next_action: None, replay: fake_replay, budget: None };
    run(plan, &engine, options, &provenance(), &|_| {})
}

/// Records without their wall times, which differ between runs.
fn timeless(records: &[PairRecord]) -> Vec<PairRecord> {
    records
        .iter()
        .cloned()
        .map(|mut r| {
            if let PairOutcome::Ok(m) = &mut r.outcome {
                m.elapsed_ms = 0;
            }
            r
        })
        .collect()
}

const IDS: [&str; 5] = ["c1", "c2", "bad-3", "c4", "panic-5"];

#[test]
fn shards_partition_the_pairs() {
    let plan = plan_with(&IDS);
    let all: Vec<String> = plan.pairs().into_iter().map(|p| plan.key(p)).collect();
    assert_eq!(all.len(), IDS.len() * plan.experiment.configurations.len());
    for n in 1..=4u32 {
        let mut union: Vec<String> = Vec::new();
        for k in 1..=n {
            let shard = Shard { index: k, count: n };
            let keys: Vec<String> = plan.shard_pairs(Some(shard)).into_iter().map(|p| plan.key(p)).collect();
            for key in &keys {
                assert!(!union.contains(key), "{key} is in two shards of {n}");
            }
            union.extend(keys);
        }
        union.sort();
        let mut expected = all.clone();
        expected.sort();
        assert_eq!(union, expected, "the {n} shards cover every pair");
    }
    // Deterministic: the same slice every time.
    let s = Shard { index: 2, count: 3 };
    assert_eq!(plan.shard_pairs(Some(s)), plan_with(&IDS).shard_pairs(Some(s)));
}

#[test]
fn shard_parsing() {
    assert_eq!("2/4".parse::<Shard>().expect("valid"), Shard { index: 2, count: 4 });
    for bad in ["0/4", "5/4", "1/0", "x/2", "3"] {
        assert!(bad.parse::<Shard>().is_err(), "{bad} should be rejected");
    }
}

#[test]
fn a_run_records_every_pair_and_failures_do_not_stop_it() {
    let plan = plan_with(&IDS);
    let dir = temp_dir("full");
    let seen = Mutex::new(Vec::new());
    let engine =
        Engine { summarizer: &TestSummarizer, judge: &TestJudge, next_action: None, replay: fake_replay, budget: None };
    let data = run(&plan, &engine, &options(&dir), &provenance(), &|p| lock(&seen).push(p.clone())).expect("runs");
    let pairs = IDS.len() * plan.experiment.configurations.len();
    assert_eq!(data.records.len(), pairs);
    let (records, truncated) = read_results(&dir.join(RESULTS_FILE)).expect("log reads");
    assert!(!truncated);
    assert_eq!(records.len(), pairs, "one line per pair");
    let failed: Vec<&PairRecord> =
        data.records.iter().filter(|r| matches!(r.outcome, PairOutcome::Failed { .. })).collect();
    assert_eq!(failed.len(), 2 * plan.experiment.configurations.len());
    let panic = failed.iter().find(|r| r.conversation_id == "panic-5").expect("the panic is recorded");
    match &panic.outcome {
        PairOutcome::Failed { error } => assert!(error.contains("panic: strategy bug on panic-5"), "{error}"),
        PairOutcome::Ok(_) => unreachable!(),
    }
    assert_eq!(data.manifest.counts.failed, failed.len());
    assert_eq!(data.manifest.counts.ok, pairs - failed.len());
    assert_eq!(data.manifest.counts.missing, 0);
    assert!(data.manifest.complete);
    assert_eq!(data.manifest.judge, "test-judge");
    assert_eq!(data.manifest.summarizer, "test-summarizer");
    // Sorted: configuration order first.
    assert_eq!(data.records[0].config_id, plan.experiment.configurations[0].config_id);
    assert_eq!(
        data.records.last().map(|r| r.config_id.as_str()),
        plan.experiment.configurations.last().map(|c| c.config_id.as_str())
    );
    let seen = lock(&seen);
    assert_eq!(seen.first().map(|p| p.done), Some(0));
    assert_eq!(seen.iter().map(|p| p.done).max(), Some(pairs));
    assert!(seen.iter().all(|p| p.total == pairs));
    // The manifest on disk is the one returned.
    assert_eq!(read_manifest(&dir).expect("manifest"), data.manifest);
    let text = fs::read_to_string(dir.join(MANIFEST_FILE)).expect("manifest text");
    assert!(text.contains("\"git_commit\": \"abc\""));
}

#[test]
fn a_conversation_without_a_window_fails_alone_when_the_experiment_sets_none() {
    let text = EXPERIMENT.replace("windows = [4000, 40000]\n", "");
    let exp = Experiment::parse(&text, Path::new("unit.toml"), &crate::catalog::Catalog).expect("valid");
    let conversations = vec![
        PlannedConversation { dataset: "a".into(), conversation: Arc::new(conversation("w", 4, Some(5000))) },
        PlannedConversation { dataset: "a".into(), conversation: Arc::new(conversation("nw", 4, None)) },
    ];
    let plan = Plan::from_conversations(exp, conversations, Vec::new());
    let data = run_fake(&plan, &options(&temp_dir("own-window"))).expect("runs");
    for r in &data.records {
        match (&r.outcome, r.conversation_id.as_str()) {
            (PairOutcome::Ok(_), "w") => assert_eq!(r.window, 5000),
            (PairOutcome::Failed { error }, "nw") => assert!(error.contains("no context_window"), "{error}"),
            (other, id) => panic!("{id}: unexpected {other:?}"),
        }
    }
}

#[test]
fn an_existing_log_needs_resume() {
    let plan = plan_with(&IDS[..2]);
    let dir = temp_dir("exists");
    run_fake(&plan, &options(&dir)).expect("first run");
    match run_fake(&plan, &options(&dir)) {
        Err(RunError::Exists { .. }) => {}
        other => panic!("expected Exists, got {other:?}"),
    }
    // Resuming a finished run runs nothing and returns the same records.
    let again = run_fake(&plan, &RunOptions { resume: true, ..options(&dir) }).expect("resume");
    assert_eq!(again.manifest.counts.resumed, again.records.len());
    // Another experiment in the same folder is refused.
    let other = plan_with(&IDS[..3]);
    match run_fake(&other, &RunOptions { resume: true, ..options(&dir) }) {
        Err(RunError::Mismatch { problem, .. }) => assert!(problem.contains("holds experiment"), "{problem}"),
        other => panic!("expected Mismatch, got {other:?}"),
    }
}

#[test]
fn resume_after_a_kill_drops_the_truncated_line_and_runs_only_what_is_missing() {
    let plan = plan_with(&IDS);
    let whole = run_fake(&plan, &options(&temp_dir("resume-whole"))).expect("uninterrupted run");

    let dir = temp_dir("resume-killed");
    run_fake(&plan, &options(&dir)).expect("run");
    // Simulate a kill: keep 7 whole lines and half of the 8th.
    let log = dir.join(RESULTS_FILE);
    let text = fs::read_to_string(&log).expect("log");
    let lines: Vec<&str> = text.lines().collect();
    let mut cut: String = lines[..7].iter().map(|l| format!("{l}\n")).collect();
    cut.push_str(&lines[7][..lines[7].len() / 2]);
    fs::write(&log, &cut).expect("truncate");
    let (kept, truncated) = read_results(&log).expect("tolerates the cut line");
    assert_eq!((kept.len(), truncated), (7, true));

    let totals = Mutex::new(Vec::new());
    let engine =
        Engine { summarizer: &TestSummarizer, judge: &TestJudge, next_action: None, replay: fake_replay, budget: None };
    let resumed = run(&plan, &engine, &RunOptions { resume: true, ..options(&dir) }, &provenance(), &|p| {
        lock(&totals).push((p.total, p.resumed))
    })
    .expect("resume");
    let pairs = whole.records.len();
    assert!(lock(&totals).iter().all(|&t| t == (pairs - 7, 7)), "only the missing pairs run");
    assert_eq!(timeless(&resumed.records), timeless(&whole.records));
    assert_eq!(resumed.manifest.counts.resumed, 7);
    // The log was rewritten cleanly: every line parses, one per pair.
    let text = fs::read_to_string(&log).expect("log");
    assert!(text.ends_with('\n'));
    assert_eq!(text.lines().count(), pairs);
    assert!(text.lines().all(|l| serde_json::from_str::<PairRecord>(l).is_ok()));
}

#[test]
fn a_bad_line_before_the_last_is_an_error_that_names_it() {
    let plan = plan_with(&IDS[..2]);
    let dir = temp_dir("corrupt");
    run_fake(&plan, &options(&dir)).expect("run");
    let log = dir.join(RESULTS_FILE);
    let text = fs::read_to_string(&log).expect("log");
    fs::write(&log, format!("{{not json\n{text}")).expect("corrupt");
    match run_fake(&plan, &RunOptions { resume: true, ..options(&dir) }) {
        Err(RunError::Corrupt { line: 1, .. }) => {}
        other => panic!("expected Corrupt at line 1, got {other:?}"),
    }
}

#[test]
fn merging_shards_gives_the_whole_run() {
    let plan = plan_with(&IDS);
    let whole = run_fake(&plan, &options(&temp_dir("merge-whole"))).expect("whole");
    let s1 = temp_dir("merge-s1");
    let s2 = temp_dir("merge-s2");
    let one = run_fake(&plan, &RunOptions { shard: Some(Shard { index: 1, count: 2 }), ..options(&s1) }).expect("1/2");
    let two = run_fake(&plan, &RunOptions { shard: Some(Shard { index: 2, count: 2 }), ..options(&s2) }).expect("2/2");
    assert_eq!(one.records.len() + two.records.len(), whole.records.len());
    assert!(!one.records.is_empty() && !two.records.is_empty());
    assert_eq!(one.manifest.shard.as_deref(), Some("1/2"));

    let out = temp_dir("merge-out");
    // Listing a shard twice changes nothing: records are deduplicated by pair key.
    let merged = merge(&[s1.clone(), s2.clone(), s1.clone()], &out).expect("merge");
    assert_eq!(timeless(&merged.records), timeless(&whole.records));
    assert_eq!(merged.manifest.counts.missing, 0);
    assert_eq!(merged.manifest.counts.ok, whole.manifest.counts.ok);
    assert_eq!(merged.manifest.shard, None);
    assert_eq!(merged.manifest.experiment_id, whole.manifest.experiment_id);
    assert_eq!(RunData::read(&out).expect("reads back").records, merged.records);

    // One shard alone: the other's pairs are missing.
    let partial = merge(std::slice::from_ref(&s1), &temp_dir("merge-partial")).expect("merge one");
    assert_eq!(partial.manifest.counts.missing, two.records.len());

    // Shards of different experiments do not merge.
    let other = temp_dir("merge-other");
    run_fake(&plan_with(&IDS[..2]), &options(&other)).expect("other experiment");
    match merge(&[s1, other], &temp_dir("merge-bad")) {
        Err(RunError::Mismatch { problem, .. }) => assert!(problem.contains("same experiment"), "{problem}"),
        other => panic!("expected Mismatch, got {other:?}"),
    }
}

#[test]
fn duplicate_conversations_are_left_out_with_a_problem() {
    let exp = Experiment::parse(EXPERIMENT, Path::new("unit.toml"), &crate::catalog::Catalog).expect("valid");
    let c = Arc::new(conversation("dup", 3, None));
    let plan = Plan::from_conversations(
        exp,
        vec![
            PlannedConversation { dataset: "a".into(), conversation: c.clone() },
            PlannedConversation { dataset: "a".into(), conversation: c.clone() },
            PlannedConversation { dataset: "b".into(), conversation: c },
        ],
        Vec::new(),
    );
    assert_eq!(plan.conversations.len(), 2);
    assert_eq!(plan.problems.len(), 1);
    assert!(plan.problems[0].contains("dup"));
}

#[test]
fn recorded_gets_pairs_only_for_recordings_that_hold_a_compaction() {
    let text = format!("{EXPERIMENT}\n[[strategy]]\nname = \"recorded\"\n");
    let exp = Experiment::parse(&text, Path::new("unit.toml"), &crate::catalog::Catalog).expect("valid experiment");
    let mut compacted = conversation("held", 6, None);
    compacted.messages.insert(
        5,
        Message::user("Summary of the conversation so far.").with_meta("compact_summary", serde_json::json!(true)),
    );
    let conversations = vec![
        PlannedConversation { dataset: "a.jsonl".into(), conversation: Arc::new(conversation("plain", 6, None)) },
        PlannedConversation { dataset: "a.jsonl".into(), conversation: Arc::new(compacted) },
    ];
    let plan = Plan::from_conversations(exp, conversations, Vec::new());
    let recorded: Vec<usize> = plan
        .pairs()
        .into_iter()
        .filter(|p| plan.experiment.configurations[p.config].strategy == "recorded")
        .map(|p| p.conversation)
        .collect();
    // Two windows, only the recording with a compaction.
    assert_eq!(recorded, [1, 1]);
    let others = plan.pairs().len() - recorded.len();
    assert_eq!(others, 2 * (plan.experiment.configurations.len() - 2), "every other configuration runs both");
}

/// Retrying reads the failure's type; only records written before failures carried one are
/// read from their message.
#[test]
fn a_resume_retries_by_the_failure_kind() {
    let record = |failure: Option<PairFailure>, error: &str| PairRecord {
        conversation_id: "c".into(),
        dataset: "d.jsonl".into(),
        config_id: "none-32k-0".into(),
        strategy: "none".into(),
        params: serde_json::json!({}),
        window: 32_000,
        judge: "offline".into(),
        content_hash: None,
        failure,
        outcome: PairOutcome::Failed { error: error.into() },
    };
    assert!(is_retryable(&record(Some(PairFailure::CacheMiss), "anything")));
    assert!(is_retryable(&record(Some(PairFailure::Endpoint), "anything")));
    // A replay error whose text happens to start like an endpoint failure is not retried.
    assert!(!is_retryable(&record(Some(PairFailure::Replay), &format!("{ENDPOINT_ERROR}: no"))));
    assert!(!is_retryable(&record(Some(PairFailure::Panic), "panic: x")));
    // An old record: its message says what it was.
    assert!(is_retryable(&record(None, &format!("{CACHE_MISS_ERROR}: 2 summaries"))));
    assert!(!is_retryable(&record(None, "bad parameter")));
    // The kind is written to the log and read back.
    let line = serde_json::to_string(&record(Some(PairFailure::Endpoint), "e")).expect("serializes");
    assert!(line.contains("\"failure\":\"endpoint\""), "{line}");
}

/// A run with the real replay, offline summarizer and judge gives every pair the metrics of a
/// replay of it alone (which meters its own entries): sharing a conversation's entries, and
/// the order pairs run in, change no figure, on one worker or two.
#[test]
fn shared_entries_and_the_order_of_pairs_change_no_figure() {
    let exp = Experiment::parse(
        r#"
name = "shared"
datasets = ["unused"]
windows = [600, 4000]
seed = 3

[[strategy]]
name = "keep-last-n"

[[strategy]]
name = "observation-mask"

[[strategy]]
name = "cut-point"
"#,
        Path::new("shared.toml"),
        &crate::catalog::Catalog,
    )
    .expect("valid experiment");
    let conversations: Vec<PlannedConversation> = [("small", 4), ("large", 30), ("mid", 12)]
        .into_iter()
        .map(|(id, turns)| PlannedConversation {
            dataset: "a.jsonl".into(),
            conversation: Arc::new(conversation(id, turns, None)),
        })
        .collect();
    let plan = Plan::from_conversations(exp, conversations, Vec::new());
    let summarizer = crate::summarize::OfflineSummarizer::new();
    let judge = crate::judge::OfflineJudge;
    let engine = Engine::new(&summarizer, &judge);
    let strategies = build_strategies(&plan.experiment);
    for jobs in [1, 2] {
        let out = temp_dir(&format!("shared-{jobs}"));
        let data = run(&plan, &engine, &RunOptions { jobs: Some(jobs), ..options(&out) }, &provenance(), &|_| {})
            .expect("run");
        assert_eq!(data.records.len(), plan.pairs().len());
        for (record, pair) in timeless(&data.records).iter().zip(sorted_pairs(&plan)) {
            let config = &plan.experiment.configurations[pair.config];
            let conversation = &plan.conversations[pair.conversation].conversation;
            assert_eq!(record.conversation_id, conversation.id);
            let settings = ReplaySettings {
                strategy: crate::catalog::strategy_config(&config.resolved).expect("reads back"),
                window: config.window.expect("the experiment sets windows"),
                encoding: plan.experiment.tokenizer,
                cache: plan.experiment.cache,
                price: plan.experiment.price.as_ref().map(|p| p.price()),
                overflow: plan.experiment.overflow,
            };
            let compactor = strategies[pair.config].compactor().expect("builds");
            let mut alone =
                replay::replay_built(conversation, compactor, &settings, &summarizer, &judge).expect("replays");
            alone.elapsed_ms = 0;
            match &record.outcome {
                PairOutcome::Ok(m) => assert_eq!(
                    serde_json::to_value(m.as_ref()).expect("json"),
                    serde_json::to_value(&alone).expect("json"),
                    "{} under {}",
                    record.conversation_id,
                    record.config_id
                ),
                PairOutcome::Failed { error } => panic!("{error}"),
            }
            assert_eq!(record.content_hash.as_deref(), Some(old_pair_hash(&plan, &engine, pair).as_str()));
        }
        let _ = fs::remove_dir_all(&out);
    }
}

/// The plan's pairs in the order of a finished run's records.
fn sorted_pairs(plan: &Plan) -> Vec<Pair> {
    let mut pairs = plan.pairs();
    let rank = |p: &Pair| {
        let c = &plan.conversations[p.conversation];
        (p.config, c.dataset.clone(), c.conversation.id.clone())
    };
    pairs.sort_by_key(rank);
    pairs
}

/// The content hash as written before the conversation's part was hashed once per run: FNV-1a
/// of the whole text at once.
fn old_pair_hash(plan: &Plan, engine: &Engine<'_>, pair: Pair) -> String {
    let conversation = &plan.conversations[pair.conversation].conversation;
    let config = &plan.experiment.configurations[pair.config];
    let conv = serde_json::to_string(conversation.as_ref()).unwrap_or_default();
    let cfg = serde_json::to_string(&config.resolved).unwrap_or_default();
    let text = format!(
        "{conv}\u{1f}{cfg}\u{1f}{:?}\u{1f}{}\u{1f}{}\u{1f}{:?}\u{1f}{:?}",
        config.window,
        engine.summarizer.name(),
        engine.judge.name(),
        plan.experiment.tokenizer,
        plan.experiment.cache
    );
    format!("{:016x}", fnv1a(text.as_bytes()))
}

#[test]
fn pairs_run_largest_conversation_first_each_conversations_pairs_together() {
    let exp =
        Experiment::parse(EXPERIMENT, Path::new("unit.toml"), &crate::catalog::Catalog).expect("valid experiment");
    let conversations: Vec<PlannedConversation> = [("s", 2), ("l", 9), ("m", 5), ("l2", 9)]
        .into_iter()
        .map(|(id, turns)| PlannedConversation {
            dataset: "a.jsonl".into(),
            conversation: Arc::new(conversation(id, turns, Some(8000))),
        })
        .collect();
    let plan = Plan::from_conversations(exp, conversations, Vec::new());
    let order = longest_first(&plan, &plan.pairs());
    let ids: Vec<&str> = order.iter().map(|p| plan.conversations[p.conversation].conversation.id.as_str()).collect();
    let per = plan.experiment.configurations.len();
    // "l" and "l2" hold the same number of bytes but for their ids' lengths: "l2" is larger.
    let expected: Vec<&str> = ["l2", "l", "m", "s"].iter().flat_map(|id| std::iter::repeat_n(*id, per)).collect();
    assert_eq!(ids, expected);
    // Within a conversation, each strategy's first configuration in the plan's order, then
    // each one's second...: no two configurations of one strategy next to each other.
    let configurations = &plan.experiment.configurations;
    let strategies: Vec<&str> = order[..per].iter().map(|p| configurations[p.config].strategy.as_str()).collect();
    assert_eq!(strategies, ["none", "truncate", "none", "truncate", "truncate", "truncate"]);
    let first: Vec<usize> = order[..2].iter().map(|p| p.config).collect();
    let none_first = configurations.iter().position(|c| c.strategy == "none");
    let truncate_first = configurations.iter().position(|c| c.strategy == "truncate");
    assert_eq!(first, [none_first.expect("none"), truncate_first.expect("truncate")]);
    assert!(order[..per].iter().all(|p| order[..per].iter().filter(|o| o.config == p.config).count() == 1));
}
