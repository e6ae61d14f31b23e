//! How close an LLM-bound run comes to its bound, with default flags.
//!
//! ```text
//! cargo run --release -p compactlens-benches --bin llm-concurrency [-- LATENCY_MS]
//! ```
//!
//! A scripted OpenAI-compatible server (testkit's) answers every request after a fixed latency
//! (200 ms unless given). The workload is the one the performance issue measured: four
//! synthetic conversations x two strategies x one window, summarizer and judge both `llm`, one
//! endpoint with `max_concurrency = 16`, no `--jobs`. The bound is the larger of the requests
//! spread over the cap (`requests x latency / 16`) and the longest chain of requests that wait
//! on each other (a pair's summaries one after another; its probes are scored beside the
//! replay, each an answer then a grade, so only the last checkpoint's two requests add to the
//! chain): `chain x latency`. Printed: wall time, the bound, their ratio, requests and the
//! peak in flight (the server counts).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::time::{Duration, Instant};

use dataset::LoadOptions;
use runlog::experiment::Experiment;
use runlog::record::PairOutcome;
use runner::llm_setup::LlmRoles;
use runner::run::{run, Engine, Plan, Provenance, RunOptions};
use testkit::server::{MockServer, Recorded, Reply};

const CAP: usize = 16;

fn main() -> anyhow::Result<()> {
    let latency = Duration::from_millis(std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200));
    let server = MockServer::start();
    server.respond_with(move |r: &Recorded| {
        let reply = if r.body.contains("accuracy") {
            Reply::text(
                r#"{"accuracy": 4, "completeness": 4, "artifact_trail": 3, "continuity": 4, "decisions": 3}"#,
                400,
                30,
            )
        } else {
            Reply::text("The user is rebooking; the agent checked the fare rules and the baggage allowance.", 900, 40)
        };
        reply.delayed(latency)
    });
    let dir = std::env::temp_dir().join(format!("compactlens-llm-concurrency-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data"))?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let support = std::fs::read_to_string(root.join("datasets/synthetic/support.jsonl"))?;
    let coding = std::fs::read_to_string(root.join("datasets/synthetic/coding.jsonl"))?;
    let lines: Vec<&str> = support.lines().take(2).chain(coding.lines().take(2)).collect();
    std::fs::write(dir.join("data/four.jsonl"), lines.join("\n") + "\n")?;
    let experiment = format!(
        r#"
name = "llm-concurrency"
datasets = ["data"]
windows = [16000]
summarizer = "llm"
judge = "llm"
cache_mode = "off"

[llm]
base_url = "{}/v1"
model = "m"
api_key_env = ""
max_concurrency = {CAP}
max_retries = 0

[[strategy]]
name = "keep-last-n"

[[strategy]]
name = "codex"
"#,
        server.url()
    );
    std::fs::write(dir.join("exp.toml"), experiment)?;
    let experiment = Experiment::load(&dir.join("exp.toml"), &runner::catalog::Catalog)?;
    let plan = Plan::load(experiment, &LoadOptions::default())?;
    let roles = LlmRoles::build(&plan.experiment, &|_| None, None)?;
    let (Some(summarizer), Some(judge)) = (roles.summarizer.as_deref(), roles.judge.as_deref()) else {
        anyhow::bail!("both roles are models");
    };
    let engine = Engine::new(summarizer, judge);
    let options = RunOptions { out: dir.join("out"), resume: false, jobs: None, shard: None };
    let started = Instant::now();
    let data = run(&plan, &engine, &options, &Provenance::default(), &|_| {})?;
    let wall = started.elapsed();

    let requests = server.count();
    let mut chain = 0u64;
    for r in &data.records {
        if let PairOutcome::Ok(m) = &r.outcome {
            // The probes are scored beside the replay, each an answer then a grade: the
            // chain is the summaries, and a last checkpoint's two requests after them.
            let asked = u64::from(!m.probes.is_empty());
            chain = chain.max(m.summarizer_calls + 2 * asked);
        }
    }
    let spread = latency.mul_f64(requests as f64 / CAP as f64);
    let bound = spread.max(latency * u32::try_from(chain).unwrap_or(u32::MAX));
    println!(
        "pairs {}, requests {requests}, latency {} ms, max_concurrency {CAP}, jobs {:?}",
        data.records.len(),
        latency.as_millis(),
        data.manifest.jobs
    );
    println!(
        "bound: max(requests x latency / cap = {:.1} s, longest chain {chain} x latency = {:.1} s) = {:.1} s",
        spread.as_secs_f64(),
        (latency * chain as u32).as_secs_f64(),
        bound.as_secs_f64()
    );
    println!(
        "wall {:.1} s, ratio to the bound {:.2}, peak in flight {}",
        wall.as_secs_f64(),
        wall.as_secs_f64() / bound.as_secs_f64(),
        server.max_in_flight()
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
