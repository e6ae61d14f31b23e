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
//!
//! # Agreement, with a model
//!
//! With `next_action = "llm"` a [`NextActionModel`] ([`llm::LlmNextAction`]) is asked, at each
//! call that compacted, for its next action twice: with the context the call's compactions
//! left (the request the agent sends) and with the full history at the same point (every
//! recorded message before the call, the recorded agent's own summaries aside). The first
//! answer is compared with the recorded action and with the second ([`agreement`], by
//! [`dataset::action::agrees`]: the same tool and the identifiers its recorded arguments
//! use). The full-history answer depends on the conversation and the point only, so it is
//! asked once per point and shared by every configuration that compacted there. An answer
//! that is not an action (it did not parse, or the request failed) is never agreement: the
//! point is left out of the shares that need it and counted ([`AgreementFigures::unparsed`]).
//! The requests are made beside the replay, like the LLM judge's, and collected at its end.

use std::collections::{HashMap, HashSet};

use compaction::{Context, Conversation, Message, Role};
use dataset::action::{self, FileUse};
use dataset::text::{occurs, render_message};
use runlog::record::{AgreementFigures, ModelAction, NextAction, NextActionAgreement, PairMetrics};

pub mod llm;

/// A model asked for the next action at a compaction point (see the module docs).
pub trait NextActionModel: Send + Sync {
    /// Name recorded in run.json (`llm:<model>`).
    fn name(&self) -> String;
    /// Ask for the action of recorded message `at` (the call's assistant message) with the
    /// compacted context `ctx`, and with the full history of `conversation` before `at`.
    fn ask(&self, conversation: &Conversation, at: usize, ctx: &Context) -> Asked;
}

/// What [`NextActionModel::ask`] gives: the agreement, and what of it the pair must count
/// against itself (as a summary's or a probe's failed request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub agreement: NextActionAgreement,
    /// Requests the response cache could not answer in mode `only`.
    pub cache_misses: u64,
    /// The first request that failed at the endpoint, when one did.
    pub endpoint_error: Option<String>,
    /// Requests that failed at the endpoint.
    pub endpoint_failures: u64,
}

/// The full history at recorded message `at`: every message before it, the recorded agent's
/// own summaries aside (no configuration but `recorded` sees them).
pub fn full_history(conversation: &Conversation, at: usize) -> Context {
    let end = at.min(conversation.messages.len());
    Context::from_entries(
        conversation.messages[..end]
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.meta_flag(compaction::message::COMPACT_SUMMARY))
            .map(|(i, m)| compaction::Entry::recorded(i, m.clone()))
            .collect(),
    )
}

/// A model's action as an assistant message (a tool call, or a reply); `None` for an answer
/// that is not an action.
fn as_message(a: &ModelAction) -> Option<Message> {
    match a {
        ModelAction::Tool { name, arguments } => Some(Message::assistant_calls(
            "",
            vec![compaction::ToolCall { id: "proposed".into(), name: name.clone(), arguments: arguments.clone() }],
        )),
        ModelAction::Reply { text } => Some(Message::assistant(text.clone())),
        ModelAction::Unparsed { .. } | ModelAction::Failed { .. } => None,
    }
}

/// The agreement of the `compacted` answer with the `recorded` action and with the `full`
/// answer ([`action::agrees`]); each `None` where an answer it needs is not an action.
pub fn agreement(recorded: &Message, compacted: ModelAction, full: ModelAction) -> NextActionAgreement {
    let (c, f) = (as_message(&compacted), as_message(&full));
    NextActionAgreement {
        agrees_recorded: c.as_ref().map(|c| action::agrees(recorded, c)),
        agrees_full: c.as_ref().zip(f.as_ref()).map(|(c, f)| action::agrees(f, c)),
        full_agrees_recorded: f.as_ref().map(|f| action::agrees(recorded, f)),
        compacted,
        full,
    }
}

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

/// The pair's agreement figures from its compactions' agreements (a model was asked).
pub(super) fn settle_agreement(m: &mut PairMetrics) {
    let asked: Vec<&NextActionAgreement> = m.compaction_events.iter().filter_map(|e| e.agreement.as_ref()).collect();
    let share = |v: &[bool]| (!v.is_empty()).then(|| v.iter().filter(|b| **b).count() as f64 / v.len() as f64);
    let recorded: Vec<bool> = asked.iter().filter_map(|a| a.agrees_recorded).collect();
    let full: Vec<bool> = asked.iter().filter_map(|a| a.agrees_full).collect();
    let unparsed = asked
        .iter()
        .flat_map(|a| [&a.compacted, &a.full])
        .filter(|x| matches!(x, ModelAction::Unparsed { .. }))
        .count();
    m.next_action_agreement = Some(AgreementFigures {
        agree_recorded: share(&recorded),
        agree_recorded_compactions: recorded.len() as u64,
        agree_full: share(&full),
        agree_full_compactions: full.len() as u64,
        unparsed: unparsed as u64,
    });
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
