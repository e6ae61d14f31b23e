//! `compactlens validate FILE...`: load and validate datasets.
//!
//! Every problem goes to stderr as `file:line: conversation ID, message N, field F: what is
//! wrong`; one summary line per file goes to stdout. Exit code 2 when anything is wrong.
//! Files are loaded one at a time, so a folder of large recordings never sits in memory.

use std::path::PathBuf;

use dataset::{self, Dataset, LoadOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Dataset files (JSONL, one conversation per line) or folders (every `*.jsonl` under
    /// them, recursively).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The longest line accepted, in bytes; longer lines are reported and skipped.
    #[arg(long, value_name = "BYTES", default_value_t = dataset::DEFAULT_MAX_LINE_BYTES)]
    max_line_bytes: usize,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let options = LoadOptions { max_line_bytes: args.max_line_bytes, ..LoadOptions::default() };
    let mut total_problems = 0usize;
    for path in &args.files {
        if path.is_dir() {
            let found = dataset::find_jsonl(path);
            if found.is_empty() {
                tell!("{}: no *.jsonl files in this folder", path.display());
                total_problems += 1;
            }
            for f in found {
                match f.unreadable {
                    Some(err) => {
                        tell!("{err}");
                        total_problems += 1;
                    }
                    None => total_problems += report(&dataset::load_file(&f.path, &options)),
                }
            }
        } else {
            total_problems += report(&dataset::load_file(path, &options));
        }
    }
    Ok(if total_problems > 0 { crate::exit::USAGE } else { crate::exit::OK })
}

/// Print a dataset's problems (stderr) and summary (stdout); the number of problems.
fn report(ds: &Dataset) -> usize {
    let invalid = ds.validate();
    for err in ds.problems.iter().chain(&invalid) {
        tell!("{err}");
    }
    let problems = ds.problems.len() + invalid.len();
    say!(
        "{}: {}, {}, {}, {}",
        ds.path.display(),
        count(ds.conversations.len(), "conversation"),
        count(ds.message_count(), "message"),
        count(ds.probe_count(), "probe"),
        count(problems, "problem"),
    );
    problems
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
