//! `judge calibrate --config FILE` alone: the experiment's LLM judge on its answer keys'
//! labels against the real summaries and on the calibration set of the working directory,
//! per source, label and category, with what the calibration cost; against a stub that answers
//! from the labels (every verdict right) and one that answers against them (every verdict
//! wrong), and a floor that fails when nothing was scored.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use testkit::server::{MockServer, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

/// Every alias and its label: stated in its context or not.
fn labels() -> BTreeMap<&'static str, bool> {
    [
        ("alpha-one", true),
        ("bravo-two", false),
        ("charlie-three", true),
        ("delta-four", false),
        ("echo-five", true),
        ("foxtrot-six", false),
        ("golf-seven", true),
        ("hotel-eight", false),
    ]
    .into_iter()
    .collect()
}

/// A recording whose agent compacted once (message 4, a summary stating alpha-one and
/// charlie-three in other words), its keys labelled against that summary, and a calibration set of the four
/// other aliases, in `dir`, with the experiment naming the stub's judge.
fn setup(test: &str, url: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-judge-llm-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for sub in ["data", "keys", "datasets/calibration"] {
        fs::create_dir_all(dir.join(sub)).expect("temp dir");
    }
    let conversation = json!({"id": "s1", "source": "test/cc", "messages": [
        {"role": "user", "content": "Use alpha-one, not bravo-two; keep charlie-three and drop delta-four."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": "Working."},
        {"role": "user", "content": "Summary: the user chose alpha-one and keeps the third charlie.", "meta": {"compact_summary": true}},
        {"role": "assistant", "content": "Continuing."}
    ]});
    fs::write(dir.join("data/set.jsonl"), format!("{conversation}\n")).expect("dataset");
    let key = |id: &str, alias: &str, label: &str| {
        json!({"conversation": "s1", "id": id, "asked_at": 4, "kind": "constraint", "tier": "critical",
               "question": format!("What about {alias}?"), "facts": [[alias]], "meaning": format!("The user said {alias}."),
               "source_message": 0, "in_real_summary": label})
    };
    let keys = [
        key("k1", "alpha-one", "verbatim"),
        key("k2", "bravo-two", "absent"),
        key("k3", "charlie-three", "paraphrase"),
        key("k4", "delta-four", "absent"),
    ];
    let text: String = keys.iter().map(|k| format!("{k}\n")).collect();
    fs::write(dir.join("keys/set.jsonl"), text).expect("keys");
    let items = [
        json!({"id": "c1", "context": "We settled on echo-five.", "facts": [["echo-five"], ["foxtrot-six"]], "retained": [true, false], "category": "verbatim"}),
        json!({"id": "c2", "context": "The seventh golf is the plan.", "facts": [["golf-seven"], ["hotel-eight"]], "retained": [true, false], "category": "paraphrase"}),
    ];
    let text: String = items.iter().map(|i| format!("{i}\n")).collect();
    fs::write(dir.join("datasets/calibration/judge.jsonl"), text).expect("labels");
    let exp = format!(
        "name = \"cal\"\ndatasets = [\"data/set.jsonl\"]\nwindows = [32000]\njudge = \"llm\"\ncache_mode = \"off\"\n\
         [keys]\n\"data/set.jsonl\" = \"keys/set.jsonl\"\n\
         [llm]\nbase_url = \"{url}/v1\"\nmodel = \"judge-model\"\nmax_retries = 0\n\
         [[strategy]]\nname = \"keep-last-n\"\n"
    );
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    fs::write(dir.join("prices.toml"), "[models.\"judge-model\"]\ninput = 1.0\ncached_input = 0.1\noutput = 4.0\n")
        .expect("prices");
    dir
}

/// A judge that grades from the labels (`right`) or against them.
fn judge(right: bool) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |r: &Recorded| {
        let body = r.json()["messages"].to_string();
        if !body.contains("accuracy") {
            return Reply::text("An answer.", 120, 8);
        }
        let label = labels().into_iter().find(|(alias, _)| body.contains(alias)).is_some_and(|(_, l)| l);
        let g = if label == right { 5 } else { 0 };
        Reply::text(
            format!(
                r#"{{"accuracy": {g}, "completeness": {g}, "artifact_trail": {g}, "continuity": {g}, "decisions": {g}, "rationale": "r"}}"#
            ),
            300,
            30,
        )
    }
}

fn calibrate(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["judge", "calibrate", "--config", "exp.toml"])
        .args(extra)
        .current_dir(dir)
        .output()
        .expect("runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_judge_answering_from_the_labels_scores_every_fact_right_and_the_cost_is_printed() {
    let server = MockServer::start();
    server.respond_with(judge(true));
    let dir = setup("right", &server.url());
    let (code, stdout, stderr) = calibrate(&dir, &["--min-accuracy", "0.99"]);
    assert_eq!(code, 1, "the offline judge misses the paraphrase and falls below the floor: {stdout}{stderr}");
    // The keys against the real summary, per label, then the calibration set, per category.
    assert!(stdout.contains("answer keys against the real summaries: 4 labelled facts in 1 sources"), "{stdout}");
    let llm_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("judge llm:judge-model")).collect();
    let all = llm_lines.iter().filter(|l| l.contains("facts scored")).collect::<Vec<_>>();
    assert_eq!(all.len(), 2, "keys and calibration set: {stdout}");
    for line in &all {
        assert!(line.contains("accuracy 100.0%") && line.contains("kappa 1.00"), "{line}");
    }
    for label in ["verbatim", "paraphrase", "absent"] {
        assert!(llm_lines.iter().any(|l| l.starts_with(&format!("judge llm:judge-model on {label}:"))), "{stdout}");
    }
    assert!(
        stderr.contains("judge offline") && !stderr.contains("judge llm:judge-model"),
        "only the offline judge is below: {stderr}"
    );
    // Four key facts and four labelled facts: each an answer and a grade.
    let cost = stdout.lines().find(|l| l.starts_with("calibration cost, judge llm:judge-model:")).expect("the cost");
    assert!(cost.contains(": 16 requests (0 from the response cache, 16 sent)"), "{cost}");
    assert!(cost.contains("3360 input and 304 output tokens"), "{cost}");
    // 8 x (120 in, 8 out) + 8 x (300 in, 30 out) at $1 and $4 a million.
    let dollars = (3360.0 * 1.0 + 304.0 * 4.0) / 1e6;
    assert!(cost.contains(&format!("${dollars:.4}")), "{cost}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_judge_answering_against_the_labels_scores_every_fact_wrong_and_nothing_scored_fails_the_floor() {
    let server = MockServer::start();
    server.respond_with(judge(false));
    let dir = setup("wrong", &server.url());
    let (code, stdout, stderr) = calibrate(&dir, &["--min-accuracy", "0.5"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let all: Vec<&str> =
        stdout.lines().filter(|l| l.starts_with("judge llm:judge-model:") && l.contains("facts scored")).collect();
    assert_eq!(all.len(), 2, "{stdout}");
    for line in &all {
        assert!(line.contains("accuracy 0.0%") && line.contains("kappa -1.00"), "{line}");
    }
    assert!(
        stderr.contains("judge llm:judge-model on the keys of all sources: accuracy 0.000 is below 0.5"),
        "{stderr}"
    );

    // A grader whose verdicts never parse: nothing was scored, and a floor cannot pass on it.
    let mute = MockServer::start();
    mute.respond_with(|_| Reply::text("I would rather not say.", 10, 5));
    let dir2 = setup("mute", &mute.url());
    let (code, stdout, stderr) = calibrate(&dir2, &["--min-accuracy", "0.5"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("judge llm:judge-model") && stderr.contains("nothing was measured"), "{stderr}");
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&dir2);
}
