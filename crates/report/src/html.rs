//! `report.html`: one self-contained page per run folder, a view of the run log.
//!
//! Everything on the page comes from the manifest (`run.json`) and the records
//! (`results.jsonl`); the per-configuration numbers are the same [`crate::summary`] aggregates
//! that `summary.csv` holds; the probes' questions and fact aliases come from the manifest and
//! the timelines' thresholds from the records, so a report rendered again from the folder alone
//! is byte-identical. A run folder written before the manifest held probe texts shows facts by
//! number ([`ProbeTexts::for_run`]); the report never reads datasets or rebuilds strategies.
//!
//! The file needs nothing else to open: inline CSS, inline SVG charts, one small inline script
//! (sorting, filtering, the conversation picker) and a Content-Security-Policy meta tag that
//! forbids every fetch (`default-src 'none'`), allows inline styles, and allows only that
//! script by its SHA-256 hash, computed at render time. An injected `<script>` therefore could
//! not run even if escaping failed; and escaping does not fail: every string that comes from a
//! conversation, a dataset, a parameter or an error message goes through [`escape`].
//!
//! Size: the page knows its bound, [`MAX_REPORT_BYTES`]. Per-conversation detail (timelines,
//! compaction events, lost facts) is embedded once as compact JSON and drawn by the script on
//! demand (`detail.rs`, and the lost facts' block); a timeline keeps at most
//! [`MAX_TIMELINE_POINTS`] points (min/max per bucket, so every peak and trough of the sawtooth
//! survives), a pair lists its first and last [`MAX_COMPACTION_EVENTS_PER_PAIR`] compaction
//! events with summaries cut at [`MAX_SUMMARY_CHARS`] characters, and the lost facts keep at most
//! [`MAX_PROBE_ROWS`] rows and [`MAX_LOST_BYTES`] bytes; the paired compactions (the real summary
//! beside a strategy's, `real.rs`) keep at most `MAX_PAIRED_COMPACTIONS` (24) pairs in
//! `MAX_PAIRED_BYTES` (a sixteenth of the bound) bytes. Conversations are embedded in page order while the page stays under
//! its bound. The page says when it left something out; the CSV files always hold everything.
//!
//! ```no_run
//! let family = |name: &str| (name == "none").then_some("baseline");
//! let path = report::html::write_report(std::path::Path::new("reports/default-20250101-000000"), family).unwrap();
//! assert!(path.ends_with("report.html"));
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use compaction::{Conversation, ProbeKind};
use runlog::experiment::canonical_json;
use runlog::log::RunData;
use runlog::record::{FoundIn, PairMetrics, PairOutcome, PairRecord};
use sha2::{Digest, Sha256};

use crate::summary::{self, ConfigSummary};
use crate::ReportError;

mod detail;
mod evidence;
mod failures;
mod real;
mod stand_in;
mod svg;
pub(crate) mod verdict;

/// The report's file name in a run folder.
pub const REPORT_HTML: &str = "report.html";
/// Points drawn per timeline line at most.
pub const MAX_TIMELINE_POINTS: usize = 240;
/// The page's size bound in bytes: conversations' detail is embedded while the page stays under it.
pub const MAX_REPORT_BYTES: usize = 4_000_000;
/// Compaction and overflow markers drawn per timeline at most.
pub const MAX_TIMELINE_MARKERS: usize = 200;
/// Rows of the lost-facts table at most.
pub const MAX_PROBE_ROWS: usize = 2_000;
/// Bytes of the lost-facts data after which further rows are left out (counted, not listed).
pub const MAX_LOST_BYTES: usize = MAX_REPORT_BYTES / 4;
/// Compaction events listed with their summaries per (conversation, configuration) pair: the
/// first and the last this many (all of them when a pair has at most twice as many).
pub const MAX_COMPACTION_EVENTS_PER_PAIR: usize = 3;
/// Characters of one summary shown at most.
pub const MAX_SUMMARY_CHARS: usize = 4_000;
/// Failed pairs listed at most.
pub const MAX_FAILURES: usize = 200;

const STYLE: &str = include_str!("html/report.css");
const SCRIPT: &str = include_str!("html/report.js");

/// Distinct colours for strategies, in the order they first appear in the experiment (a name
/// outside the catalog).
const PALETTE: [&str; 10] =
    ["#2457c5", "#d9822b", "#1e8449", "#c0392b", "#7d3cb5", "#17a2b8", "#8c6d31", "#e84393", "#5b6475", "#b7950b"];

/// Each family's colours: blues and greens for the seeds, warm hues for the production systems,
/// greys for the baselines, purple for the reference. A strategy takes the next colour of its
/// family in the order it first appears.
fn family_palette(family: &str) -> &'static [&'static str] {
    match family {
        "seed" => &["#2457c5", "#1e8449", "#17a2b8", "#5b8def", "#0e6655"],
        "production" => {
            // Warm hues told apart from each other (no two oranges or two reds side by side).
            &["#d9822b", "#c0392b", "#e84393", "#b7950b", "#8c6d31", "#6d214f", "#7d8c1f", "#ff8a65", "#5d4037"]
        }
        "baseline" => &["#5b6475", "#95a5a6", "#34495e"],
        "reference" => &["#7d3cb5"],
        _ => &PALETTE,
    }
}

/// A strategy's family by its name (`seed`, `production`, `baseline`, `reference`), `None` for a
/// name the catalog does not know: the strategy catalog's `family`, which the caller supplies
/// (the report knows no strategy).
pub type FamilyOf = fn(&str) -> Option<&'static str>;

/// A strategy's family, or `external` for a name the catalog does not know (an external
/// strategy's label).
pub fn family_or_external(family: FamilyOf, strategy: &str) -> &'static str {
    family(strategy).unwrap_or("external")
}

/// Escape text for HTML element content and double- or single-quoted attribute values.
pub fn escape(text: &str) -> String {
    let text = plain(text);
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (k, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if k <= chunk.len() {
                out.push(char::from(TABLE[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The CSP source of an inline script: `'sha256-<base64 of its SHA-256>'`.
pub fn script_hash_source(script: &str) -> String {
    format!("'sha256-{}'", base64(&Sha256::digest(script.as_bytes())))
}

/// The page's Content-Security-Policy: nothing may be fetched, framed or submitted; inline
/// styles are allowed; the one inline script is allowed by its hash.
pub fn content_security_policy() -> String {
    format!(
        "default-src 'none'; style-src 'unsafe-inline'; script-src {}; base-uri 'none'; form-action 'none'",
        script_hash_source(SCRIPT)
    )
}

/// A probe's question and facts as the dataset states them.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeText {
    pub question: String,
    pub answer: String,
    /// Each fact's accepted aliases.
    pub facts: Vec<Vec<String>>,
}

/// Probe texts by dataset label, conversation id and probe id.
#[derive(Debug, Clone, Default)]
pub struct ProbeTexts {
    probes: HashMap<(String, String, String), ProbeText>,
}

impl ProbeTexts {
    /// The probe texts a run recorded in its manifest.
    pub fn from_manifest(probes: &[runlog::record::ProbeText]) -> ProbeTexts {
        let probes = probes
            .iter()
            .map(|p| {
                (
                    (p.dataset.clone(), p.conversation_id.clone(), p.probe_id.clone()),
                    ProbeText { question: p.question.clone(), answer: p.answer.clone(), facts: p.facts.clone() },
                )
            })
            .collect();
        ProbeTexts { probes }
    }

    /// The probe texts of a run, from its manifest (a run written before manifests held
    /// them has none: its facts are shown by number).
    pub fn for_run(data: &RunData) -> ProbeTexts {
        ProbeTexts::from_manifest(&data.manifest.probes)
    }

    /// The probes of conversations, each with its dataset label.
    pub fn from_conversations<'a>(conversations: impl IntoIterator<Item = (&'a str, &'a Conversation)>) -> ProbeTexts {
        let mut probes = HashMap::new();
        for (dataset, c) in conversations {
            for p in &c.probes {
                probes.insert(
                    (dataset.to_string(), c.id.clone(), p.id.clone()),
                    ProbeText { question: p.question.clone(), answer: p.answer.clone(), facts: p.facts.clone() },
                );
            }
        }
        ProbeTexts { probes }
    }

    pub fn get(&self, dataset: &str, conversation: &str, probe: &str) -> Option<&ProbeText> {
        self.probes.get(&(dataset.to_string(), conversation.to_string(), probe.to_string()))
    }

    pub fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }
}

/// Render `report.html` from the run folder's files into the folder; returns its path.
///
/// The folder must be a run (its `run.json` is read first, so no lock file is left in a
/// folder that is not one); its lock is held while it is read and written (a run or merge
/// writing into it is refused, not raced), none of its files may be a link, and its
/// `results.jsonl` must agree with `run.json` ([`RunData::read`]).
/// `family` names each strategy's family.
pub fn write_report(run_dir: &Path, family: FamilyOf) -> Result<PathBuf, ReportError> {
    runlog::log::read_manifest(run_dir)?;
    let _lock = runlog::folder::RunLock::take(run_dir)?;
    runlog::folder::refuse_links(run_dir)?;
    let data = RunData::read(run_dir)?;
    write_report_for(run_dir, &data, family)
}

/// Render `report.html` into `run_dir` from a run already in memory (what a run calls after
/// writing its CSV files).
pub fn write_report_for(run_dir: &Path, data: &RunData, family: FamilyOf) -> Result<PathBuf, ReportError> {
    let texts = ProbeTexts::for_run(data);
    let html = render(data, &texts, family);
    let path = run_dir.join(REPORT_HTML);
    runlog::atomic::write_atomic(&path, html.as_bytes())
        .map_err(|source| ReportError::Io { path: path.clone(), source })?;
    Ok(path)
}

/// One conversation of the run.
struct ConversationView<'a> {
    dataset: &'a str,
    id: &'a str,
    /// Its records, in configuration order.
    records: Vec<&'a PairRecord>,
}

/// Everything the sections share.
struct Page<'a> {
    data: &'a RunData,
    texts: &'a ProbeTexts,
    summaries: Vec<ConfigSummary>,
    /// The dataset views of every section, the one shown first first: the pooled `all`, then
    /// each dataset when the run has several.
    views: Vec<String>,
    colors: HashMap<&'a str, &'static str>,
    conversations: Vec<ConversationView<'a>>,
    /// The verdict, from the files the run writes (or why there is none).
    verdict: Result<crate::verdict::Verdict, String>,
    family: FamilyOf,
}

/// The whole page as a string; `family` names each strategy's family.
pub fn render(data: &RunData, texts: &ProbeTexts, family: FamilyOf) -> String {
    let experiment = &data.manifest.experiment;
    let summaries = summary::summarize(&experiment.configurations, &data.records, data.manifest.seed);
    let mut colors: HashMap<&str, &'static str> = HashMap::new();
    let mut per_family: HashMap<&'static str, usize> = HashMap::new();
    let names = experiment.configurations.iter().map(|c| c.strategy.as_str());
    for name in names.chain(data.records.iter().map(|r| r.strategy.as_str())) {
        if colors.contains_key(name) {
            continue;
        }
        let group = family_or_external(family, name);
        let palette = family_palette(group);
        let k = per_family.entry(group).or_insert(0);
        colors.insert(name, palette[*k % palette.len()]);
        *k += 1;
    }
    let mut by_conversation: BTreeMap<(&str, &str), Vec<&PairRecord>> = BTreeMap::new();
    for r in &data.records {
        by_conversation.entry((r.dataset.as_str(), r.conversation_id.as_str())).or_default().push(r);
    }
    let conversations =
        by_conversation.into_iter().map(|((dataset, id), records)| ConversationView { dataset, id, records }).collect();
    let datasets = summary::datasets(&summaries);
    let views: Vec<String> = if datasets.len() > 1 {
        [summary::ALL_DATASETS.to_string()].into_iter().chain(datasets.iter().map(|d| d.to_string())).collect()
    } else {
        vec![summary::ALL_DATASETS.to_string()]
    };
    let verdict = crate::verdict::Verdict::of_run(data).map_err(|e| e.to_string());
    let page = Page { data, texts, summaries, views, colors, conversations, verdict, family };

    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n",
        escape(&content_security_policy())
    ));
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!("<title>{}</title>\n", escape(&format!("compactlens: {}", experiment.name))));
    out.push_str(&format!("<style>\n{STYLE}</style>\n</head>\n<body>\n<main>\n"));
    page.header(&mut out);
    page.verdict(&mut out);
    page.leaderboard(&mut out);
    real::section(&mut out, &page);
    failures::section(&mut out, &page.summaries, page.data, &|s| page.color(s));
    page.families(&mut out);
    page.pareto(&mut out);
    page.by_kind(&mut out);
    let mut lost = String::new();
    page.lost_facts(&mut lost);
    let mut tail = String::new();
    page.manifest(&mut tail);
    page.problems(&mut tail);
    tail.push_str("</main>\n");
    tail.push_str(&format!("<script>{SCRIPT}</script>\n</body>\n</html>\n"));
    // What is left of the bound, less room for the two detail sections' own text, goes to the
    // conversations' detail.
    let budget = MAX_REPORT_BYTES.saturating_sub(out.len() + lost.len() + tail.len() + DETAIL_SECTIONS_BYTES);
    let detail = page.detail(budget);
    page.timelines(&mut out, &detail);
    out.push_str(&lost);
    page.compactions(&mut out, &detail);
    out.push_str(&detail.block);
    out.push_str(&tail);
    out
}

/// Room kept for the text of the timeline and compaction sections around their embedded data.
const DETAIL_SECTIONS_BYTES: usize = 8 * 1024;

/// A signed share as a percentage with its sign (`+4.2%`, `-35.0%`), `–` for none.
fn signed_pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{:+.1}%", v * 100.0),
        _ => "–".into(),
    }
}

fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{:.1}%", v * 100.0),
        _ => "–".into(),
    }
}

fn ci(v: Option<(f64, f64)>) -> String {
    match v {
        Some((lo, hi)) => format!("<br><span class=\"ci\">[{:.1}, {:.1}]</span>", lo * 100.0, hi * 100.0),
        None => String::new(),
    }
}

fn usd(v: f64) -> String {
    if v == 0.0 {
        "$0".into()
    } else if v.abs() < 0.01 {
        format!("${}", trim_zeros(&format!("{v:.6}")))
    } else {
        format!("${}", trim_zeros(&format!("{v:.4}")))
    }
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// A `data-v` attribute for sorting ("" sorts last).
fn dv(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!(" data-v=\"{v}\""),
        _ => " data-v=\"\"".into(),
    }
}

fn metrics(r: &PairRecord) -> Option<&PairMetrics> {
    match &r.outcome {
        PairOutcome::Ok(m) => Some(m),
        PairOutcome::Failed { .. } => None,
    }
}

/// A value's serde name (`o200k_base`, `openai`).
fn serde_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => e.to_string(),
    }
}

/// Text as `escape` shows it, without the HTML escaping: for text a script puts in the page as
/// text. Bidirectional overrides and isolates would reverse the text around them (an id with
/// U+202E): shown as their code point instead.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("[U+{:04X}]", c as u32))
            }
            // NUL and the other control characters (an id may hold them) are shown, not kept.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => out.push_str(&format!("[U+{:04X}]", c as u32)),
            _ => out.push(c),
        }
    }
    out
}

/// A JSON data block the page's script reads: `<`, `>` and `&` are written as `\u` escapes, so
/// no text inside can close the element or open a comment.
pub fn json_block(id: &str, value: &serde_json::Value) -> String {
    let json = value.to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    format!("<script type=\"application/json\" id=\"{}\">{json}</script>\n", escape(id))
}

/// A colour swatch before a name.
fn swatch_of(color: &str) -> String {
    format!("<span class=\"swatch\" style=\"background:{color}\"></span>")
}

impl Page<'_> {
    fn family_of(&self, strategy: &str) -> &'static str {
        family_or_external(self.family, strategy)
    }

    fn color(&self, strategy: &str) -> &'static str {
        self.colors.get(strategy).copied().unwrap_or(PALETTE[PALETTE.len() - 2])
    }

    fn swatch(&self, strategy: &str) -> String {
        swatch_of(self.color(strategy))
    }

    fn header(&self, out: &mut String) {
        let m = &self.data.manifest;
        out.push_str(&format!("<h1>{}</h1>\n", escape(&format!("compactlens: {}", m.experiment.name))));
        out.push_str(&format!(
            "<p class=\"note\">{} · started {} · commit {} · {} configurations × {} conversations{}</p>\n",
            escape(&m.experiment_id),
            escape(&m.started_at),
            escape(m.git_commit.as_deref().unwrap_or("unknown")),
            m.experiment.configurations.len(),
            m.conversations,
            if m.complete { "" } else { " · <span class=\"bad\">incomplete run</span>" }
        ));
        // In page order; the real summaries' section, when the run has one, right after the
        // leaderboard.
        let real =
            if crate::real::has_recorded(self.data) { "<a href=\"#real-summaries\">Real summaries</a>" } else { "" };
        out.push_str(&format!(
            "<nav><a href=\"#verdict\">Verdict</a><a href=\"#leaderboard\">Leaderboard</a>{real}\
             <a href=\"#failures\">What breaks agents</a><a href=\"#families\">By family</a><a href=\"#pareto\">Pareto</a>\
             <a href=\"#kinds\">By probe kind</a><a href=\"#timelines\">Timelines</a><a href=\"#lost\">Lost facts</a>\
             <a href=\"#compactions\">Compactions</a><a href=\"#manifest\">Manifest</a><a href=\"#problems\">Problems</a></nav>\n",
        ));
    }

    fn manifest(&self, out: &mut String) {
        let m = &self.data.manifest;
        let e = &m.experiment;
        let mut rows: Vec<(&str, String)> = vec![
            ("experiment", e.name.clone()),
            ("experiment file", e.file.clone()),
            ("experiment id", m.experiment_id.clone()),
        ];
        if let Some(d) = &e.description {
            rows.push(("description", d.clone()));
        }
        rows.push(("datasets", e.datasets.join(", ")));
        rows.push((
            "windows",
            if e.windows.is_empty() {
                "each conversation's own".into()
            } else {
                e.windows.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(", ")
            },
        ));
        rows.push(("tokenizer", serde_name(&m.tokenizer)));
        rows.push(("prefix cache", serde_name(&m.cache)));
        rows.push((
            "price",
            match &e.price {
                Some(p) => format!(
                    "{}: ${} / ${} cached / ${} output per million tokens",
                    p.model.as_deref().unwrap_or("inline"),
                    p.input,
                    p.cached_input,
                    p.output
                ),
                None => "none (every call costs $0)".into(),
            },
        ));
        rows.push((
            "summarizer",
            if m.stand_in_summary || m.summarizer == "offline" {
                format!(
                    "{}: a stand-in summary (an extractive summarizer, not a model). Retention under it measures what \
                     verbatim extraction keeps; ranking a summarizer against masking or truncation needs {}.",
                    m.summarizer,
                    crate::verdict::STAND_IN_REMEDY
                )
            } else {
                m.summarizer.clone()
            },
        ));
        rows.push(("judge", m.judge.clone()));
        for e in &m.external {
            let program = match (&e.name, &e.version) {
                (Some(n), Some(v)) => format!("{n} {v}"),
                _ => "no process started".to_string(),
            };
            rows.push(("external strategy", format!("{}: {} ({program})", e.label, e.command.join(" "))));
        }
        rows.push(("bootstrap seed", m.seed.to_string()));
        rows.push(("tool version", m.tool_version.clone()));
        rows.push(("git commit", m.git_commit.clone().unwrap_or_else(|| "unknown".into())));
        rows.push(("started", m.started_at.clone()));
        rows.push(("versions", m.versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")));
        rows.push((
            "pairs",
            format!(
                "{} total, {} planned, {} ok, {} failed, {} missing, {} resumed",
                m.counts.pairs_total,
                m.counts.pairs_planned,
                m.counts.ok,
                m.counts.failed,
                m.counts.missing,
                m.counts.resumed
            ),
        ));
        rows.push((
            "wall time",
            format!("{:.1} s (replays {:.1} s)", m.timings.wall_ms as f64 / 1e3, m.timings.replay_ms as f64 / 1e3),
        ));
        if let Some(s) = &m.shard {
            rows.push(("shard", s.clone()));
        }
        if !m.merged_from.is_empty() {
            rows.push(("merged from", m.merged_from.join(", ")));
        }
        out.push_str("<h2 id=\"manifest\">Manifest</h2>\n<dl class=\"manifest\">\n");
        for (k, v) in rows {
            out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", escape(k), escape(&v)));
        }
        out.push_str("</dl>\n");
    }

    fn leaderboard(&self, out: &mut String) {
        out.push_str("<h2 id=\"leaderboard\">Leaderboard</h2>\n");
        out.push_str(
            "<p class=\"note\">One row per configuration. Retention is the mean over conversations of the share of \
             probe facts still in the context when the probe is asked, with its 95% bootstrap interval in brackets; \
             at-risk retention counts only probes whose source message was compacted away. Compression ratio: \
             request tokens sent / request tokens had nothing been compacted (lower keeps less). Overflow rate: \
             calls still over the window after compaction / calls. Click a column to sort.</p>\n",
        );
        out.push_str(
            "<p class=\"note\">A request over the window is a rejected call, as a provider would reject it: under \
             <code>overflow = \"fail\"</code> the conversation ends there and every later probe scores 0. Completion: \
             conversations with no rejected call; retention if sent: as if every request had been sent. Rows are \
             ranked by completion, then retention, so a configuration that loses conversations ranks below every \
             configuration that completes more. <b>not exercised</b>: the configuration never compacted on these \
             conversations, so its retention says nothing about its compaction. Paired at-risk retention is over \
             the probes at risk under every configuration of the same dataset and window that compacted there; \
             each at-risk figure gives the probes it rests on. Estimate error: the strategy's own token estimate \
             against the exact count at its trigger checks, (estimate - exact) / exact, median and 95th percentile.</p>\n",
        );
        out.push_str(&stand_in::note(self.data));
        self.switch(out);
        for (i, view) in self.views.iter().enumerate() {
            self.leaderboard_view(out, view, i);
        }
    }

    /// The dataset switch of a section, when the run has several datasets.
    fn switch(&self, out: &mut String) {
        if self.views.len() < 2 {
            return;
        }
        out.push_str("<label class=\"note\">dataset <select class=\"dataset-switch\">");
        for v in &self.views {
            let label = if v == summary::ALL_DATASETS { "all datasets (pooled)".to_string() } else { v.clone() };
            out.push_str(&format!("<option value=\"{}\">{}</option>", escape(v), escape(&label)));
        }
        out.push_str("</select></label>\n");
    }

    /// The attributes of view `i`'s elements: its dataset, hidden unless it is the first.
    fn view_attrs(&self, view: &str, i: usize) -> String {
        if self.views.len() < 2 {
            return String::new();
        }
        format!(" data-dataset=\"{}\"{}", escape(view), if i > 0 { " hidden" } else { "" })
    }

    /// The rows of one dataset view.
    fn rows(&self, view: &str) -> Vec<&ConfigSummary> {
        self.summaries.iter().filter(|s| s.dataset == view).collect()
    }

    fn leaderboard_view(&self, out: &mut String, view: &str, i: usize) {
        let suffix = if i == 0 { String::new() } else { format!("-{i}") };
        out.push_str(&format!("<div{}>\n", self.view_attrs(view, i)));
        out.push_str(&format!(
            "<input class=\"filter\" type=\"search\" placeholder=\"filter configurations\" data-filter=\"leaderboard-table{suffix}\">\n"
        ));
        out.push_str(&format!(
            "<div class=\"scroll\"><table id=\"leaderboard-table{suffix}\" class=\"sortable sticky\">\n<thead><tr>"
        ));
        // State retention on the answer keys leads the figures where the view has keys.
        let keyed = self.rows(view).iter().any(|s| s.state.all.mean.is_some());
        let mut heads: Vec<(&str, bool)> = vec![
            ("strategy", false),
            ("window", true),
            ("parameters", false),
            ("completion", true),
            ("paired at-risk retention", true),
            ("retention", true),
            ("cost / conv.", true),
            ("compactions / conv.", true),
            ("rejections", true),
            ("family", false),
            ("conversations", true),
            ("failed", true),
            ("compacted conv.", true),
            ("retention if sent", true),
            ("at-risk retention", true),
            ("compression ratio", true),
            ("overflow rate", true),
            ("violations", true),
            ("peak tokens", true),
            ("cache-hit rate", true),
            ("at-risk conv.", true),
            ("estimate error p50", true),
            ("estimate error p95", true),
        ];
        if keyed {
            heads.insert(4, ("state retention (answer keys)", true));
        }
        for (h, num) in heads {
            let sorted = if h == "retention" { " aria-sort=\"descending\"" } else { "" };
            out.push_str(&format!("<th{}{sorted}>{}</th>", if num { " class=\"num\"" } else { "" }, escape(h)));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        let order = summary::rank(self.rows(view));
        for s in order {
            let c = &s.config;
            // The verdict's paired figure, with its interval over conversations.
            let paired = self.verdict_entry(&c.config_id, view).map(|e| e.retention);
            out.push_str("<tr>");
            out.push_str(&format!(
                "<td class=\"nowrap\" title=\"{}\">{}{}{}</td>",
                escape(&c.config_id),
                self.swatch(&c.strategy),
                escape(&c.strategy),
                if s.exercised() { "" } else { " <span class=\"tag\">not exercised</span>" }
            ));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}</td>",
                dv(c.window.map(|w| w as f64)),
                c.window.map(|w| w.to_string()).unwrap_or_else(|| "own".into())
            ));
            out.push_str(&format!("<td class=\"mono params\">{}</td>", escape(&canonical_json(&c.params))));
            out.push_str(&format!(
                "<td class=\"num{}\"{}>{}</td>",
                if s.completion_rate.is_some_and(|v| v < 1.0) { " bad" } else { "" },
                dv(s.completion_rate),
                pct(s.completion_rate)
            ));
            if keyed {
                out.push_str(&format!(
                    "<td class=\"num\"{} title=\"critical {}, useful {}; at risk {}\">{}{} <span class=\"note\">({} keys, {} conv.)</span></td>",
                    dv(s.state.all.mean),
                    pct(s.state.critical),
                    pct(s.state.useful),
                    pct(s.state.at_risk),
                    pct(s.state.all.mean),
                    ci(s.state.all.ci),
                    s.state.keys,
                    s.state.all.n
                ));
            }
            out.push_str(&format!(
                "<td class=\"num\"{}>{}{} <span class=\"note\">({} probes)</span></td>",
                dv(s.paired_at_risk_retention),
                pct(s.paired_at_risk_retention),
                ci(paired.and_then(|f| f.interval)),
                s.paired_at_risk_probes
            ));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}{}</td>",
                dv(s.retention.mean),
                pct(s.retention.mean),
                ci(s.retention.ci)
            ));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}</td>",
                dv(s.cost_usd_mean),
                s.cost_usd_mean.map(usd).unwrap_or_else(|| "–".into())
            ));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}</td>",
                dv(s.compactions_mean),
                s.compactions_mean.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into())
            ));
            let rejected = s.completion_rate.map(|r| ((1.0 - r) * s.conversations as f64).round() as u64).unwrap_or(0);
            let refused = s.rejected_requests_openai + s.rejected_requests_anthropic;
            out.push_str(&format!(
                "<td class=\"num{}\"{} title=\"conversations ended by a rejected call; requests OpenAI / Anthropic would refuse\">{}{}</td>",
                if rejected + refused > 0 { " bad" } else { "" },
                dv(Some(rejected as f64)),
                rejected,
                if refused > 0 {
                    format!(
                        " <span class=\"note\">(refused {} / {})</span>",
                        s.rejected_requests_openai, s.rejected_requests_anthropic
                    )
                } else {
                    String::new()
                }
            ));
            out.push_str(&format!("<td><span class=\"tag\">{}</span></td>", self.family_of(&c.strategy)));
            out.push_str(&format!("<td class=\"num\"{}>{}</td>", dv(Some(s.conversations as f64)), s.conversations));
            out.push_str(&format!(
                "<td class=\"num{}\"{}>{}</td>",
                if s.failed > 0 { " bad" } else { "" },
                dv(Some(s.failed as f64)),
                s.failed
            ));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}</td>",
                dv(Some(s.compacted_conversations as f64)),
                s.compacted_conversations
            ));
            out.push_str(&format!("<td class=\"num\"{}>{}</td>", dv(s.retention_if_sent), pct(s.retention_if_sent)));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}{} <span class=\"note\">({} probes)</span></td>",
                dv(s.at_risk_retention.mean),
                pct(s.at_risk_retention.mean),
                ci(s.at_risk_retention.ci),
                s.at_risk_probes
            ));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}</td>",
                dv(s.compression_ratio),
                s.compression_ratio.map(|v| format!("{v:.3}")).unwrap_or_else(|| "–".into())
            ));
            let overflow_bad = s.overflow_rate.is_some_and(|v| v > 0.0);
            out.push_str(&format!(
                "<td class=\"num{}\"{}>{}</td>",
                if overflow_bad { " bad" } else { "" },
                dv(s.overflow_rate),
                pct(s.overflow_rate)
            ));
            out.push_str(&format!(
                "<td class=\"num{}\"{}>{}</td>",
                if s.violations > 0 { " bad" } else { "" },
                dv(Some(s.violations as f64)),
                s.violations
            ));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}</td>",
                dv(s.peak_tokens_max.map(|v| v as f64)),
                s.peak_tokens_max.map(|v| v.to_string()).unwrap_or_else(|| "–".into())
            ));
            out.push_str(&format!("<td class=\"num\"{}>{}</td>", dv(s.cache_hit_rate), pct(s.cache_hit_rate)));
            out.push_str(&format!(
                "<td class=\"num\"{}>{}</td>",
                dv(Some(s.at_risk_retention.n as f64)),
                s.at_risk_retention.n
            ));
            for e in [s.estimate_error_p50, s.estimate_error_p95] {
                out.push_str(&format!("<td class=\"num\"{}>{}</td>", dv(e), signed_pct(e)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table></div>\n</div>\n");
    }

    /// The leaderboard's configurations grouped by family (seeds, production systems,
    /// baselines, reference), each group by retention, with the headline numbers side by side.
    fn families(&self, out: &mut String) {
        out.push_str("<h2 id=\"families\">By family</h2>\n");
        out.push_str(
            "<p class=\"note\">The same configurations grouped by family: the seed documents, the production \
             systems (the compaction built into agents and APIs), the baselines and the recorded reference; within \
             a family, by retention.</p>\n",
        );
        self.switch(out);
        for (i, view) in self.views.iter().enumerate() {
            self.families_view(out, view, i);
        }
    }

    /// The family table of one dataset view.
    fn families_view(&self, out: &mut String, view: &str, i: usize) {
        let suffix = if i == 0 { String::new() } else { format!("-{i}") };
        out.push_str(&format!(
            "<div{}><div class=\"scroll\"><table id=\"families-table{suffix}\" class=\"sticky\">\n<thead><tr><th>strategy</th>\
             <th class=\"num\">window</th><th>parameters</th><th class=\"num\">completion</th><th class=\"num\">retention</th>\
             <th class=\"num\">compression ratio</th><th class=\"num\">overflow rate</th><th class=\"num\">cost / conv.</th>\
             <th class=\"num\">failed</th></tr></thead>\n<tbody>\n",
            self.view_attrs(view, i)
        ));
        let order = ["seed", "production", "baseline", "reference", "external"];
        for family in order {
            let mut rows: Vec<&ConfigSummary> =
                self.rows(view).into_iter().filter(|s| self.family_of(&s.config.strategy) == family).collect();
            if rows.is_empty() {
                continue;
            }
            rows.sort_by(|a, b| {
                b.retention.mean.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.retention.mean.unwrap_or(f64::NEG_INFINITY))
            });
            out.push_str(&format!(
                "<tr class=\"group\"><th colspan=\"9\">{family} ({} configurations)</th></tr>\n",
                rows.len()
            ));
            for s in rows {
                let c = &s.config;
                out.push_str(&format!(
                    "<tr><td class=\"nowrap\" title=\"{}\">{}{}</td><td class=\"num\">{}</td><td class=\"mono params\">{}</td>\
                     <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                     <td class=\"num\">{}</td><td class=\"num{}\">{}</td></tr>\n",
                    escape(&c.config_id),
                    self.swatch(&c.strategy),
                    escape(&c.strategy),
                    c.window.map(|w| w.to_string()).unwrap_or_else(|| "own".into()),
                    escape(&canonical_json(&c.params)),
                    pct(s.completion_rate),
                    pct(s.retention.mean),
                    s.compression_ratio.map(|v| format!("{v:.3}")).unwrap_or_else(|| "–".into()),
                    pct(s.overflow_rate),
                    s.cost_usd_mean.map(usd).unwrap_or_else(|| "–".into()),
                    if s.failed > 0 { " bad" } else { "" },
                    s.failed
                ));
            }
        }
        out.push_str("</tbody>\n</table></div></div>\n");
    }

    /// The conversations' indices taken in turn from each dataset (the first of each, then the
    /// second of each, ...): the order in which detail is embedded under a size bound, so every
    /// dataset keeps some.
    fn interleaved(&self) -> Vec<usize> {
        let mut by_dataset: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, c) in self.conversations.iter().enumerate() {
            match by_dataset.iter_mut().find(|(d, _)| *d == c.dataset) {
                Some((_, list)) => list.push(i),
                None => by_dataset.push((c.dataset, vec![i])),
            }
        }
        let longest = by_dataset.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
        (0..longest).flat_map(|k| by_dataset.iter().filter_map(move |(_, l)| l.get(k).copied())).collect()
    }

    /// The attribute that ties a conversation's element to its dataset, so the dataset switch
    /// hides it when another dataset is chosen (none in a run of one dataset).
    fn of_dataset(&self, dataset: &str) -> String {
        if self.views.len() < 2 {
            return String::new();
        }
        format!(" data-of=\"{}\"", escape(dataset))
    }

    /// The verdict's entry of a configuration in a dataset view.
    fn verdict_entry(&self, config_id: &str, view: &str) -> Option<&crate::verdict::Entry> {
        let v = self.verdict.as_ref().ok()?;
        v.windows
            .iter()
            .flat_map(|w| &w.views)
            .filter(|x| x.dataset == view)
            .find_map(|x| crate::verdict::Verdict::entry(x, config_id))
    }

    fn legend(&self, out: &mut String) {
        let mut seen: Vec<&str> = Vec::new();
        for s in &self.summaries {
            if !seen.contains(&s.config.strategy.as_str()) {
                seen.push(&s.config.strategy);
            }
        }
        seen.sort_by_key(|s| {
            ["seed", "production", "baseline", "reference", "external"].iter().position(|f| *f == self.family_of(s))
        });
        out.push_str("<div class=\"legend\">");
        for s in seen {
            out.push_str(&format!("<span>{}{}</span>", self.swatch(s), escape(s)));
        }
        out.push_str("</div>\n");
    }

    fn pareto(&self, out: &mut String) {
        out.push_str("<h2 id=\"pareto\">Retention against cost</h2>\n");
        out.push_str(
            "<p class=\"note\">One point per configuration, coloured by strategy, with its 95% interval as a vertical \
             bar. The dashed step line is the Pareto frontier: no other configuration retains more for less. \
             A hollow point stays off the frontier: it never compacted (not exercised), or a provider would have \
             rejected some of its calls while another configuration completed every conversation. \
             Hover a point for its configuration.</p>\n",
        );
        self.switch(out);
        self.legend(out);
        for (i, view) in self.views.iter().enumerate() {
            let all = self.rows(view);
            // One pair of charts per window: configurations of different windows are not
            // alternatives to each other, and their retentions sit on different scales.
            let mut windows: Vec<Option<u64>> = Vec::new();
            for s in &all {
                if !windows.contains(&s.config.window) {
                    windows.push(s.config.window);
                }
            }
            windows.sort_by_key(|w| w.unwrap_or(u64::MAX));
            out.push_str(&format!("<div class=\"window-charts\"{}>\n", self.view_attrs(view, i)));
            for (k, window) in windows.iter().enumerate() {
                let rows: Vec<&ConfigSummary> = all.iter().copied().filter(|s| s.config.window == *window).collect();
                let eligible = summary::frontier_eligible(&rows);
                let points = |x: fn(&ConfigSummary) -> Option<f64>| -> Vec<svg::ParetoPoint> {
                    rows.iter()
                        .zip(&eligible)
                        .filter_map(|(s, eligible)| {
                            Some(svg::ParetoPoint {
                                config_id: s.config.config_id.clone(),
                                strategy: s.config.strategy.clone(),
                                color: self.color(&s.config.strategy),
                                x: x(s).filter(|v| v.is_finite())?,
                                y: s.retention.mean.filter(|v| v.is_finite())?,
                                ci: s.retention.ci,
                                eligible: *eligible,
                            })
                        })
                        .collect()
                };
                let label = crate::verdict::render::window_label(*window);
                out.push_str(&format!(
                    "<h3>Window {}</h3>\n<div class=\"charts\" data-window=\"{}\">\n",
                    escape(&label),
                    escape(&label)
                ));
                let cost = points(|s| s.cost_usd_mean);
                out.push_str(&format!(
                    "<div class=\"chart big\"><h4>Retention against cost per conversation ({})</h4>",
                    escape(&label)
                ));
                if cost.is_empty() && !rows.is_empty() {
                    // One id per page: the first view's first note carries it.
                    let id = if i == 0 && k == 0 { " id=\"cost-not-measured\"" } else { "" };
                    out.push_str(&format!(
                        "<p class=\"note\"{id}>Cost is not measured: the experiment sets no price.</p>"
                    ));
                } else {
                    out.push_str(&svg::pareto_chart("cost per conversation (USD)", usd, &cost));
                }
                out.push_str("</div>\n");
                let kept = points(|s| s.compression_ratio);
                out.push_str(&format!(
                    "<div class=\"chart big\"><h4>Retention against tokens kept ({})</h4>",
                    escape(&label)
                ));
                out.push_str(&svg::pareto_chart(
                    "tokens kept (request tokens sent / without compaction)",
                    |v| format!("{:.0}%", v * 100.0),
                    &kept,
                ));
                out.push_str("</div>\n</div>\n");
            }
            out.push_str("</div>\n");
        }
    }

    fn by_kind(&self, out: &mut String) {
        out.push_str("<h2 id=\"kinds\">Retention by probe kind</h2>\n");
        out.push_str(
            "<p class=\"note\">Mean retention per probe kind (over the conversations that have probes of that kind), \
             per configuration. Red is lost, green is kept.</p>\n",
        );
        self.switch(out);
        for (i, view) in self.views.iter().enumerate() {
            self.by_kind_view(out, view, i);
        }
    }

    fn by_kind_view(&self, out: &mut String, view: &str, i: usize) {
        let suffix = if i == 0 { String::new() } else { format!("-{i}") };
        out.push_str(&format!(
            "<div class=\"scroll\"{}><table id=\"kinds-table{suffix}\" class=\"sortable sticky\">\n<thead><tr><th>configuration</th><th>strategy</th>",
            self.view_attrs(view, i)
        ));
        for k in ProbeKind::CLASSIC {
            out.push_str(&format!("<th class=\"num\">{}</th>", k.as_str()));
        }
        out.push_str("<th class=\"num\">all</th></tr></thead>\n<tbody>\n");
        for s in self.rows(view) {
            out.push_str(&format!(
                "<tr><td class=\"mono sticky-name\">{}</td><td>{}{}{}</td>",
                escape(&s.config.config_id),
                self.swatch(&s.config.strategy),
                escape(&s.config.strategy),
                if s.exercised() { "" } else { " <span class=\"tag\">not exercised</span>" }
            ));
            for v in s.retention_by_kind.iter().copied().chain([s.retention.mean]) {
                let style = match v {
                    Some(v) if v.is_finite() => {
                        format!(" style=\"background:hsl({:.0},65%,{:.0}%)\"", 120.0 * v.clamp(0.0, 1.0), 88.0)
                    }
                    _ => String::new(),
                };
                out.push_str(&format!("<td class=\"heat\"{}{style}>{}</td>", dv(v), pct(v)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table></div>\n");
        out.push_str(
            "<p class=\"note\">Mean retention per checkpoint: a derived probe is asked at 25%, 50%, 75% and 100% of \
             the conversation's calls (those after the message that holds its answer), the same calls for every \
             strategy.</p>\n",
        );
        out.push_str(&format!(
            "<div class=\"scroll\"{}><table id=\"checkpoints-table{suffix}\" class=\"sortable sticky\">\n<thead><tr><th>configuration</th>\
             <th>strategy</th>",
            self.view_attrs(view, i)
        ));
        for c in runlog::settings::CHECKPOINTS {
            out.push_str(&format!("<th class=\"num\">at {c}%</th>"));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        // The view's rows only: every view used to repeat every dataset's rows.
        for s in self.rows(view) {
            out.push_str(&format!(
                "<tr><td class=\"mono sticky-name\">{}</td><td>{}{}</td>",
                escape(&s.config.config_id),
                self.swatch(&s.config.strategy),
                escape(&s.config.strategy)
            ));
            for v in s.retention_by_checkpoint {
                let style = match v {
                    Some(v) if v.is_finite() => {
                        format!(" style=\"background:hsl({:.0},65%,{:.0}%)\"", 120.0 * v.clamp(0.0, 1.0), 88.0)
                    }
                    _ => String::new(),
                };
                out.push_str(&format!("<td class=\"heat\"{}{style}>{}</td>", dv(v), pct(v)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table></div>\n");
    }

    fn lost_facts(&self, out: &mut String) {
        out.push_str("<h2 id=\"lost\">Lost facts</h2>\n");
        out.push_str(&format!(
            "<p class=\"note\">One row per probe and checkpoint (the percentage of the conversation's calls made \
             when it was asked) that lost a fact under at least one configuration: which \
             configurations lost which of its facts (nowhere in the context when the probe was asked), and how many \
             configurations kept them all. {} The rows are embedded as data and drawn when the list is opened.</p>\n",
            if self.texts.is_empty() {
                "The datasets could not be read when this page was rendered, so facts are shown by number (in the \
                 dataset's order)."
            } else {
                "Questions and fact aliases are read from the datasets."
            }
        ));
        // Configurations by index, so a row names them by number.
        let mut configs: Vec<&str> = Vec::new();
        let mut config_rows = Vec::new();
        let mut rows = Vec::new();
        let mut total = 0usize;
        let mut rows_bytes = 0usize;
        // Taken in turn from each dataset, so a bound reached early still leaves every dataset
        // its rows; listed in page order.
        for ci in self.interleaved() {
            let c = &self.conversations[ci];
            // Probe order: as the records list them.
            let mut probe_ids: Vec<(&str, u32)> = Vec::new();
            for r in &c.records {
                if let Some(m) = metrics(r) {
                    for p in &m.probes {
                        if !probe_ids.contains(&(p.probe_id.as_str(), p.checkpoint)) {
                            probe_ids.push((&p.probe_id, p.checkpoint));
                        }
                    }
                }
            }
            for (probe_id, checkpoint) in probe_ids {
                let text = self.texts.get(c.dataset, c.id, probe_id);
                let mut scored = 0usize;
                let mut kind = "";
                let mut at_risk = false;
                let mut aliases: Option<Vec<String>> = None;
                let mut losses = Vec::new();
                for r in &c.records {
                    let found = metrics(r)
                        .and_then(|m| m.probes.iter().find(|p| p.probe_id == probe_id && p.checkpoint == checkpoint));
                    let Some(score) = found else {
                        continue;
                    };
                    scored += 1;
                    kind = score.kind.as_str();
                    let lost: Vec<usize> =
                        score.facts.iter().enumerate().filter(|(_, f)| **f == FoundIn::Lost).map(|(i, _)| i).collect();
                    if lost.is_empty() {
                        continue;
                    }
                    at_risk |= score.at_risk;
                    // Aliases only when the dataset's probe still has the facts the record scored.
                    if let Some(t) = text.filter(|t| t.facts.len() == score.facts.len()) {
                        aliases = Some(t.facts.iter().map(|a| plain(&a.join(" | "))).collect());
                    }
                    let k = match configs.iter().position(|id| *id == r.config_id) {
                        Some(k) => k,
                        None => {
                            configs.push(&r.config_id);
                            config_rows.push(serde_json::json!([plain(&r.config_id), self.color(&r.strategy)]));
                            configs.len() - 1
                        }
                    };
                    losses.push(serde_json::json!([k, lost, score.facts.len(), evidence::kept(score)]));
                }
                if losses.is_empty() {
                    continue;
                }
                total += 1;
                if rows.len() >= MAX_PROBE_ROWS || rows_bytes >= MAX_LOST_BYTES {
                    continue;
                }
                let kept_all = scored - losses.len();
                let row = serde_json::json!([
                    c.dataset,
                    plain(&format!("{} / {}", c.dataset, c.id)),
                    plain(probe_id),
                    kind,
                    checkpoint,
                    at_risk,
                    text.map(|t| plain(&t.question)).unwrap_or_default(),
                    aliases,
                    losses,
                    kept_all,
                    scored
                ]);
                rows_bytes += row.to_string().len();
                rows.push((ci, row));
            }
        }
        rows.sort_by_key(|(ci, _)| *ci);
        let rows: Vec<serde_json::Value> = rows.into_iter().map(|(_, row)| row).collect();
        if total == 0 {
            out.push_str("<p>No probe lost a fact under any configuration.</p>\n");
            return;
        }
        if total > rows.len() {
            out.push_str(&format!(
                "<p class=\"note\">Showing {} of {total} probes; probes.csv has every score.</p>\n",
                rows.len()
            ));
        }
        out.push_str(&format!(
            "<details id=\"lost-details\"><summary>{} probes that lost a fact</summary>\n\
             <input class=\"filter\" type=\"search\" placeholder=\"filter by conversation, probe, configuration or fact\" \
             data-filter=\"lost-table\">\n<div class=\"scroll\"><table id=\"lost-table\" class=\"sortable\">\n<thead><tr>\
             <th>conversation</th><th>probe</th><th>question</th><th>lost under</th><th class=\"num\">kept all facts</th>\
             </tr></thead>\n<tbody></tbody>\n</table></div>\n</details>\n",
            rows.len()
        ));
        out.push_str(&json_block("lost-data", &serde_json::json!({ "configs": config_rows, "rows": rows })));
    }

    /// Requests a provider would refuse and findings both accept, apart, per configuration and
    /// rule, summed over its conversations.
    fn refusals_and_findings(&self, out: &mut String) {
        let mut refused: std::collections::BTreeMap<(String, String), u64> = Default::default();
        let mut findings: std::collections::BTreeMap<(String, String), u64> = Default::default();
        for r in &self.data.records {
            let PairOutcome::Ok(m) = &r.outcome else { continue };
            for (rule, n) in &m.rejections_by_rule {
                *refused.entry((r.config_id.clone(), rule.clone())).or_default() += n;
            }
            for (kind, n) in &m.violations_by_kind {
                if kind != "orphan_tool_result" && kind != "unanswered_tool_call" {
                    *findings.entry((r.config_id.clone(), kind.clone())).or_default() += n;
                }
            }
        }
        let table = |out: &mut String,
                     id: &str,
                     title: &str,
                     what: &str,
                     rows: &std::collections::BTreeMap<(String, String), u64>| {
            if rows.is_empty() {
                out.push_str(&format!("<h3 id=\"{id}\">{title}</h3>\n<p class=\"ok\">None.</p>\n"));
                return;
            }
            out.push_str(&format!(
                "<h3 id=\"{id}\">{title}</h3>\n<div class=\"scroll\"><table><thead><tr><th>configuration</th><th>{what}</th>\
                 <th>count</th></tr></thead>\n<tbody>\n"
            ));
            for ((config, rule), n) in rows {
                out.push_str(&format!(
                    "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td class=\"num\">{n}</td></tr>\n",
                    escape(config),
                    escape(rule)
                ));
            }
            out.push_str("</tbody></table></div>\n");
        };
        table(out, "rejections", "Requests a provider would refuse", "provider / rule broken (requests)", &refused);
        table(out, "findings", "Findings (both providers accept)", "kind", &findings);
    }

    fn problems(&self, out: &mut String) {
        out.push_str("<h2 id=\"problems\">Problems</h2>\n");
        self.refusals_and_findings(out);
        let failed: Vec<&PairRecord> =
            self.data.records.iter().filter(|r| matches!(r.outcome, PairOutcome::Failed { .. })).collect();
        let dataset_problems = &self.data.manifest.dataset_problems;
        if failed.is_empty() && dataset_problems.is_empty() {
            out.push_str("<p class=\"ok\">No pair failed and every dataset line loaded.</p>\n");
            return;
        }
        if !failed.is_empty() {
            out.push_str(&format!("<h3>Failed pairs ({})</h3>\n", failed.len()));
            out.push_str(
                "<div class=\"scroll\"><table><thead><tr><th>conversation</th><th>configuration</th><th>error</th></tr></thead>\n<tbody>\n",
            );
            for r in failed.iter().take(MAX_FAILURES) {
                let PairOutcome::Failed { error } = &r.outcome else { continue };
                out.push_str(&format!(
                    "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td><pre>{}</pre></td></tr>\n",
                    escape(&format!("{} / {}", r.dataset, r.conversation_id)),
                    escape(&r.config_id),
                    escape(error)
                ));
            }
            out.push_str("</tbody></table></div>\n");
        }
        if !dataset_problems.is_empty() {
            out.push_str(&format!("<h3>Dataset problems ({})</h3>\n<pre>", dataset_problems.len()));
            for p in dataset_problems.iter().take(MAX_FAILURES) {
                out.push_str(&escape(p));
                out.push('\n');
            }
            out.push_str("</pre>\n");
        }
    }
}

#[cfg(test)]
mod tests;
