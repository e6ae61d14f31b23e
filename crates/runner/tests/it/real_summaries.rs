//! scratch
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use compaction::{Context, Conversation, PromptKind, SummaryRequest};
use dataset::import::{import, FormatChoice, ImportOptions};
use runner::replay::Summarizer;
use runner::summarize::OfflineSummarizer;

const CORPORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpora");

fn sessions() -> Option<Vec<Conversation>> {
    let root = Path::new(CORPORA);
    if !root.is_dir() {
        println!("skipped: no corpora folder at {CORPORA}");
        return None;
    }
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let mut out = Vec::new();
    for dir in ["claude-code-spotter", "claude-code-entire"] {
        let files = import(&[PathBuf::from(root.join(dir))], &options);
        for f in files {
            out.extend(f.conversations);
        }
    }
    Some(out)
}

#[test]
fn dump_pairs() {
    let Some(convs) = sessions() else { return };
    let dir = std::env::var("DUMP_DIR").unwrap_or_default();
    for conv in &convs {
        let mut start = 0;
        let mut round = 1;
        for (i, m) in conv.messages.iter().enumerate() {
            if !m.meta_flag("compact_summary") {
                continue;
            }
            let ctx = Context::from_messages(conv.messages[start..i].to_vec());
            let req = SummaryRequest::new((0..i - start).collect(), PromptKind::SessionSummary, 16_384, round);
            let s = OfflineSummarizer::new().summarize(&ctx, &req).expect("summarizes");
            if !dir.is_empty() {
                std::fs::write(format!("{dir}/{}-{i}-real.md", conv.id), &m.content).unwrap();
                std::fs::write(format!("{dir}/{}-{i}-standin.md", conv.id), &s.text).unwrap();
            }
            println!("{} at {i}: real {} chars, stand-in {} chars", conv.id, m.content.len(), s.text.len());
            start = i;
            round += 1;
        }
    }
}
