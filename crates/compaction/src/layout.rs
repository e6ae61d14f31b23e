//! Building a context from a plan's layout: kept, masked, summarized and inserted slots, with
//! the running totals of the source context carried over.

use crate::context::{Context, Entry, Origin};
use crate::message::Message;
use crate::plan::{Change, Slot, SummaryOutcome, SummaryRequest};
use crate::tokens::TokenCounter;

/// A built layout and what it did.
#[derive(Debug, Clone)]
pub struct Built {
    /// The new context.
    pub context: Context,
    /// Entries of the source context that are not in the new one in any form.
    pub removed: usize,
    /// Entries whose content was replaced by a placeholder.
    pub masked: usize,
    /// The summary texts inserted, in order.
    pub summaries: Vec<String>,
    /// The highest summary round inserted, if any.
    pub round: Option<u32>,
}

impl Built {
    /// What the build left, for its event ([`CompactionEvent::new`](crate::CompactionEvent::new)),
    /// with the failure path's `fallback` if one ran; the summary texts move into it.
    pub fn change(&mut self, fallback: Option<String>) -> Change<'_> {
        Change::Built {
            context: &self.context,
            removed: self.removed,
            masked: self.masked,
            summaries: std::mem::take(&mut self.summaries),
            round: self.round,
            fallback,
        }
    }
}

/// Build a context from `layout`. Summary slots take their text from `summaries` (a failed or
/// missing summary becomes an empty string: use a fallback layout to avoid that). New entries
/// are metered with `meters` (the strategy's estimator), so the running totals `ctx` keeps for
/// them stay known in the new context without a second pass over it.
pub fn build_layout(
    ctx: &Context,
    layout: &[Slot],
    requests: &[SummaryRequest],
    summaries: &[SummaryOutcome],
    meters: &[&dyn TokenCounter],
) -> Built {
    // The entries kept, to count those removed: in a layout's order, which is mostly theirs.
    let mut used: Vec<usize> = Vec::with_capacity(layout.len());
    let mut out = Context::with_totals_of(ctx, layout.len());
    let mut masked = 0;
    let mut texts = Vec::new();
    let mut round = None;
    for slot in layout {
        match slot {
            Slot::Keep { index } => {
                if let Some(e) = ctx.get(*index) {
                    used.push(*index);
                    out.push(e.clone());
                }
            }
            Slot::Mask { index, placeholder } => {
                if let Some(e) = ctx.get(*index) {
                    used.push(*index);
                    masked += 1;
                    let m = e.message().with_content(placeholder.as_str());
                    let origin = match e.origin() {
                        Origin::Recorded { index } | Origin::Masked { index } => Origin::Masked { index: *index },
                        other => other.clone(),
                    };
                    out.push_metered(Entry::new(m, origin), meters);
                }
            }
            Slot::Summary { request, role, prefix, suffix } => {
                let text = match summaries.get(*request) {
                    Some(Ok(t)) => t.clone(),
                    _ => String::new(),
                };
                let req = requests.get(*request);
                let r = req.map(|r| r.round).unwrap_or(1);
                round = Some(round.map_or(r, |x: u32| x.max(r)));
                let covers = req.map(|r| covered(ctx, &r.span)).unwrap_or_default();
                texts.push(text.clone());
                out.push_metered(
                    Entry::new(
                        Message::new(*role, format!("{prefix}{text}{suffix}")),
                        Origin::Summary { round: r, covers },
                    ),
                    meters,
                );
            }
            Slot::Insert { message, what } => {
                out.push_metered(Entry::new(Message::clone(message), Origin::Inserted { what: *what }), meters);
            }
        }
    }
    if !used.windows(2).all(|w| w[0] < w[1]) {
        used.sort_unstable();
        used.dedup();
    }
    let removed = ctx.len() - used.len();
    Built { context: out, removed, masked, summaries: texts, round }
}

/// The recorded indices that entries `span` of `ctx` stand for, sorted and deduplicated.
pub fn covered(ctx: &Context, span: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    for &i in span {
        if let Some(e) = ctx.get(i) {
            match e.origin() {
                Origin::Recorded { index } | Origin::Masked { index } => out.push(*index),
                Origin::Summary { covers, .. } => out.extend_from_slice(covers),
                Origin::Inserted { .. } => {}
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
