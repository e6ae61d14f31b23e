//! Deterministic text: a small seed expands into prose, code, JSON, CJK, emoji or combining
//! marks, so generated conversations stay short to print (and to shrink) while their texts are
//! realistic and, where asked, tens of kilobytes long.

/// A tiny deterministic generator (the workspace's SplitMix64, seeded apart from the
/// datasets' streams). Not for anything but test data.
#[derive(Debug, Clone)]
pub struct SplitMix(seeded::SplitMix64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seeded::SplitMix64::new(seed ^ seeded::GOLDEN))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

pub const WORDS: &[&str] = &[
    "the",
    "parser",
    "returns",
    "an",
    "error",
    "when",
    "config",
    "file",
    "is",
    "missing",
    "we",
    "should",
    "retry",
    "request",
    "with",
    "backoff",
    "cache",
    "layer",
    "keeps",
    "tokens",
    "per",
    "message",
    "order",
    "refund",
    "ticket",
    "customer",
    "flight",
    "booking",
    "section",
    "draft",
    "outline",
    "related",
    "work",
    "method",
    "results",
    "table",
    "figure",
    "benchmark",
    "latency",
    "throughput",
    "index",
    "query",
    "schema",
    "migration",
    "deploy",
    "rollback",
    "test",
    "fails",
    "because",
    "timeout",
    "value",
    "null",
    "pointer",
    "buffer",
    "stream",
    "window",
    "budget",
    "summary",
    "compaction",
    "agent",
    "tool",
    "call",
    "output",
    "reads",
    "writes",
    "module",
    "function",
    "struct",
    "field",
];

pub const CJK: &[&str] =
    &["日本", "中文", "测试", "上下文", "压缩", "東京", "한국어", "데이터", "模型", "摘要", "注文", "返金", "。", "、"];

pub const EMOJI: &[&str] = &["😀", "🚀", "👍🏽", "👨\u{200d}👩\u{200d}👧", "🇯🇵", "✅", "🔥", "❤\u{fe0f}", "🧪"];

pub const COMBINING: &[&str] =
    &["e\u{301}", "a\u{308}", "n\u{303}", "o\u{302}\u{323}", "Z\u{351}\u{36b}\u{343}", "\u{1100}\u{1161}\u{11a8}"];

pub const FILES: &[&str] = &[
    "src/main.rs",
    "src/lib.rs",
    "src/parser.rs",
    "src/cache/mod.rs",
    "tests/integration.rs",
    "Cargo.toml",
    "README.md",
    "paper/outline.md",
    "orders/1042.json",
    "docs/設計.md",
];

/// What a piece of text looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextKind {
    Empty,
    Prose,
    Code,
    Json,
    Cjk,
    Emoji,
    Combining,
    Mixed,
}

impl TextKind {
    pub const ALL: [TextKind; 8] = [
        TextKind::Empty,
        TextKind::Prose,
        TextKind::Code,
        TextKind::Json,
        TextKind::Cjk,
        TextKind::Emoji,
        TextKind::Combining,
        TextKind::Mixed,
    ];
}

/// A text described by its kind, a length in words (or lines, for code) and a seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Text {
    pub kind: TextKind,
    pub len: u16,
    pub seed: u32,
}

impl Text {
    pub fn new(kind: TextKind, len: u16, seed: u32) -> Text {
        Text { kind, len, seed }
    }
    pub fn prose(len: u16, seed: u32) -> Text {
        Text::new(TextKind::Prose, len, seed)
    }
    /// The text itself.
    pub fn render(&self) -> String {
        render(self.kind, self.len as usize, self.seed as u64)
    }
}

fn prose_word(rng: &mut SplitMix, kind: TextKind) -> String {
    match kind {
        TextKind::Cjk => rng.pick(CJK).to_string(),
        TextKind::Emoji if rng.below(3) == 0 => rng.pick(EMOJI).to_string(),
        TextKind::Combining if rng.below(3) == 0 => format!("{}{}", rng.pick(WORDS), rng.pick(COMBINING)),
        TextKind::Mixed => match rng.below(6) {
            0 => rng.pick(CJK).to_string(),
            1 => rng.pick(EMOJI).to_string(),
            2 => rng.pick(COMBINING).to_string(),
            3 => rng.pick(FILES).to_string(),
            4 => format!("{}", rng.below(100_000)),
            _ => rng.pick(WORDS).to_string(),
        },
        _ => rng.pick(WORDS).to_string(),
    }
}

/// Expand `kind`, `len` and `seed` into text. Deterministic.
pub fn render(kind: TextKind, len: usize, seed: u64) -> String {
    let mut rng = SplitMix::new(seed);
    match kind {
        TextKind::Empty => String::new(),
        TextKind::Code => {
            let mut out = String::new();
            for i in 0..len.max(1) {
                let w = rng.pick(WORDS);
                let line = match rng.below(5) {
                    0 => format!("fn {w}_{i}(x: u32) -> u32 {{"),
                    1 => format!("    let {w} = x.wrapping_mul({});", rng.below(997)),
                    2 => format!("    // {} {} {}", w, rng.pick(WORDS), rng.pick(WORDS)),
                    3 => format!("    if {w} > {} {{ return {w}; }}", rng.below(64)),
                    _ => "}".to_string(),
                };
                out.push_str(&line);
                out.push('\n');
            }
            out
        }
        TextKind::Json => {
            let mut map = serde_json::Map::new();
            for i in 0..len.max(1) {
                let key = format!("{}_{i}", rng.pick(WORDS));
                let value = match rng.below(4) {
                    0 => serde_json::Value::from(rng.below(10_000) as u64),
                    1 => serde_json::Value::from(rng.pick(WORDS)),
                    2 => serde_json::Value::from(rng.below(2) == 0),
                    _ => serde_json::Value::from(vec![rng.pick(WORDS), rng.pick(FILES)]),
                };
                map.insert(key, value);
            }
            serde_json::Value::Object(map).to_string()
        }
        _ => {
            let mut out = String::new();
            let sep = if kind == TextKind::Cjk { "" } else { " " };
            for i in 0..len {
                if i > 0 {
                    out.push_str(sep);
                }
                out.push_str(&prose_word(&mut rng, kind));
                if kind != TextKind::Cjk && rng.below(12) == 0 {
                    out.push('.');
                }
            }
            out
        }
    }
}

/// A large tool output (a file listing, a log) of about `bytes` bytes. Deterministic.
pub fn huge(bytes: usize, seed: u64) -> String {
    let mut rng = SplitMix::new(seed);
    let mut out = String::with_capacity(bytes + 128);
    let mut line = 1;
    while out.len() < bytes {
        let s = match rng.below(4) {
            0 => format!(
                "{line:>6} | pub fn {}_{}(&self) -> Result<{}, Error> {{",
                rng.pick(WORDS),
                line,
                rng.pick(WORDS)
            ),
            1 => format!("{line:>6} | [INFO] {} {} in {}ms", rng.pick(WORDS), rng.pick(FILES), rng.below(5000)),
            2 => format!("{line:>6} |     {} = {} + {};", rng.pick(WORDS), rng.below(1 << 20), rng.pick(WORDS)),
            _ => format!("{line:>6} | {}", render(TextKind::Mixed, 8, rng.next_u64())),
        };
        out.push_str(&s);
        out.push('\n');
        line += 1;
    }
    out
}
