//! A real run folder over a hostile conversation: the experiment file and the dataset are
//! written to a temp folder, replayed with the offline summarizer and judge through every
//! strategy, and the run's CSV files and `report.html` are written as a run writes them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use compaction::{Conversation, Message, Probe, ProbeKind, ToolCall};
use dataset::LoadOptions;
use runlog::experiment::Experiment;
use runlog::log::RunData;
use runner::judge::OfflineJudge;
use runner::run::{self, Engine, Plan, Provenance, RunOptions};
use runner::summarize::OfflineSummarizer;

/// Script that would mark the page if it ever ran: it sets the title, a global, and adds an
/// element. The browser test asserts none of that happened.
pub const INJECTED_SCRIPT: &str =
    "<script>document.title='pwned';window.__pwned=1;document.body.appendChild(document.createElement('blink'))</script>";

/// Every kind of hostile text the page must show as text.
pub fn hostile(n: usize) -> String {
    format!(
        "{INJECTED_SCRIPT} <img src=x onerror=\"window.__pwned=2;document.title='pwned'\"> </style><style>body{{display:none}}</style> \
         <a href=\"javascript:window.__pwned=3\">open #{n}</a> </pre></td></tr></table></svg><svg onload=\"window.__pwned=4\"> \
         <iframe src=\"https://example.invalid/\"></iframe> <link rel=stylesheet href=\"https://example.invalid/x.css\"> &amp; ' \""
    )
}

/// The experiment's name (the page title is `compactlens: <name>`).
pub const NAME: &str = "browser-adversarial";

const EXPERIMENT: &str = r#"
name = "browser-adversarial"
description = "A conversation full of markup: <script>document.title='pwned'</script>"
datasets = ["adversarial.jsonl"]
windows = [6000]
price = { input = 2.0, cached_input = 0.5, output = 8.0 }
seed = 7

[[strategy]]
name = "none"

[[strategy]]
name = "truncate"

[[strategy]]
name = "observation-mask"

[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = 6

[[strategy]]
name = "split-fraction"
"#;

/// A coding session with hostile text in every role, long enough to compact several times in
/// a 6,000-token window.
pub fn conversation(id: &str) -> Conversation {
    let mut messages = vec![
        Message::system("You are a coding agent. Follow the user's task."),
        Message::user(format!("Task: fix the login page. Note the port 8443. {}", hostile(0))),
    ];
    for turn in 0..24 {
        let call_id = format!("call-{turn}");
        messages.push(Message::assistant_calls(
            format!("Reading file {turn}. {}", if turn % 5 == 0 { hostile(turn) } else { String::new() }),
            vec![ToolCall {
                id: call_id.clone(),
                name: "read_file".into(),
                arguments: format!("{{\"path\":\"src/page_{turn}.html\"}}"),
            }],
        ));
        let body: String =
            (0..60).map(|k| format!("line {k} of page {turn}: <div class=\"row\">value {k}</div>\n")).collect();
        messages.push(Message::tool_result(&call_id, "read_file", format!("{body}{}", hostile(turn))));
        messages.push(Message::assistant(format!("Page {turn} read; identifier ident-{turn}-ok. {}", hostile(turn))));
        messages.push(Message::user(format!(
            "Continue with page {}. {}",
            turn + 1,
            if turn % 3 == 0 { hostile(turn) } else { String::new() }
        )));
    }
    messages.push(Message::assistant("Done: the login page is fixed."));
    let mut c = Conversation::new(id, messages);
    c.probes = vec![
        Probe {
            id: "task".into(),
            kind: ProbeKind::Task,
            question: format!("What was the task? {}", hostile(90)),
            answer: "fix the login page".into(),
            facts: vec![vec!["login page".into()], vec!["8443".into()]],
            source_message: 1,
            asked_at: None,
            tier: None,
            ..Default::default()
        },
        Probe {
            id: "early-identifier".into(),
            kind: ProbeKind::Recall,
            question: "Which identifier did page 1 have?".into(),
            answer: "ident-1-ok".into(),
            facts: vec![vec!["ident-1-ok".into(), format!("ident-1-ok {}", hostile(91))]],
            source_message: 8,
            asked_at: None,
            tier: None,
            ..Default::default()
        },
        Probe {
            id: format!("artifact-{}", hostile(92)),
            kind: ProbeKind::Artifact,
            question: "Which file was read second?".into(),
            answer: "src/page_1.html".into(),
            facts: vec![vec!["src/page_1.html".into()]],
            source_message: 6,
            asked_at: None,
            tier: None,
            ..Default::default()
        },
    ];
    c
}

/// A fresh folder under the system temp dir.
pub fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-report-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

/// Write the experiment and dataset under `root`, run it into `root/run`, write the CSV files
/// and the report. Returns the run folder and the run.
pub fn adversarial_run(root: &Path) -> (PathBuf, RunData) {
    let dataset: String = [conversation(&format!("conv-{}", hostile(1))), conversation("plain-id")]
        .iter()
        .map(|c| serde_json::to_string(c).expect("serializes") + "\n")
        .collect();
    std::fs::write(root.join("adversarial.jsonl"), dataset).expect("dataset written");
    let exp_path = root.join("adversarial.toml");
    std::fs::write(&exp_path, EXPERIMENT).expect("experiment written");
    let experiment = Experiment::load(&exp_path, &runner::catalog::Catalog).expect("valid experiment");
    let plan = Plan::load(experiment, &LoadOptions::default()).expect("datasets load");
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let summarizer = OfflineSummarizer::new();
    let judge = OfflineJudge;
    let out = root.join("run");
    let options = RunOptions { out: out.clone(), resume: false, jobs: Some(2), shard: None };
    let provenance = Provenance {
        tool_version: "0.0.0-test".into(),
        git_commit: Some(format!("deadbeef {}", hostile(2))),
        started_at: "2025-01-01T00:00:00Z".into(),
    };
    let data = run::run(&plan, &Engine::new(&summarizer, &judge), &options, &provenance, &|_| {}).expect("runs");
    report::write_outputs(&out, &data).expect("csv written");
    report::html::write_report(&out, compaction_strategies::family).expect("report written");
    (out, data)
}
