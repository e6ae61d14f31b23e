//! `compactlens judge calibrate` on the shipped labelled set: the set's shape, the figures
//! reports/README.md records, `--min-accuracy`, and errors that name the line and field.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn calibrate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(["judge", "calibrate"]).args(args).current_dir(root()).output().expect("runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_shipped_set_has_150_items_a_third_paraphrases_and_a_third_near_misses() {
    let text = fs::read_to_string(root().join("datasets/calibration/judge.jsonl")).expect("the set");
    let items: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    assert!(items.len() >= 150, "{} items", items.len());
    let count = |c: &str| items.iter().filter(|i| i["category"] == c).count();
    assert_eq!(
        count("paraphrase") + count("near-miss") + count("verbatim") + count("absent"),
        items.len(),
        "every item has a category"
    );
    for c in ["paraphrase", "near-miss"] {
        assert!(count(c) * 3 >= items.len(), "{c}: {} of {} items", count(c), items.len());
    }
    // Items drawn from real Claude Code summaries.
    let real = items.iter().filter(|i| i["id"].as_str().is_some_and(|id| id.starts_with("cc-"))).count();
    assert!(real >= 30, "{real} items from real summaries");
    // Both verdicts occur in the paraphrases and the near misses: the set is not all positives.
    for c in ["paraphrase", "near-miss"] {
        let labels: Vec<bool> = items
            .iter()
            .filter(|i| i["category"] == c)
            .flat_map(|i| i["retained"].as_array().expect("labels").iter().map(|b| b.as_bool().expect("bool")))
            .collect();
        assert!(labels.contains(&true) && labels.contains(&false), "{c}");
    }
}

#[test]
fn the_offline_figures_are_the_ones_reports_readme_records() {
    let (code, stdout, stderr) = calibrate(&["datasets/calibration/judge.jsonl"]);
    assert_eq!(code, 0, "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("judge offline:")).expect("the offline judge's line");
    let figures = &line[..line.find(" (credited").expect("counts follow")];
    let readme = fs::read_to_string(root().join("reports/README.md")).expect("reports/README.md");
    assert!(readme.contains(figures), "reports/README.md must record: {figures}");
    // Per category, with kappa.
    for c in ["paraphrase", "near-miss", "verbatim"] {
        let line = stdout.lines().find(|l| l.starts_with(&format!("judge offline on {c}:"))).expect("a category line");
        assert!(line.contains("kappa"), "{line}");
    }
    // Every disagreement is listed.
    assert!(stdout.lines().filter(|l| l.starts_with("  ")).count() > 0);
    let (code, _, stderr) = calibrate(&["datasets/calibration/judge.jsonl", "--min-accuracy", "0.99"]);
    assert_eq!(code, 1, "below the floor: {stderr}");
    assert!(stderr.contains("below 0.99"), "{stderr}");
}

#[test]
fn a_bad_labels_file_names_the_line_and_field() {
    let dir = std::env::temp_dir().join(format!("compactlens-labels-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("bad.jsonl");
    fs::write(
        &file,
        "{\"id\":\"a\",\"context\":\"x\",\"facts\":[[\"x\"]],\"retained\":[true]}\n\
         {\"id\":\"b\",\"context\":\"y\",\"facts\":[[\"y\"],[\"z\"]],\"retained\":[true]}\n",
    )
    .expect("write");
    let path = file.to_string_lossy().into_owned();
    let (code, _, stderr) = calibrate(&[&path]);
    assert_eq!(code, 2);
    assert!(stderr.contains("bad.jsonl:2: item b, field retained"), "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}
