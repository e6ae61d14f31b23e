//! `compactlens synth`: files, summary lines, family selection and usage errors.

use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

/// A fresh folder under the system temp dir, unique to this process and test, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(test: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("compactlens-cli-synth-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    TempDir(dir)
}

#[test]
fn writes_one_file_per_family_asked_for_and_summarizes_each() {
    let dir = temp_dir("two");
    let out = Command::new(BIN)
        .args(["synth", "--seed", "42", "--families", "support,paper", "--per-family", "1", "--out"])
        .arg(&dir.0)
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .expect("the folder exists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["paper.jsonl", "support.jsonl"]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].contains("support.jsonl: 1 conversation,") && lines[0].contains("tokens (o200k_base"), "{stdout}");
    assert!(lines[1].contains("paper.jsonl: 1 conversation,"), "{stdout}");
    // The file is the library's generation for that seed, byte for byte.
    let text = std::fs::read_to_string(dir.0.join("support.jsonl")).expect("written");
    let expected = ::synth::to_jsonl(&::synth::generate_family(42, ::synth::Family::Support, 1)).expect("serializes");
    assert_eq!(text, expected);
}

#[test]
fn an_unknown_family_is_a_usage_error() {
    let dir = temp_dir("unknown");
    let out = Command::new(BIN)
        .args(["synth", "--families", "coding,recipes", "--out"])
        .arg(&dir.0)
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown family \"recipes\""), "{stderr}");
    assert!(!dir.0.join("coding.jsonl").exists(), "nothing is written on a usage error");
}
