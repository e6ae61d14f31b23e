use std::path::Path;

use compaction::{ProbeKind, Trigger};
use runner::experiment::Experiment;
use runner::record::{CallPoint, CompactionRecord, FoundIn, PairMetrics, PairOutcome, PairRecord, ProbeScore};
use runner::run::{Counts, Manifest, RunData, Timings, MANIFEST_FORMAT};

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
            probe_id: HOSTILE.into(),
            kind: ProbeKind::Recall,
            asked_at: 8,
            at_risk: true,
            score: if lost { 0.5 } else { 1.0 },
            facts: vec![FoundIn::Summary, if lost { FoundIn::Lost } else { FoundIn::Verbatim }],
            judge: "offline".into(),
            llm: None,
        }],
        compaction_events: vec![CompactionRecord {
            call: 2,
            trigger: Trigger::Proactive,
            step: HOSTILE.into(),
            tokens_before: 1_900,
            tokens_after: 600,
            estimate_before: 1_800,
            estimate_after: 580,
            messages_before: 9,
            messages_after: 4,
            removed: 5,
            masked: 0,
            round: Some(1),
            fallback: None,
            shortfall: None,
            summary: summary.into(),
            violations: vec![],
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
            })
            .collect(),
        ..PairMetrics::default()
    }
}

fn run_data() -> RunData {
    let experiment = Experiment::parse(EXPERIMENT, Path::new("experiments/html-unit.toml")).expect("valid");
    let mut records = Vec::new();
    for (i, c) in experiment.configurations.iter().enumerate() {
        records.push(PairRecord {
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
        versions: Default::default(),
        tool_version: "0.0.0".into(),
        git_commit: Some(HOSTILE.into()),
        started_at: "2025-01-01T00:00:00Z".into(),
        seed: 1,
        tokenizer: compaction::Encoding::O200kBase,
        cache: runner::replay::CacheProfile::None,
        summarizer: "offline".into(),
        judge: "offline".into(),
        shard: None,
        merged_from: Vec::new(),
        jobs: None,
        conversations: 2,
        counts: Counts::default(),
        timings: Timings::default(),
        dataset_problems: vec![HOSTILE.into()],
        complete: true,
        llm: None,
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
    let html = render(&run_data(), &ProbeTexts::default());
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
    let html = render(&run_data(), &ProbeTexts::default());
    // Only the page's own tags: no injected element survives.
    assert_eq!(html.matches("<script").count(), 1);
    assert_eq!(html.matches("<img").count(), 0);
    assert!(tags(&html).iter().filter(|t| t.starts_with("a ")).all(|t| t.starts_with("a href=\"#")));
    assert!(tags(&html).iter().all(|t| !t.contains(" on")), "no event handler attribute");
    assert_eq!(html.matches("<style").count(), 1);
    assert_eq!(html.matches("</style>").count(), 1);
    assert!(!html.contains("javascript:alert(1)\""));
    // The hostile text is there, escaped, in each place it reaches: conversation id, probe id,
    // step, summary, error, description, commit, dataset problem.
    let escaped = escape(HOSTILE);
    assert!(html.matches(escaped.as_str()).count() >= 8, "{}", html.matches(escaped.as_str()).count());
}

#[test]
fn the_sections_are_all_there() {
    let data = run_data();
    let html = render(&data, &ProbeTexts::default());
    for id in ["manifest", "leaderboard", "pareto", "kinds", "timelines", "lost", "compactions", "problems"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "section {id}");
    }
    // One leaderboard row and one Pareto point per chart for each configuration.
    let table = &html[html.find("id=\"leaderboard-table\"").expect("table")..];
    let body = &table[..table.find("</table>").expect("end")];
    assert_eq!(body.matches("<tr>").count(), 1 + data.manifest.experiment.configurations.len());
    assert_eq!(html.matches("class=\"point\"").count(), 2 * data.manifest.experiment.configurations.len());
    // The best configuration leads the leaderboard and sits on the frontier.
    let truncate = &data.manifest.experiment.configurations[1].config_id;
    let first_row = &body[body.find("<tbody>").expect("tbody")..];
    assert!(first_row[..first_row.find("</tr>").expect("row")].contains(truncate.as_str()));
    assert!(html.contains("75.0%"), "the truncate configuration's retention");
    // A timeline per configuration of the replayed conversation, with the window and the trigger.
    assert_eq!(html.matches("aria-label=\"context size per call\"").count(), 2);
    assert!(html.contains("window 2000"));
    assert!(html.contains("trigger threshold"), "truncate has a threshold");
    // The lost fact is shown by number, under the configuration that lost it.
    assert!(html.contains("fact #2"));
    assert_eq!(html.matches("class=\"lost\"").count(), 1);
    assert!(html.contains("(1 of 2 facts kept)"), "the losing configuration kept one fact");
    assert!(html.contains(">1 of 2</td>"), "one of the two configurations kept every fact");
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
    }];
    let texts = ProbeTexts::from_conversations([("evil.jsonl", &conversation)]);
    let html = render(&data, &texts);
    assert!(html.contains("Which &lt;b&gt;port&lt;/b&gt;?"));
    assert!(html.contains("<span class=\"lost\">8080 | port &lt;8080&gt;</span>"));
    assert!(!html.contains("fact #2"));
}

#[test]
fn write_report_reads_a_run_folder_and_names_a_bad_one() {
    let dir = std::env::temp_dir().join(format!("compactbench-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let err = write_report(&dir).expect_err("no run.json");
    assert!(err.to_string().contains("run.json"), "{err}");

    let data = run_data();
    runner::run::write_manifest(&dir, &data.manifest).expect("manifest");
    let lines: String = data.records.iter().map(|r| serde_json::to_string(r).expect("json") + "\n").collect();
    std::fs::write(dir.join(runner::run::RESULTS_FILE), lines).expect("log");
    let path = write_report(&dir).expect("renders");
    assert_eq!(path, dir.join(REPORT_HTML));
    let html = std::fs::read_to_string(&path).expect("written");
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    assert!(!dir.join("report.html.tmp").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
