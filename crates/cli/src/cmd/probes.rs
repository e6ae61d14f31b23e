//! `compactlens probes derive IN --out OUT`: add probes derived from each recording.
//! `compactlens probes audit DATASET... [--strict]`: what the probes ask, per source (see
//! `dataset::probes::audit`); `--strict` exits 1 when a source passes the limits.
//! `compactlens probes generate IN --config F --out OUT`: probes the experiment's model writes
//! (see `runner::probegen`), validated against their source messages, beside the others.
//!
//! Reads a dataset (JSONL), replaces each conversation's derived probes (ids starting with
//! `derived-`) with fresh ones and keeps every other probe, and writes the result. The
//! derivation is deterministic (see `dataset::probes`). One summary line goes to stdout: probes
//! by kind. Load problems go to stderr; the conversations that loaded are written, and the exit
//! code is 2 when any line could not be loaded. `--out` may not be IN (a line that did not load
//! would be lost); the output is written atomically, and not at all when nothing loaded.

use std::path::PathBuf;

use anyhow::Context as _;
use dataset::probes::{self, DeriveParams};
use dataset::{self, LoadOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Derive probes from the recordings themselves: the original task, files touched, errors
    /// and identifiers, the last request and pending todos, gold actions.
    Derive(DeriveArgs),
    /// Audit datasets' probes per source: probes by kind and tier, fact types (plain word,
    /// short, digits, date, code fragment, ...), facts tested twice at one checkpoint, and
    /// conversations of 20+ messages without a critical task probe.
    Audit(AuditArgs),
    /// Have the experiment's model (its judge's endpoint, else its summarizer's) write probes
    /// in the schema of the derived ones; each fact must occur in the probe's source messages.
    /// Rejected probes are listed and counted. The probes (ids `llm-N`) replace earlier
    /// generated ones and sit beside derived and hand-written probes.
    Generate(GenerateArgs),
    /// Attach answer keys (keys files: one written probe a line, with its conversation id) to
    /// a dataset's conversations and write the result; the keys are checked first (sources
    /// before the checkpoint, an alias of each fact in its sources, no duplicate) and nothing
    /// is written when one fails.
    Merge(MergeArgs),
    /// What a person needs to write answer keys at a checkpoint: every human message in full,
    /// the to-do list, questions and answers, git and test commands with their outcome, every
    /// event in one line and the last events in full; recorded summaries hidden.
    Context(ContextArgs),
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// The dataset to read (JSONL, one conversation per line).
    #[arg(value_name = "DATASET")]
    input: PathBuf,
    /// The keys files (JSONL, one key a line with its `conversation`).
    #[arg(value_name = "KEYS", required = true)]
    keys: Vec<PathBuf>,
    /// The dataset to write (not DATASET itself).
    #[arg(long, value_name = "OUT")]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct ContextArgs {
    /// The dataset to read (JSONL, one conversation per line).
    #[arg(value_name = "DATASET")]
    input: PathBuf,
    /// The conversation's id.
    #[arg(long, value_name = "ID")]
    conversation: String,
    /// The checkpoint: the view shows messages 0..N-1 (for a recorded compaction, N is the
    /// index of the summary message).
    #[arg(long, value_name = "N")]
    at: usize,
    /// How many of the last events are shown in full.
    #[arg(long, value_name = "K", default_value_t = 100)]
    full: usize,
    /// Characters shown of each event in full.
    #[arg(long, value_name = "C", default_value_t = 4000)]
    clip: usize,
}

#[derive(Debug, clap::Args)]
struct GenerateArgs {
    /// The dataset to read (JSONL, one conversation per line).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// The experiment whose model, cache and key are used (its `[llm]`, `[judge]` or
    /// `[summarizer]` endpoint).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The dataset to write (not IN itself).
    #[arg(long, value_name = "OUT")]
    out: PathBuf,
    /// Probes asked of the model per conversation.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    max_probes: u16,
    /// Override the experiment's `cache_mode`.
    #[arg(long, value_name = "MODE")]
    cache_mode: Option<llm::cache::CacheMode>,
}

#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// The datasets to audit (JSONL, one conversation per line).
    #[arg(value_name = "DATASET", required = true)]
    datasets: Vec<PathBuf>,
    /// Exit 1 when a source has more than 10% plain-word facts, any code-fragment fact, a fact
    /// tested twice at one checkpoint, or a conversation of 20+ messages without a critical
    /// task probe.
    #[arg(long)]
    strict: bool,
    /// Answer keys to measure the probes against: the share of the keys' facts, by source and
    /// tier, that the derived probes (and the generated ones, where present) test at the same
    /// checkpoint. The keys are checked as `probes merge` checks them.
    #[arg(long, value_name = "KEYS", num_args = 1..)]
    keys: Vec<PathBuf>,
    /// With `--keys`: also list each critical key no derived probe tests (source,
    /// conversation, key, checkpoint, question, facts).
    #[arg(long, requires = "keys")]
    untested: bool,
}

#[derive(Debug, clap::Args)]
struct DeriveArgs {
    /// The dataset to read (JSONL, one conversation per line).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// The dataset to write (not IN itself).
    #[arg(long, value_name = "OUT")]
    out: PathBuf,
    /// Task probes per conversation: the first request and later requests with identifiers
    /// [default: 4].
    #[arg(long, value_name = "N")]
    max_task: Option<usize>,
    /// Artifact probes per conversation, patched files of the gold family included [default: 6].
    #[arg(long, value_name = "N")]
    max_artifact: Option<usize>,
    /// Error and user-identifier recall probes per conversation (lessons and the state of the
    /// tests come on top) [default: 4].
    #[arg(long, value_name = "N")]
    max_recall: Option<usize>,
    /// Continuation probes per conversation (last request, pending todos, next step) [default: 3].
    #[arg(long, value_name = "N")]
    max_continuation: Option<usize>,
    /// Gold probes per conversation (gold actions, patched files, submitted answer) [default: 8].
    #[arg(long, value_name = "N")]
    max_gold: Option<usize>,
    /// Facts per probe [default: 4].
    #[arg(long, value_name = "N")]
    max_facts: Option<usize>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Command::Derive(a) => derive(a),
        Command::Audit(a) => audit(a),
        Command::Generate(a) => generate(a),
        Command::Merge(a) => merge(a),
        Command::Context(a) => context(a),
    }
}

fn generate(args: GenerateArgs) -> anyhow::Result<u8> {
    use runner::probegen::{self, ProbeWriter};
    if crate::output::same_file(&args.out, &args.input) {
        tell!("error: --out {} is the input; write the dataset elsewhere", args.out.display());
        return Ok(crate::exit::USAGE);
    }
    let experiment = match runlog::experiment::Experiment::load_with_env(
        &args.config,
        &|name| std::env::var(name).ok(),
        &runner::catalog::Catalog,
    ) {
        Ok(e) => e,
        Err(e) => {
            tell!("error: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    let roles = match runner::llm_setup::LlmRoles::build(&experiment, &|name| std::env::var(name).ok(), args.cache_mode)
    {
        Ok(r) => r,
        Err(e) => {
            tell!("error: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    let client = match (&roles.judge, &roles.summarizer) {
        (Some(j), _) => j.answerer(),
        (None, Some(s)) => s.client(),
        (None, None) => {
            tell!(
                "error: {} names no model: probes generate needs `judge = \"llm\"` or `summarizer = \"llm\"` with an [llm] table",
                args.config.display()
            );
            return Ok(crate::exit::USAGE);
        }
    };
    let writer = ProbeWriter::new(client, usize::from(args.max_probes))?;
    let ds = dataset::load_file(&args.input, &LoadOptions::default());
    for e in &ds.problems {
        tell!("{e}");
    }
    let mut conversations = ds.conversations;
    if conversations.is_empty() {
        tell!("error: no conversation loaded from {}; {} is not written", args.input.display(), args.out.display());
        return Ok(crate::exit::USAGE);
    }
    let (mut kept, mut rejected, mut failed) = (0usize, 0usize, 0usize);
    for conv in &mut conversations {
        match writer.generate(conv) {
            Ok((probes, bad)) => {
                kept += probes.len();
                rejected += bad.len();
                for r in &bad {
                    tell!("rejected: {} probe {} ({:?}): {}", r.conversation, r.index, r.question, r.reason);
                }
                probegen::replace_generated(conv, probes);
            }
            Err(e) => {
                failed += 1;
                tell!("error: {e}");
            }
        }
    }
    if failed > 0 {
        tell!(
            "error: {failed} of {} conversations got no probes; {} is not written (replies already received are cached)",
            conversations.len(),
            args.out.display()
        );
        return Ok(crate::exit::FAILED);
    }
    let by_kind = write_dataset(&args.out, &conversations, probegen::LLM_PREFIX)?;
    say!(
        "{}: {} conversations, {kept} generated probes kept ({}), {rejected} rejected of {} proposed",
        args.out.display(),
        conversations.len(),
        by_kind.join(", "),
        kept + rejected
    );
    if rejected > 0 {
        tell!("warning: {rejected} of {} proposed probes were rejected (listed above)", kept + rejected);
    }
    Ok(if ds.problems.is_empty() { crate::exit::OK } else { crate::exit::USAGE })
}

fn audit(args: AuditArgs) -> anyhow::Result<u8> {
    let mut audit = probes::audit::Audit::default();
    let mut problems = 0;
    let keys: Vec<dataset::keys::Keys> = args.keys.iter().map(dataset::keys::load_keys).collect();
    let mut coverage = dataset::keys::Coverage::default();
    let mut attached_to: std::collections::HashSet<(usize, String)> = std::collections::HashSet::new();
    for path in &args.datasets {
        let mut ds = dataset::load_file(path, &LoadOptions::default());
        for e in &ds.problems {
            eprintln!("{}", crate::output::terminal(&e.to_string()));
        }
        problems += ds.problems.len();
        for (k, file) in keys.iter().enumerate() {
            let attached = dataset::keys::attach(ds.conversations.iter_mut(), file);
            for conv in ds.conversations.iter().filter(|c| file.by_conversation.contains_key(&c.id)) {
                attached_to.insert((k, conv.id.clone()));
                for (p, field, problem) in dataset::check_keys(conv) {
                    tell!("{}: conversation {}, probes[{p}].{field}: {problem}", file.path.display(), conv.id);
                    problems += 1;
                }
            }
            let _ = attached;
        }
        for c in &ds.conversations {
            coverage.add(&ds.name, c);
            // The audit's limits are for the probes a rule or a model wrote; keys are checked
            // above.
            if c.probes.iter().any(|p| p.is_written()) {
                let mut without = c.clone();
                without.probes.retain(|p| !p.is_written());
                audit.add(&without);
            } else {
                audit.add(c);
            }
        }
    }
    for (k, file) in keys.iter().enumerate() {
        for e in &file.problems {
            tell!("{e}");
            problems += 1;
        }
        for (id, list) in &file.by_conversation {
            if !attached_to.contains(&(k, id.clone())) {
                let line = list.first().map(|(l, _)| *l).unwrap_or(0);
                tell!("{}:{line}: conversation {id}: not in any dataset given", file.path.display());
                problems += 1;
            }
        }
    }
    print!("{}", crate::output::terminal(&audit.render()));
    if !keys.is_empty() {
        print!("{}", crate::output::terminal(&coverage.render()));
        if args.untested {
            print!("{}", crate::output::terminal(&coverage.render_untested()));
        }
    }
    let violations = audit.violations();
    for v in &violations {
        println!("limit: {}", crate::output::terminal(v));
    }
    if problems > 0 {
        return Ok(crate::exit::USAGE);
    }
    Ok(if args.strict && !violations.is_empty() { crate::exit::FAILED } else { crate::exit::OK })
}

/// Write `conversations` to `path` atomically; the probes whose ids start with `prefix`, by
/// kind (`task 3`, ...).
fn write_dataset(
    path: &std::path::Path,
    conversations: &[compaction::Conversation],
    prefix: &str,
) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<u8> = Vec::new();
    for conv in conversations {
        serde_json::to_writer(&mut out, conv).context("serializing a conversation")?;
        out.push(b'\n');
    }
    crate::output::write_atomic(path, &out)?;
    let kinds =
        probes::count_by_kind(conversations.iter().flat_map(|c| &c.probes).filter(|p| p.id.starts_with(prefix)));
    Ok(kinds.iter().map(|(k, n)| format!("{} {n}", k.as_str())).collect())
}

fn derive(args: DeriveArgs) -> anyhow::Result<u8> {
    let d = DeriveParams::default();
    let params = DeriveParams {
        max_task: args.max_task.unwrap_or(d.max_task),
        max_artifact: args.max_artifact.unwrap_or(d.max_artifact),
        max_recall: args.max_recall.unwrap_or(d.max_recall),
        max_continuation: args.max_continuation.unwrap_or(d.max_continuation),
        max_gold: args.max_gold.unwrap_or(d.max_gold),
        max_facts: args.max_facts.unwrap_or(d.max_facts),
        ..d
    };
    if crate::output::same_file(&args.out, &args.input) {
        tell!(
            "error: --out {} is the input; write the dataset elsewhere (a line that does not load would be lost)",
            args.out.display()
        );
        return Ok(crate::exit::USAGE);
    }
    let ds = dataset::load_file(&args.input, &LoadOptions::default());
    for e in &ds.problems {
        tell!("{e}");
    }
    let mut conversations = ds.conversations;
    let mut added = 0usize;
    let mut without = Vec::new();
    for conv in &mut conversations {
        let n = probes::replace_derived(conv, &params);
        added += n;
        if n == 0 && probes::uses_tools(conv) {
            without.push(conv.id.clone());
        }
    }
    if conversations.is_empty() {
        tell!(
            "error: no conversation loaded from {}; {} {}",
            args.input.display(),
            args.out.display(),
            if args.out.exists() { "is left unchanged" } else { "is not written" }
        );
        return Ok(crate::exit::USAGE);
    }
    let by_kind = write_dataset(&args.out, &conversations, probes::DERIVED_PREFIX)?;
    say!(
        "{}: {} conversations, {added} derived probes ({})",
        args.out.display(),
        conversations.len(),
        by_kind.join(", ")
    );
    if !without.is_empty() {
        tell!("no probe could be derived for {} tool-using conversations: {}", without.len(), without.join(", "));
    }
    Ok(if ds.problems.is_empty() { crate::exit::OK } else { crate::exit::USAGE })
}

fn merge(args: MergeArgs) -> anyhow::Result<u8> {
    if crate::output::same_file(&args.out, &args.input)
        || args.keys.iter().any(|k| crate::output::same_file(&args.out, k))
    {
        tell!("error: --out {} is one of the inputs; write the dataset elsewhere", args.out.display());
        return Ok(crate::exit::USAGE);
    }
    let ds = dataset::load_file(&args.input, &LoadOptions::default());
    let mut problems = 0usize;
    for e in &ds.problems {
        tell!("{e}");
        problems += 1;
    }
    let mut conversations = ds.conversations;
    let mut keys_in = 0usize;
    let mut checkpoints = 0usize;
    for path in &args.keys {
        let keys = dataset::keys::load_keys(path);
        for e in &keys.problems {
            tell!("{e}");
            problems += 1;
        }
        let attached = dataset::keys::attach(conversations.iter_mut(), &keys);
        for (id, line) in &attached.unknown {
            tell!("{}:{line}: conversation {id}: not in {}", path.display(), args.input.display());
            problems += 1;
        }
        keys_in += attached.keys;
        checkpoints += keys.checkpoints();
    }
    for conv in &conversations {
        for (p, field, problem) in dataset::check_keys(conv) {
            tell!("{}: conversation {}, probes[{p}].{field}: {problem}", args.input.display(), conv.id);
            problems += 1;
        }
    }
    if problems > 0 {
        tell!(
            "error: {problems} problem{} in the dataset or the keys; {} is not written",
            if problems == 1 { "" } else { "s" },
            args.out.display()
        );
        return Ok(crate::exit::USAGE);
    }
    let mut out: Vec<u8> = Vec::new();
    for conv in &conversations {
        serde_json::to_writer(&mut out, conv).context("serializing a conversation")?;
        out.push(b'\n');
    }
    crate::output::write_atomic(&args.out, &out)?;
    say!(
        "{}: {} conversations, {keys_in} answer keys at {checkpoints} checkpoints attached",
        args.out.display(),
        conversations.len()
    );
    Ok(crate::exit::OK)
}

fn context(args: ContextArgs) -> anyhow::Result<u8> {
    let ds = dataset::load_file(&args.input, &LoadOptions::default());
    for e in &ds.problems {
        tell!("{e}");
    }
    let Some(conv) = ds.conversations.iter().find(|c| c.id == args.conversation) else {
        tell!("error: {}: no conversation {:?}", args.input.display(), args.conversation);
        return Ok(crate::exit::USAGE);
    };
    if args.at == 0 || args.at > conv.messages.len() {
        tell!("error: --at {} is outside 1..={} (the conversation's messages)", args.at, conv.messages.len());
        return Ok(crate::exit::USAGE);
    }
    print!("{}", crate::output::terminal(&dataset::keys::authoring_view(conv, args.at, args.full, args.clip)));
    Ok(crate::exit::OK)
}
