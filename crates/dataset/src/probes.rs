//! Derived probes: questions whose answers are in a recording, found without annotation.
//!
//! [`derive()`] reads one conversation and returns probes of five families, deterministically
//! (the same conversation and [`DeriveParams`] give the same probes, byte for byte):
//!
//! - **task** ([`ProbeKind::Task`]): the first real user request. "Real" skips text the agent
//!   harness injected (`meta.injected`, Claude Code's task notifications and reminders),
//!   demonstrations (`meta.demo`), queued duplicates and recorded compaction summaries. Its
//!   facts are the request's key terms.
//! - **artifact** ([`ProbeKind::Artifact`]): files the agent wrote, edited or read, from tool-call
//!   arguments (`file_path`, `path`, ... and the commands of shell calls: redirections,
//!   `sed -i`, `tee`, `cat`, `head`, ...). Written and edited files come first; one probe per
//!   file, whose source is the last call that wrote or edited it (the last that read it, for a
//!   file only read).
//! - **recall** ([`ProbeKind::Recall`]): error lines of failed tool results and of injected
//!   error reports (the last error line of a traceback), and identifiers the user gave (ids,
//!   paths, numbers, commands), those mentioned in the fewest messages first.
//! - **continuation** ([`ProbeKind::Continuation`]): the last user request with key terms
//!   (when it is not the task itself), and the items still pending in the last todo list the
//!   agent wrote (`TodoWrite`).
//! - **gold** ([`ProbeKind::Decision`] for actions, [`ProbeKind::Artifact`] for patched files,
//!   [`ProbeKind::Recall`] for a submitted answer): the gold actions of the format
//!   (`meta.gold_actions`), each sourced at the call that best matches it, with the action's
//!   name and argument values as facts; the files a submitted patch changes
//!   (`meta.submission`); a submitted answer that is not a patch.
//!
//! - **what the agent recorded as structure**: every request a person
//!   typed (injected, queued and command-output text is not one; the words a user typed when
//!   they turned down a call are), by one key phrase of two to six words and its identifiers;
//!   the constraints the user stated (quoted issue text and code are not theirs); the answers
//!   chosen to the agent's questions and the plans approved or turned down; a confirmation
//!   with what it confirmed; the to-do list as it stood at each write; what was committed,
//!   pushed, opened as a pull request, left uncommitted (`git status`, `git diff --stat`) and
//!   which branch was switched to; each test or lint run with its suite and counts (the last
//!   run of a suite critical); the changes made through a domain tool (`cancel_reservation`,
//!   `update_...`), with the object and the new value together; the plans the agent stated as
//!   a list.
//!
//! The families of what stands at a point of the work (requests, constraints, choices, to-do
//! lists, git, test runs, plans, domain changes, lessons, decisions) are spread over the
//! conversation, so a checkpoint anywhere has the state before it; every bound is multiplied
//! by the conversation's [`scale`] (one per [`SCALE_MESSAGES`] messages, at most
//! [`MAX_SCALE`]).
//!
//! Every probe names its source message, and every alias of every fact occurs in that message
//! as the offline judge reads it ([`crate::text::render_message`], [`crate::text::normalize`],
//! [`crate::text::occurs`]); an alias that does not is left out, and a fact with no alias left
//! is dropped. Recorded compaction summaries (`meta.compact_summary`) and placeholder results
//! (`meta.synthetic`) are never sources. Near-duplicates within a kind (a probe whose facts
//! are among those of an earlier probe of the same kind) are merged into the earlier one; each
//! family keeps at most its bound ([`DeriveParams`]), spread evenly over the conversation when
//! there are more candidates, and each kind at most its bound ([`DeriveParams::max_of`]) over
//! all families (families are taken in the order task, gold, continuation, artifact, recall).
//! Derived probe ids start with [`DERIVED_PREFIX`].
//!
//! ```
//! use compaction::{Conversation, Message, ProbeKind, ToolCall};
//! use dataset::probes::{derive, DeriveParams};
//!
//! let mut conv = Conversation::new("c", vec![
//!     Message::user("Fix the crash in src/parser.rs when the input is empty (issue #4521)."),
//!     Message::assistant_calls("", vec![ToolCall {
//!         id: "1".into(), name: "Edit".into(),
//!         arguments: r#"{"file_path":"/repo/src/parser.rs","old_string":"let x = v[0];","new_string":"let x = v.first()?;"}"#.into(),
//!     }]),
//!     Message::tool_result("1", "Edit", "The file /repo/src/parser.rs has been updated."),
//!     Message::assistant("Fixed."),
//! ]);
//! // A fact found in a quarter of the messages is everywhere and dropped: a longer session.
//! for _ in 0..12 {
//!     conv.messages.push(Message::assistant("Working."));
//! }
//! let probes = derive(&conv, &DeriveParams::default());
//! let task = probes.iter().find(|p| p.kind == ProbeKind::Task).unwrap();
//! assert_eq!(task.source_message, 0);
//! assert!(task.facts.iter().any(|f| f.contains(&"src/parser.rs".to_string())));
//! let artifact = probes.iter().find(|p| p.kind == ProbeKind::Artifact).unwrap();
//! assert_eq!(artifact.source_message, 1);
//! assert_eq!(artifact.facts, vec![vec!["/repo/src/parser.rs".to_string(), "parser.rs".to_string()]]);
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};

use compaction::{Conversation, Message, Probe, ProbeKind, Role, Tier};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::import::is_harness_text;
use crate::text::{is_common_word, normalize, occurs, render_message, STOPWORDS};
use files::{basename, command_of, is_path, READERS};
pub(crate) use files::{same_file, touches, Touch, Verb};
use requests::{request_text, said_text, without_quoted};

/// State probes per conversation: the last failing test, the last failed command.
const STATE_PROBES: usize = 2;

/// Derived probe ids start with this; [`replace_derived`] replaces only these.
pub const DERIVED_PREFIX: &str = "derived-";

/// Bounds of the derivation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DeriveParams {
    /// Task probes per conversation.
    pub max_task: usize,
    /// Artifact probes per conversation: files written, edited or read, and the files a
    /// submitted patch changes (gold), which are taken first.
    pub max_artifact: usize,
    /// Recall probes per conversation: a submitted answer (gold) first, then errors and
    /// identifiers the user gave.
    pub max_recall: usize,
    /// Continuation probes (last request, pending todo items) per conversation.
    pub max_continuation: usize,
    /// Gold probes (gold actions, patched files, submitted answer) per conversation.
    pub max_gold: usize,
    /// User choice and confirmation probes per conversation.
    pub max_choices: usize,
    /// Lesson probes (an error followed by its fix) per conversation.
    pub max_lessons: usize,
    /// Decision probes (the agent's stated decisions and their reasons) per conversation.
    pub max_decisions: usize,
    /// Plan probes per conversation (the plans the agent stated as a list). Every to-do list
    /// the agent wrote is asked as it stood, one probe per write, whatever this bound.
    pub max_todos: usize,
    /// Probes of the answers the user chose to the agent's questions and of the plans they
    /// approved or turned down.
    pub max_asked: usize,
    /// Probes of what the agent committed, pushed and opened as a pull request; and, as many
    /// again, of the issues it read, started and closed in an issue tracker (`bd`, `gh issue`).
    pub max_git: usize,
    /// Probes of the changes the agent made through a domain tool (a call whose name opens
    /// with a verb of change: `update_reservation_flights`, `cancel_pending_order`).
    pub max_actions: usize,
    /// Probes of the constraints and preferences the user stated.
    pub max_constraints: usize,
    /// Facts per probe.
    pub max_facts: usize,
}

impl DeriveParams {
    /// The most probes of `kind` a conversation gets, over all families: recall probes are
    /// errors, identifiers, lessons and the state of the tests and commands; decisions are
    /// gold actions, user choices and the agent's own decisions.
    pub fn max_of(&self, kind: ProbeKind) -> usize {
        match kind {
            // The issues read in a tracker are tasks, their rules constraints, the files they
            // name the next step, and the issues started and closed work state.
            ProbeKind::Task => self.max_task + self.max_git,
            ProbeKind::Recall => self.max_recall + self.max_lessons + STATE_PROBES,
            ProbeKind::Artifact => self.max_artifact,
            ProbeKind::Decision => self.max_gold + self.max_choices + self.max_decisions,
            ProbeKind::Continuation => self.max_continuation,
            ProbeKind::Constraint => self.max_constraints + self.max_git,
            ProbeKind::Choice => self.max_asked,
            ProbeKind::WorkState => self.max_todos + 3 * self.max_git + self.max_actions,
            ProbeKind::NextStep => 2 * self.max_todos + self.max_git,
            // Lessons are recall probes (an error and its fix).
            ProbeKind::Lesson => 0,
        }
    }
}

impl Default for DeriveParams {
    fn default() -> DeriveParams {
        DeriveParams {
            max_task: 4,
            max_artifact: 6,
            max_recall: 4,
            max_continuation: 3,
            max_gold: 8,
            max_choices: 2,
            max_lessons: 2,
            max_decisions: 2,
            max_todos: 3,
            max_asked: 3,
            max_git: 4,
            max_actions: 4,
            max_constraints: 3,
            max_facts: 4,
        }
    }
}

/// What the derivation left out, and why: facts (or single aliases) that cannot separate a
/// context that kept them from one that did not, and probes left with no fact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Facts that were a stop word, or a token under 3 characters that is not a number or id.
    pub common_word: usize,
    /// Facts found in the system prompt (always in the context).
    pub in_system_prompt: usize,
    /// Facts that were a lone plain word, a code fragment or a short token
    /// ([`facts::FactType::allowed`]).
    pub not_a_fact: usize,
    /// Probes left with no fact.
    pub probes: usize,
}

impl Dropped {
    /// Add `other`'s counts to these.
    pub fn merge(&mut self, other: &Dropped) {
        self.common_word += other.common_word;
        self.in_system_prompt += other.in_system_prompt;
        self.not_a_fact += other.not_a_fact;
        self.probes += other.probes;
    }
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dropped {} probes with no discriminating fact; facts dropped: {} common words, {} in the system prompt, {} plain words or code fragments",
            self.probes, self.common_word, self.in_system_prompt, self.not_a_fact
        )
    }
}

/// The probes derived from `conv` (see the module docs).
pub fn derive(conv: &Conversation, params: &DeriveParams) -> Vec<Probe> {
    derive_counted(conv, params).0
}

/// [`derive()`], with what it dropped and why.
pub fn derive_counted(conv: &Conversation, params: &DeriveParams) -> (Vec<Probe>, Dropped) {
    let d = Deriver::new(conv, params);
    let mut out = Vec::new();
    let families: [(&str, Vec<Candidate>, usize); 19] = [
        // How the work is handed in, before the task takes the same tokens as identifiers.
        ("handoff", d.handoff(), 1),
        ("task", d.task(), params.max_task),
        ("constraint", d.constraints(), params.max_constraints),
        ("asked", d.asked(), params.max_asked),
        ("git", d.git(), params.max_git),
        // Four kinds: the issue read, its rules, the files it names, and its start and close.
        ("tracker", d.tracker(), 3 * params.max_git),
        ("todo", d.todos(), params.max_todos),
        ("plan", d.plans(), params.max_todos),
        ("gold", d.gold(), params.max_gold),
        ("action", d.actions(), params.max_actions),
        ("choice", d.choices(), params.max_choices),
        ("continuation", d.continuation(), params.max_continuation),
        ("lesson", d.lessons(), params.max_lessons),
        ("state", d.state(), STATE_PROBES),
        ("tests", d.test_runs(), params.max_git),
        ("artifact", d.artifacts(), params.max_artifact),
        ("decision", d.decisions(), params.max_decisions),
        ("error", d.errors(), params.max_recall.div_ceil(2)),
        ("recall", d.user_identifiers(), params.max_recall),
    ];
    // Candidates come ranked. Artifacts are spread over the conversation (written and edited
    // files first, read files filling what is left); the families of what stands at a point of
    // the work (requests, constraints, choices, git, lessons, decisions) are spread over the
    // conversation too, so that a checkpoint anywhere has the state before it; the to-do
    // lists are asked each as it stood, until the next ([`WINDOWED_FAMILY`]); the others are
    // taken in rank order. A family keeps at most its bound, and every kind at most its own
    // ([`DeriveParams::max_of`]), both times the conversation's scale ([`scale`]). One fact is
    // tested by one probe at a checkpoint: an alias an earlier probe tests is left out of later
    // ones, a fact left with no alias is dropped, and so is a probe left with no fact.
    let scale = scale(conv);
    let mut room: BTreeMap<ProbeKind, usize> = ProbeKind::ALL.iter().map(|&k| (k, params.max_of(k) * scale)).collect();
    let mut used: HashSet<String> = HashSet::new();
    for (family, candidates, bound) in families {
        let bound = bound * scale;
        let spread_family = SPREAD_FAMILIES.contains(&family);
        let mut kept: Vec<Candidate> = Vec::new();
        // Aliases of the family's candidates so far (spread families): a later candidate
        // keeps only what is new.
        let mut family_used: HashSet<String> = HashSet::new();
        for c in candidates {
            let first: Option<Vec<String>> = c.facts.first().filter(|_| c.needs_first).cloned();
            let Some(mut c) = d.checked(c) else { continue };
            for f in &mut c.facts {
                f.retain(|a| !used.contains(&normalize(a)) && !family_used.contains(&normalize(a)));
            }
            let (facts, sources): (Vec<Vec<String>>, Vec<usize>) =
                c.facts.into_iter().zip(c.fact_sources).filter(|(f, _)| !f.is_empty()).unzip();
            (c.facts, c.fact_sources) = (facts, sources);
            if c.facts.is_empty() {
                continue;
            }
            if first.is_some_and(|first| !c.facts.iter().flatten().any(|a| first.contains(a))) {
                d.dropped.borrow_mut().probes += 1;
                continue;
            }
            if family == WINDOWED_FAMILY {
                // Every one is kept (see WINDOWED_FAMILY); later families leave its facts.
            } else if spread_family {
                family_used.extend(c.facts.iter().flatten().map(|a| normalize(a)));
            } else if family != "artifact" {
                // Spread artifacts are chosen below; their facts are reserved only when chosen.
                let left = room.get(&c.kind).copied().unwrap_or(0);
                if kept.len() >= bound || left == 0 {
                    continue;
                }
                if let Some(left) = room.get_mut(&c.kind) {
                    *left -= 1;
                }
                used.extend(c.facts.iter().flatten().map(|a| normalize(a)));
            } else if kept.iter().any(|k| {
                k.facts.iter().flatten().any(|a| c.facts.iter().flatten().any(|b| normalize(a) == normalize(b)))
            }) {
                continue;
            }
            kept.push(c);
        }
        let selected: Vec<Candidate> = if family == WINDOWED_FAMILY {
            used.extend(kept.iter().flat_map(|c| c.facts.iter().flatten()).map(|a| normalize(a)));
            kept
        } else if family == "artifact" {
            let bound = bound.min(room.get(&ProbeKind::Artifact).copied().unwrap_or(0));
            let (written, read): (Vec<Candidate>, Vec<Candidate>) = kept.into_iter().partition(|c| !c.secondary);
            let mut s = spread(written, bound);
            let left = bound - s.len();
            s.extend(spread(read, left));
            s.sort_by_key(|c| c.source);
            if let Some(left) = room.get_mut(&ProbeKind::Artifact) {
                *left -= s.len();
            }
            used.extend(s.iter().flat_map(|c| c.facts.iter().flatten()).map(|a| normalize(a)));
            s
        } else if spread_family {
            // In the order of the conversation, at most the bound, spread evenly (the first and
            // the last kept); then each kind within its room.
            // Secondary candidates (a weaker marker) fill what the others leave.
            kept.sort_by_key(|c| c.source);
            let (first, second): (Vec<Candidate>, Vec<Candidate>) = kept.into_iter().partition(|c| !c.secondary);
            let mut s = spread(first, bound);
            let left = bound - s.len();
            s.extend(spread(second, left));
            s.sort_by_key(|c| c.source);
            s.retain(|c| match room.get_mut(&c.kind) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    true
                }
                _ => false,
            });
            used.extend(s.iter().flat_map(|c| c.facts.iter().flatten()).map(|a| normalize(a)));
            s
        } else {
            kept
        };
        for (n, c) in selected.into_iter().enumerate() {
            // Facts that come from other messages than the source (a lesson's fix, a pull
            // request's title, the symbols of earlier changes): every message that holds one,
            // each fact's own (the checks kept every alias of a fact to its message).
            let mut sources: Vec<usize> = c.fact_sources.clone();
            sources.push(c.source);
            sources.sort_unstable();
            sources.dedup();
            out.push(Probe {
                id: format!("{DERIVED_PREFIX}{family}-{}", n + 1),
                kind: c.kind,
                question: c.question,
                answer: c.answer,
                facts: c.facts,
                source_message: c.source,
                source_messages: if sources.len() > 1 { sources } else { Vec::new() },
                asked_at: None,
                until: c.until,
                tier: Some(c.tier),
                ..Default::default()
            });
        }
    }
    let dropped = d.dropped.into_inner();
    (out, dropped)
}

/// The families spread over the conversation rather than taken in rank order: what stands at
/// a point of the work.
const SPREAD_FAMILIES: [&str; 11] =
    ["task", "constraint", "asked", "git", "tracker", "tests", "plan", "action", "choice", "lesson", "decision"];

/// The family asked as it stood at each point rather than once: every to-do list the agent
/// wrote yields its probe, each asked until the next write, so none is bounded, none counts
/// against its kind's room, and consecutive probes may ask the same item (they never stand at
/// one checkpoint together).
const WINDOWED_FAMILY: &str = "todo";

/// Messages per step of a conversation's scale.
pub const SCALE_MESSAGES: usize = 40;
/// The largest scale.
pub const MAX_SCALE: usize = 6;

/// How many times its bounds a conversation's families and kinds keep: one per
/// [`SCALE_MESSAGES`] messages begun, at most [`MAX_SCALE`]. A longer recording holds more
/// state, and its checkpoints are spread over it.
pub fn scale(conv: &Conversation) -> usize {
    conv.messages.len().div_ceil(SCALE_MESSAGES).clamp(1, MAX_SCALE)
}

/// Replace the derived probes of `conv` (ids starting with [`DERIVED_PREFIX`]) with fresh
/// ones, keeping every other probe; the number of probes added.
pub fn replace_derived(conv: &mut Conversation, params: &DeriveParams) -> usize {
    replace_derived_counted(conv, params).0
}

/// [`replace_derived`], with what the derivation dropped and why.
pub fn replace_derived_counted(conv: &mut Conversation, params: &DeriveParams) -> (usize, Dropped) {
    conv.probes.retain(|p| !p.id.starts_with(DERIVED_PREFIX));
    let (derived, dropped) = derive_counted(conv, params);
    let n = derived.len();
    conv.probes.extend(derived);
    (n, dropped)
}

/// True when a conversation makes at least one tool call.
pub fn uses_tools(conv: &Conversation) -> bool {
    conv.messages.iter().any(|m| !m.tool_calls.is_empty())
}

/// A probe before its aliases are checked.
#[derive(Debug, Clone)]
struct Candidate {
    kind: ProbeKind,
    question: String,
    answer: String,
    facts: Vec<Vec<String>>,
    source: usize,
    /// Taken only when the family's bound leaves room (files only read).
    secondary: bool,
    /// Per fact, the message that holds it, when the facts come from several messages (a
    /// lesson's cause and fix); empty: every fact is in `source`.
    fact_sources: Vec<usize>,
    tier: Tier,
    /// Asked only until this message is in context ([`Probe::until`]): a to-do list's probe
    /// until the list is written again.
    until: Option<usize>,
    /// The question asks for the first fact (a test run's outcome): a candidate that lost it
    /// to the checks is dropped, not asked with what is left.
    needs_first: bool,
}

/// A candidate's defaults, for a family's literal to complete (`..Candidate::default()`): not
/// secondary, every fact in `source`. A literal always sets the kind, the question, the answer,
/// the facts, the source and the tier; the values here for those are never kept.
impl Default for Candidate {
    fn default() -> Candidate {
        Candidate {
            kind: ProbeKind::default(),
            question: String::new(),
            answer: String::new(),
            facts: Vec::new(),
            source: 0,
            secondary: false,
            fact_sources: Vec::new(),
            tier: Tier::Detail,
            until: None,
            needs_first: false,
        }
    }
}

/// Keep at most `bound` candidates, spread evenly over the list (which is in the order the
/// family ranks them: the first and last are always kept).
fn spread<T>(items: Vec<T>, bound: usize) -> Vec<T> {
    let n = items.len();
    if n <= bound {
        return items;
    }
    if bound == 0 {
        return Vec::new();
    }
    if bound == 1 {
        return items.into_iter().take(1).collect();
    }
    let picks: HashSet<usize> = (0..bound).map(|i| (i * (n - 1) + (bound - 1) / 2) / (bound - 1)).collect();
    items.into_iter().enumerate().filter(|(i, _)| picks.contains(i)).map(|(_, x)| x).collect()
}

struct Deriver<'a> {
    conv: &'a Conversation,
    params: &'a DeriveParams,
    /// Each message rendered and normalized as the judge reads it.
    rendered: Vec<String>,
    /// Messages that may be a probe's source.
    usable: Vec<bool>,
    /// The system prompt(s), rendered and normalized.
    system: String,
    dropped: std::cell::RefCell<Dropped>,
}

impl<'a> Deriver<'a> {
    fn new(conv: &'a Conversation, params: &'a DeriveParams) -> Deriver<'a> {
        let rendered = conv.messages.iter().map(|m| normalize(&render_message(m))).collect();
        let usable = conv
            .messages
            .iter()
            .map(|m| !m.meta_flag(compaction::message::COMPACT_SUMMARY) && !m.meta_flag("synthetic"))
            .collect();
        let system = conv
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| normalize(&render_message(m)))
            .collect::<Vec<_>>()
            .join("\n");
        Deriver { conv, params, rendered, usable, system, dropped: Default::default() }
    }

    /// Why `alias` cannot be a fact, if it cannot: a common word, in the system prompt, or
    /// a lone plain word, a code fragment or a short token ([`facts::allowed`]). A fact
    /// repeated in later messages is kept: it is still available to the agent, and at-risk
    /// scoring asks whether its sources left the context.
    fn weak(&self, alias: &str) -> Option<Weak> {
        let a = normalize(alias);
        if is_common_word(alias) {
            return Some(Weak::Common);
        }
        if occurs(&self.system, &a) {
            return Some(Weak::System);
        }
        if !facts::allowed(alias) {
            return Some(Weak::NotAFact);
        }
        None
    }

    fn msg(&self, i: usize) -> &Message {
        &self.conv.messages[i]
    }

    /// True when `alias` occurs in message `i` as the judge reads it.
    fn occurs_in(&self, i: usize, alias: &str) -> bool {
        let a = normalize(alias);
        !a.is_empty() && crate::text::matches(&self.rendered[i], &a)
    }

    /// The candidate with only the aliases that occur in its source; `None` when no fact is
    /// left or the source may not be used.
    fn checked(&self, mut c: Candidate) -> Option<Candidate> {
        if !self.usable.get(c.source).copied().unwrap_or(false) {
            return None;
        }
        let mut seen = HashSet::new();
        let mut dropped = self.dropped.borrow_mut();
        let sources = c.fact_sources.clone();
        let kept: Vec<(Vec<String>, usize)> = c
            .facts
            .into_iter()
            .enumerate()
            .map(|(k, f)| {
                let source = sources.get(k).copied().unwrap_or(c.source);
                let mut aliases: Vec<String> = Vec::new();
                let mut why = None;
                for a in f {
                    let a = a.trim().to_string();
                    if a.is_empty() || aliases.contains(&a) || !self.occurs_in(source, &a) {
                        continue;
                    }
                    // A weak alias is left out (the judge would credit it anywhere); the fact
                    // stays with its other aliases.
                    match self.weak(&a) {
                        Some(w) => why = why.or(Some(w)),
                        None => aliases.push(a),
                    }
                }
                if aliases.is_empty() {
                    match why {
                        Some(Weak::Common) => dropped.common_word += 1,
                        Some(Weak::System) => dropped.in_system_prompt += 1,
                        Some(Weak::NotAFact) => dropped.not_a_fact += 1,
                        None => {}
                    }
                }
                (aliases, source)
            })
            .filter(|(f, _)| !f.is_empty() && seen.insert(normalize(&f[0])))
            .take(self.params.max_facts)
            .collect();
        if kept.is_empty() {
            dropped.probes += 1;
            return None;
        }
        // Each fact keeps the message that holds it.
        (c.facts, c.fact_sources) = kept.into_iter().unzip();
        Some(c)
    }

    /// The model call that message `i` is (1 for the first assistant message), or that
    /// follows it.
    fn call_number(&self, i: usize) -> usize {
        self.conv.messages[..=i.min(self.conv.messages.len().saturating_sub(1))]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count()
            .max(1)
    }

    /// Real user requests, in order.
    fn user_requests(&self) -> Vec<usize> {
        (0..self.conv.messages.len()).filter(|&i| self.usable[i] && is_real_user(self.msg(i))).collect()
    }

    /// The last request (when no task probe took it), the pending items of the last todo
    /// list, and the next step the agent last stated.
    fn continuation(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        let requests = self.user_requests();
        if let Some(&i) = requests.get(1..).and_then(<[usize]>::last) {
            let text = request_text(&self.msg(i).content);
            let facts = work::request_facts(&text, self.params.max_facts);
            if !facts.is_empty() {
                out.push(Candidate {
                    kind: ProbeKind::Continuation,
                    question: "What did the user ask for most recently?".into(),
                    answer: clip(&text, 400),
                    facts,
                    source: i,
                    tier: Tier::Critical,
                    ..Candidate::default()
                });
            }
        }
        out.extend(self.pending_todos());
        out.extend(self.next_step());
        out
    }

    /// The pending items of the last todo list the agent wrote.
    fn pending_todos(&self) -> Option<Candidate> {
        let (i, args) = self.conv.messages.iter().enumerate().rev().find_map(|(i, m)| {
            m.tool_calls.iter().rev().find_map(|c| {
                let todo = c.name.to_ascii_lowercase().contains("todo");
                let args: Value = serde_json::from_str(&c.arguments).ok()?;
                (todo && args.get("todos").is_some_and(Value::is_array)).then_some((i, args))
            })
        })?;
        let items = args.get("todos").and_then(Value::as_array)?;
        let pending: Vec<&str> = items
            .iter()
            .filter(|t| t.get("status").and_then(Value::as_str) != Some("completed"))
            .filter_map(|t| t.get("content").and_then(Value::as_str))
            .collect();
        if pending.is_empty() {
            return None;
        }
        // Each item as written (a phrase), with its identifiers as further aliases.
        let facts = pending
            .iter()
            .map(|item| {
                let mut aliases = vec![item.trim().to_string()];
                aliases.extend(work::request_facts(item, 2).into_iter().flatten());
                aliases
            })
            .collect();
        Some(Candidate {
            kind: ProbeKind::Continuation,
            question: "Which items of the agent's todo list were still pending at its last update?".into(),
            answer: pending.join("; "),
            facts,
            source: i,
            tier: Tier::Critical,
            ..Candidate::default()
        })
    }

    /// Where a coding agent stands: the last failing test and its error, the last command
    /// that failed and why (each from the tool output that reported it). Critical while no
    /// later run of the same program succeeded; a failure resolved since is a detail.
    fn state(&self) -> Vec<Candidate> {
        let calls = self.calls();
        let mut test: Option<Candidate> = None;
        let mut command: Option<Candidate> = None;
        for (i, m) in self.conv.messages.iter().enumerate().rev() {
            if !self.usable[i] || m.role != Role::Tool || (test.is_some() && command.is_some()) {
                continue;
            }
            let call = m.tool_call_id.as_deref().and_then(|id| calls.get(id));
            let Some(cmd) = call.and_then(|(_, args)| command_of(args)) else { continue };
            if call.is_some_and(|(name, args)| reads_files(name, args)) {
                continue;
            }
            if is_rejection(&m.content) {
                continue;
            }
            let error = error_line(&m.content, m.is_error, false);
            let first = clip(cmd.lines().next().unwrap_or_default(), 60);
            let tier = if self.succeeded_later(i, &cmd) { Tier::Detail } else { Tier::Critical };
            if test.is_none() {
                if let Some(name) = failing_test(&m.content) {
                    let mut facts = vec![vec![name.clone(), basename(&name.replace("::", "/")).to_string()]];
                    if let Some(e) = &error {
                        facts.extend(work::cause_facts(e));
                    }
                    test = Some(Candidate {
                        kind: ProbeKind::Recall,
                        question: format!("Which test failed last (run by `{first}`), and with what error?"),
                        answer: match &error {
                            Some(e) => format!("{name}: {e}"),
                            None => name,
                        },
                        facts,
                        source: i,
                        tier,
                        ..Candidate::default()
                    });
                }
            }
            if command.is_none() {
                if let Some(e) = error.filter(|_| m.is_error || m.content.contains("Exit code")) {
                    command = Some(Candidate {
                        kind: ProbeKind::Recall,
                        question: format!("Why did the last command that failed, `{first}`, fail?"),
                        facts: work::cause_facts(&e),
                        answer: e,
                        source: i,
                        tier,
                        ..Candidate::default()
                    });
                }
            }
        }
        test.into_iter().chain(command).collect()
    }

    /// Every tool call by id: (name, arguments).
    fn calls(&self) -> HashMap<&str, (&str, &str)> {
        self.conv
            .messages
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| (c.id.as_str(), (c.name.as_str(), c.arguments.as_str()))))
            .collect()
    }

    fn gold(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        let actions = self.conv.meta.get("gold_actions").and_then(Value::as_array).cloned().unwrap_or_default();
        let total = actions.len();
        for (n, action) in actions.iter().enumerate() {
            let Some(name) = action.get("name").and_then(Value::as_str) else { continue };
            let mut values = Vec::new();
            if let Some(args) = action.get("arguments") {
                scalar_values(args, &mut values);
            }
            values.retain(|v| v.chars().count() >= 2);
            // Identifier-like values first: they are what must survive.
            values.sort_by_key(|v| std::cmp::Reverse(term_score(v, false)));
            let hits = |i: usize| values.iter().filter(|v| self.occurs_in(i, v)).count();
            let calls: Vec<usize> = (0..self.conv.messages.len())
                .filter(|&i| self.usable[i] && self.msg(i).tool_calls.iter().any(|c| c.name == name))
                .collect();
            // Only a call the agent made with the action's tool: a user turn or tool result
            // that happens to hold its values is not the decision.
            let Some(source) = best(&calls, hits) else { continue };
            // An action whose arguments never occur tests nothing the recording holds.
            if !values.is_empty() && hits(source) == 0 {
                continue;
            }
            // The question names the tool: its arguments are the facts.
            let facts: Vec<Vec<String>> = values.iter().map(|v| vec![v.clone()]).collect();
            if facts.is_empty() {
                continue;
            }
            let args = action.get("arguments").map(Value::to_string).unwrap_or_default();
            // A lookup (`get_`, `search_`, `find_`, ...) is how the agent found its way: useful;
            // an action that changes something is what the user chose: critical.
            let lookup = ["get_", "search_", "find_", "list_", "calculate", "think", "check_"]
                .iter()
                .any(|p| name.to_ascii_lowercase().starts_with(p));
            out.push(Candidate {
                kind: ProbeKind::Decision,
                question: format!(
                    "With which arguments did the agent call {name} at call {} (gold action {} of {total})?",
                    self.call_number(source),
                    n + 1
                ),
                answer: format!("{name}({})", clip(&args, 300)),
                facts,
                source,
                tier: if lookup { Tier::Useful } else { Tier::Critical },
                ..Candidate::default()
            });
        }
        let Some(submission) = self.conv.meta.get("submission").and_then(Value::as_str) else { return out };
        let files = patched_files(submission);
        if files.is_empty() {
            let answer = submission.trim();
            let source = (0..self.conv.messages.len()).rev().find(|&i| self.usable[i] && self.occurs_in(i, answer));
            if let (Some(source), true) = (source, answer.chars().count() <= 200) {
                out.push(Candidate {
                    kind: ProbeKind::Recall,
                    question: "What answer did the agent submit at the end?".into(),
                    answer: answer.to_string(),
                    facts: vec![vec![answer.to_string()]],
                    source,
                    tier: Tier::Critical,
                    ..Candidate::default()
                });
            }
            return out;
        }
        let total = files.len();
        for (n, path) in files.iter().enumerate() {
            let base = basename(path);
            // The last call naming the path, else the last message naming it, else the same
            // for the file name alone.
            let in_call = |i: usize| !self.msg(i).tool_calls.is_empty();
            let last = |alias: &str, call: bool| {
                (0..self.conv.messages.len())
                    .rev()
                    .find(|&i| self.usable[i] && (!call || in_call(i)) && self.occurs_in(i, alias))
            };
            let source = last(path, true)
                .or_else(|| last(path, false))
                .or_else(|| last(base, true))
                .or_else(|| last(base, false));
            let Some(source) = source else { continue };
            let mut facts = vec![vec![path.clone(), base.to_string()]];
            let mut fact_sources = vec![source];
            // The functions its hunks change, as the diff names them (`@@ ... @@ def parse(`),
            // each from the last message up to the file's that names it.
            for symbol in hunk_symbols(submission, path).into_iter().take(2) {
                let Some(at) = (0..=source).rev().find(|&i| self.usable[i] && self.occurs_in(i, &symbol)) else {
                    continue;
                };
                facts.push(vec![symbol]);
                fact_sources.push(at);
            }
            let touched = if facts.len() > 1 { ", and which functions in it" } else { "" };
            out.push(Candidate {
                kind: ProbeKind::Artifact,
                question: format!(
                    "Which file does the agent's final patch change (file {} of {total}){touched}?",
                    n + 1
                ),
                answer: path.clone(),
                facts,
                source,
                fact_sources,
                tier: Tier::Useful,
                ..Candidate::default()
            });
        }
        out
    }

    fn artifacts(&self) -> Vec<Candidate> {
        // Per file: the strongest verb, the last call with it, first appearance.
        let mut files: Vec<Touch> = Vec::new();
        // Per file (same index as `files`): the symbols its changes touched, each with the
        // message of the change, in order.
        let mut symbols: Vec<Vec<(String, usize)>> = Vec::new();
        // Calls whose result says the user rejected them: an edit the user rejected is not a
        // change.
        let rejected: HashSet<&str> = self
            .conv
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool && is_rejection(&m.content))
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        for (i, m) in self.conv.messages.iter().enumerate() {
            if !self.usable[i] {
                continue;
            }
            for call in m.tool_calls.iter().filter(|c| !rejected.contains(c.id.as_str())) {
                for t in touches(&call.name, &call.arguments) {
                    let t = Touch { message: i, ..t };
                    let k = match files.iter().position(|f| same_file(&f.path, &t.path)) {
                        Some(k) => k,
                        None => {
                            files.push(Touch { first: i, ..t.clone() });
                            symbols.push(Vec::new());
                            files.len() - 1
                        }
                    };
                    if let Some(symbol) = t.symbol.clone() {
                        symbols[k].retain(|(s, _)| *s != symbol);
                        symbols[k].push((symbol, i));
                    }
                    let f = &mut files[k];
                    // A change replaces any earlier touch; a read only replaces a read.
                    if t.verb != Verb::Read || f.verb == Verb::Read {
                        let first = f.first;
                        *f = Touch { first, ..t };
                    }
                }
            }
        }
        // Written and edited files first, then files only read; each group in order.
        let mut ranked: Vec<(&Touch, &Vec<(String, usize)>)> = files.iter().zip(&symbols).collect();
        ranked.sort_by_key(|(f, _)| (f.verb == Verb::Read, f.first));
        ranked
            .into_iter()
            .map(|(f, touched)| {
                let base = basename(&f.path);
                let mut question = format!(
                    "Which file did the agent {} with the {} tool at call {}",
                    f.verb.as_str(),
                    f.tool,
                    self.call_number(f.message)
                );
                if let Some(h) = f.hint.as_deref().filter(|h| !h.contains(base) && !h.contains(&f.path)) {
                    question.push_str(&format!(" ({h})"));
                }
                question.push('?');
                let mut aliases = vec![f.path.clone()];
                if base != f.path && (base.contains('.') || base.chars().count() >= 6) {
                    aliases.push(base.to_string());
                }
                // What changed in it: the symbols its last changes define or touch (the last
                // two, each sourced at its change).
                let mut facts = vec![aliases];
                let mut fact_sources = vec![f.message];
                let last: Vec<&(String, usize)> = touched.iter().rev().take(2).collect();
                if !last.is_empty() && f.verb != Verb::Read {
                    question = question.replacen('?', " What did the change touch?", 1);
                    for (symbol, at) in last.into_iter().rev() {
                        facts.push(vec![symbol.clone()]);
                        fact_sources.push(*at);
                    }
                }
                Candidate {
                    kind: ProbeKind::Artifact,
                    question,
                    answer: match &f.symbol {
                        Some(symbol) => format!("{} ({symbol})", f.path),
                        None => f.path.clone(),
                    },
                    facts,
                    source: f.message,
                    secondary: f.verb == Verb::Read,
                    fact_sources,
                    tier: if f.verb == Verb::Read { Tier::Detail } else { Tier::Useful },
                    ..Candidate::default()
                }
            })
            .collect()
    }

    /// One candidate per distinct error line, in order.
    fn errors(&self) -> Vec<Candidate> {
        let calls: HashMap<&str, (&str, &str)> = self
            .conv
            .messages
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| (c.id.as_str(), (c.name.as_str(), c.arguments.as_str()))))
            .collect();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            let reported = m.role == Role::Tool || (m.role == Role::User && m.meta_flag("injected"));
            if !self.usable[i] || !reported {
                continue;
            }
            let call = m.tool_call_id.as_deref().and_then(|id| calls.get(id));
            let reads = call.is_some_and(|(name, args)| reads_files(name, args));
            if is_rejection(&m.content) {
                continue;
            }
            let Some(line) = error_line(&m.content, m.is_error, reads) else { continue };
            if !seen.insert(normalize(&line)) {
                continue;
            }
            let facts = work::cause_facts(&line);
            let during = call
                .map(|(name, args)| match command_of(args) {
                    Some(cmd) => format!(" when it ran `{}`", clip(cmd.lines().next().unwrap_or_default(), 60)),
                    None => format!(" in a {name} call"),
                })
                .unwrap_or_default();
            out.push(Candidate {
                kind: ProbeKind::Recall,
                question: format!("What error did the agent get{during}?"),
                answer: line,
                facts,
                source: i,
                tier: Tier::Detail,
                ..Candidate::default()
            });
        }
        out
    }

    /// Identifiers the user gave, those mentioned in the fewest messages first.
    fn user_identifiers(&self) -> Vec<Candidate> {
        let mut found: Vec<(usize, usize, String, String)> = Vec::new();
        let mut seen = HashSet::new();
        for (turn, i) in self.user_requests().into_iter().enumerate() {
            let text = request_text(&self.msg(i).content);
            for (pos, token, before) in tokens(&text) {
                // Only identifiers: a version number, a bare folder or a marker is incidental.
                if !is_id(&token) || !seen.insert(normalize(&token)) {
                    continue;
                }
                let mentions = self.rendered.iter().filter(|r| occurs(r, &normalize(&token))).count();
                let what = if token.contains("://") {
                    "URL"
                } else if token.contains('@') {
                    "address"
                } else if token.contains('/') || is_path(&token) {
                    "path"
                } else if token.trim_start_matches('#').chars().all(|c| c.is_ascii_digit()) {
                    "number"
                } else {
                    "identifier"
                };
                let hint = if before.is_empty() { String::new() } else { format!(", right after \"{before}\"") };
                let question = format!("Which {what} did the user give in their message {}{hint}?", turn + 1);
                found.push((mentions, i * 1_000_000 + pos, token, question));
            }
        }
        found.sort_by_key(|f| (f.0, f.1));
        found
            .into_iter()
            .map(|(_, at, token, question)| Candidate {
                kind: ProbeKind::Recall,
                question,
                answer: token.clone(),
                facts: vec![vec![token]],
                source: at / 1_000_000,
                tier: Tier::Detail,
                ..Candidate::default()
            })
            .collect()
    }
}

/// The candidate among `messages` with the most hits (the last of equals); `None` when empty.
fn best(messages: &[usize], hits: impl Fn(usize) -> usize) -> Option<usize> {
    messages.iter().copied().max_by_key(|&i| (hits(i), i))
}

/// A user message typed by a person.
fn is_real_user(m: &Message) -> bool {
    m.role == Role::User
        && !m.meta_flag("injected")
        && !m.meta_flag("queued")
        && !structure::is_command_text(&m.content)
        && !m.meta_flag(compaction::message::COMPACT_SUMMARY)
        && !m.meta_flag("demo")
        && !is_harness_text(&m.content)
        && !request_text(&m.content).trim().is_empty()
}

/// At most `max` characters of `text`, cut at a character boundary, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    let t = text.trim();
    match t.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &t[..at]),
        None => t.to_string(),
    }
}

/// The first words of `text` up to `max` characters (whole words only).
fn clip_words(text: &str, max: usize) -> String {
    let mut out = String::new();
    for w in text.split_whitespace() {
        if !out.is_empty() && out.chars().count() + 1 + w.chars().count() > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Why an alias cannot discriminate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weak {
    Common,
    System,
    NotAFact,
}

/// True when `token` is an identifier a question may ask for by itself: a reservation, user
/// or order number (letters with digits, `_`-joined names with digits, `#` numbers, numbers of
/// five digits or more), a hash of 7+ hex characters, a path (a file name with an extension,
/// or two segments), a URL, or an error code (`E0425`, `ERR_X`, `HTTP 404` as `404` is not).
/// Versions (`1.2.3`), bare folders (`lib/`) and punctuation (`###`) are not.
pub fn is_id(token: &str) -> bool {
    let t = token.trim();
    let n = t.chars().count();
    if !(3..=200).contains(&n) || t.chars().any(char::is_whitespace) {
        return false;
    }
    if t.contains("://") {
        return t.starts_with("http") && n > 10;
    }
    let letters = t.chars().filter(|c| c.is_alphabetic()).count();
    let digits = t.chars().filter(|c| c.is_ascii_digit()).count();
    // A version: digits and dots, or `v` then digits and dots.
    let version = t.trim_start_matches(['v', 'V']).chars().all(|c| c.is_ascii_digit() || c == '.') && t.contains('.');
    if version {
        return false;
    }
    if t.contains('/') {
        let segments = t.trim_matches('/').split('/').filter(|s| !s.is_empty()).count();
        return letters > 1 && (segments >= 2 || is_path(t)) && !slashed_words(t);
    }
    if is_path(t) {
        return true;
    }
    if let Some((user, domain)) = t.split_once('@') {
        return !user.is_empty() && domain.contains('.') && letters > 2;
    }
    if let Some(rest) = t.strip_prefix('#') {
        return digits >= 3 && rest.chars().all(|c| c.is_ascii_alphanumeric());
    }
    let hex = n >= 7 && t.chars().all(|c| c.is_ascii_hexdigit()) && digits > 0 && letters > 0;
    if hex {
        return true;
    }
    if t.chars().all(|c| c.is_ascii_digit()) {
        return n >= 5;
    }
    let plain = t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        return false;
    }
    // Error codes (`E0425`, `ERR_CONNECTION_REFUSED`, `ENOENT` is a word) and record ids
    // (`Q69X3R`, `mia_li_3668`, `W2378156`).
    let upper_code = t.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') && digits > 0;
    (upper_code && letters >= 1 && n >= 4)
        || (letters > 0 && digits > 0 && n >= 5)
        || (t.contains("_") && digits > 0)
        || (t.starts_with("ERR_") && letters > 4)
}

/// How much a token looks like a fact worth keeping: 3 for identifiers (digits with letters,
/// `_`, `/`, `file.ext`, `#id`, `--flag`, long CamelCase) and numbers of three digits or more; 2 for a
/// capitalized word that does not start a sentence; 1 for a long uncommon word; 0 otherwise.
fn term_score(token: &str, sentence_start: bool) -> u8 {
    let t = token;
    let n = t.chars().count();
    if !(2..=80).contains(&n) || t.contains("://") {
        return 0;
    }
    let letters = t.chars().filter(|c| c.is_alphabetic()).count();
    let digits = t.chars().filter(|c| c.is_ascii_digit()).count();
    let inner = |c: char| t.trim_matches(c).contains(c);
    let camel = t.chars().skip(1).any(|c| c.is_uppercase()) && t.chars().any(|c| c.is_lowercase());
    // `file.ext` or `a.b.c`, not an abbreviation like `e.g`.
    let dotted = inner('.') && !t.contains("..") && t.split('.').filter(|p| p.chars().count() >= 2).count() >= 2;
    let wordy = t.chars().all(|c| c.is_alphanumeric() || "_-./#:@".contains(c));
    if !wordy {
        return 0;
    }
    if (letters > 0 && digits > 0)
        || (t.contains('_') && letters > 1)
        || (t.contains('/') && letters > 1 && !slashed_words(t))
        || (dotted && letters > 1)
        || (t.starts_with('#') && n > 2)
        || (t.starts_with("--") && letters >= 3)
        || (camel && n >= 8)
        || digits >= 3
    {
        return 3;
    }
    let lower = t.to_lowercase();
    if letters == n && STOPWORDS.contains(&lower.as_str()) {
        return 0;
    }
    let capital = t.chars().next().is_some_and(char::is_uppercase) && t.chars().skip(1).all(char::is_lowercase);
    if (capital && !sentence_start && n >= 4) || camel {
        return 2;
    }
    if letters == n && n >= 8 {
        return 1;
    }
    0
}

/// Whitespace tokens of `text` with punctuation trimmed: (position, token, up to five words
/// before it). Tokens inside XML-like tags are skipped.
pub(crate) fn tokens(text: &str) -> Vec<(usize, String, String)> {
    let raw: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for (pos, r) in raw.iter().enumerate() {
        if (r.starts_with('<') && r.contains('>')) || r.starts_with("</") {
            continue;
        }
        let t = r
            .trim_start_matches(['(', '"', '\'', '`', '[', '{', '<', '*'])
            .trim_end_matches(['.', ',', ';', ':', ')', '"', '\'', '`', ']', '}', '>', '*', '!', '?']);
        // Markdown emphasis (`_Use`, `_Note_`) is not part of a word.
        let bare = t.trim_matches('_');
        let t = if !bare.contains('_') && !bare.is_empty() { bare } else { t };
        if t.is_empty() {
            continue;
        }
        let from = pos.saturating_sub(5);
        let before = raw[from..pos].join(" ");
        out.push((pos, t.to_string(), clip(&before, 60)));
    }
    out
}

/// The scalar values of a JSON value, in order (strings, and numbers written out).
fn scalar_values(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|x| scalar_values(x, out)),
        Value::Object(map) => map.values().for_each(|x| scalar_values(x, out)),
        _ => {}
    }
}

/// The files a unified diff changes (`diff --git a/X b/X`), in order.
fn patched_files(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let Some(rest) = line.trim_end_matches('\r').strip_prefix("diff --git ") else { continue };
        let Some(b) = rest.split(' ').find_map(|p| p.strip_prefix("b/")) else { continue };
        if !out.iter().any(|x| x == b) {
            out.push(b.to_string());
        }
    }
    out
}

/// The functions the hunks of `path` in a unified diff change, as each hunk header names its
/// context (`@@ -10,6 +10,8 @@ def parse_config(path):` gives `parse_config`), in order.
fn hunk_symbols(patch: &str, path: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = false;
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            current = rest.split(' ').any(|p| p.strip_prefix("b/") == Some(path));
            continue;
        }
        if !current {
            continue;
        }
        let Some(context) = line.strip_prefix("@@").and_then(|r| r.split_once("@@")).map(|(_, c)| c.trim()) else {
            continue;
        };
        if let Some(symbol) = work::defined_symbol(context).filter(|s| !out.contains(s)) {
            out.push(symbol);
        }
    }
    out
}

/// Two or three lowercase words joined by `/` (`date/time`, `add/commit/push`): prose, not a
/// path (a path opens with `/`, `.` or `~`, has more segments, or a file name).
fn slashed_words(t: &str) -> bool {
    let parts: Vec<&str> = t.split('/').collect();
    (2..=3).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && p.chars().count() <= 12 && p.chars().all(|c| c.is_ascii_lowercase()))
}

/// The line of a tool output that states its error: the last `...Error:` / `...Exception:` line
/// of a traceback, else the first line that starts like an error (`error:`, `fatal:`,
/// `FAILED`, ...) or reports one (`panicked at`, `No such file or directory`, ...), else, for
/// an output flagged as an error, its first informative line. A line of a single word (`ERROR:`)
/// is replaced by the line after it. Outputs of calls that only read files are skipped unless
/// flagged: file contents mention errors without being errors.
pub(crate) fn error_line<'a>(content: &'a str, flagged: bool, reads_files: bool) -> Option<String> {
    if reads_files && !flagged {
        return None;
    }
    // A harness tag opening a line (`<tool_use_error>Found 2 matches...`) is not its text.
    let untag = |l: &'a str| -> &'a str {
        match l.strip_prefix('<').and_then(|r| r.split_once('>')) {
            Some((tag, rest)) if !tag.contains(' ') && !rest.trim().is_empty() => rest.trim(),
            _ => l,
        }
    };
    let lines: Vec<&str> =
        content.lines().map(str::trim).map(untag).filter(|l| !l.is_empty() && l.len() <= 400).collect();
    let exception = |l: &str| {
        l.split(':').next().is_some_and(|head| {
            let head = head.trim();
            !head.contains(' ') && (head.ends_with("Error") || head.ends_with("Exception")) && head.len() > 5
        }) && l.contains(':')
    };
    const STARTS: [&str; 8] = ["error", "Error", "ERROR", "fatal:", "FAILED", "FAIL:", "panic", "Segmentation fault"];
    const REPORTS: [&str; 6] = [
        "panicked at",
        "No such file or directory",
        "command not found",
        "Permission denied",
        "undefined reference",
        "Traceback (most recent call last)",
    ];
    let marked = |l: &str| STARTS.iter().any(|m| l.starts_with(m)) || REPORTS.iter().any(|m| l.contains(m));
    let informative = |l: &str| l.split_whitespace().count() >= 2 && !l.starts_with("Exit code") && !l.starts_with('<');
    let at = lines
        .iter()
        .rposition(|l| exception(l))
        .or_else(|| lines.iter().position(|l| marked(l) && !l.starts_with("Traceback")))
        .or_else(|| {
            // A flagged output's cause line (`nothing to commit, working tree clean`), else its
            // first informative line.
            let cause = work::cause_line(content).and_then(|c| lines.iter().position(|l| *l == c));
            if flagged {
                cause.or_else(|| lines.iter().position(|l| informative(l)))
            } else {
                None
            }
        })?;
    let line = if lines[at].split_whitespace().count() < 2 { lines.get(at + 1).copied()? } else { lines[at] };
    informative(line).then(|| line.to_string())
}

/// True when a tool result says the user refused the call: not a failure of the command.
pub(crate) fn is_rejection(content: &str) -> bool {
    let head: String = content.chars().take(200).collect::<String>().to_lowercase();
    ["doesn't want to proceed", "tool use was rejected", "user rejected", "user denied"]
        .iter()
        .any(|p| head.contains(p))
}

/// The name of the last failing test a test runner's output reports: pytest's
/// `FAILED path::test - ...`, cargo's `test path ... FAILED`, Go's `--- FAIL: TestX`, unittest's
/// `FAIL: test_x (module.Class)`.
fn failing_test(output: &str) -> Option<String> {
    let mut found = None;
    for line in output.lines().map(str::trim) {
        let name = if let Some(rest) = line.strip_prefix("FAILED ") {
            rest.split([' ', '\t']).next()
        } else if let Some(rest) = line.strip_prefix("--- FAIL: ") {
            rest.split_whitespace().next()
        } else if let Some(rest) = line.strip_prefix("FAIL: ").or_else(|| line.strip_prefix("ERROR: ")) {
            rest.split_whitespace().next().filter(|n| n.starts_with("test"))
        } else if line.starts_with("test ") && line.ends_with("FAILED") {
            line.split_whitespace().nth(1)
        } else {
            None
        };
        // `FAILED (errors=1)` is unittest's tally, not a test.
        let name = name.filter(|n| !n.starts_with('(') && !n.contains('='));
        if let Some(n) = name.filter(|n| n.chars().count() >= 4 && n.chars().any(char::is_alphabetic)) {
            found = Some(n.to_string());
        }
    }
    found
}

/// True when a call only reads files (its output is file content).
pub(crate) fn reads_files(name: &str, arguments: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if ["read", "view", "open", "read_file", "cat", "grep", "glob"].contains(&lower.as_str()) {
        return true;
    }
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    if args.get("command").and_then(Value::as_str) == Some("view") {
        return true;
    }
    let Some(cmd) = command_of(arguments) else { return false };
    let first = cmd.split(['|', ';', '&']).next().unwrap_or_default().trim().to_string();
    let first = first
        .strip_prefix("cd ")
        .map(|_| cmd.split("&&").nth(1).unwrap_or_default().trim().to_string())
        .unwrap_or(first);
    let program = first.split_whitespace().next().unwrap_or_default();
    READERS.contains(&basename(program)) || program == "grep" || (program == "sed" && first.contains(" -n"))
}

/// Probes of several conversations, counted by kind.
pub fn count_by_kind<'a>(probes: impl IntoIterator<Item = &'a Probe>) -> BTreeMap<ProbeKind, usize> {
    let mut out = BTreeMap::new();
    for p in probes {
        *out.entry(p.kind).or_default() += 1;
    }
    out
}

pub mod audit;
pub mod facts;
mod files;
mod requests;
mod structure;
mod tracker;
mod work;

#[cfg(test)]
mod tests;
