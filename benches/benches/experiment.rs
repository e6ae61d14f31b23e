//! The whole default experiment (`experiments/default.toml`: its strategies at their
//! documents' defaults, 32k and 128k windows, the committed synthetic datasets, offline
//! summarizer and judge) through `runner::run::run` on a rayon pool of 1 and of 2 threads.
//!
//! ```text
//! cargo bench -p compactlens-benches --bench experiment
//! ```
//!
//! Each iteration runs every pair into a fresh folder (the JSONL log and the manifest are
//! written, as in a real run; the CSV and HTML views are the CLI's and are not). The ratio of
//! the two medians is the parallel speedup; `benches/RESULTS.md` holds the target (at least
//! 1.7x on 2 threads). Criterion measures wall time, which a shared machine's load moves; the
//! bench also prints each configuration's mean CPU time per run (the process's user + system
//! time, from the run's own `timings.cpu_ms`), which the load does not move much, and the
//! ratio of the two-thread CPU to the one-thread CPU (above 1: work the second thread adds).

#![allow(clippy::print_stderr)] // a bench that cannot load its input says so

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dataset::LoadOptions;
use runlog::experiment::Experiment;
use runner::run::{run, Engine, Plan, Progress, Provenance, RunOptions};

/// The experiment file, from this package's folder.
pub fn default_experiment() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/default.toml")
}

pub fn bench(c: &mut Criterion) {
    let path = default_experiment();
    let plan = match Experiment::load(&path, &runner::catalog::Catalog)
        .map_err(|e| e.to_string())
        .and_then(|e| Plan::load(e, &LoadOptions::default()).map_err(|e| e.to_string()))
    {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("experiment bench skipped: {}: {e}", path.display());
            return;
        }
    };
    let summarizer = runner::llm_setup::build_summarizer(&plan.experiment.summarizer);
    let judge = runner::llm_setup::build_judge(&plan.experiment.judge);
    let engine = Engine::new(summarizer.as_ref(), judge.as_ref());
    let pairs = plan.pairs().len();
    let scratch = std::env::temp_dir().join(format!("compactlens-bench-experiment-{}", std::process::id()));
    let counter = AtomicUsize::new(0);
    let provenance = Provenance::default();
    // Per thread count: (runs, CPU milliseconds).
    let cpu: Mutex<[(u64, u64); 3]> = Mutex::new([(0, 0); 3]);

    let mut group = c.benchmark_group("experiment");
    // A run takes seconds: ten samples of one run each, one run of warm-up.
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(pairs as u64));
    for jobs in [1usize, 2] {
        group.bench_with_input(BenchmarkId::new("default", format!("{jobs}-threads")), &jobs, |b, &jobs| {
            b.iter(|| {
                let out = scratch.join(counter.fetch_add(1, Ordering::Relaxed).to_string());
                let options = RunOptions { out: out.clone(), resume: false, jobs: Some(jobs), shard: None };
                let data = run(&plan, &engine, &options, &provenance, &|_: &Progress| {});
                let _ = std::fs::remove_dir_all(&out);
                if let Some(ms) = data.as_ref().ok().and_then(|d| d.manifest.timings.cpu_ms) {
                    if let Ok(mut cpu) = cpu.lock() {
                        cpu[jobs].0 += 1;
                        cpu[jobs].1 += ms;
                    }
                }
                data.map(|d| d.records.len()).unwrap_or(0)
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&scratch);
    let cpu = cpu.lock().map(|c| *c).unwrap_or_default();
    let mean = |j: usize| (cpu[j].0 > 0).then(|| cpu[j].1 as f64 / cpu[j].0 as f64 / 1e3);
    for jobs in [1, 2] {
        if let Some(s) = mean(jobs) {
            eprintln!("experiment/default/{jobs}-threads: {s:.2} s of CPU per run (mean of {} runs)", cpu[jobs].0);
        }
    }
    if let (Some(one), Some(two)) = (mean(1), mean(2)) {
        eprintln!("experiment/default: 2-thread CPU / 1-thread CPU = {:.2}", two / one);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
