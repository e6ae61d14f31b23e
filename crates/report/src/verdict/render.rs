//! The verdict as text (the terminal) and markdown (a CI job summary). Both are drawn from
//! the same [`Verdict`], with the same labels and numbers.

use super::{Comparison, Difference, Entry, Figure, Standing, Verdict, View, Warning, MIN_EVIDENCE};
use crate::gate::SIGN_TEST_ALPHA;

/// A window as people say it: `32k`, `128k`, `1500`, or `own window`.
pub fn window_label(window: Option<u64>) -> String {
    match window {
        Some(w) if w % 1000 == 0 => format!("{}k", w / 1000),
        Some(w) => w.to_string(),
        None => "own window".into(),
    }
}

/// A view's dataset as people say it.
pub fn dataset_label(dataset: &str) -> String {
    if dataset == crate::summary::ALL_DATASETS {
        "all datasets pooled".into()
    } else {
        dataset.to_string()
    }
}

/// A configuration as people say it: its strategy and the parameters the experiment set.
pub fn label(e: &Entry) -> String {
    let mut out = e.strategy.clone();
    for (k, v) in &e.params {
        out.push_str(&format!(" {k}={v}"));
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{:.1}%", v * 100.0)).unwrap_or_else(|| "–".into())
}

fn usd(v: f64) -> String {
    let sign = if v < 0.0 { "−" } else { "" };
    let a = v.abs();
    if a >= 1.0 {
        format!("{sign}${a:.2}")
    } else {
        format!("{sign}${a:.4}")
    }
}

fn interval(i: Option<(f64, f64)>, f: &dyn Fn(f64) -> String) -> String {
    i.map(|(lo, hi)| format!(" [{}, {}]", f(lo), f(hi))).unwrap_or_default()
}

fn share(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

/// `completion 100.0% [100.0, 100.0] of 15 conv.`
pub fn completion(f: &Figure) -> String {
    format!("{}{} of {} conv.", pct(f.value), interval(f.interval, &share), f.conversations)
}

/// `69.0% [60.1, 77.2] (661 probes, 15 conv.)`
pub fn retention(f: &Figure) -> String {
    match f.value {
        None => "– (no probe at risk)".into(),
        Some(_) => format!(
            "{}{} ({} probes, {} conv.)",
            pct(f.value),
            interval(f.interval, &share),
            f.probes.unwrap_or(0),
            f.conversations
        ),
    }
}

/// `$2.36 [$2.10, $2.60]`
pub fn cost(f: &Figure) -> String {
    match f.value {
        None => "not priced".into(),
        Some(v) => format!("{}{}", usd(v), interval(f.interval, &usd)),
    }
}

fn signed_pt(v: f64) -> String {
    format!("{}{:.1}", if v < 0.0 { "−" } else { "+" }, (v * 100.0).abs())
}

fn signed_usd(v: f64) -> String {
    if v < 0.0 {
        usd(v)
    } else {
        format!("+{}", usd(v))
    }
}

/// A paired difference: `+12.7 pt [+5.1, +20.3]`, with "no detectable difference" when the
/// test finds none.
pub fn difference(d: &Difference, money: bool) -> String {
    let Some(m) = d.mean else { return "not compared (no common conversation)".into() };
    let f: &dyn Fn(f64) -> String = if money { &signed_usd } else { &signed_pt };
    let unit = if money { "" } else { " pt" };
    let spread = match (d.interval, d.sign_p) {
        (Some((lo, hi)), _) => format!(" [{}, {}]", f(lo), f(hi)),
        // The threshold is stated: a p of 0.03 beside "no detectable difference" would read oddly.
        (None, Some(p)) => format!(
            " (one-sided sign test p={p:.3}, {} {}; {} conv.)",
            if p < SIGN_TEST_ALPHA { "under" } else { "not under" },
            SIGN_TEST_ALPHA,
            d.pairs
        ),
        _ => String::new(),
    };
    let reading = if d.detectable { "" } else { ", no detectable difference" };
    format!("{}{unit}{spread}{reading}", f(m))
}

/// How a front configuration compares with another, in one line, with what it rests on.
pub fn comparison(c: &Comparison) -> String {
    format!(
        "completion {}; at-risk retention {}; cost {}; {}",
        difference(&c.completion, false),
        difference(&c.retention, false),
        difference(&c.cost, true),
        evidence(c)
    )
}

/// What a comparison rests on: `on 24 conv. compacted under both, 310 probes at risk under
/// both`, and "too little evidence" under [`MIN_EVIDENCE`] conversations.
pub fn evidence(c: &Comparison) -> String {
    let base = format!("on {} conv. compacted under both, {} probes at risk under both", c.both_compacted, c.probes);
    if c.enough_evidence() {
        base
    } else {
        format!("{base}: too little evidence (at least {MIN_EVIDENCE} conv. are needed)")
    }
}

/// ` (exercised in 3 of 69 conv.)` for a configuration that compacted in only some of the
/// view's conversations; empty when it compacted in all.
pub fn exercised(e: &Entry, conversations: usize) -> String {
    if e.compacted_conversations >= conversations {
        String::new()
    } else {
        format!(" (exercised in {} of {conversations} conv.)", e.compacted_conversations)
    }
}

fn warning_line(w: &Warning, labels: &dyn Fn(&str) -> String) -> String {
    if w.configurations.is_empty() {
        return w.message.clone();
    }
    const SHOWN: usize = 6;
    let mut names: Vec<String> = w.configurations.iter().take(SHOWN).map(|c| labels(c)).collect();
    if w.configurations.len() > SHOWN {
        names.push(format!("{} more", w.configurations.len() - SHOWN));
    }
    format!("{}: {}", w.message, names.join(", "))
}

impl View {
    /// The label of a configuration of the view, by id (the id itself when unknown).
    pub fn label_of(&self, config_id: &str) -> String {
        Verdict::entry(self, config_id).map(label).unwrap_or_else(|| config_id.to_string())
    }

    /// One line on what the view rests on.
    pub fn basis(&self) -> String {
        format!(
            "{} conversations, {} compacted under some configuration; each comparison pairs the conversations compacted under both of its configurations",
            self.conversations, self.compacting_conversations
        )
    }

    /// The front, best first, as labels, each with how often it was exercised when not always.
    pub fn front_labels(&self) -> Vec<String> {
        self.front
            .iter()
            .map(|id| match Verdict::entry(self, id) {
                Some(e) => format!("{}{}", label(e), exercised(e, self.conversations)),
                None => id.clone(),
            })
            .collect()
    }

    /// The configuration to ship: the cheapest of a tie, else the best.
    pub fn pick(&self) -> Option<&Entry> {
        let id = self.tie.as_ref().map(|t| &t.cheapest).or(self.best.as_ref().map(|b| &b.config_id))?;
        Verdict::entry(self, id)
    }

    /// The tie in one line: `letta, opencode, codex: no detectable difference in completion or
    /// at-risk retention (each against letta on at least 24 conv. compacted under both);
    /// opencode is $1.30 (28.0%) cheaper per conversation than letta`.
    pub fn tie_line(&self) -> Option<String> {
        let t = self.tie.as_ref()?;
        let best = self.best.as_ref()?;
        let names: Vec<String> = t.members.iter().map(|m| self.label_of(m)).collect();
        let cost = match (t.cheapest == best.config_id, t.saving) {
            (true, _) => format!("{} is also the cheapest", self.label_of(&best.config_id)),
            (false, Some(s)) => format!(
                "{} is {}{} cheaper per conversation than {}",
                self.label_of(&t.cheapest),
                usd(s),
                t.saving_share.map(|x| format!(" ({:.1}%)", x * 100.0)).unwrap_or_default(),
                self.label_of(&best.config_id)
            ),
            (false, None) => format!("{} is the cheapest (the saving is not priced)", self.label_of(&t.cheapest)),
        };
        Some(format!(
            "tie: {}: no detectable difference in completion or at-risk retention (each against {} on at least {} conv. compacted under both); {cost}",
            names.join(", "),
            self.label_of(&best.config_id),
            t.conversations
        ))
    }

    /// The sweeps' values on the front, one line each: `keep-last-n threshold_percent: 0.7, 0.8 on the front (of 0.6, 0.7, 0.8, 0.9)`.
    pub fn sweep_lines(&self) -> Vec<String> {
        self.sweeps
            .iter()
            .map(|s| {
                let on: Vec<&str> = s.points.iter().filter(|p| p.on_front).map(|p| p.value.as_str()).collect();
                let all: Vec<&str> = s.points.iter().map(|p| p.value.as_str()).collect();
                format!(
                    "{} {}: {} on the front (of {})",
                    s.strategy,
                    s.parameter,
                    if on.is_empty() { "no value".to_string() } else { on.join(", ") },
                    all.join(", ")
                )
            })
            .collect()
    }
}

impl Verdict {
    fn header_lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "Verdict: {} (summarizer {}{}, judge {})",
            self.experiment,
            self.summarizer,
            if self.stand_in_summary { ", a stand-in" } else { "" },
            self.judge
        )];
        for w in &self.warnings {
            out.push(format!("! {}", w.message));
        }
        out
    }

    /// The full verdict for a terminal: every window, pooled then per dataset.
    pub fn text(&self) -> String {
        let mut out = self.header_lines().join("\n");
        out.push('\n');
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        for w in &self.windows {
            for (i, v) in w.views.iter().enumerate() {
                out.push('\n');
                out.push_str(&format!(
                    "{} window, {}: {}\n",
                    window_label(w.window),
                    dataset_label(&v.dataset),
                    v.basis()
                ));
                if i == 0 {
                    self.view_text(v, &mut out);
                } else {
                    self.view_brief(v, &mut out);
                }
            }
        }
        out
    }

    fn view_text(&self, v: &View, out: &mut String) {
        if let Some(state) = &v.state {
            out.push_str(&format!("  {state}\n"));
        }
        match &v.best {
            Some(best) => {
                let e = Verdict::entry(v, &best.config_id);
                out.push_str(&format!("  best: {} ({})\n", v.label_of(&best.config_id), best.config_id));
                if let Some(e) = e {
                    out.push_str(&format!("    completion {}\n", completion(&e.completion)));
                    out.push_str(&format!(
                        "    at-risk retention {}{}\n",
                        retention(&e.retention),
                        exercised(e, v.conversations)
                    ));
                    out.push_str(&format!("    cost per conversation {}\n", cost(&e.cost)));
                }
                for a in &best.against {
                    out.push_str(&format!("    against {}: {}\n", v.label_of(&a.config_id), comparison(&a.comparison)));
                }
                if best.against.is_empty() {
                    out.push_str("    alone on the front\n");
                }
                if let Some(tie) = v.tie_line() {
                    out.push_str(&format!("  {tie}\n"));
                }
            }
            None => out.push_str("  best: none (no configuration can be ranked)\n"),
        }
        out.push_str(&format!("  front: {}\n", list(&v.front_labels())));
        if let Some(readiness) = &v.readiness {
            out.push_str(&format!("  {readiness}\n"));
        }
        for line in v.sweep_lines() {
            out.push_str(&format!("  sweep: {line}\n"));
        }
        let beaten: Vec<&Entry> =
            v.configurations.iter().filter(|e| matches!(e.standing, Standing::Beaten(_))).collect();
        if !beaten.is_empty() {
            out.push_str("  off the front:\n");
            for e in beaten {
                if let Standing::Beaten(c) = &e.standing {
                    out.push_str(&format!(
                        "    {}{}: beaten by {}: {}\n",
                        label(e),
                        exercised(e, v.conversations),
                        v.label_of(&c.by),
                        comparison(c)
                    ));
                }
            }
        }
        let not_ranked: Vec<(&Entry, &str)> = v
            .configurations
            .iter()
            .filter_map(|e| match &e.standing {
                Standing::NotRanked { reason } => Some((e, reason.as_str())),
                _ => None,
            })
            .collect();
        if !not_ranked.is_empty() {
            out.push_str("  not ranked:\n");
            for (e, reason) in not_ranked {
                out.push_str(&format!("    {}: {reason}\n", label(e)));
            }
        }
        for w in &v.warnings {
            out.push_str(&format!("  ! {}\n", warning_line(w, &|id| v.label_of(id))));
        }
    }

    fn view_brief(&self, v: &View, out: &mut String) {
        if let Some(state) = &v.state {
            out.push_str(&format!("  {state}\n"));
        }
        match &v.best {
            Some(best) => out.push_str(&format!("  best: {}\n", v.label_of(&best.config_id))),
            None => out.push_str("  best: none (no configuration can be ranked)\n"),
        }
        if let Some(tie) = v.tie_line() {
            out.push_str(&format!("  {tie}\n"));
        }
        out.push_str(&format!("  front: {}\n", list(&v.front_labels())));
        for w in &v.warnings {
            out.push_str(&format!("  ! {}\n", w.message));
        }
    }

    /// The short verdict a run ends with: per window (every dataset pooled) the pick (the
    /// cheapest of a tie, else the best) with its figures, the tie or how sure the best is, the
    /// front, and the warnings.
    pub fn short_text(&self) -> String {
        let mut out = self.header_lines().join("\n");
        out.push('\n');
        let rows: Vec<[String; 5]> = self
            .pooled()
            .map(|(w, v)| {
                let best = v.pick();
                [
                    window_label(w),
                    best.map(|e| if v.tie.is_some() { format!("{} (tie)", label(e)) } else { label(e) })
                        .unwrap_or_else(|| "none".into()),
                    best.map(|e| pct(e.completion.value)).unwrap_or_else(|| "–".into()),
                    best.map(|e| retention(&e.retention)).unwrap_or_else(|| "–".into()),
                    best.map(|e| cost(&e.cost)).unwrap_or_else(|| "–".into()),
                ]
            })
            .collect();
        let head = ["window", "pick", "completion", "at-risk retention", "cost / conv."];
        let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let padded: Vec<String> =
                cells.iter().zip(&widths).map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count()))).collect();
            format!("{}\n", padded.join("  ").trim_end())
        };
        out.push_str(&line(head.to_vec()));
        for r in &rows {
            out.push_str(&line(r.iter().map(String::as_str).collect()));
        }
        for (w, v) in self.pooled() {
            // Where the run has answer keys, what the agent still knows comes first.
            if let Some(state) = &v.state {
                out.push_str(&format!("{} {state}\n", window_label(w)));
            }
            if let Some(tie) = v.tie_line() {
                out.push_str(&format!("{} {tie}\n", window_label(w)));
            }
            out.push_str(&format!("{} front: {}\n", window_label(w), list(&v.front_labels())));
            if let Some(c) = v.best.as_ref().and_then(|b| b.runner_up.as_ref()) {
                if v.tie.as_ref().is_none_or(|t| !t.members.contains(&runner_up_id(v))) {
                    out.push_str(&format!(
                        "{} how sure: {} against {}, at-risk retention {}; {}\n",
                        window_label(w),
                        v.label_of(&c.by),
                        v.label_of(&runner_up_id(v)),
                        difference(&c.retention, false),
                        evidence(c)
                    ));
                }
            }
            for s in v.sweep_lines() {
                out.push_str(&format!("{} sweep: {s}\n", window_label(w)));
            }
            if let Some(readiness) = &v.readiness {
                out.push_str(&format!("{} {readiness}\n", window_label(w)));
            }
            for warning in &v.warnings {
                out.push_str(&format!("{} ! {}\n", window_label(w), warning_line(warning, &|id| v.label_of(id))));
            }
        }
        out
    }

    /// The verdict as markdown (a GitHub job summary): per window and view the best, the
    /// front and the warnings; the pooled view's configurations off the front with what beats
    /// them.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "### Verdict: {}\n\nSummarizer `{}`{}, judge `{}`.\n\n",
            md(&self.experiment),
            md(&self.summarizer),
            if self.stand_in_summary { " (a stand-in)" } else { "" },
            md(&self.judge)
        );
        for w in &self.warnings {
            out.push_str(&format!("> **warning:** {}\n>\n", md(&w.message)));
        }
        for n in &self.notes {
            out.push_str(&format!("> note: {}\n>\n", md(n)));
        }
        out.push_str(
            "\n| window | dataset | pick | completion | at-risk retention | cost / conv. | front |\n|---|---|---|---|---|---|---|\n",
        );
        for w in &self.windows {
            for v in &w.views {
                let best = v.pick();
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {} |\n",
                    window_label(w.window),
                    md(&dataset_label(&v.dataset)),
                    best.map(|e| format!("`{}`", md(&label(e)))).unwrap_or_else(|| "none".into()),
                    best.map(|e| completion(&e.completion)).unwrap_or_else(|| "–".into()),
                    best.map(|e| retention(&e.retention)).unwrap_or_else(|| "–".into()),
                    best.map(|e| md(&cost(&e.cost))).unwrap_or_else(|| "–".into()),
                    v.front_labels().iter().map(|l| format!("`{}`", md(l))).collect::<Vec<_>>().join(", "),
                ));
            }
        }
        for (w, v) in self.pooled() {
            out.push_str(&format!("\n#### {}, {}\n\n{}.\n\n", window_label(w), dataset_label(&v.dataset), v.basis()));
            if let Some(state) = &v.state {
                out.push_str(&format!("**{}**\n\n", md(state)));
            }
            if let Some(tie) = v.tie_line() {
                out.push_str(&format!("**{}.**\n\n", md(&tie)));
            }
            if let Some(best) = &v.best {
                for a in &best.against {
                    out.push_str(&format!(
                        "- best `{}` against `{}`: {}.\n",
                        md(&v.label_of(&best.config_id)),
                        md(&v.label_of(&a.config_id)),
                        md(&comparison(&a.comparison))
                    ));
                }
                if !best.against.is_empty() {
                    out.push('\n');
                }
            }
            for s in v.sweep_lines() {
                out.push_str(&format!("- sweep: {}\n", md(&s)));
            }
            let beaten: Vec<(&Entry, &Comparison)> = v
                .configurations
                .iter()
                .filter_map(|e| match &e.standing {
                    Standing::Beaten(c) => Some((e, c.as_ref())),
                    _ => None,
                })
                .collect();
            if !beaten.is_empty() {
                out.push_str(
                    "\n| off the front | beaten by | completion | at-risk retention | cost / conv. | rests on |\n|---|---|---|---|---|---|\n",
                );
                for (e, c) in beaten {
                    out.push_str(&format!(
                        "| `{}`{} | `{}` | {} | {} | {} | {} |\n",
                        md(&label(e)),
                        md(&exercised(e, v.conversations)),
                        md(&v.label_of(&c.by)),
                        md(&difference(&c.completion, false)),
                        md(&difference(&c.retention, false)),
                        md(&difference(&c.cost, true)),
                        md(&evidence(c))
                    ));
                }
            }
            for e in &v.configurations {
                if let Standing::NotRanked { reason } = &e.standing {
                    out.push_str(&format!("- not ranked: `{}`: {}\n", md(&label(e)), md(reason)));
                }
            }
            for warning in &v.warnings {
                out.push_str(&format!("- **warning:** {}\n", md(&warning_line(warning, &|id| v.label_of(id)))));
            }
        }
        inert(&out)
    }
}

/// The front's second of a view (the best's runner-up).
fn runner_up_id(v: &View) -> String {
    v.front.get(1).cloned().unwrap_or_default()
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "empty".into()
    } else {
        items.join(", ")
    }
}

/// A table cell: pipes and newlines would break the row; control characters and the
/// bidirectional overrides are made inert ([`inert`]).
fn md(text: &str) -> String {
    inert(&text.replace('|', "\\|").replace(['\n', '\r'], " "))
}

/// `text` with control characters other than newline and tab (ESC, BEL, NUL...) and the
/// bidirectional overrides and isolates written as `\u{..}`: markdown printed on a terminal or
/// shown in a job summary can neither drive the terminal nor reverse a line.
pub fn inert(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi =
            matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\n' && c != '\t') || bidi {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}
