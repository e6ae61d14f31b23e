//! Every conversation file of the shared corpora imports: each file's format is sniffed, the
//! repairs are counted, `validate` is clean on the output, and derived probes exist for every
//! conversation that uses tools. Skipped, with the reason printed, when the corpora folder is
//! absent.

// The test prints why it skips, and the repair counts it found.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use compaction::ProbeKind;
use runner::dataset::check_conversation;
use runner::import::{import, Format, FormatChoice, ImportOptions, RepairReport};
use runner::judge::{normalize, occurs, render_message};
use runner::probes::{count_by_kind, derive, uses_tools, DeriveParams};

const CORPORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpora");

fn corpora() -> Option<Vec<PathBuf>> {
    let root = Path::new(CORPORA);
    if !root.is_dir() {
        println!("skipped: no corpora folder at {CORPORA}");
        return None;
    }
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(root).ok()?.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    Some(dirs)
}

#[test]
fn every_corpus_file_imports_and_validates() {
    let Some(dirs) = corpora() else { return };
    let options = ImportOptions { format: FormatChoice::Auto, strict: false };
    let mut total = RepairReport::default();
    let mut conversations = 0;
    let mut kinds: std::collections::BTreeMap<ProbeKind, usize> = Default::default();
    for dir in &dirs {
        let files = import(std::slice::from_ref(dir), &options);
        assert!(!files.is_empty(), "{}: no files", dir.display());
        let mut report = RepairReport::default();
        let mut formats: Vec<Format> = Vec::new();
        for f in &files {
            assert!(
                f.errors.is_empty(),
                "{}: {:#?}",
                f.path.display(),
                f.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>()
            );
            let format = f.format.expect("a format");
            if !formats.contains(&format) {
                formats.push(format);
            }
            report.merge(&f.report);
            for conv in &f.conversations {
                conversations += 1;
                let probes = derive(conv, &DeriveParams::default());
                assert_eq!(probes, derive(conv, &DeriveParams::default()), "{}: derivation is deterministic", conv.id);
                if uses_tools(conv) {
                    assert!(!probes.is_empty(), "{}: a tool-using conversation has derived probes", conv.id);
                }
                for p in &probes {
                    let source = &conv.messages[p.source_message];
                    assert!(
                        !source.meta_flag("compact_summary"),
                        "{} {}: sourced at a recorded summary",
                        conv.id,
                        p.id
                    );
                    let rendered = normalize(&render_message(source));
                    for alias in p.facts.iter().flatten() {
                        assert!(
                            occurs(&rendered, &normalize(alias)),
                            "{} {}: alias {alias:?} is not in message {}",
                            conv.id,
                            p.id,
                            p.source_message
                        );
                    }
                }
                for (k, n) in count_by_kind(&probes) {
                    *kinds.entry(k).or_default() += n;
                }
                let mut with_probes = conv.clone();
                with_probes.probes = probes;
                let problems = check_conversation(&with_probes);
                assert!(
                    problems.is_empty(),
                    "{}: {}",
                    f.path.display(),
                    problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n")
                );
            }
        }
        let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
        println!(
            "{}: {} files, {} conversations, format {}: {}",
            dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            files.len(),
            report.conversations,
            names.join("+"),
            report
        );
        assert_eq!(formats.len(), 1, "{}: one format per corpus", dir.display());
        total.merge(&report);
    }
    println!("all: {conversations} conversations: {total}");
    println!("derived probes by kind: {kinds:?}");
}

#[test]
fn the_corpora_experiments_run_every_strategy_and_the_recorded_reference() {
    use runner::experiment::Experiment;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut want: Vec<&str> = compaction::strategies::NAMES.to_vec();
    want.extend(compaction::strategies::REFERENCE_NAMES);
    want.sort_unstable();
    for file in ["corpora.toml", "ci-corpora.toml"] {
        let exp = Experiment::load(&root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut names: Vec<&str> = exp.configurations.iter().map(|c| c.strategy.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names, want, "{file}");
        assert!(exp.datasets.iter().all(|d| d.starts_with("../target/corpora")), "{file}: imported datasets only");
        assert!(exp.windows.contains(&128_000), "{file}: the window where the strategies meet the recorded cuts");
    }
}
