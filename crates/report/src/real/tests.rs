use std::path::Path;

use compaction::{ProbeKind, Tier, Trigger};
use runlog::experiment::Experiment;
use runlog::log::{Counts, Manifest, RunData, Timings, MANIFEST_FORMAT};
use runlog::record::{CompactionRecord, FoundIn, PairMetrics, PairOutcome, PairRecord, ProbeScore};

use super::*;
use crate::SUMMARY_CSV as SUMMARY_CSV_NAME;

const WITH_RECORDED: &str = r#"
name = "real-unit"
datasets = ["cc.jsonl"]
windows = [128000]
seed = 7

[[strategy]]
name = "anthropic-compaction"

[[strategy]]
name = "truncate"

[[strategy]]
name = "recorded"
"#;

/// (probe id, checkpoint, at risk, score, tier).
type P = (&'static str, u32, bool, f64, Tier);

fn probe((id, checkpoint, at_risk, score, tier): P) -> ProbeScore {
    ProbeScore {
        written: false,
        probe_id: id.into(),
        kind: ProbeKind::Task,
        tier: Some(tier),
        asked_at: 10,
        checkpoint,
        at_risk,
        score,
        facts: vec![if score > 0.0 { FoundIn::Summary } else { FoundIn::Lost }],
        judge: "offline".into(),
        if_sent: None,
        llm: None,
        verdict: Default::default(),
        evidence: Vec::new(),
    }
}

fn event(summary: &str) -> CompactionRecord {
    CompactionRecord {
        call: 3,
        trigger: Trigger::Proactive,
        step: "summarize".into(),
        tokens_before: 120_000,
        tokens_after: 9_000,
        estimate_before: 118_000,
        estimate_after: 8_800,
        messages_before: 90,
        messages_after: 3,
        removed: 88,
        masked: 0,
        round: Some(1),
        fallback: None,
        shortfall: None,
        summary: summary.into(),
        violations: Vec::new(),
        next_action: None,
        agreement: None,
    }
}

fn record(data: &RunData, strategy: &str, dataset: &str, conversation: &str, probes: &[P]) -> PairRecord {
    let c = data.manifest.experiment.configurations.iter().find(|c| c.strategy == strategy).expect("configured");
    let summary = if strategy == "truncate" { "" } else { "what happened" };
    PairRecord {
        content_hash: None,
        failure: None,
        conversation_id: conversation.into(),
        dataset: dataset.into(),
        config_id: c.config_id.clone(),
        strategy: strategy.into(),
        params: c.params.clone(),
        window: 128_000,
        judge: "offline".into(),
        outcome: PairOutcome::Ok(Box::new(PairMetrics {
            calls: 8,
            compactions: 1,
            probes: probes.iter().copied().map(probe).collect(),
            compaction_events: vec![event(summary)],
            ..PairMetrics::default()
        })),
    }
}

fn run(experiment: &str) -> RunData {
    let experiment = Experiment::parse(experiment, Path::new("experiments/real-unit.toml"), &runner::catalog::Catalog)
        .expect("valid");
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        experiment_id: "real-unit-00000000".into(),
        experiment,
        probes: Vec::new(),
        versions: Default::default(),
        tool_version: "0.0.0".into(),
        git_commit: None,
        started_at: "2025-01-01T00:00:00Z".into(),
        seed: 7,
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
        conversations: 0,
        counts: Counts::default(),
        timings: Timings::default(),
        dataset_problems: Vec::new(),
        complete: true,
        llm: None,
        stopped: None,
        external: Vec::new(),
    };
    RunData { manifest, records: Vec::new() }
}

const C: Tier = Tier::Critical;
const U: Tier = Tier::Useful;
const D: Tier = Tier::Detail;

/// Two conversations. Pairs at risk under both, critical or useful: s1 (p1@50, p2@100) and
/// s2 (p1@100, asked after a rejected call under anthropic-compaction). Left out: a pair at
/// risk under one only, a detail probe, a pair of a conversation `recorded` did not replay.
fn small() -> RunData {
    let mut data = run(WITH_RECORDED);
    let rows = [
        ("recorded", "s1", vec![("p1", 50, true, 0.5, C), ("p2", 100, true, 1.0, U), ("p3", 100, true, 0.0, C)]),
        (
            "anthropic-compaction",
            "s1",
            vec![("p1", 50, true, 1.0, C), ("p2", 100, true, 1.0, U), ("p3", 100, false, 1.0, C)],
        ),
        ("truncate", "s1", vec![("p1", 50, true, 0.0, C), ("p2", 100, true, 0.0, U)]),
        ("recorded", "s2", vec![("p1", 100, true, 0.0, C), ("d", 100, true, 0.0, D)]),
        ("anthropic-compaction", "s2", vec![("p1", 100, true, 1.0, C), ("d", 100, true, 1.0, D)]),
        ("anthropic-compaction", "s3", vec![("p1", 100, true, 1.0, C)]),
    ];
    for (strategy, conv, probes) in rows {
        let mut r = record(&data, strategy, "cc.jsonl", conv, &probes);
        // s2 under anthropic-compaction: asked after a rejected call, so the headline scores 0;
        // the summary kept the fact, and that is what is compared.
        if let (PairOutcome::Ok(m), "anthropic-compaction", "s2") = (&mut r.outcome, strategy, conv) {
            m.probes[0].score = 0.0;
            m.probes[0].if_sent = Some(1.0);
        }
        data.records.push(r);
    }
    data
}

#[test]
fn a_summarizing_configuration_sits_beside_recorded_on_the_probes_at_risk_under_both() {
    let data = small();
    let rows = compare(&data);
    assert_eq!(rows.len(), 1, "truncate inserts no summary, so only anthropic-compaction: {rows:?}");
    let r = &rows[0];
    assert_eq!((r.strategy.as_str(), r.dataset.as_str(), r.window), ("anthropic-compaction", "cc.jsonl", 128_000));
    assert!(r.recorded_config_id.starts_with("recorded-"), "{}", r.recorded_config_id);
    assert!(r.stand_in_summary);
    assert_eq!((r.probes, r.conversations, r.rejected_probes), (3, 2, 1));
    // recorded: s1 (0.5 + 1.0) / 2, s2 0.0; weighted by pairs: (0.75 * 2 + 0) / 3.
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
    assert!(close(r.real.value, 0.5), "{:?}", r.real.value);
    assert!(close(r.stand_in.value, 1.0), "{:?}", r.stand_in.value);
    assert!(close(r.difference.mean, 0.5), "{:?}", r.difference.mean);
    assert_eq!((r.real.probes, r.real.conversations), (Some(3), 2));
    // Two conversations: a sign test, not an interval, and two wins of two are not enough.
    assert_eq!(r.difference.pairs, 2);
    assert!(r.difference.interval.is_none());
    assert!(r.difference.sign_p.is_some_and(|p| (p - 0.25).abs() < 1e-9), "{:?}", r.difference.sign_p);
    assert!(!r.difference.detectable);
}

#[test]
fn enough_conversations_give_an_interval_and_a_detectable_difference_either_way() {
    for stand_in_wins in [true, false] {
        let mut data = run(WITH_RECORDED);
        for i in 0..12 {
            let conv = format!("s{i}");
            let (real, ours) = if stand_in_wins { (0.25, 0.75) } else { (0.75, 0.25) };
            let jitter = i as f64 / 100.0;
            let r = record(&data, "recorded", "cc.jsonl", &conv, &[("p", 100, true, real + jitter, C)]);
            data.records.push(r);
            let r = record(&data, "anthropic-compaction", "cc.jsonl", &conv, &[("p", 100, true, ours - jitter, C)]);
            data.records.push(r);
        }
        let rows = compare(&data);
        let d = &rows[0].difference;
        assert_eq!(d.pairs, 12);
        let (lo, hi) = d.interval.expect("an interval from 10 conversations on");
        assert!(d.detectable);
        if stand_in_wins {
            assert!(lo > 0.0 && hi < 1.0, "[{lo}, {hi}]");
        } else {
            assert!(hi < 0.0 && lo > -1.0, "[{lo}, {hi}]");
        }
        let html = crate::html::render(&data, &crate::html::ProbeTexts::default(), compaction_strategies::family);
        let reading = if stand_in_wins { "the stand-in keeps more" } else { "the real summary keeps more" };
        assert!(html.contains(reading), "{reading}");
    }
}

#[test]
fn several_datasets_get_their_own_rows_and_a_pooled_one() {
    let mut data = small();
    let r = record(&data, "recorded", "spotter.jsonl", "t1", &[("q", 100, true, 1.0, C)]);
    data.records.push(r);
    let r = record(&data, "anthropic-compaction", "spotter.jsonl", "t1", &[("q", 100, true, 0.0, C)]);
    data.records.push(r);
    let rows = compare(&data);
    let got: Vec<(&str, usize, usize)> = rows.iter().map(|r| (r.dataset.as_str(), r.probes, r.conversations)).collect();
    assert_eq!(got, vec![("cc.jsonl", 3, 2), ("spotter.jsonl", 1, 1), (ALL_DATASETS, 4, 3)]);
    let pooled = &rows[2];
    // recorded (1.5 + 0 + 1) / 4, anthropic-compaction (2 + 1 + 0) / 4.
    assert!(pooled.real.value.is_some_and(|v| (v - 0.625).abs() < 1e-9), "{:?}", pooled.real.value);
    assert!(pooled.stand_in.value.is_some_and(|v| (v - 0.75).abs() < 1e-9), "{:?}", pooled.stand_in.value);
}

#[test]
fn the_report_and_the_csv_show_real_against_stand_in_only_with_recorded() {
    let data = small();
    let html = crate::html::render(&data, &crate::html::ProbeTexts::default(), compaction_strategies::family);
    assert!(html.contains("id=\"real-summaries\""));
    assert!(html.contains("Real summaries against the stand-in"));
    assert!(html.contains("written by the offline stand-in"));
    // The row: 3 probes, 2 conversations, 50.0% real, 100.0% stand-in, +50.0 pt, a sign test.
    let section = html.split("id=\"real-summaries\"").nth(1).expect("section");
    let section = section.split("</table>").next().expect("table");
    for text in ["anthropic-compaction-128k", ">3<", ">2<", "50.0%", "100.0%", "+50.0 pt", "sign test p=0.25"] {
        assert!(section.contains(text), "{text} in {section}");
    }
    assert!(!section.contains("truncate-128k"), "truncate does not summarize");

    let root = std::env::temp_dir().join(format!("compactlens-real-{}", std::process::id()));
    let dir = root.join("with");
    crate::write_outputs(&dir, &data).expect("writes");
    let text = std::fs::read_to_string(dir.join(REAL_CSV)).expect("real_vs_stand_in.csv");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(REAL_HEADER.join(",").as_str()));
    let row: Vec<&str> = lines.next().expect("a row").split(',').collect();
    let col = |name: &str| row[REAL_HEADER.iter().position(|h| *h == name).expect("column")];
    assert_eq!((col("probes"), col("conversations"), col("rejected_probes")), ("3", "2", "1"));
    assert_eq!((col("real_retention"), col("stand_in_retention"), col("difference")), ("0.5", "1", "0.5"));
    assert_eq!((col("difference_ci_low"), col("difference_sign_p"), col("detectable")), ("", "0.25", "false"));
    assert_eq!(lines.next(), None);

    // Without `recorded`: no section, no file.
    let mut without = run(&WITH_RECORDED.replace("name = \"recorded\"", "name = \"none\""));
    for r in &data.records {
        if r.strategy != "recorded" {
            without.records.push(r.clone());
        }
    }
    assert!(compare(&without).is_empty());
    let html = crate::html::render(&without, &crate::html::ProbeTexts::default(), compaction_strategies::family);
    assert!(!html.contains("real-summaries"));
    let dir = root.join("without");
    crate::write_outputs(&dir, &without).expect("writes");
    assert!(dir.join(SUMMARY_CSV_NAME).exists() && !dir.join(REAL_CSV).exists());
    std::fs::remove_dir_all(&root).expect("cleans up");
}

#[test]
fn the_row_struct_and_the_header_agree() {
    let mut w = ::csv::WriterBuilder::new().has_headers(true).from_writer(Vec::new());
    w.serialize(RealRow::default()).expect("serializes");
    let text = String::from_utf8(w.into_inner().expect("flushes")).expect("utf-8");
    assert_eq!(text.lines().next().expect("header").split(',').collect::<Vec<_>>(), REAL_HEADER);
}
