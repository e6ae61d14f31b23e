//! Every conversation file of the shared corpora imports: each file's format is sniffed, the
//! repairs are counted, `validate` is clean on the output, derived probes exist for at least
//! 90% of the conversations that use tools, and every derived fact discriminates (no common
//! word, nothing from the system prompt, no lone plain word or code fragment, one alias in one
//! probe; gold decisions only from gold actions). Every data file of the folder (walked independently of the
//! importer) is imported, each corpus gives the conversation count its SOURCE.md states, and
//! the Claude Code sessions keep their subagents, compaction side-calls (when asked to) and
//! recorded compactions. Skipped, with the reason printed, when the corpora folder is absent.

// The test prints why it skips, and the repair counts it found.
#![allow(clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use compaction::ProbeKind;
use dataset::check_conversation;
use dataset::import::{import, Format, FormatChoice, ImportOptions, RepairReport};
use dataset::probes::{count_by_kind, derive, uses_tools, DeriveParams};
use dataset::text::is_common_word;
use dataset::text::{normalize, occurs, render_message};

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
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let mut total = RepairReport::default();
    let mut conversations = 0;
    let mut kinds: BTreeMap<ProbeKind, usize> = Default::default();
    let (mut tool_using, mut without) = (0usize, 0usize);
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
                // A short conversation can hold nothing that discriminates: its probes are
                // dropped. Most tool-using conversations keep some.
                if uses_tools(conv) {
                    tool_using += 1;
                    if probes.is_empty() {
                        println!("{}: no discriminating probe", conv.id);
                        without += 1;
                    }
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
                    // The files changed so far: each in the message that changed it, at or
                    // before the source (the last change).
                    let list = p.question.starts_with("Which files has the agent changed so far");
                    let earlier: Vec<String> = if list {
                        conv.messages[..=p.source_message].iter().map(|m| normalize(&render_message(m))).collect()
                    } else {
                        Vec::new()
                    };
                    // A fact from another message (a lesson's fix, a pull request's title)
                    // names it in `source_messages`.
                    let others: Vec<String> =
                        p.source_messages.iter().map(|&m| normalize(&render_message(&conv.messages[m]))).collect();
                    for alias in p.facts.iter().flatten() {
                        let found = if list {
                            earlier.iter().any(|r| occurs(r, &normalize(alias)))
                        } else {
                            occurs(&rendered, &normalize(alias)) || others.iter().any(|r| occurs(r, &normalize(alias)))
                        };
                        assert!(
                            found,
                            "{} {}: alias {alias:?} is not in message {} (nor {:?})",
                            conv.id, p.id, p.source_message, p.source_messages
                        );
                    }
                }
                assert_discriminating(conv, &probes);
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
    assert!(without * 10 <= tool_using, "{without} of {tool_using} tool-using conversations have no probe");
}

/// No fact of a derived probe is a common word, occurs in the system prompt, or is a lone
/// plain word or a code fragment; every probe has a tier; a gold probe's decision is sourced
/// at a call of its gold action's tool; one alias is tested by one probe at a checkpoint (a
/// to-do list's probes stand one after another). Checked here from
/// the messages, independently of the derivation.
fn assert_discriminating(conv: &compaction::Conversation, probes: &[compaction::Probe]) {
    use dataset::probes::facts::{fact_type, FactType};
    let rendered: Vec<String> = conv.messages.iter().map(|m| normalize(&render_message(m))).collect();
    let system: Vec<&String> =
        conv.messages.iter().zip(&rendered).filter(|(m, _)| m.role == compaction::Role::System).map(|x| x.1).collect();
    // Each alias with the checkpoints its probes stand over (after the source, until `until`).
    let mut tested: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
    for p in probes {
        assert!(p.tier.is_some(), "{} {}: no tier", conv.id, p.id);
        let mut mine = BTreeSet::new();
        for alias in p.facts.iter().flatten() {
            let a = normalize(alias);
            assert!(!is_common_word(alias), "{} {}: {alias:?} is a common word", conv.id, p.id);
            assert!(!system.iter().any(|s| occurs(s, &a)), "{} {}: {alias:?} is in the system prompt", conv.id, p.id);
            mine.insert(a);
        }
        let span = (p.source_message + 1, p.until.unwrap_or(usize::MAX));
        for a in mine {
            let spans = tested.entry(a.clone()).or_default();
            assert!(
                !spans.iter().any(|(lo, hi)| *lo <= span.1 && span.0 <= *hi),
                "{} {}: {a:?} is tested by two probes at one checkpoint",
                conv.id,
                p.id
            );
            spans.push(span);
        }
        for f in &p.facts {
            let t = fact_type(&f[0]);
            assert!(
                t != FactType::PlainWord && t != FactType::CodeFragment,
                "{} {}: {:?} is {t:?}",
                conv.id,
                p.id,
                f[0]
            );
        }
        if p.id.starts_with("derived-gold") && p.kind == ProbeKind::Decision {
            let gold = conv
                .meta
                .get("gold_actions")
                .and_then(|g| g.as_array())
                .expect("gold decisions come from gold actions");
            let calls = &conv.messages[p.source_message].tool_calls;
            assert!(
                calls.iter().any(|c| gold.iter().any(|g| g["name"] == c.name.as_str())),
                "{} {}: decision sourced at message {} that makes no gold action's call",
                conv.id,
                p.id,
                p.source_message
            );
        }
    }
}

#[test]
fn the_corpora_experiments_run_every_strategy_and_the_recorded_reference() {
    use runlog::experiment::Experiment;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut want: Vec<&str> = compaction_strategies::NAMES.to_vec();
    want.extend(compaction_strategies::REFERENCE_NAMES);
    want.sort_unstable();
    for file in ["corpora.toml", "ci-corpora.toml"] {
        let exp =
            Experiment::load(&root.join(file), &runner::catalog::Catalog).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut names: Vec<&str> = exp.configurations.iter().map(|c| c.strategy.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names, want, "{file}: run `scripts/regenerate.sh`");
        assert!(exp.datasets.iter().all(|d| d.starts_with("../target/corpora")), "{file}: imported datasets only");
        assert!(exp.windows.contains(&128_000), "{file}: the window where the strategies meet the recorded cuts");
    }
}

/// Every file under `dir`, hidden ones included, whatever its extension.
fn walk_all(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk_all(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `Conversations: **N**` count of a corpus's SOURCE.md.
fn stated_conversations(dir: &Path) -> usize {
    let path = dir.join("SOURCE.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rest = text
        .split("Conversations: **")
        .nth(1)
        .unwrap_or_else(|| panic!("{}: no \"Conversations: **N**\" line", path.display()));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|e| panic!("{}: conversation count {digits:?}: {e}", path.display()))
}

#[test]
fn every_data_file_is_imported_and_each_corpus_has_the_conversations_its_source_states() {
    let Some(dirs) = corpora() else { return };
    // Every file of the corpora folder but the SOURCE.md files, at any depth (top-level files
    // and hidden files too): a file the importer does not reach is a file the runs never see.
    let mut on_disk = Vec::new();
    walk_all(Path::new(CORPORA), &mut on_disk);
    let on_disk: BTreeSet<PathBuf> =
        on_disk.iter().filter(|p| p.file_name().is_none_or(|n| n != "SOURCE.md")).map(|p| canonical(p)).collect();
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let mut imported = BTreeSet::new();
    for dir in &dirs {
        let files = import(std::slice::from_ref(dir), &options);
        // Compaction side-calls are counted by SOURCE.md but not imported by default.
        let conversations: usize = files.iter().map(|f| f.conversations.len() + f.skipped_compaction_calls).sum();
        assert_eq!(conversations, stated_conversations(dir), "{}: conversations against SOURCE.md", dir.display());
        for conv in files.iter().flat_map(|f| &f.conversations) {
            assert_ne!(conv.meta.get("kind").and_then(|k| k.as_str()), Some("compaction"), "{}: a side-call", conv.id);
        }
        for f in &files {
            assert!(imported.insert(canonical(&f.path)), "{}: imported twice", f.path.display());
        }
    }
    let skipped: Vec<&PathBuf> = on_disk.difference(&imported).collect();
    let extra: Vec<&PathBuf> = imported.difference(&on_disk).collect();
    assert!(skipped.is_empty() && extra.is_empty(), "not imported: {skipped:#?}\nimported, not on disk: {extra:#?}");
    assert!(!on_disk.is_empty());
}

#[test]
fn claude_code_sessions_keep_subagents_side_calls_and_their_recorded_compaction() {
    let Some(dirs) = corpora() else { return };
    let Some(dir) = dirs.iter().find(|d| d.ends_with("claude-code-spotter")) else {
        println!("skipped: no claude-code-spotter corpus");
        return;
    };
    let options =
        ImportOptions { format: FormatChoice::Exact(Format::ClaudeCode), strict: true, include_compaction_calls: true };
    let files = import(std::slice::from_ref(dir), &options);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut compacted = 0;
    for f in &files {
        assert!(f.errors.is_empty(), "{}: {:?}", f.path.display(), f.errors);
        assert_eq!(f.conversations.len(), 1, "{}: one conversation per file", f.path.display());
        let conv = &f.conversations[0];
        let kind = conv.meta["kind"].as_str().expect("a kind").to_string();
        *kinds.entry(kind.clone()).or_default() += 1;
        let name = f.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let expected_kind = if name.starts_with("agent-acompact-") {
            "compaction"
        } else if name.starts_with("agent-") {
            "subagent"
        } else {
            "session"
        };
        assert_eq!(kind, expected_kind, "{}", f.path.display());

        // The compact_boundary lines of the raw file, read independently of the importer.
        let text = std::fs::read_to_string(&f.path).expect("readable");
        let raw: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|d| d["subtype"] == "compact_boundary")
            .map(|d| {
                let m = &d["compactMetadata"];
                serde_json::json!({"trigger": m["trigger"], "pre_tokens": m["preTokens"]})
            })
            .collect();
        let carried: Vec<&compaction::Message> =
            conv.messages.iter().filter(|m| m.meta.contains_key("compact_boundary")).collect();
        let summaries = conv.messages.iter().filter(|m| m.meta_flag("compact_summary")).count();
        if raw.is_empty() {
            assert!(carried.is_empty() && !conv.meta.contains_key("recorded_compactions"), "{}", f.path.display());
            continue;
        }
        compacted += 1;
        assert_eq!(kind, "session", "{}: only main sessions compact", f.path.display());
        assert_eq!(conv.meta["recorded_compactions"], 1, "{}", f.path.display());
        assert_eq!(summaries, 1, "{}: one recorded summary", f.path.display());
        assert_eq!(carried.len(), 1, "{}: one message carries the boundary", f.path.display());
        assert!(carried[0].meta_flag("compact_summary"), "{}: the boundary is on the summary", f.path.display());
        assert_eq!(carried[0].meta["compact_boundary"], raw[0], "{}", f.path.display());
        assert_eq!(carried[0].meta["compact_boundary"]["trigger"], "auto", "{}", f.path.display());
    }
    // SOURCE.md of claude-code-spotter: 4 session files (subagent.jsonl is a subagent's file
    // kept without its parent and reads as a session), 4 subagents, 3 compaction side-calls;
    // the three main sessions with subagents each compacted once.
    let want: BTreeMap<String, usize> =
        [("compaction", 3), ("session", 4), ("subagent", 4)].into_iter().map(|(k, n)| (k.to_string(), n)).collect();
    assert_eq!(kinds, want);
    assert_eq!(compacted, 3);
}
