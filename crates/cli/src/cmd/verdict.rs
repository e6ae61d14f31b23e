//! `compactlens verdict RUN_DIR [--format text|markdown|json]`: at each window, which
//! configuration to ship, how sure that is, and why (see `report::verdict`), from a run
//! folder's `run.json`, `summary.csv`, `results.csv` and `probes.csv`. Exit 2 when the folder
//! is not a run or a file cannot be read (the error names the file, line and column).

use std::path::PathBuf;

use crate::exit;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// For a terminal: every window, pooled then per dataset.
    Text,
    /// For a CI job summary or a pull request.
    Markdown,
    /// Every figure, interval and comparison, for a program.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run folder.
    #[arg(value_name = "RUN_DIR")]
    dir: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let verdict = match report::verdict::Verdict::read(&args.dir) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {}", crate::output::terminal(&e.to_string()));
            return Ok(exit::USAGE);
        }
    };
    match args.format {
        Format::Text => print!("{}", crate::output::terminal(&verdict.text())),
        Format::Markdown => print!("{}", verdict.markdown()),
        Format::Json => println!("{}", serde_json::to_string_pretty(&verdict)?),
    }
    Ok(exit::OK)
}
