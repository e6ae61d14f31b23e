//! The shape of a context: one line per entry, for snapshots a reviewer reads at a glance.
//!
//! ```text
//! 00 system                                         412 tok  #0
//! 01 summary round 2 (assistant)                    230 tok  #1-14
//! 02 user [draft]                                    52 tok  #15
//! 03 assistant tool_call read_file                   30 tok  #16
//! 04 tool result read_file                         1.2k tok  #17
//! 05 masked tool result bash                         12 tok  #18
//! 06 inserted acknowledgement (assistant)             4 tok
//! ```
//!
//! Each line holds the position, what the entry is (role, tool calls or the tool answered,
//! `error`, the `[stage]` label, `decision` when it records a stage decision, `(empty)`), its
//! tokens under the given counter, and the recorded messages it stands for (`#i` for a recorded
//! or masked message, `#a-b,c` for a summary's coverage).

use compaction::{Compacted, Context, Entry, Exact, Inserted, Origin, Role, TokenCounter};

/// Column where token counts end.
const DESC_WIDTH: usize = 44;

/// `412 tok`, `1.2k tok`, `123k tok`, `1.5M tok`.
pub fn format_tokens(n: u64) -> String {
    if n < 1_000 {
        format!("{n} tok")
    } else if n < 100_000 {
        format!("{:.1}k tok", n as f64 / 1_000.0)
    } else if n < 1_000_000 {
        format!("{}k tok", (n as f64 / 1_000.0).round() as u64)
    } else {
        format!("{:.1}M tok", n as f64 / 1_000_000.0)
    }
}

/// Sorted indices as ranges: `1-4,7,9-10`.
pub fn format_ranges(indices: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

fn inserted_name(what: Inserted) -> &'static str {
    match what {
        Inserted::Acknowledgement => "acknowledgement",
        Inserted::StageDigest => "stage digest",
        Inserted::TruncationNotice => "truncation notice",
        Inserted::Other => "message",
    }
}

/// What an entry is, without its tokens: `assistant tool_calls grep, read_file [draft]`.
pub fn describe(entry: &Entry) -> String {
    let m = entry.message();
    let mut s = match entry.origin() {
        Origin::Summary { round, .. } => format!("summary round {round} ({})", m.role),
        Origin::Inserted { what } => format!("inserted {} ({})", inserted_name(*what), m.role),
        Origin::Masked { .. } => format!("masked {}", message_kind(entry)),
        Origin::Recorded { .. } => message_kind(entry),
    };
    if m.is_error {
        s.push_str(" error");
    }
    if let Some(stage) = &m.stage {
        s.push_str(&format!(" [{stage}]"));
    }
    if m.meta.contains_key("stage_decision") {
        s.push_str(" decision");
    }
    if m.content.is_empty() && m.tool_calls.is_empty() {
        s.push_str(" (empty)");
    }
    s
}

fn message_kind(entry: &Entry) -> String {
    let m = entry.message();
    match m.role {
        Role::Tool => format!("tool result {}", m.name.as_deref().unwrap_or("?")),
        Role::Assistant if m.tool_calls.len() == 1 => format!("assistant tool_call {}", m.tool_calls[0].name),
        Role::Assistant if m.tool_calls.len() > 1 => {
            let names: Vec<&str> = m.tool_calls.iter().map(|c| c.name.as_str()).collect();
            format!("assistant tool_calls {}", names.join(", "))
        }
        role => role.to_string(),
    }
}

fn source(entry: &Entry) -> String {
    match entry.origin() {
        Origin::Recorded { index } | Origin::Masked { index } => format!("#{index}"),
        Origin::Summary { covers, .. } => format!("#{}", format_ranges(covers)),
        Origin::Inserted { .. } => String::new(),
    }
}

/// One line per entry, tokens counted with `counter`.
pub fn render(ctx: &Context, counter: &dyn TokenCounter) -> String {
    let width = ctx.len().saturating_sub(1).to_string().len().max(2);
    let mut out = String::new();
    for (i, e) in ctx.entries().iter().enumerate() {
        let line = format!(
            "{i:0width$} {desc:<DESC_WIDTH$} {tok:>9}  {src}",
            desc = describe(e),
            tok = format_tokens(e.tokens(counter)),
            src = source(e)
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A header line and the shape of `ctx`.
fn block(label: &str, ctx: &Context, counter: &dyn TokenCounter) -> String {
    format!(
        "{label}: {} messages, {} ({})\n{}",
        ctx.len(),
        format_tokens(ctx.tokens(counter)),
        counter.name(),
        render(ctx, counter)
    )
}

/// The shapes before and after a compaction, and what the event reports, counted with
/// o200k_base.
pub fn before_after(ctx: &Context, compacted: &Compacted) -> String {
    before_after_with(ctx, compacted, &Exact::o200k())
}

/// [`before_after`] with any counter.
pub fn before_after_with(ctx: &Context, compacted: &Compacted, counter: &dyn TokenCounter) -> String {
    let e = &compacted.event;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    format!(
        "{}\n{}\nevent: {} {} step {:?}, estimate {} -> {}, removed {}, masked {}, summaries {}, round {}, \
         fallback {}, shortfall {}\n",
        block("before", ctx, counter),
        block("after", &compacted.context, counter),
        e.strategy,
        e.trigger.as_str(),
        e.step,
        e.estimate_before,
        e.estimate_after,
        e.removed,
        e.masked,
        e.summaries.len(),
        opt(e.round.map(|r| r.to_string())),
        opt(e.fallback.clone()),
        opt(e.shortfall.map(|s| s.to_string())),
    )
}
