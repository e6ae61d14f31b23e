use std::path::Path;

use compaction::{ProbeKind, Trigger};
use runlog::experiment::Experiment;
use runlog::log::{Counts, Manifest, RunData, Timings, MANIFEST_FORMAT};
use runlog::record::{CallPoint, CompactionRecord, FoundIn, PairMetrics, PairOutcome, PairRecord, ProbeScore};

use super::*;

/// Text that would run script, load a resource or break out of an element if it were not
/// escaped.
const HOSTILE: &str = concat!(
    "<script>document.title='pwned'</script>",
    "<img src=x onerror=\"document.title='pwned'\">",
    "</style><style>body{display:none}</style>",
    "<a href=\"javascript:alert(1)\">click</a>",
    "</pre></td></table>'\"&",
);

const EXPERIMENT: &str = r#"
name = "html-unit"
datasets = ["none.jsonl"]
windows = [2000]
seed = 1

[[strategy]]
name = "none"

[[strategy]]
name = "truncate"
"#;

fn metrics(retention: f64, summary: &str, lost: bool) -> PairMetrics {
    PairMetrics {
        calls: 4,
        compactions: 1,
        peak_tokens: 1_900,
        input_tokens: 4_000,
        uncompacted_input_tokens: 6_000,
        retention: Some(retention),
        probes: vec![ProbeScore {
            written: false,
            probe_id: HOSTILE.into(),
            kind: ProbeKind::Recall,
            tier: None,
            asked_at: 8,
            checkpoint: 100,
            at_risk: true,
            score: if lost { 0.5 } else { 1.0 },
            facts: vec![FoundIn::Summary, if lost { FoundIn::Lost } else { FoundIn::Verbatim }],
            judge: "offline".into(),
            llm: None,
            if_sent: None,
            verdict: Default::default(),
            evidence: Vec::new(),
        }],
        compaction_events: vec![CompactionRecord {
            step: HOSTILE.into(),
            round: Some(1),
            summary: summary.into(),
            ..event(2)
        }],
        timeline: (0..4u32)
            .map(|call| CallPoint {
                call,
                message_index: call as usize * 2 + 2,
                request_tokens: [500, 1_200, 600, 1_000][call as usize],
                estimate: [480, 1_150, 580, 950][call as usize],
                cached_tokens: 0,
                compacted: call == 2,
                overflow: false,
                check_tokens: 0,
                check_estimate: 0,
            })
            .collect(),
        ..PairMetrics::default()
    }
}

fn run_data() -> RunData {
    let experiment = Experiment::parse(EXPERIMENT, Path::new("experiments/html-unit.toml"), &runner::catalog::Catalog)
        .expect("valid");
    let mut records = Vec::new();
    for (i, c) in experiment.configurations.iter().enumerate() {
        records.push(PairRecord {
            content_hash: None,
            failure: None,
            conversation_id: HOSTILE.into(),
            dataset: "evil.jsonl".into(),
            config_id: c.config_id.clone(),
            strategy: c.strategy.clone(),
            params: c.params.clone(),
            window: 2_000,
            judge: "offline".into(),
            outcome: PairOutcome::Ok(Box::new(metrics(0.5 + 0.25 * i as f64, HOSTILE, i == 0))),
        });
    }
    records.push(PairRecord {
        content_hash: None,
        failure: None,
        conversation_id: "c-failed".into(),
        dataset: "evil.jsonl".into(),
        config_id: experiment.configurations[0].config_id.clone(),
        strategy: "none".into(),
        params: serde_json::json!({}),
        window: 2_000,
        judge: "offline".into(),
        outcome: PairOutcome::Failed { error: HOSTILE.into() },
    });
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        experiment_id: "html-unit-00000000".into(),
        experiment: Experiment { description: Some(HOSTILE.into()), ..experiment },
        probes: Vec::new(),
        versions: Default::default(),
        tool_version: "0.0.0".into(),
        git_commit: Some(HOSTILE.into()),
        started_at: "2025-01-01T00:00:00Z".into(),
        seed: 1,
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
        conversations: 2,
        counts: Counts::default(),
        timings: Timings::default(),
        dataset_problems: vec![HOSTILE.into()],
        complete: true,
        llm: None,
        stopped: None,
        external: Vec::new(),
    };
    RunData { manifest, records }
}

/// The page's real tags (without `<` and `>`): the text between a `<` and the next `>`.
/// Escaped text holds no `<`, so everything found here is markup the page wrote.
fn tags(html: &str) -> Vec<&str> {
    html.split('<').skip(1).filter_map(|piece| piece.split_once('>').map(|(tag, _)| tag)).collect()
}

#[test]
fn escape_covers_the_five_characters() {
    assert_eq!(
        escape(r#"<a href="x" title='y'>&</a>"#),
        "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
    );
    assert_eq!(escape("plain text, ünïcode"), "plain text, ünïcode");
    // A right-to-left override in an id would reverse the text after it.
    assert_eq!(escape("conv\u{202e}gpj.exe"), "conv[U+202E]gpj.exe");
    assert_eq!(escape("a\u{2066}b\u{2069}"), "a[U+2066]b[U+2069]");
}

#[test]
fn base64_and_the_script_hash() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"hello world"), "aGVsbG8gd29ybGQ=");
    // The SHA-256 of the empty string, as CSP writes it.
    assert_eq!(script_hash_source(""), "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='");
}

#[test]
fn the_page_is_self_contained_and_its_script_is_allowed_by_hash() {
    let html = render(&run_data(), &ProbeTexts::default(), compaction_strategies::family);
    let csp = content_security_policy();
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    assert!(!csp.contains("unsafe-eval"));
    assert!(!csp.contains("script-src 'unsafe-inline'"));
    // The CSP is the first thing in <head> after the charset, so it covers everything after it.
    let head = html.find("<head>").expect("head");
    let meta = html.find("Content-Security-Policy").expect("csp meta");
    assert!(meta > head && meta < html.find("<title>").expect("title"));
    // Exactly one script, whose text hashes to the source the CSP allows.
    assert_eq!(html.matches("<script>").count(), 1, "only the page's own script tag is real");
    let start = html.find("<script>").expect("script") + "<script>".len();
    let end = html[start..].find("</script>").expect("end") + start;
    assert!(csp.contains(&script_hash_source(&html[start..end])));
    // Nothing points outside the file: no tag has a source or a link other than an anchor
    // on the page, and neither the style nor the script names a URL.
    for tag in tags(&html) {
        assert!(!tag.contains(" src=") && !tag.contains(" srcset=") && !tag.contains("xlink:href"), "{tag}");
        if let Some(at) = tag.find(" href=") {
            assert!(tag[at..].starts_with(" href=\"#"), "{tag}");
        }
    }
    for needle in ["http://", "https://", "@import", "url("] {
        assert!(!STYLE.contains(needle) && !SCRIPT.contains(needle), "found {needle:?}");
    }
}

#[test]
fn hostile_text_renders_as_text_everywhere() {
    let html = render(&run_data(), &ProbeTexts::default(), compaction_strategies::family);
    // Only the page's own tags: no injected element survives. The one script runs; the others
    // are data blocks, each closed once.
    let data_blocks = html.matches("<script type=\"application/json\" id=\"").count();
    assert_eq!(data_blocks, 2, "the lost facts' data and the conversations' detail");
    assert_eq!(html.matches("<script").count(), 1 + data_blocks);
    assert_eq!(html.matches("</script>").count(), 1 + data_blocks);
    let lost = lost_data(&html);
    assert!(lost["rows"].as_array().expect("rows").iter().any(|r| r[2] == HOSTILE), "the probe id, as text: {lost}");
    // The step and the summary are data the script puts in the page as text.
    let detail = detail_data(&html);
    let row = &detail["v"][0][3][0][12][0];
    assert_eq!((&row[3], &row[13]), (&serde_json::json!(HOSTILE), &serde_json::json!(HOSTILE)), "{row}");
    assert_eq!(html.matches("<img").count(), 0);
    assert!(tags(&html).iter().filter(|t| t.starts_with("a ")).all(|t| t.starts_with("a href=\"#")));
    // The page's own script is code, not markup: its comparisons are not tags.
    let markup = html.replace(SCRIPT, "");
    assert!(tags(&markup).iter().all(|t| !t.contains(" on")), "no event handler attribute");
    assert_eq!(html.matches("<style").count(), 1);
    assert_eq!(html.matches("</style>").count(), 1);
    assert!(!html.contains("javascript:alert(1)\""));
    // The hostile text is there, escaped, in each place it reaches in the markup: conversation
    // id (the picker, the events list), error, description, commit (header and manifest),
    // dataset problem.
    let escaped = escape(HOSTILE);
    assert!(html.matches(escaped.as_str()).count() >= 7, "{}", html.matches(escaped.as_str()).count());
}

#[test]
fn the_sections_are_all_there() {
    let data = run_data();
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    let mut at = 0;
    for id in [
        "verdict",
        "leaderboard",
        "families",
        "pareto",
        "kinds",
        "timelines",
        "lost",
        "compactions",
        "manifest",
        "problems",
    ] {
        let found = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("section {id}"));
        assert!(found > at, "section {id} is out of order: the page opens on the verdict, then the leaderboard");
        at = found;
    }
    // One leaderboard row and one Pareto point per chart for each configuration.
    let table = &html[html.find("id=\"leaderboard-table\"").expect("table")..];
    let body = &table[..table.find("</table>").expect("end")];
    assert_eq!(body.matches("<tr>").count(), 1 + data.manifest.experiment.configurations.len());
    // No price: one Pareto point per configuration (tokens kept), and the cost chart says why
    // it is missing rather than drawing every configuration at $0.
    assert_eq!(html.matches("class=\"point\"").count(), data.manifest.experiment.configurations.len());
    assert!(html.contains("id=\"cost-not-measured\""));
    // Requests a provider would refuse and findings are listed apart in Problems.
    assert!(html.contains("id=\"rejections\"") && html.contains("id=\"findings\""));
    // The best configuration leads the leaderboard and sits on the frontier.
    let truncate = &data.manifest.experiment.configurations[1].config_id;
    let first_row = &body[body.find("<tbody>").expect("tbody")..];
    assert!(first_row[..first_row.find("</tr>").expect("row")].contains(truncate.as_str()));
    assert!(html.contains("75.0%"), "the truncate configuration's retention");
    // Each row names its family, and the family view groups the rows under their family.
    assert!(first_row.contains("<span class=\"tag\">baseline</span>"));
    let families = &html[html.find("id=\"families-table\"").expect("families table")..];
    let families = &families[..families.find("</table>").expect("end")];
    assert_eq!(
        families.matches("<tr class=\"group\">").count(),
        data.manifest
            .experiment
            .configurations
            .iter()
            .map(|c| family_or_external(compaction_strategies::family, &c.strategy))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    // The timelines are data, drawn on demand: a pair per configuration of the replayed
    // conversation, with its window and every call; the failed pair with its error.
    let detail = detail_data(&html);
    let conversations = detail["v"].as_array().expect("conversations");
    assert_eq!(conversations.len(), 2, "{detail}");
    assert!(!html.contains("id=\"detail-left-out\""), "everything is embedded");
    let pairs = conversations[0][3].as_array().expect("pairs");
    assert_eq!(pairs.len(), 2);
    for p in pairs {
        assert_eq!((&p[1], &p[2], &p[3]), (&serde_json::json!(2000), &serde_json::Value::Null, &serde_json::json!(4)));
        // Calls 0..4 as steps, request tokens, estimate - request tokens.
        assert_eq!(p[8], serde_json::json!([0, 500, -20, 1, 1200, -50, 1, 600, -20, 1, 1000, -50]));
    }
    assert_eq!(conversations[1][3][0][2], HOSTILE, "the failed pair's error");
    assert_eq!(html.matches("<option value=\"").count() - html.matches("<option value=\"all\"").count(), 2, "picker");
    // The lost fact is embedded by number (no aliases known), under the configuration that lost
    // it: one row, one losing configuration, its second fact lost of two, one of two kept all.
    let lost = lost_data(&html);
    let rows = lost["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{lost}");
    assert_eq!(rows[0][7], serde_json::Value::Null, "no aliases, so facts are shown by number");
    assert_eq!(rows[0][8], serde_json::json!([[0, [1], 2, []]]), "no evidence recorded for the kept fact here");
    assert_eq!((rows[0][9].as_u64(), rows[0][10].as_u64()), (Some(1), Some(2)));
    assert!(lost["configs"][0][0].as_str().is_some_and(|id| html.contains(id)));
    assert!(html.contains("<details id=\"lost-details\">"), "drawn when opened");
    // The failed pair and the dataset problem are listed.
    assert!(html.contains("Failed pairs (1)") && html.contains("Dataset problems (1)"));
}

#[test]
fn fact_aliases_come_from_the_datasets_when_known() {
    let data = run_data();
    let mut conversation = compaction::Conversation::new(HOSTILE, vec![compaction::Message::user("hi")]);
    conversation.probes = vec![compaction::Probe {
        id: HOSTILE.into(),
        kind: ProbeKind::Recall,
        question: "Which <b>port</b>?".into(),
        answer: "8080".into(),
        facts: vec![vec!["alpha".into()], vec!["8080".into(), "port <8080>".into()]],
        source_message: 0,
        asked_at: None,
        tier: None,
        ..Default::default()
    }];
    let texts = ProbeTexts::from_conversations([("evil.jsonl", &conversation)]);
    let html = render(&data, &texts, compaction_strategies::family);
    // Embedded as data with `<` and `>` escaped, so the text cannot close the block.
    assert!(html.contains("Which \\u003cb\\u003eport\\u003c/b\\u003e?"));
    assert!(!html.contains("<b>port"));
    let lost = lost_data(&html);
    assert_eq!(lost["rows"][0][6], "Which <b>port</b>?");
    assert_eq!(lost["rows"][0][7], serde_json::json!(["alpha", "8080 | port <8080>"]));
}

#[test]
fn write_report_reads_a_run_folder_and_names_a_bad_one() {
    let dir = std::env::temp_dir().join(format!("compactlens-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let err = write_report(&dir, compaction_strategies::family).expect_err("no run.json");
    assert!(err.to_string().contains("run.json"), "{err}");

    let mut data = run_data();
    // run.json counts the records of the log (a log that disagrees is refused).
    (data.manifest.counts.ok, data.manifest.counts.failed) = runlog::log::count(&data.records);
    data.manifest.complete = true;
    runlog::log::write_manifest(&dir, &data.manifest).expect("manifest");
    let lines: String = data.records.iter().map(|r| serde_json::to_string(r).expect("json") + "\n").collect();
    std::fs::write(dir.join(runlog::log::RESULTS_FILE), &lines).expect("log");
    // A log cut short, or emptied, disagrees with run.json: refused, nothing written.
    std::fs::write(dir.join(runlog::log::RESULTS_FILE), &lines[..lines.len() - 10]).expect("log");
    let err = write_report(&dir, compaction_strategies::family).expect_err("cut short");
    assert!(err.to_string().contains("its last line is cut short"), "{err}");
    std::fs::write(dir.join(runlog::log::RESULTS_FILE), "").expect("log");
    let err = write_report(&dir, compaction_strategies::family).expect_err("empty");
    assert!(err.to_string().contains("holds no record"), "{err}");
    assert!(!dir.join(REPORT_HTML).exists());
    std::fs::write(dir.join(runlog::log::RESULTS_FILE), &lines).expect("log");
    let path = write_report(&dir, compaction_strategies::family).expect("renders");
    assert_eq!(path, dir.join(REPORT_HTML));
    let html = std::fs::read_to_string(&path).expect("written");
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    assert!(!dir.join("report.html.tmp").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cells of the leaderboard's body, as their opening tags.
fn leaderboard_cells(html: &str) -> Vec<&str> {
    let table = &html[html.find("id=\"leaderboard-table\"").expect("table")..];
    let body = &table[table.find("<tbody>").expect("tbody")..table.find("</tbody>").expect("end")];
    tags(body).into_iter().filter(|t| t.starts_with("td")).collect()
}

#[test]
fn every_numeric_leaderboard_cell_carries_its_value_for_sorting() {
    let data = run_data();
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    let cells = leaderboard_cells(&html);
    let numeric: Vec<&&str> = cells.iter().filter(|t| t.contains("class=\"num")).collect();
    // 20 numeric columns per configuration (window, the headline figures, rejections, then the details).
    assert_eq!(numeric.len(), 20 * data.manifest.experiment.configurations.len(), "{cells:#?}");
    for cell in numeric {
        assert!(cell.contains(" data-v=\""), "a numeric cell sorts as text: <{cell}>");
    }
    // The counts sort by value: the failed pair of the first configuration is its data-v.
    assert!(cells.iter().any(|t| t.contains("class=\"num bad\" data-v=\"1\"")), "failed = 1 carries data-v");
}

/// `run_data` with costs and token counts that put both configurations on the frontier of
/// both Pareto charts (the cheaper one retains less).
fn run_data_with_a_frontier() -> RunData {
    let mut data = run_data();
    for (i, r) in data.records.iter_mut().enumerate() {
        if let PairOutcome::Ok(m) = &mut r.outcome {
            m.cost_usd = Some(0.001 * (i + 1) as f64);
            m.input_tokens = 3_000 + 1_000 * i as u64;
        }
    }
    data
}

/// The `<svg>` elements of the Pareto section.
fn pareto_svgs(html: &str) -> Vec<&str> {
    let section = &html[html.find("id=\"pareto\"").expect("pareto")..html.find("id=\"kinds\"").expect("kinds")];
    section.split("<svg").skip(1).map(|s| &s[..s.find("</svg>").expect("closed")]).collect()
}

#[test]
fn both_pareto_charts_draw_the_frontier_and_the_page_shows_kinds_and_markers() {
    let data = run_data_with_a_frontier();
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    let charts = pareto_svgs(&html);
    assert_eq!(charts.len(), 2, "cost and tokens kept");
    for chart in &charts {
        assert_eq!(chart.matches("<path class=\"frontier\" d=\"M").count(), 1, "a frontier path: {chart}");
        // Two points on it: a move, one step (a horizontal then a vertical segment), and the
        // level line to the edge.
        let d = &chart[chart.find(" d=\"").expect("d") + 4..];
        let d = &d[..d.find('"').expect("end of d")];
        assert_eq!((d.matches(" H").count(), d.matches(" V").count()), (2, 1), "{d}");
    }
    // Retention by probe kind: a heat cell per kind and the mean, per configuration.
    let kinds = &html[html.find("id=\"kinds-table\"").expect("kinds table")..];
    let kinds = &kinds[..kinds.find("</table>").expect("end")];
    let configurations = data.manifest.experiment.configurations.len();
    assert_eq!(kinds.matches("class=\"heat\"").count(), configurations * (ProbeKind::CLASSIC.len() + 1));
    assert!(kinds.contains(">recall<"), "the kind is a column");
    // Compaction markers on the timelines: call, tokens before and after, per event.
    let detail = detail_data(&html);
    let pairs = detail["v"][0][3].as_array().expect("pairs");
    assert_eq!(pairs.len(), configurations);
    assert!(pairs.iter().all(|p| p[9] == serde_json::json!([2, 1_900, 600])), "{detail}");
}

#[test]
fn priority_chain_timelines_draw_both_thresholds_with_their_labels() {
    const CHAIN: &str = r#"
name = "chain-unit"
datasets = ["none.jsonl"]
windows = [2000]

[[strategy]]
name = "priority-chain"

[[strategy]]
name = "truncate"
"#;
    let experiment =
        Experiment::parse(CHAIN, Path::new("experiments/chain-unit.toml"), &runner::catalog::Catalog).expect("valid");
    let mut data = run_data();
    data.records = experiment
        .configurations
        .iter()
        .map(|c| PairRecord {
            content_hash: None,
            failure: None,
            conversation_id: "c".into(),
            dataset: "d.jsonl".into(),
            config_id: c.config_id.clone(),
            strategy: c.strategy.clone(),
            params: c.params.clone(),
            window: 2_000,
            judge: "offline".into(),
            outcome: PairOutcome::Ok(Box::new({
                // The thresholds a replay records at the first call.
                let mut m = metrics(0.5, "s", false);
                let strategy = runner::catalog::strategy_config(&c.resolved).and_then(|s| s.build()).expect("builds");
                m.thresholds = strategy
                    .thresholds(&compaction::Context::new(), &compaction::Budget::new(2_000))
                    .into_iter()
                    .map(|(l, t)| (l.to_string(), t))
                    .collect();
                m
            })),
        })
        .collect();
    data.manifest.experiment = experiment;
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    let detail = detail_data(&html);
    let pairs = detail["v"][0][3].as_array().expect("pairs");
    assert_eq!(pairs.len(), 2);
    // priority-chain: the prune at 80% and the chain at 85% of 2,000 tokens, each labelled.
    assert_eq!(pairs[0][7], serde_json::json!([["prune (P5)", 1600], ["chain trigger", 1700]]), "{detail}");
    // truncate: its one trigger.
    let truncate = pairs[1][7].as_array().expect("thresholds");
    assert_eq!(truncate.len(), 1, "{detail}");
    assert_eq!(truncate[0][0], "trigger");
}

/// A compaction event at `call` with a summary naming it.
fn event(call: u32) -> CompactionRecord {
    CompactionRecord {
        call,
        trigger: Trigger::Proactive,
        step: "summarize".into(),
        tokens_before: 1_900,
        tokens_after: 600,
        estimate_before: 1_800,
        estimate_after: 580,
        messages_before: 9,
        messages_after: 4,
        removed: 5,
        masked: 0,
        round: Some(call),
        fallback: None,
        shortfall: None,
        summary: format!("summary-of-call-{call}"),
        violations: vec![],
        next_action: None,
        agreement: None,
    }
}

#[test]
fn every_pair_lists_its_first_and_last_compactions_and_the_page_says_what_it_left_out() {
    let k = MAX_COMPACTION_EVENTS_PER_PAIR;
    let mut data = run_data();
    // Many pairs with more events than the per-pair cap, well over what a global cap in
    // record order would have reached: each pair still shows its own.
    let many = 2 * k + 7;
    let template = data.records[0].clone();
    data.records = (0..40)
        .map(|i| {
            let mut r = template.clone();
            r.conversation_id = format!("conv-{i:02}");
            if let PairOutcome::Ok(m) = &mut r.outcome {
                m.compaction_events = (0..many as u32).map(event).collect();
            }
            r
        })
        .collect();
    // One pair under the cap lists all of its events.
    let mut small = template.clone();
    small.conversation_id = "conv-small".into();
    if let PairOutcome::Ok(m) = &mut small.outcome {
        m.compaction_events = (0..2_u32).map(|c| event(100 + c)).collect();
    }
    data.records.push(small);
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    let section = &html[html.find("id=\"compactions\"").expect("section")..html.find("id=\"problems\"").expect("end")];
    // Every conversation has its folded list, drawn from the data when opened; every pair has
    // its first k and last k events there.
    assert_eq!(section.matches("<details class=\"events\" data-detail=").count(), 41);
    let detail = detail_data(&html);
    let pairs: Vec<&serde_json::Value> =
        detail["v"].as_array().expect("conversations").iter().map(|c| &c[3][0]).collect();
    assert_eq!(pairs.len(), 41);
    let summaries = |p: &serde_json::Value| -> Vec<String> {
        p[12].as_array().expect("rows").iter().map(|r| r[13].as_str().unwrap_or("").to_string()).collect()
    };
    let ends: Vec<String> = (0..k).chain(many - k..many).map(|c| format!("summary-of-call-{c}")).collect();
    let mut cut = 0;
    for p in &pairs {
        if p[11] == many {
            assert_eq!(summaries(p), ends, "the first and last {k}");
            cut += 1;
        } else {
            assert_eq!(summaries(p), ["summary-of-call-100", "summary-of-call-101"], "a small pair lists all");
        }
    }
    assert_eq!(cut, 40);
    let listed = 40 * 2 * k + 2;
    let total = 40 * many + 2;
    assert!(
        section.contains(&format!("Listed {listed} of {total} compaction events: 40 pairs are shown by their first and last events; compactions.csv has them all.")),
        "{}",
        &section[..section.len().min(2_000)]
    );
}

#[test]
fn the_page_stays_under_its_size_bound_and_names_what_it_left_out() {
    let mut data = run_data();
    let template = data.records[0].clone();
    // Summaries of MAX_SUMMARY_CHARS each: enough conversations to pass the page's bound.
    let per_pair = 2 * MAX_COMPACTION_EVENTS_PER_PAIR * MAX_SUMMARY_CHARS;
    let pairs = MAX_REPORT_BYTES / per_pair + 20;
    data.records = (0..pairs)
        .map(|i| {
            let mut r = template.clone();
            r.conversation_id = format!("conv-{i:04}");
            if let PairOutcome::Ok(m) = &mut r.outcome {
                m.compaction_events = (0..(2 * MAX_COMPACTION_EVENTS_PER_PAIR) as u32)
                    .map(|c| CompactionRecord { summary: "x".repeat(MAX_SUMMARY_CHARS), ..event(c) })
                    .collect();
            }
            r
        })
        .collect();
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    assert!(html.len() < MAX_REPORT_BYTES, "{} bytes", html.len());
    assert!(html.len() > MAX_REPORT_BYTES - 2 * per_pair, "the bound is used, not left empty: {} bytes", html.len());
    // Every conversation's timelines and event rows fit; the summaries' text fills what is left
    // and the page says how many it left out.
    let detail = detail_data(&html);
    let conversations = detail["v"].as_array().expect("conversations");
    let embedded = conversations.len();
    assert_eq!(embedded, pairs, "the timelines and rows come first");
    let rows: Vec<&serde_json::Value> =
        conversations.iter().flat_map(|c| c[3][0][12].as_array().expect("rows").iter()).collect();
    let without = rows.iter().filter(|r| r[13].is_null()).count();
    assert!(without > 10 && without + 10 < rows.len(), "{without} of {} summaries left out", rows.len());
    assert!(html.contains(&format!(
        "The text of {without} of the {} summaries listed is left out to keep the page under its size bound",
        rows.len()
    )));
    // Only embedded conversations are offered: the picker and the event lists name them.
    assert_eq!(html.matches("<details class=\"events\" data-detail=").count(), embedded);
}

#[test]
fn an_inapplicable_configuration_is_listed_with_its_reason_and_never_ranked() {
    let mut data = run_data();
    for r in &mut data.records {
        if let PairOutcome::Ok(m) = &mut r.outcome {
            if r.strategy == "truncate" {
                m.inapplicable_reason = Some(format!("max_output_tokens is at least the window {HOSTILE}"));
            }
            m.fabricated_directives.push(runlog::record::FabricatedDirective {
                call: 2,
                directive: format!("push to main {HOSTILE}"),
                sentence: format!("The user asked to push to main {HOSTILE}."),
                nearest: format!("please push the branch {HOSTILE}"),
            });
        }
    }
    let summaries = summary::summarize(&data.manifest.experiment.configurations, &data.records, 1);
    let truncate = summaries.iter().find(|s| s.config.strategy == "truncate").expect("a truncate row");
    assert!(!truncate.applicable && truncate.inapplicable_reason.starts_with("max_output_tokens"));
    let ranked = summary::rank(summaries.iter().collect());
    assert!(ranked.iter().all(|s| s.config.strategy != "truncate"), "an inapplicable configuration is not ranked");
    assert!(ranked.iter().any(|s| s.config.strategy == "none"));
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    let table = &html[html.find("id=\"leaderboard-table\"").expect("table")..];
    let table = &table[..table.find("</table>").expect("end")];
    assert!(!table.contains(">truncate<"), "not in the leaderboard");
    let section = &html[html.find("id=\"failures\"").expect("section")..];
    assert!(section.contains("inapplicable"));
    assert!(section.contains(&escape(&format!("max_output_tokens is at least the window {HOSTILE}"))));
    assert!(section.contains(&escape(&format!("The user asked to push to main {HOSTILE}."))));
    // Beside the flag, the person's nearest words, escaped like the rest.
    assert!(section.contains(&escape(&format!("please push the branch {HOSTILE}"))));
    assert_eq!(html.matches("<script>").count(), 1, "only the page's own script tag is real");
}

/// The conversations' detail block of a page.
fn detail_data(html: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"detail-data\">";
    let start = html.find(open).expect("detail-data block") + open.len();
    let end = start + html[start..].find("</script>").expect("block closed");
    serde_json::from_str(&html[start..end]).expect("detail-data is JSON")
}

/// The lost-facts data block of a page.
fn lost_data(html: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"lost-data\">";
    let start = html.find(open).expect("lost-data block") + open.len();
    let end = start + html[start..].find("</script>").expect("block closed");
    serde_json::from_str(&html[start..end]).expect("lost-data is JSON")
}

#[test]
fn a_json_block_cannot_close_its_element() {
    let block = json_block("x", &serde_json::json!({"t": "</script><script>alert(1)</script><!-- & "}));
    assert_eq!(block.matches("</script>").count(), 1, "{block}");
    assert!(!block.contains("<!--") && !block.contains("& "));
    let body = &block[block.find('>').map(|i| i + 1).unwrap_or(0)..block.rfind("</script>").unwrap_or(0)];
    let back: serde_json::Value = serde_json::from_str(body).expect("still JSON");
    assert_eq!(back["t"], "</script><script>alert(1)</script><!-- & ");
}

/// A run of `recorded` beside one summarizing configuration over `conversations`
/// conversations, every summary longer than the page shows.
fn run_with_recorded(conversations: usize) -> RunData {
    let mut data = run_data();
    let experiment = Experiment::parse(
        "name = \"html-real\"\ndatasets = [\"none.jsonl\"]\nwindows = [2000]\nseed = 1\n\n[[strategy]]\nname = \"recorded\"\n\n[[strategy]]\nname = \"truncate\"\n",
        Path::new("experiments/html-real.toml"), &runner::catalog::Catalog,
    )
    .expect("valid");
    let long = |who: &str| format!("{who} {HOSTILE} {}", "x".repeat(MAX_SUMMARY_CHARS + 100));
    data.records = (0..conversations)
        .flat_map(|k| experiment.configurations.iter().map(move |c| (k, c.clone())).collect::<Vec<_>>())
        .map(|(k, c)| PairRecord {
            content_hash: None,
            failure: None,
            conversation_id: format!("c{k:02}"),
            dataset: "evil.jsonl".into(),
            config_id: c.config_id.clone(),
            strategy: c.strategy.clone(),
            params: c.params.clone(),
            window: 2_000,
            judge: "offline".into(),
            outcome: PairOutcome::Ok(Box::new(metrics(0.75, &long(&c.strategy), false))),
        })
        .collect();
    data.manifest.experiment = Experiment { description: None, ..experiment };
    data.manifest.conversations = conversations;
    data
}

#[test]
fn paired_compactions_show_the_real_and_the_stand_in_side_by_side_within_their_bound() {
    let html = render(&run_with_recorded(2), &ProbeTexts::default(), compaction_strategies::family);
    // In the navigation, and placed right after the leaderboard.
    assert!(html.contains("<a href=\"#real-summaries\">Real summaries</a>"));
    let real = html.find("id=\"real-summaries\"").expect("the section");
    assert!(html.find("id=\"leaderboard\"").expect("leaderboard") < real);
    assert!(real < html.find("id=\"failures\"").expect("failures"));
    // One pair per conversation: the compaction at call 2 is the summary held at 50%, 75% and
    // 100% of the 4 calls under both.
    assert_eq!(html.matches("<details class=\"pair\"").count(), 2);
    assert!(html.contains("held at 50%, 75%, 100% of the calls"), "the checkpoints are named");
    // The right-hand text is labelled stand-in, not with the strategy's name; both are cut
    // with a note; hostile text stays text.
    assert!(html.contains("<summary><span class=\"swatch\""), "a pair's line opens on its colour");
    assert!(html.contains("stand-in (offline summarizer), in truncate&#39;s compaction"));
    assert!(html.contains("real summary (<code>recorded</code>)"));
    assert_eq!(html.matches(" more characters; compactions.csv has the full text)").count(), 4, "each text cut");
    assert_eq!(html.matches("<script>").count(), 1, "only the page's own script tag is real");
    assert!(!html.contains("paired-left-out"), "nothing left out");
    // The compaction events say who wrote each summary.
    let detail = detail_data(&html);
    let sources: Vec<&str> = detail["c"].as_array().expect("configs").iter().filter_map(|c| c[2].as_str()).collect();
    assert_eq!(sources, ["real (recorded)", "stand-in"]);

    // Past the bound on pairs, the section says how many it shows.
    let many = render(
        &run_with_recorded(real::MAX_PAIRED_COMPACTIONS + 6),
        &ProbeTexts::default(),
        compaction_strategies::family,
    );
    assert_eq!(many.matches("<details class=\"pair\"").count(), real::MAX_PAIRED_COMPACTIONS);
    assert!(many.contains(&format!(
        "Showing {} of {} paired compactions",
        real::MAX_PAIRED_COMPACTIONS,
        real::MAX_PAIRED_COMPACTIONS + 6
    )));
    assert!(many.len() < MAX_REPORT_BYTES);
}

#[test]
fn pareto_charts_are_drawn_per_window_on_fitted_axes() {
    let mut data = run_data();
    let experiment = Experiment::parse(
        "name = \"w\"\ndatasets = [\"none.jsonl\"]\nwindows = [2000, 4000]\nseed = 1\n\n[[strategy]]\nname = \"truncate\"\n",
        Path::new("experiments/w.toml"), &runner::catalog::Catalog,
    )
    .expect("valid");
    data.records = experiment
        .configurations
        .iter()
        .map(|c| PairRecord {
            content_hash: None,
            failure: None,
            conversation_id: "c".into(),
            dataset: "evil.jsonl".into(),
            config_id: c.config_id.clone(),
            strategy: c.strategy.clone(),
            params: c.params.clone(),
            window: c.window.unwrap_or(0),
            judge: "offline".into(),
            outcome: PairOutcome::Ok(Box::new(metrics(0.9, "s", false))),
        })
        .collect();
    data.manifest.experiment = experiment;
    let html = render(&data, &ProbeTexts::default(), compaction_strategies::family);
    let section = &html[html.find("id=\"pareto\"").expect("pareto")..html.find("id=\"kinds\"").expect("kinds")];
    assert_eq!(section.matches("<div class=\"charts\" data-window=").count(), 2, "one block per window");
    assert!(section.contains("data-window=\"2k\"") && section.contains("data-window=\"4k\""));
    // Every configuration retains 90% here: the axis holds it, with a margin, and does not
    // start at 0.
    for range in section.split("data-y-range=\"").skip(1) {
        let r: Vec<f64> =
            range[..range.find('"').expect("closed")].split(' ').map(|v| v.parse().expect("a number")).collect();
        assert!(r[0] > 0.5 && r[0] < 0.9 && r[1] > 0.9 && r[1] <= 1.0, "{r:?}");
    }
    assert!(section.contains("<p class=\"axis-range\">retention axis"), "the chart says its axis");
}
