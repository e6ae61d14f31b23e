//! The whole default experiment (`experiments/default.toml`: every strategy at its document's
//! defaults, 32k and 128k windows, the committed synthetic datasets, offline summarizer and
//! judge) through `runner::run::run` on a rayon pool of 1 and of 2 threads.
//!
//! Each iteration runs every pair into a fresh folder (the JSONL log and the manifest are
//! written, as in a real run; the CSV and HTML views are the CLI's and are not). The ratio of
//! the two medians is the parallel speedup of the CPU work; `benches/RESULTS.md` holds the
//! target (at least 1.7x on 2 threads).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{BenchmarkId, Criterion, Throughput};
use dataset::LoadOptions;
use runner::experiment::Experiment;
use runner::run::{run, Engine, Plan, Progress, Provenance, RunOptions};

use super::quick;

/// The experiment file, from this package's folder.
pub fn default_experiment() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/default.toml")
}

pub fn bench(c: &mut Criterion) {
    let path = default_experiment();
    let plan = match Experiment::load(&path)
        .map_err(|e| e.to_string())
        .and_then(|e| Plan::load(e, &LoadOptions::default()).map_err(|e| e.to_string()))
    {
        Ok(plan) => plan,
        Err(e) => {
            // Benches report and go on: the other topics still run.
            eprintln!("experiment bench skipped: {}: {e}", path.display());
            return;
        }
    };
    let summarizer = runner::llm_setup::build_summarizer(&plan.experiment.summarizer);
    let judge = runner::llm_setup::build_judge(&plan.experiment.judge);
    let engine = Engine::new(summarizer.as_ref(), judge.as_ref());
    let pairs = plan.pairs().len();
    let scratch = std::env::temp_dir().join(format!("compactbench-bench-experiment-{}", std::process::id()));
    let counter = AtomicUsize::new(0);
    let provenance = Provenance::default();

    let mut group = c.benchmark_group("experiment");
    // A run takes seconds: ten samples of one run each.
    quick(&mut group, 10, 10);
    group.throughput(Throughput::Elements(pairs as u64));
    for jobs in [1usize, 2] {
        group.bench_with_input(BenchmarkId::new("default", format!("{jobs}-threads")), &jobs, |b, &jobs| {
            b.iter(|| {
                let out = scratch.join(counter.fetch_add(1, Ordering::Relaxed).to_string());
                let options = RunOptions { out: out.clone(), resume: false, jobs: Some(jobs), shard: None };
                let data = run(&plan, &engine, &options, &provenance, &|_: &Progress| {});
                let _ = std::fs::remove_dir_all(&out);
                data.map(|d| d.records.len()).unwrap_or(0)
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&scratch);
}
