//! The verdict on small hand-built run folders.

use super::*;

/// One configuration of a hand-built run: per conversation, whether it completed and
/// compacted, its cost, and its two probes' scores (at risk when it compacted).
struct Spec {
    id: &'static str,
    strategy: &'static str,
    params: &'static str,
    completed: fn(usize) -> bool,
    compacted: fn(usize) -> bool,
    cost: f64,
    score: fn(usize) -> f64,
}

fn spec(id: &'static str, score: fn(usize) -> f64, cost: f64) -> Spec {
    Spec { id, strategy: id, params: "{}", completed: |_| true, compacted: |_| true, cost, score }
}

/// The files of a run of `specs` at 32k over `n` conversations of dataset `d1`; `summary_extra`
/// adds columns to summary.csv (`name`, then one value per spec), `tier` tags probe p2.
fn files(
    specs: &[Spec],
    n: usize,
    manifest_extra: &str,
    summary_extra: Option<(&str, &[&str])>,
    tier: Option<&str>,
) -> RunFiles {
    let configs: Vec<String> = specs
        .iter()
        .map(|s| {
            format!(r#"{{"config_id":"{}","strategy":"{}","params":{},"window":32000}}"#, s.id, s.strategy, s.params)
        })
        .collect();
    let manifest = format!(
        r#"{{"experiment":{{"name":"t","configurations":[{}]}},"seed":7,"summarizer":"offline","judge":"offline"{manifest_extra}}}"#,
        configs.join(",")
    );
    let mut summary = String::from("config_id,strategy,dataset,failed,compactions_mean,rejected_requests_openai");
    if let Some((col, _)) = summary_extra {
        summary.push_str(&format!(",{col}"));
    }
    summary.push('\n');
    for (i, s) in specs.iter().enumerate() {
        for d in ["all", "d1"] {
            summary.push_str(&format!("{},{},{d},0,{},0", s.id, s.strategy, if (s.compacted)(0) { 1 } else { 0 }));
            if let Some((_, values)) = summary_extra {
                summary.push_str(&format!(",{}", values[i]));
            }
            summary.push('\n');
        }
    }
    let mut results = String::from("conversation_id,dataset,config_id,status,completed,compactions,cost_usd\n");
    let mut probes = String::from("conversation_id,dataset,config_id,probe_id,at_risk,score");
    probes.push_str(if tier.is_some() { ",tier\n" } else { "\n" });
    for s in specs {
        for c in 0..n {
            results.push_str(&format!(
                "c{c},d1,{},ok,{},{},{}\n",
                s.id,
                (s.completed)(c),
                if (s.compacted)(c) { 2 } else { 0 },
                s.cost
            ));
            for p in ["p1", "p2"] {
                probes.push_str(&format!("c{c},d1,{},{p},{},{}", s.id, (s.compacted)(c), (s.score)(c)));
                match tier {
                    Some(t) => probes.push_str(&format!(",{}\n", if p == "p2" { t } else { "critical" })),
                    None => probes.push('\n'),
                }
            }
        }
    }
    RunFiles { manifest, summary, results, probes }
}

fn standard() -> Vec<Spec> {
    vec![
        spec("a", |_| 0.9, 1.0),
        spec("b", |_| 0.5, 1.0),
        spec("c", |c| if c % 2 == 0 { 1.0 } else { 0.75 }, 0.5),
        Spec { compacted: |_| false, ..spec("d", |_| 1.0, 0.2) },
        Spec { completed: |c| c % 2 == 0, ..spec("e", |_| 1.0, 0.1) },
    ]
}

fn verdict(f: &RunFiles) -> Verdict {
    Verdict::from_files(f, "run").expect("a valid run")
}

fn pooled(v: &Verdict) -> &View {
    v.pooled().next().expect("a window").1
}

#[test]
fn the_front_the_best_and_what_beats_the_rest() {
    let v = verdict(&files(&standard(), 24, "", None, None));
    assert_eq!(v.windows.len(), 1);
    let view = pooled(&v);
    assert_eq!(view.dataset, ALL_DATASETS);
    assert_eq!(view.front, ["a", "c"], "a retains most, c costs least");
    let a = Verdict::entry(view, "a").expect("a");
    assert_eq!(a.completion.value, Some(1.0));
    assert_eq!(a.completion.conversations, 24);
    assert!((a.retention.value.expect("scored") - 0.9).abs() < 1e-9);
    assert_eq!(a.retention.probes, Some(48), "two probes at risk in each of 24 conversations");
    // How sure: a against c differs by 2.5 points, which the conversations cannot tell apart.
    let best = view.best.as_ref().expect("a best");
    assert_eq!(best.config_id, "a");
    let up = best.runner_up.as_ref().expect("c is second");
    assert_eq!(up.by, "a");
    assert!((up.retention.mean.expect("compared") - 0.025).abs() < 1e-9);
    let (lo, hi) = up.retention.interval.expect("24 pairs: a bootstrap");
    assert!(lo < 0.0 && hi > 0.0, "[{lo}, {hi}] covers 0");
    assert!(!up.retention.detectable);
    assert!(up.cost.detectable, "a costs 0.5 more in every conversation");
    assert!((up.cost.mean.expect("priced") - 0.5).abs() < 1e-9);
    assert_eq!((up.both_compacted, up.probes), (24, 48), "the comparison carries what it rests on");
    // So a and c are a tie, and c, the cheaper, is the pick, with its saving.
    let tie = view.tie.as_ref().expect("no detectable difference on 24 conversations");
    assert_eq!(tie.members, ["a", "c"]);
    assert_eq!(tie.cheapest, "c");
    assert!((tie.saving.expect("priced") - 0.5).abs() < 1e-9);
    assert!((tie.saving_share.expect("priced") - 0.5).abs() < 1e-9);
    assert_eq!(view.pick().map(|e| e.config_id.as_str()), Some("c"));
    let mut html = String::new();
    crate::html::verdict::verdict_view(&mut html, &v, ALL_DATASETS);
    assert!(html.contains("<b>c (cheapest of a tie)</b>"), "no bold best that the tie contradicts: {html}");
    assert_eq!(
        view.tie_line().expect("a tie line"),
        "tie: a, c: no detectable difference in completion or at-risk retention (each against a on at least 24 conv. compacted under both); c is $0.5000 (50.0%) cheaper per conversation than a"
    );
    // b is beaten by a, by 40 points, detectably.
    let Standing::Beaten(b) = &Verdict::entry(view, "b").expect("b").standing else { panic!("b is beaten") };
    assert_eq!(b.by, "a");
    assert!((b.retention.mean.expect("compared") - 0.4).abs() < 1e-9);
    assert!(b.retention.detectable && b.detectable());
    assert!(!b.completion.detectable, "both complete everything");
    // d never compacted; e loses half its conversations while others complete all.
    assert!(
        matches!(&Verdict::entry(view, "d").expect("d").standing, Standing::NotRanked { reason } if reason.contains("never compacted"))
    );
    let Standing::Beaten(e) = &Verdict::entry(view, "e").expect("e").standing else { panic!("e is beaten") };
    assert_eq!(e.by, "a");
    assert!((e.completion.mean.expect("compared") - 0.5).abs() < 1e-9 && e.completion.detectable);
    let kinds: Vec<WarningKind> = view.warnings.iter().map(|w| w.kind).collect();
    assert_eq!(kinds, [WarningKind::NeverExercised, WarningKind::RejectedCalls]);
    assert_eq!(view.warnings[0].configurations, ["d"]);
    assert_eq!(view.warnings[1].configurations, ["e"]);
}

#[test]
fn fewer_than_twenty_conversations_compacted_under_both_is_too_little_evidence_for_that_comparison() {
    let v = verdict(&files(&standard(), 19, "", None, None));
    let view = pooled(&v);
    let w = &view.warnings[0];
    assert_eq!(w.kind, WarningKind::TooLittleEvidence);
    assert_eq!(
        w.message,
        "too little evidence to tell the best from one other on the front (19 conversations compacted under both; at least 20 are needed)"
    );
    assert_eq!(w.configurations, ["c"]);
    assert!(view.tie.is_none(), "no tie is named on too little evidence");
    assert!(v.text().contains("on 19 conv. compacted under both, 38 probes at risk under both: too little evidence"));
    let v = verdict(&files(&standard(), 20, "", None, None));
    assert!(!pooled(&v).warnings.iter().any(|w| w.kind == WarningKind::TooLittleEvidence));
    assert!(!v.text().contains("too little evidence"), "{}", v.text());
}

#[test]
fn a_configuration_that_compacts_rarely_never_shrinks_another_comparison() {
    // r compacts in 3 of 24 conversations; before, the paired set was the intersection over
    // every configuration, and r's 3 conversations were all the others rested on.
    let mut specs = standard();
    specs.push(Spec { compacted: |c| c < 3, ..spec("r", |_| 0.95, 2.0) });
    let v = verdict(&files(&specs, 24, "", None, None));
    let view = pooled(&v);
    let up = view.best.as_ref().and_then(|b| b.against.iter().find(|a| a.config_id == "c")).expect("a against c");
    assert_eq!(up.comparison.both_compacted, 24, "a against c rests on every conversation both compacted");
    let r = Verdict::entry(view, "r").expect("r");
    assert_eq!(r.compacted_conversations, 3);
    assert_eq!(r.retention.conversations, 3);
    assert!(v.text().contains("r (exercised in 3 of 24 conv.)"), "{}", v.text());
    // r against a: its own comparison says it rests on 3 conversations.
    let against_r = match &r.standing {
        Standing::Beaten(c) => c.as_ref().clone(),
        Standing::Front => view
            .best
            .as_ref()
            .and_then(|b| b.against.iter().find(|a| a.config_id == "r"))
            .map(|a| a.comparison.clone())
            .expect("compared with the best"),
        Standing::NotRanked { reason } => panic!("r is ranked: {reason}"),
    };
    assert_eq!(against_r.both_compacted, 3);
    assert!(!against_r.enough_evidence());
}

#[test]
fn a_stand_in_summarizer_is_flagged_or_inferred() {
    let inferred = verdict(&files(&standard(), 24, "", None, None));
    assert!(inferred.stand_in_summary);
    assert_eq!(inferred.warnings[0].kind, WarningKind::StandInSummarizer);
    assert!(inferred.notes.iter().any(|n| n.contains("no stand_in_summary flag")));
    let flagged = verdict(&files(&standard(), 24, r#","stand_in_summary":false"#, None, None));
    assert!(!flagged.stand_in_summary && flagged.warnings.is_empty());
    assert!(!flagged.notes.iter().any(|n| n.contains("stand_in_summary")));
}

#[test]
fn an_inapplicable_configuration_is_not_ranked_and_says_why() {
    let extra =
        ("applicable,inapplicable_reason", &["true,", "true,", "false,window below its reserve", "true,", "true,"][..]);
    let v = verdict(&files(&standard(), 24, "", Some(extra), None));
    let view = pooled(&v);
    assert_eq!(view.front, ["a"], "c cannot operate, so a stands alone");
    assert!(matches!(&Verdict::entry(view, "c").expect("c").standing,
        Standing::NotRanked { reason } if reason == "cannot operate at this window: window below its reserve"));
    assert!(view.warnings.iter().any(|w| w.kind == WarningKind::Inapplicable && w.configurations == ["c"]));
    assert!(!v.notes.iter().any(|n| n.contains("applicable")), "the column is there");
    let without = verdict(&files(&standard(), 24, "", None, None));
    assert!(without.notes.iter().any(|n| n.contains("no applicable column")));
}

#[test]
fn tiers_keep_critical_and_useful_probes_only() {
    let v = verdict(&files(&standard(), 24, "", None, Some("detail")));
    let a = Verdict::entry(pooled(&v), "a").expect("a");
    assert_eq!(a.retention.probes, Some(24), "p2 is a detail probe");
    let v = verdict(&files(&standard(), 24, "", None, Some("useful")));
    assert_eq!(Verdict::entry(pooled(&v), "a").expect("a").retention.probes, Some(48));
    assert!(!v.notes.iter().any(|n| n.contains("tier")));
}

#[test]
fn a_sweep_names_its_values_on_the_front() {
    let specs = vec![
        Spec { params: r#"{"trigger":0.6}"#, strategy: "s", ..spec("s6", |_| 0.9, 1.0) },
        Spec { params: r#"{"trigger":0.7}"#, strategy: "s", ..spec("s7", |_| 0.8, 0.5) },
        Spec { params: r#"{"trigger":0.8}"#, strategy: "s", ..spec("s8", |_| 0.7, 0.6) },
    ];
    let v = verdict(&files(&specs, 24, "", None, None));
    let view = pooled(&v);
    assert_eq!(view.sweeps.len(), 1);
    let s = &view.sweeps[0];
    assert_eq!((s.strategy.as_str(), s.parameter.as_str()), ("s", "trigger"));
    let points: Vec<(&str, bool)> = s.points.iter().map(|p| (p.value.as_str(), p.on_front)).collect();
    assert_eq!(points, [("0.6", true), ("0.7", true), ("0.8", false)]);
    assert_eq!(view.sweep_lines(), ["s trigger: 0.6, 0.7 on the front (of 0.6, 0.7, 0.8)"]);
    assert_eq!(view.label_of("s7"), "s trigger=0.7");
}

#[test]
fn a_bad_cell_names_file_line_and_column() {
    let mut f = files(&standard(), 3, "", None, None);
    f.results = f.results.replacen(",ok,true,2,1", ",ok,true,two,1", 1);
    let err = Verdict::from_files(&f, "run").expect_err("not a number").to_string();
    assert_eq!(err, "run/results.csv:2: column compactions: \"two\" is not a number");
    let mut f = files(&standard(), 3, "", None, None);
    f.results = f.results.replace("completed", "done");
    let err = Verdict::from_files(&f, "run").expect_err("no column").to_string();
    assert_eq!(err, "run/results.csv: no column completed");
}

#[test]
fn text_markdown_and_json_tell_the_same_verdict() {
    let v = verdict(&files(&standard(), 24, "", None, None));
    let (text, short, markdown) = (v.text(), v.short_text(), v.markdown());
    let json: serde_json::Value = serde_json::to_value(&v).expect("serializes");
    let view = &json["windows"][0]["views"][0];
    assert_eq!(view["best"]["config_id"], "a");
    assert_eq!(view["front"], serde_json::json!(["a", "c"]));
    for out in [&text, &short, &markdown] {
        assert!(out.contains("a, c") || out.contains("`a`, `c`"), "{out}");
        assert!(out.contains("stand-in"), "{out}");
        // The tie is named with its cost in all three, and its cheapest is the pick.
        assert!(out.contains("c is $0.5000 (50.0%) cheaper per conversation than a"), "{out}");
    }
    assert!(text.contains("at-risk retention 90.0% [90.0, 90.0] (48 probes, 24 conv.)"), "{text}");
    for out in [&short, &markdown] {
        assert!(out.contains("87.5% [82.3, 92.7] (48 probes, 24 conv.)"), "the pick's figures: {out}");
    }
    assert!(text.contains("b: beaten by a: completion +0.0 pt [+0.0, +0.0], no detectable difference; at-risk retention +40.0 pt [+40.0, +40.0];"), "{text}");
    assert!(markdown.contains("| `b` | `a` |"), "{markdown}");
    assert!(short.contains("32k front: a, c"), "{short}");
}

#[test]
fn a_sign_test_states_its_threshold_beside_its_p() {
    let d = |p: f64, detectable: bool| Difference {
        pairs: 8,
        mean: Some(0.013),
        interval: None,
        sign_p: Some(p),
        detectable,
    };
    assert_eq!(
        render::difference(&d(0.03125, false), false),
        "+1.3 pt (one-sided sign test p=0.031, not under 0.025; 8 conv.), no detectable difference"
    );
    assert_eq!(
        render::difference(&d(0.0039, true), false),
        "+1.3 pt (one-sided sign test p=0.004, under 0.025; 8 conv.)"
    );
}

#[test]
fn the_answer_keys_line_sets_the_recorded_summaries_beside_the_rest() {
    let specs = vec![spec("a", |_| 0.9, 1.0), Spec { strategy: "recorded", ..spec("rec", |_| 0.8, 1.0) }];
    let v = verdict(&files(&specs, 24, "", Some(("state_retention", &["0.95", "0.8"])), None));
    let line = pooled(&v).state.clone().expect("a state line where summary.csv has state retention");
    assert!(line.contains("the recorded agent's own summaries 80.0%"), "{line}");
    // A configuration whose compactions summary.csv does not count is not among those that
    // compacted: the line does not rank what it cannot tell was exercised.
    assert!(!line.contains("95.0%"), "{line}");
    assert!(verdict(&files(&standard(), 24, "", None, None))
        .windows
        .iter()
        .all(|w| w.views.iter().all(|v| v.state.is_none())));
}

#[test]
fn readiness_gets_a_line_only_where_it_separates_the_front() {
    let columns = "next_action_ready,next_action_ready_ci_low,next_action_ready_ci_high,next_action_compactions";
    // The front is a and c; c's next actions find what they need far less often.
    let apart = ["0.95,0.9,0.99,40", "0.5,0.45,0.55,40", "0.2,0.1,0.3,40", ",,,0", ",,,0"];
    let v = verdict(&files(&standard(), 24, "", Some((columns, &apart)), None));
    let line = pooled(&v).readiness.clone().expect("the intervals do not overlap");
    assert!(line.contains("95.0%") && line.contains("20.0%") && line.contains("over 40 compactions"), "{line}");
    assert!(!line.contains("50.0%"), "b is not on the front: {line}");
    assert!(v.text().contains(&line));
    let mut html = String::new();
    crate::html::verdict::verdict_view(&mut html, &v, ALL_DATASETS);
    assert!(html.contains(&crate::html::escape(&line)), "the report's verdict has the line too");
    // Overlapping intervals: no line.
    let close = ["0.95,0.8,0.99,40", "0.5,0.45,0.55,40", "0.9,0.85,0.97,40", ",,,0", ",,,0"];
    let v = verdict(&files(&standard(), 24, "", Some((columns, &close)), None));
    assert_eq!(pooled(&v).readiness, None);
    // No readiness at all (a run before it was measured): no line.
    assert_eq!(pooled(&verdict(&files(&standard(), 24, "", None, None))).readiness, None);
}
