//! The `compactlens` binary: the only place that reads the environment, prints, and picks
//! exit codes (0 ok, 1 gate regression or failed run, 2 usage or input error).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Every line the binary prints goes through one of these three macros, which escape control
/// characters with [`output::terminal`]: a hostile name (an experiment's, a path, a strategy's,
/// an id) can neither drive the terminal nor reverse the line.
macro_rules! say {
    ($($arg:tt)*) => { println!("{}", $crate::output::terminal(&format!($($arg)*))) };
}
/// [`say!`] without the newline.
macro_rules! say_part {
    ($($arg:tt)*) => { print!("{}", $crate::output::terminal(&format!($($arg)*))) };
}
/// [`say!`] on stderr.
macro_rules! tell {
    ($($arg:tt)*) => { eprintln!("{}", $crate::output::terminal(&format!($($arg)*))) };
}

mod cmd;
mod output;

/// A compaction of a long context allocates and frees small objects by the tens of thousands
/// (an entry, its message and its strings for each masked output): mimalloc does that work in
/// about half the time of the system allocator (benches/RESULTS.md, "The allocator"). The
/// feature `system-allocator` builds with the system's instead (for heap profilers).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Evaluate and benchmark how LLM agents compact their context.
#[derive(Debug, Parser)]
#[command(name = "compactlens", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Read no input file (experiment, price table, prompt, summary or results table,
    /// results.jsonl, run.json, recording, labels) larger than this; the defaults are per
    /// kind of file (16 MiB for settings, 512 MiB for a CSV table, 2 GiB for results.jsonl).
    #[arg(long, global = true, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    max_input_bytes: Option<u64>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an experiment: every conversation under every configuration, into a run folder.
    Run(cmd::run::Args),
    /// Combine shard folders of one experiment into one run folder.
    Merge(cmd::merge::Args),
    /// List every strategy with its source document and parameters.
    Strategies(cmd::strategies::Args),
    /// Check the files generated from the strategy catalog (experiments/README.md's parameter
    /// tables, the experiment files' strategy tables, the gate's baseline); --write rewrites them.
    Generated(cmd::generated::Args),
    /// Check every strategy of an experiment, external ones included, on generated
    /// conversations: no orphaned tool result, no unanswered call, nothing a provider refuses.
    Conform(cmd::conform::Args),
    /// Check dataset files; every problem names file, line and field.
    Validate(cmd::validate::Args),
    /// Import recorded sessions (openai, anthropic, claude-code, mini-swe-agent, swe-agent,
    /// openhands, tau-bench, tau2) into one dataset; repairs are counted, or errors with --strict.
    Import(cmd::import::Args),
    /// Probes from the recordings themselves (`probes derive IN --out OUT`).
    Probes(cmd::probes::Args),
    /// Check a judge against human labels (`judge calibrate LABELS.jsonl [--config FILE]`).
    Judge(cmd::judge::Args),
    /// Compare a run's summary.csv with a baseline; exit 1 on a regression.
    Gate(cmd::gate::Args),
    /// Re-render report.html in a run folder from its run.json and results.jsonl.
    Report(cmd::report::Args),
    /// Which configuration to ship at each window, how sure, and why, from a run folder.
    Verdict(cmd::verdict::Args),
    /// Write the synthetic datasets (deterministic for a seed), one JSONL file per family.
    Synth(cmd::synth::Args),
}

/// Exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
}

/// On SIGINT or SIGTERM, kill the process groups of the external strategies' programs (a busy
/// one would outlive the run otherwise) and exit 130 or 143, as a shell reports a process
/// those signals ended. The run folder's lock is released by the OS with the process.
#[cfg(unix)]
fn stop_strategies_on_signals() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    // Registered before this returns, so no signal arrives before the handler is in place.
    let handlers = runtime.block_on(async { (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) });
    let (Ok(mut interrupt), Ok(mut terminate)) = handlers else { return };
    std::thread::spawn(move || {
        let code = runtime.block_on(async {
            tokio::select! {
                _ = interrupt.recv() => 130,
                _ = terminate.recv() => 143,
            }
        });
        runner::external::stop_all();
        tell!("error: stopped by a signal; the external strategies' processes were killed");
        std::process::exit(code);
    });
}

#[cfg(not(unix))]
fn stop_strategies_on_signals() {}

fn main() -> ExitCode {
    // clap's own messages (an unknown argument, --help) go through the same escaping.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            if e.use_stderr() {
                tell!("{}", text.trim_end());
            } else {
                say!("{}", text.trim_end());
            }
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(exit::USAGE));
        }
    };
    if matches!(cli.command, Command::Run(_) | Command::Conform(_)) {
        stop_strategies_on_signals();
    }
    if let Some(bytes) = cli.max_input_bytes {
        inputs::set_max_bytes(bytes);
    }
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(args),
        Command::Merge(args) => cmd::merge::run(args),
        Command::Strategies(args) => cmd::strategies::run(args),
        Command::Generated(args) => cmd::generated::run(args),
        Command::Conform(args) => cmd::conform::run(args),
        Command::Validate(args) => cmd::validate::run(args),
        Command::Import(args) => cmd::import::run(args),
        Command::Probes(args) => cmd::probes::run(args),
        Command::Judge(args) => cmd::judge::run(args),
        Command::Gate(args) => cmd::gate::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Synth(args) => cmd::synth::run(args),
        Command::Verdict(args) => cmd::verdict::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            tell!("error: {}", output::error_text(&err));
            ExitCode::from(exit::USAGE)
        }
    }
}
