//! Per-conversation detail: each conversation's timelines (context size per call, one chart per
//! configuration) and its compaction events with the summaries they inserted. Both are embedded
//! once, as one compact JSON block, and drawn by the page's script: the timelines of the
//! conversation picked in the picker, the events of a conversation when its list is opened. A
//! page with hundreds of conversations stays small and opens at once, and it still needs no
//! network.
//!
//! The block holds `{"c": configurations, "k": events listed at each end of a pair, "v": conversations}`:
//! - a configuration is `[config id, colour]`;
//! - a conversation is `[dataset, "dataset / id", compaction events, pairs]`;
//! - a failed pair is `[configuration, window, error]`;
//! - a replayed pair is `[configuration, window, null, calls, compactions, overflows, peak tokens,
//!   thresholds, points, markers, overflows drawn, events, event rows]`, where thresholds are
//!   `[label, tokens]` on the strategy's estimate scale, points are the downsampled timeline as
//!   flat `call step, request tokens, estimate - request tokens` triples, markers are flat
//!   `call, tokens before, tokens after` triples of the first [`MAX_TIMELINE_MARKERS`]
//!   compactions, overflows drawn are flat `call, tokens` pairs, and event rows are the listed
//!   events (see [`events_shown`]) as `[index, call, trigger, step, tokens before, tokens after,
//!   messages before, messages after, removed, masked, round, fallback, violations, summary,
//!   summary characters, characters cut]`.
//!
//! The page's size bound: conversations are embedded in page order while the whole page stays
//! under [`MAX_REPORT_BYTES`]; the page names how many it embedded, and results.jsonl and
//! compactions.csv always hold every one.

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

/// One listed event as the page draws it.
fn event_row(i: usize, e: &CompactionRecord) -> serde_json::Value {
    let chars = e.summary.chars().count();
    let shown: String = e.summary.chars().take(MAX_SUMMARY_CHARS).collect();
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
        plain(&shown),
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
}

impl Page<'_> {
    /// One conversation's data.
    fn conversation_data(
        &self,
        c: &ConversationView<'_>,
        configs: &[&str],
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
            for p in svg::downsample(&m.timeline, MAX_TIMELINE_POINTS) {
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
            let rows: Vec<serde_json::Value> = shown.iter().map(|&i| event_row(i, &m.compaction_events[i])).collect();
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
            .map(|c| serde_json::json!([plain(&c.config_id), self.color(&c.strategy)]))
            .collect();
        // A record whose configuration the experiment does not list (a merged run) still has a row.
        let mut configs = configs;
        for r in &self.data.records {
            if !configs.contains(&r.config_id.as_str()) {
                configs.push(&r.config_id);
                config_rows.push(serde_json::json!([plain(&r.config_id), self.color(&r.strategy)]));
            }
        }
        let head = serde_json::json!({ "c": config_rows }).to_string();
        let mut used = head.len() + 64;
        let mut conversations = Vec::new();
        let mut detail = Detail {
            embedded: 0,
            block: String::new(),
            options: Vec::new(),
            events: Vec::new(),
            events_embedded: 0,
            events_listed: 0,
            pairs_cut: 0,
        };
        for (i, c) in self.conversations.iter().enumerate() {
            let (value, total, listed, cut) = self.conversation_data(c, &configs);
            let compactions: u64 = c.records.iter().filter_map(|r| metrics(r)).map(|m| m.compactions).sum();
            let option = format!(
                "<option value=\"{i}\"{}{}>{}</option>",
                if i == 0 { " selected" } else { "" },
                self.of_dataset(c.dataset),
                escape(&format!("{} / {} ({} compactions)", c.dataset, c.id, compactions))
            );
            let events = if total == 0 {
                String::new()
            } else {
                format!(
                    "<details class=\"events\" data-detail=\"{i}\"{}><summary>{}</summary></details>\n",
                    self.of_dataset(c.dataset),
                    escape(&format!("{} / {}: {} events", c.dataset, c.id, total))
                )
            };
            // Escaping `<`, `>` and `&` in the block makes each up to six bytes.
            let json = value.to_string();
            let escaped = json.len() + 5 * json.bytes().filter(|b| matches!(b, b'<' | b'>' | b'&')).count();
            let cost = escaped + 1 + option.len() + events.len();
            if used + cost > budget {
                break;
            }
            used += cost;
            conversations.push(value);
            detail.options.push(option);
            detail.events.push(events);
            detail.embedded += 1;
            detail.events_embedded += total;
            detail.events_listed += listed;
            detail.pairs_cut += cut;
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
            " <span id=\"detail-left-out\">Embedded: the first {} of {all} conversations, as many as keep the page under \
             its size bound of {:.1} MB; results.jsonl and compactions.csv have every one.</span>",
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
             at most {MAX_TIMELINE_POINTS} points (the smallest and largest request of each stretch of calls, so peaks \
             and troughs stay). The charts are drawn from the data embedded in the page when a conversation is \
             picked.{}</p>\n",
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
        for e in &d.events {
            out.push_str(e);
        }
    }
}
