//! Next-action readiness and repeat risks, offline.
//!
//! After every compaction the recording shows what the agent did next: the assistant message
//! of the call the compaction ran before (its tool calls, or its reply). The identifiers that
//! action uses ([`dataset::action::action_identifiers`]: paths, ids, hashes, URLs, error
//! codes) that it needs *from earlier in the conversation* are those that occur in a recorded
//! message before the compaction ([`dataset::action::history_identifiers`]) and not in the
//! system prompt or the live user message of the turn (which the agent has whatever the
//! compaction did; a tool's name comes from its definition and is never one). The action is
//! ready when the context the compaction left holds every one of them (in a kept message, a
//! summary or a placeholder: a message's text, or a tool call's arguments), partly ready with
//! the share, and not applicable when it needs none ([`NextAction::ready`]). A path is held
//! also as a shorter path it ends with: the recordings hold no system prompt, so the working
//! directory is unknown, and a summary names `/repo/src/a.rs` as `src/a.rs`. Each compaction
//! is read against the context it left, so a call that compacted twice is read twice.
//!
//! Two repeat risks are flagged on the same action: it repeats a call that failed before the
//! compaction with the same tool and arguments ([`dataset::action::same_call`]) and that
//! failure's result is no longer in the context verbatim (`repeat_failed`); or it reads a file
//! that a call read before the compaction and nothing changed since, and that read's result is
//! no longer in the context verbatim (`repeat_reread`). They are risks the context creates,
//! not what a live agent would do: the recorded agent had the full history.
//!
//! The recording is read once, as far as each compaction's call: the cost is linear in the
//! conversation plus, per compaction, a scan of the context for the action's identifiers.

use std::collections::{HashMap, HashSet};

use compaction::{Context, Conversation, Message, Role};
use dataset::action::{self, FileUse};
use dataset::text::{occurs, render_message};
use runlog::record::{NextAction, PairMetrics};

/// What the recording held before the call being scored.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    /// Recorded messages read so far.
    read: usize,
    /// The identifiers of the messages read (system prompts and recorded summaries aside).
    seen: HashSet<String>,
    /// The system prompts' text.
    system: String,
    /// Calls waiting for their result: call id → (message, call within it).
    open: HashMap<String, (usize, usize)>,
    /// Calls that failed: (message, call within it, message of its result).
    failed: Vec<(usize, usize, usize)>,
    /// Files read and not changed since: (path, message of the read's result).
    reads: Vec<(String, usize)>,
}

impl Tracker {
    /// Read the recording up to (not including) message `to`.
    fn advance(&mut self, conversation: &Conversation, to: usize) {
        while self.read < to.min(conversation.messages.len()) {
            let i = self.read;
            self.read += 1;
            let m = &conversation.messages[i];
            if m.role == Role::System {
                self.system.push_str(&render_message(m));
                self.system.push('\n');
                continue;
            }
            if m.meta_flag(compaction::message::COMPACT_SUMMARY) {
                continue;
            }
            self.seen.extend(action::history_identifiers(m));
            match m.role {
                Role::Assistant => {
                    for (k, call) in m.tool_calls.iter().enumerate() {
                        self.open.insert(call.id.clone(), (i, k));
                        for (path, _) in action::file_uses(call).into_iter().filter(|(_, u)| *u == FileUse::Change) {
                            self.reads.retain(|(p, _)| !action::same_file(p, &path));
                        }
                    }
                }
                Role::Tool => {
                    let Some((at, k)) = m.tool_call_id.as_ref().and_then(|id| self.open.remove(id)) else { continue };
                    let call = &conversation.messages[at].tool_calls[k];
                    if action::failure(call, m).is_some() {
                        self.failed.push((at, k, i));
                    }
                    for (path, _) in action::file_uses(call).into_iter().filter(|(_, u)| *u == FileUse::Read) {
                        self.reads.retain(|(p, _)| !action::same_file(p, &path));
                        self.reads.push((path, i));
                    }
                }
                _ => {}
            }
        }
    }

    /// The next action at recorded message `at`, read against `ctx` (the context a compaction
    /// left), with `live` the live user message of the turn.
    pub(super) fn score(
        &mut self,
        conversation: &Conversation,
        at: usize,
        live: Option<&Message>,
        ctx: &Context,
    ) -> NextAction {
        self.advance(conversation, at);
        let Some(m) = conversation.messages.get(at) else { return NextAction::default() };
        let live = live.map(render_message).unwrap_or_default();
        let needed: Vec<String> = action::action_identifiers(m)
            .into_iter()
            .filter(|t| self.seen.contains(t) && !occurs(&self.system, t) && !occurs(&live, t))
            .collect();
        let missing: Vec<String> = needed.iter().filter(|t| !holds(ctx, t)).cloned().collect();
        let (mut repeat_failed, mut repeat_reread) = (false, false);
        if !m.tool_calls.is_empty() && (!self.failed.is_empty() || !self.reads.is_empty()) {
            let verbatim: HashSet<usize> = ctx.entries().iter().filter_map(|e| e.origin().verbatim_index()).collect();
            for call in &m.tool_calls {
                repeat_failed |= self.failed.iter().any(|(a, k, r)| {
                    !verbatim.contains(r) && action::same_call(&conversation.messages[*a].tool_calls[*k], call)
                });
                repeat_reread |= action::file_uses(call).iter().any(|(path, u)| {
                    *u == FileUse::Read
                        && self.reads.iter().any(|(p, r)| action::same_file(p, path) && !verbatim.contains(r))
                });
            }
        }
        NextAction {
            message: at,
            tools: m.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(";"),
            needed: u32::try_from(needed.len()).unwrap_or(u32::MAX),
            missing,
            repeat_failed,
            repeat_reread,
        }
    }
}

/// `ctx` holds identifier `t`: in a message's text, or in a tool call's arguments; a path
/// also as a shorter path it ends with ([`action::shorter_paths`]: the recordings hold no
/// system prompt, so the working directory an absolute path starts with is unknown, and a
/// summary names files relative to it).
fn holds(ctx: &Context, t: &str) -> bool {
    let forms: Vec<String> = std::iter::once(t.to_string()).chain(action::shorter_paths(t)).collect();
    ctx.entries().iter().rev().any(|e| {
        let m = e.message();
        forms.iter().any(|f| occurs(&m.content, f) || m.tool_calls.iter().any(|c| c.arguments.contains(f.as_str())))
    })
}

/// The pair's figures from its compactions' next actions.
pub(super) fn settle(m: &mut PairMetrics) {
    let actions: Vec<&NextAction> = m.compaction_events.iter().filter_map(|e| e.next_action.as_ref()).collect();
    let ready: Vec<f64> = actions.iter().filter_map(|a| a.ready()).collect();
    m.next_action_ready = (!ready.is_empty()).then(|| ready.iter().sum::<f64>() / ready.len() as f64);
    m.next_action_compactions = ready.len() as u64;
    m.repeat_risk_failed = actions.iter().filter(|a| a.repeat_failed).count() as u64;
    m.repeat_risk_reread = actions.iter().filter(|a| a.repeat_reread).count() as u64;
}
