//! `compactlens import --format F IN... --out FILE [--strict] [--probes]`: recorded sessions
//! in public formats -> one dataset file.
//!
//! Folders are walked for `*.json`, `*.jsonl` and `*.traj` files; a Claude Code session file
//! brings its `<session>/subagents/*.jsonl`. Per file, one line to stdout: the format used (and,
//! with `auto`, why), the conversations imported and the repair counts; then a total. Every
//! problem goes to stderr as `file:line: conversation ID, field F: what`. The conversations
//! that imported are written even when others could not be; the exit code is 2 when anything
//! could not be imported (with `--strict`: when anything needed a repair). The output is
//! written atomically; when no conversation imported, or when `--out` is one of the inputs,
//! nothing is written and an existing file is left as it was.

use std::path::PathBuf;

use anyhow::Context as _;
use dataset::import::{self, FormatChoice, ImportOptions, RepairReport};
use dataset::probes::{self, DeriveParams};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The inputs' format: auto (sniff each file and say which it chose), openai, anthropic,
    /// claude-code, mini-swe-agent, swe-agent, openhands, tau-bench, tau2.
    #[arg(long, default_value = "auto", value_name = "F", value_parser = parse_format)]
    format: FormatChoice,
    /// Files or folders to import.
    #[arg(required = true, value_name = "IN")]
    inputs: Vec<PathBuf>,
    /// The dataset to write: JSONL, one conversation per line (folders created if missing).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Turn every repair into an error naming file, line and field, and leave the conversation
    /// out, instead of repairing it.
    #[arg(long)]
    strict: bool,
    /// Also derive probes, as `compactlens probes derive` does with its default bounds.
    #[arg(long)]
    probes: bool,
    /// Keep Claude Code's compaction side-calls (`agent-acompact-*`) as conversations, marked
    /// `meta.kind = "compaction"`; left out by default.
    #[arg(long)]
    include_compaction_calls: bool,
}

fn parse_format(s: &str) -> Result<FormatChoice, String> {
    s.parse()
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let options = ImportOptions {
        format: args.format,
        strict: args.strict,
        include_compaction_calls: args.include_compaction_calls,
    };
    let files = import::import(&args.inputs, &options);
    if files.is_empty() {
        tell!("no *.json, *.jsonl or *.traj files in {}", list(&args.inputs));
        return Ok(crate::exit::USAGE);
    }
    let read: Vec<&std::path::Path> =
        args.inputs.iter().map(PathBuf::as_path).chain(files.iter().map(|f| f.path.as_path())).collect();
    if let Some(input) = crate::output::clobbers(&args.out, read) {
        tell!(
            "error: --out {} is also an input ({}); write the dataset elsewhere",
            args.out.display(),
            input.display()
        );
        return Ok(crate::exit::USAGE);
    }
    let mut out: Vec<u8> = Vec::new();
    let mut total = RepairReport::default();
    let (mut conversations, mut errors, mut derived, mut side_calls) = (0usize, 0usize, 0usize, 0usize);
    let mut dropped = probes::Dropped::default();
    let params = DeriveParams::default();
    for f in files {
        for e in &f.errors {
            tell!("{e}");
        }
        let format = match (f.format, f.sniffed) {
            (Some(format), Some(why)) => format!("format {format} (auto: {why})"),
            (Some(format), None) => format!("format {format}"),
            (None, _) => "format unknown".to_string(),
        };
        say!("{}: {format}: {} conversations; {}", f.path.display(), f.conversations.len(), f.report);
        for mut conv in f.conversations {
            if args.probes {
                let (n, d) = probes::replace_derived_counted(&mut conv, &params);
                derived += n;
                dropped.merge(&d);
            }
            serde_json::to_writer(&mut out, &conv).context("serializing a conversation")?;
            out.push(b'\n');
            conversations += 1;
        }
        errors += f.errors.len();
        side_calls += f.skipped_compaction_calls;
        total.merge(&f.report);
    }
    if conversations == 0 {
        tell!(
            "error: no conversation could be imported; {} {}",
            args.out.display(),
            if args.out.exists() { "is left unchanged" } else { "is not written" }
        );
        return Ok(crate::exit::USAGE);
    }
    crate::output::write_atomic(&args.out, &out)?;
    let probes = if args.probes { format!(", {derived} derived probes ({dropped})") } else { String::new() };
    let side_calls = if side_calls > 0 {
        format!(", {side_calls} compaction side-calls left out (--include-compaction-calls keeps them)")
    } else {
        String::new()
    };
    say!(
        "{}: {conversations} conversations{side_calls}{probes}; {total}; {errors} error{}",
        args.out.display(),
        if errors == 1 { "" } else { "s" }
    );
    Ok(if errors > 0 { crate::exit::USAGE } else { crate::exit::OK })
}

fn list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}
