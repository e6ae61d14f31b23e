//! What the external-strategy protocol costs per model call.
//!
//! `protocol/{in_process,external}/{n}`: one replay of a generated conversation of `n`
//! messages through a strategy that is asked at every call and never compacts: in process (a
//! Rust no-op the driver asks, as it asks an external session), and as a Python program
//! speaking the protocol (`init`, `begin`, a `call` per model call answered `keep`). The
//! window is large enough that nothing overflows, so the difference is the protocol alone:
//! serializing each call's appended messages, the pipe both ways, and the program's JSON
//! parse. Throughput counts calls; `benches/RESULTS.md` turns the difference into a cost per
//! call and per appended kilobyte, at 1k and 10k messages (only the appended messages are sent,
//! so the cost per call stays flat as the conversation grows).

use std::path::PathBuf;

use compaction::{Budget, Context, Conversation, Encoding, Exact, Plan, Promises, Role, Strategy};
use compaction::{TokenCounter, Trigger};
use compaction_strategies::StrategyConfig;
use criterion::{BenchmarkId, Criterion, Throughput};
use runlog::settings::{CacheProfile, OverflowPolicy};
use runner::external::ExternalStrategy;
use runner::judge::OfflineJudge;
use runner::replay::{replay_built, ReplaySettings};
use runner::session::Compactor;
use runner::summarize::OfflineSummarizer;

use super::quick;

/// Conversation sizes, in messages.
pub const SIZES: [usize; 2] = [1_000, 10_000];

/// The no-op program.
const NOOP: &str = r#"
import json, sys
out = sys.stdout
for line in sys.stdin:
    m = json.loads(line)
    t = m["type"]
    if t == "init":
        out.write('{"type":"ready","name":"noop","version":"1"}\n'); out.flush()
    elif t == "call":
        out.write('{"type":"keep"}\n'); out.flush()
"#;

/// Asked at every call, compacts never: the in-process twin of the no-op program.
struct AskEveryCall(Exact);

impl Strategy for AskEveryCall {
    fn name(&self) -> &'static str {
        "ask-every-call"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.0
    }
    fn threshold(&self, _: &Context, _: &Budget) -> Option<u64> {
        None
    }
    fn should_compact(&self, _: &Context, _: &Budget) -> bool {
        true
    }
    fn plan(&self, _: &Context, _: &Budget, _: Trigger) -> Option<Plan> {
        None
    }
    fn promises(&self, _: &Context, _: &Budget) -> Promises {
        Promises::default()
    }
}

fn settings() -> ReplaySettings {
    ReplaySettings {
        strategy: StrategyConfig::default_for("none").expect("none"),
        window: 100_000_000,
        encoding: Encoding::O200kBase,
        cache: CacheProfile::None,
        price: None,
        overflow: OverflowPolicy::Continue,
    }
}

/// The calls of a conversation and the JSON bytes of its messages (what the calls append).
pub fn calls_and_bytes(convo: &Conversation) -> (u64, u64) {
    let calls = convo.messages.iter().filter(|m| m.role == Role::Assistant).count() as u64;
    let bytes = convo.messages.iter().map(|m| serde_json::to_string(m).map_or(0, |s| s.len() as u64)).sum();
    (calls, bytes)
}

pub fn bench(c: &mut Criterion) {
    let dir: PathBuf = std::env::temp_dir().join(format!("compactlens-protocol-bench-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("noop.py"), NOOP)).is_err() {
        eprintln!("protocol: cannot write the no-op program; skipped");
        return;
    }
    let spec = runlog::external::ExternalSpec {
        command: vec!["python3".into(), "noop.py".into()],
        label: "noop".into(),
        timeout_s: 60,
        params: serde_json::Map::new(),
    };
    let external = ExternalStrategy::new(spec, &dir, Encoding::O200kBase);
    let in_process = AskEveryCall(Exact::o200k());
    let (summarizer, judge, settings) = (OfflineSummarizer::new(), OfflineJudge, settings());
    let mut group = c.benchmark_group("protocol");
    quick(&mut group, 10, 3);
    for n in SIZES {
        let convo = super::replay::conversation(n);
        let (calls, bytes) = calls_and_bytes(&convo);
        // What RESULTS.md divides by: the calls, and the kilobytes their `append`s carry.
        eprintln!("protocol/{n}: {calls} calls append {:.1} KB of messages", bytes as f64 / 1024.0);
        group.throughput(Throughput::Elements(calls));
        group.bench_with_input(BenchmarkId::new("in_process", n), &convo, |b, convo| {
            b.iter(|| {
                replay_built(convo, Compactor::Stateless(&in_process), &settings, &summarizer, &judge).map(|m| m.calls)
            })
        });
        group.bench_with_input(BenchmarkId::new("external", n), &convo, |b, convo| {
            b.iter(|| {
                replay_built(
                    convo,
                    Compactor::Sessions { strategy: &external, sessions: &external },
                    &settings,
                    &summarizer,
                    &judge,
                )
                .map(|m| m.calls)
            })
        });
    }
    group.finish();
    drop(external);
    let _ = std::fs::remove_dir_all(&dir);
}
