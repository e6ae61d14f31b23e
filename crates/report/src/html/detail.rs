//! Per-conversation detail: each conversation's timelines (context size per call, one chart per
//! configuration) and its compaction events with the summaries they inserted. Both are embedded
//! once, as one compact JSON block, and drawn by the page's script: the timelines of the
//! conversation picked in the picker, the events of a conversation when its list is opened. A
//! page with hundreds of conversations stays small and opens at once, and it still needs no
//! network.
//!
//! The block holds `{"c": configurations, "k": events listed at each end of a pair, "v": conversations}`:
//! - a configuration is `[config id, colour, who wrote its summaries]` (`stand-in` when the
//!   run's summarizer is the offline stand-in, `real (recorded)` for `recorded`);
//! - a conversation is `[dataset, "dataset / id", compaction events, pairs]`;
//! - a failed pair is `[configuration, window, error]`;
//! - a replayed pair is `[configuration, window, null, calls, compactions, overflows, peak tokens,
//!   thresholds, points, markers, overflows drawn, events, event rows]`, where thresholds are
//!   `[label, tokens]` on the strategy's estimate scale, points are the downsampled timeline as
//!   flat `call step, request tokens, estimate - request tokens` triples, markers are flat
//!   `call, tokens before, tokens after` triples of the first [`MAX_TIMELINE_MARKERS`]
//!   compactions, overflows drawn are flat `call, tokens` pairs, and event rows are the listed
//!   events (see [`events_shown`]) as `[index, call, trigger, step, tokens before, tokens after,
//!   messages before, messages after, removed, masked, round, fallback, violations, summary
//!   (`null` when its text is left out for the size bound), summary characters, characters cut]`.
//!
//! The page's size bound: conversations are embedded, taken in turn from each dataset, while the
//! whole page stays under [`MAX_REPORT_BYTES`]; first their timelines and event rows, then, while
//! room is left, the text of their summaries. The page names what it left out, and results.jsonl
//! and compactions.csv always hold all of it.

use runlog::record::{CompactionRecord, PairOutcome};

use super::{escape, json_block, metrics, plain, svg, ConversationView, Page};
use super::{
    MAX_COMPACTION_EVENTS_PER_PAIR, MAX_REPORT_BYTES, MAX_SUMMARY_CHARS, MAX_TIMELINE_MARKERS, MAX_TIMELINE_POINTS,
};

/// The data block's element id.
pub(super) const DETAIL_DATA: &str = "detail-data";

/// Indices of a pair's events listed on the page: all of them when there are at most twice
/// [`MAX_COMPACTION_EVENTS_PER_PAIR`], otherwise the first and the last that many.
pub(super) fn events_shown(n: usize) -> Vec<usize> {
    let k = MAX_COMPACTION_EVENTS_PER_PAIR;
    if n <= 2 * k {
        (0..n).collect()
    } else {
        (0..k).chain(n - k..n).collect()
    }
}

/// Bytes a timeline point takes in the data, about: a call step, the request tokens and the
/// estimate's difference, with their commas.
const BYTES_PER_POINT: usize = 13;
/// Points per timeline at least, however many pairs a run has: 20 teeth of the sawtooth.
const MIN_TIMELINE_POINTS: usize = 40;

/// Points per timeline: [`MAX_TIMELINE_POINTS`], fewer when the run has so many pairs that two
/// thirds of the detail's `budget` would not hold every pair's timeline at that many (never
/// under [`MIN_TIMELINE_POINTS`]).
fn points_per_timeline(budget: usize, pairs: usize) -> usize {
    (budget * 2 / 3 / (pairs.max(1) * BYTES_PER_POINT)).clamp(MIN_TIMELINE_POINTS, MAX_TIMELINE_POINTS)
}

/// One listed event as the page draws it.
/// Without `summary`, the summary's text is `null` (left out for the page's size bound).
fn event_row(i: usize, e: &CompactionRecord, summary: bool) -> serde_json::Value {
    let chars = e.summary.chars().count();
    let shown = summary.then(|| plain(&e.summary.chars().take(MAX_SUMMARY_CHARS).collect::<String>()));
    serde_json::json!([
        i,
        e.call,
        e.trigger.as_str(),
        plain(&e.step),
        e.tokens_before,
        e.tokens_after,
        e.messages_before,
        e.messages_after,
        e.removed,
        e.masked,
        e.round,
        e.fallback.as_deref().map(plain),
        plain(&e.violations.join(", ")),
        shown,
        chars,
        chars.saturating_sub(MAX_SUMMARY_CHARS)
    ])
}

/// What is embedded, and the page's pieces that name it.
pub(super) struct Detail {
    /// Conversations embedded (the first ones in page order).
    pub embedded: usize,
    /// The data block.
    pub block: String,
    /// The picker's option of each embedded conversation.
    options: Vec<String>,
    /// The folded event list of each embedded conversation (empty when it had no event).
    events: Vec<String>,
    /// Compaction events of the embedded conversations, and of them the ones listed.
    events_embedded: usize,
    events_listed: usize,
    /// Pairs shown by their first and last events only.
    pairs_cut: usize,
    /// Listed events whose summary text was left out for the size bound.
    summaries_left_out: usize,
    /// Points per timeline at most.
    points: usize,
}

impl Page<'_> {
    /// One conversation's data.
    fn conversation_data(
        &self,
        c: &ConversationView<'_>,
        configs: &[&str],
        summaries: bool,
        max_points: usize,
    ) -> (serde_json::Value, usize, usize, usize) {
        let (mut total, mut listed, mut cut) = (0usize, 0usize, 0usize);
        let mut pairs = Vec::new();
        for r in &c.records {
            let k = configs.iter().position(|id| *id == r.config_id).unwrap_or(usize::MAX);
            let m = match &r.outcome {
                PairOutcome::Failed { error } => {
                    pairs.push(serde_json::json!([k, r.window, plain(error)]));
                    continue;
                }
                PairOutcome::Ok(m) => m,
            };
            let mut points = Vec::new();
            let mut last = 0u32;
            for p in svg::downsample(&m.timeline, max_points) {
                points.push(i64::from(p.call) - i64::from(last));
                points.push(p.request_tokens as i64);
                points.push(p.estimate as i64 - p.request_tokens as i64);
                last = p.call;
            }
            let markers: Vec<u64> = m
                .compaction_events
                .iter()
                .take(MAX_TIMELINE_MARKERS)
                .flat_map(|e| [u64::from(e.call), e.tokens_before, e.tokens_after])
                .collect();
            let overflows: Vec<u64> = m
                .timeline
                .iter()
                .filter(|p| p.overflow)
                .take(MAX_TIMELINE_MARKERS)
                .flat_map(|p| [u64::from(p.call), p.request_tokens])
                .collect();
            let shown = events_shown(m.compaction_events.len());
            total += m.compaction_events.len();
            listed += shown.len();
            if shown.len() < m.compaction_events.len() {
                cut += 1;
            }
            let rows: Vec<serde_json::Value> =
                shown.iter().map(|&i| event_row(i, &m.compaction_events[i], summaries)).collect();
            let thresholds: Vec<serde_json::Value> =
                m.thresholds.iter().map(|(l, t)| serde_json::json!([plain(l), t])).collect();
            pairs.push(serde_json::json!([
                k,
                r.window,
                null,
                m.calls,
                m.compactions,
                m.overflows,
                m.peak_tokens,
                thresholds,
                points,
                markers,
                overflows,
                m.compaction_events.len(),
                rows
            ]));
        }
        let value = serde_json::json!([c.dataset, plain(&format!("{} / {}", c.dataset, c.id)), total, pairs]);
        (value, total, listed, cut)
    }

    /// The picker's option of conversation `c`, number `k` in the data.
    fn option(&self, k: usize, c: &ConversationView<'_>, selected: bool) -> String {
        let compactions: u64 = c.records.iter().filter_map(|r| metrics(r)).map(|m| m.compactions).sum();
        format!(
            "<option value=\"{k}\"{}{}>{}</option>",
            if selected { " selected" } else { "" },
            self.of_dataset(c.dataset),
            escape(&format!("{} / {} ({} compactions)", c.dataset, c.id, compactions))
        )
    }

    /// The folded event list of conversation `c`, number `k` in the data (none without events).
    fn event_list(&self, k: usize, c: &ConversationView<'_>, events: usize) -> String {
        if events == 0 {
            return String::new();
        }
        format!(
            "<details class=\"events\" data-detail=\"{k}\"{}><summary>{}</summary></details>\n",
            self.of_dataset(c.dataset),
            escape(&format!("{} / {}: {} events", c.dataset, c.id, events))
        )
    }

    /// Who wrote a strategy's summaries, as the compaction events label them: `recorded` for the
    /// recording's own, `stand-in` when the run's summarizer is the offline stand-in (not the
    /// strategy: every summarizing strategy's text comes from it), else the strategy's name.
    fn summary_source(&self, strategy: &str) -> String {
        if strategy == crate::real::RECORDED {
            "real (recorded)".into()
        } else if super::real::stand_in(self.data) {
            "stand-in".into()
        } else {
            plain(strategy)
        }
    }

    /// The conversations' detail, as many as fit in `budget` bytes (with the picker option and
    /// the event list each adds to the page).
    pub(super) fn detail(&self, budget: usize) -> Detail {
        let configs: Vec<&str> =
            self.data.manifest.experiment.configurations.iter().map(|c| c.config_id.as_str()).collect();
        let mut config_rows: Vec<serde_json::Value> = self
            .data
            .manifest
            .experiment
            .configurations
            .iter()
            .map(|c| {
                serde_json::json!([plain(&c.config_id), self.color(&c.strategy), self.summary_source(&c.strategy)])
            })
            .collect();
        // A record whose configuration the experiment does not list (a merged run) still has a row.
        let mut configs = configs;
        for r in &self.data.records {
            if !configs.contains(&r.config_id.as_str()) {
                configs.push(&r.config_id);
                config_rows.push(serde_json::json!([
                    plain(&r.config_id),
                    self.color(&r.strategy),
                    self.summary_source(&r.strategy)
                ]));
            }
        }
        let head = serde_json::json!({ "c": config_rows }).to_string();
        let mut used = head.len() + 64;
        let mut detail = Detail {
            embedded: 0,
            block: String::new(),
            options: Vec::new(),
            events: Vec::new(),
            events_embedded: 0,
            events_listed: 0,
            pairs_cut: 0,
            summaries_left_out: 0,
            points: points_per_timeline(budget, self.data.records.len()),
        };
        // Taken in turn from each dataset, so every dataset keeps some when the bound is reached;
        // shown in page order. A conversation's place in the data is the number its picker
        // option and event list carry; the page's pieces are sized with the largest.
        let mut chosen = Vec::new();
        let last = self.conversations.len();
        // Bytes of a value in the block (escaping `<`, `>` and `&` makes each up to six bytes).
        let size = |v: &serde_json::Value| {
            let json = v.to_string();
            json.len() + 5 * json.bytes().filter(|b| matches!(b, b'<' | b'>' | b'&')).count() + 1
        };
        // First the timelines and event rows, summaries aside: they are what the summaries'
        // text would otherwise crowd out.
        for i in self.interleaved() {
            let c = &self.conversations[i];
            let (value, total, listed, cut) = self.conversation_data(c, &configs, false, detail.points);
            let cost = size(&value) + self.option(last, c, true).len() + self.event_list(last, c, total).len();
            if used + cost > budget {
                break;
            }
            used += cost;
            chosen.push((i, value, total));
            detail.embedded += 1;
            detail.events_embedded += total;
            detail.events_listed += listed;
            detail.pairs_cut += cut;
        }
        // Then the summaries' text, conversation by conversation in the same order, while it fits.
        detail.summaries_left_out = detail.events_listed;
        for (i, value, _) in &mut chosen {
            let (full, _, listed, _) = self.conversation_data(&self.conversations[*i], &configs, true, detail.points);
            let extra = size(&full).saturating_sub(size(value));
            if used + extra > budget {
                continue;
            }
            used += extra;
            *value = full;
            detail.summaries_left_out -= listed;
        }
        chosen.sort_by_key(|(i, ..)| *i);
        let mut conversations = Vec::with_capacity(chosen.len());
        for (k, (i, value, total)) in chosen.into_iter().enumerate() {
            let c = &self.conversations[i];
            conversations.push(value);
            detail.options.push(self.option(k, c, k == 0));
            detail.events.push(self.event_list(k, c, total));
        }
        detail.block = json_block(
            DETAIL_DATA,
            &serde_json::json!({ "c": config_rows, "k": MAX_COMPACTION_EVENTS_PER_PAIR, "v": conversations }),
        );
        detail
    }

    /// What the page left out of the detail, or nothing.
    fn left_out(&self, d: &Detail) -> String {
        let all = self.conversations.len();
        if d.embedded == all {
            return String::new();
        }
        format!(
            " <span id=\"detail-left-out\">Embedded: {} of {all} conversations, taken in turn from each dataset, as many \
             as keep the page under its size bound of {:.1} MB; results.jsonl and compactions.csv have every one.</span>",
            d.embedded,
            MAX_REPORT_BYTES as f64 / 1e6
        )
    }

    pub(super) fn timelines(&self, out: &mut String, d: &Detail) {
        out.push_str("<h2 id=\"timelines\">Context size per call</h2>\n");
        out.push_str(&format!(
            "<p class=\"note\">For the conversation picked, one chart per configuration: request tokens per call (blue, \
             exact tokenizer), the strategy's own estimate (grey, dotted), the window (red) and each of the strategy's \
             trigger thresholds (orange, dashed, labelled; on the estimate's scale), each compaction as a green drop \
             from the tokens before to the tokens after, overflowing calls as red dots. Long timelines are drawn with \
             at most {} points (the smallest and largest request of each stretch of calls, so peaks \
             and troughs stay). The charts are drawn from the data embedded in the page when a conversation is \
             picked.{}</p>\n",
            d.points,
            self.left_out(d)
        ));
        out.push_str(
            "<div class=\"legend\"><span><svg width=\"18\" height=\"8\" style=\"display:inline;width:18px\"><line class=\"tokens\" \
             x1=\"0\" x2=\"18\" y1=\"4\" y2=\"4\"/></svg> request tokens</span><span><svg width=\"18\" height=\"8\" \
             style=\"display:inline;width:18px\"><line class=\"estimate\" x1=\"0\" x2=\"18\" y1=\"4\" y2=\"4\"/></svg> \
             estimate</span><span><svg width=\"18\" height=\"8\" style=\"display:inline;width:18px\"><line class=\"window\" \
             x1=\"0\" x2=\"18\" y1=\"4\" y2=\"4\"/></svg> window</span><span><svg width=\"18\" height=\"8\" \
             style=\"display:inline;width:18px\"><line class=\"threshold\" x1=\"0\" x2=\"18\" y1=\"4\" y2=\"4\"/></svg> \
             trigger</span><span><svg width=\"18\" height=\"8\" style=\"display:inline;width:18px\"><line class=\"event\" \
             x1=\"9\" x2=\"9\" y1=\"0\" y2=\"8\"/></svg> compaction</span></div>\n",
        );
        out.push_str("<label>Conversation: <select id=\"timeline-select\">");
        for o in &d.options {
            out.push_str(o);
        }
        out.push_str("</select></label>\n<div id=\"timeline-charts\"></div>\n");
    }

    pub(super) fn compactions(&self, out: &mut String, d: &Detail) {
        out.push_str("<h2 id=\"compactions\">Compaction events</h2>\n");
        let total: usize = self.data.records.iter().filter_map(metrics).map(|m| m.compaction_events.len()).sum();
        if total == 0 {
            out.push_str("<p>No compaction ran.</p>\n");
            return;
        }
        out.push_str(&format!(
            "<p class=\"note\">Per conversation and configuration, the compactions with the summaries they inserted: \
             all of them when a pair has at most {}, otherwise its first and last {MAX_COMPACTION_EVENTS_PER_PAIR} \
             (summaries cut at {MAX_SUMMARY_CHARS} characters), drawn when a conversation is opened. compactions.csv \
             has every event with its full text.{}</p>\n",
            2 * MAX_COMPACTION_EVENTS_PER_PAIR,
            self.left_out(d)
        ));
        if d.events_listed < total {
            let mut why = Vec::new();
            if d.pairs_cut > 0 {
                why.push(format!("{} pairs are shown by their first and last events", d.pairs_cut));
            }
            if d.events_embedded < total {
                why.push(format!(
                    "{} events belong to conversations not embedded because the page reached its size bound",
                    total - d.events_embedded
                ));
            }
            out.push_str(&format!(
                "<p class=\"note\" id=\"compactions-left-out\">Listed {} of {total} compaction events: {}; \
                 compactions.csv has them all.</p>\n",
                d.events_listed,
                why.join("; ")
            ));
        }
        if d.summaries_left_out > 0 {
            out.push_str(&format!(
                "<p class=\"note\" id=\"summaries-left-out\">The text of {} of the {} summaries listed is left out to \
                 keep the page under its size bound; compactions.csv has it.</p>\n",
                d.summaries_left_out, d.events_listed
            ));
        }
        for e in &d.events {
            out.push_str(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timelines_thin_out_only_for_runs_with_many_pairs() {
        assert_eq!(points_per_timeline(2_000_000, 256), MAX_TIMELINE_POINTS, "a default-sized run keeps them all");
        let many = points_per_timeline(1_500_000, 1_000);
        assert!(many > MIN_TIMELINE_POINTS && many < MAX_TIMELINE_POINTS, "{many}");
        assert_eq!(points_per_timeline(0, 4_320), MIN_TIMELINE_POINTS, "never under the floor");
    }
}
