//! The offline judge: a fact is retained when one of its aliases occurs in the compacted
//! context, after normalization. Deterministic, fast, no model and no keys.
//!
//! - **Rendering**: each entry renders as its content, then for each tool call its name and
//!   arguments (JSON arguments are flattened to `key value` text so escapes such as `\\` or
//!   `\u00e9` read as the model reads them; arguments that do not parse stay as written).
//! - **Normalization** (the same for the context and for the aliases): lowercase; `\` path
//!   separators become `/`; whitespace runs collapse to one space; every whitespace-separated
//!   token loses the punctuation around it (leading ``("'`[<*``, trailing ``.,;:)"'`]>*!?``), so
//!   `(src/a.rs).` and `src/a.rs` match. Tokens made only of such punctuation disappear.
//! - **Matching**: an alias matches where its normalized text occurs and, when it begins (ends)
//!   with a letter, digit or `_`, the character before (after) the occurrence is not one:
//!   `12` does not match inside `2012`, while `a.rs` matches inside `src/a.rs`. Entries are
//!   joined with a newline, which normalization never produces, so no match spans two entries.
//! - **Expansion**: each alias also matches as a summary would write it ([`expand_aliases`](dataset::text::expand_aliases)): a
//!   path as its file name, a qualified error class without its module, `gift_card` as `gift
//!   card`, a number under a hundred in words. A string judge still cannot see most paraphrases (`the ignore file` for
//!   `.gitignore`); that is what the LLM judge is for.
//! - **Weak aliases**: a common word or a bare number under a hundred is not used when the
//!   fact has a stronger alias ([`is_weak_alias`](dataset::text::is_weak_alias)): `3` of `[3 passengers, 3]` would credit the
//!   fact wherever a 3 occurs.
//! - **Short words**: an alias of one short word (letters only, up to 5 characters) matches only
//!   a whole token ([`matches`](dataset::text::matches)): `main` is not found in `src/main.rs`.
//! - **Where**: a fact found in a recorded message kept verbatim is [`FoundIn::Verbatim`], else in
//!   a summary [`FoundIn::Summary`], else in any other entry (a masked placeholder, an inserted
//!   notice or digest) [`FoundIn::Other`], else [`FoundIn::Lost`].
//! - **Score**: the share of the probe's facts retained. A probe with no facts is scored on its
//!   expected answer as a single fact.
//!
//! Each context is rendered and normalized once per checkpoint ([`RenderedContext`]), however
//! many probes and aliases are checked against it.
//!
//! ```
//! use compaction::{Context, Conversation, Message, Probe, ProbeKind};
//! use runner::judge::OfflineJudge;
//! use runlog::record::FoundIn;
//! use runner::replay::Judge;
//!
//! let ctx = Context::from_messages(vec![Message::user("Fix the crash in (SRC\\Parser.rs).")]);
//! let probe = Probe {
//!     id: "p1".into(),
//!     kind: ProbeKind::Artifact,
//!     question: "Which file?".into(),
//!     answer: "src/parser.rs".into(),
//!     facts: vec![vec!["src/parser.rs".into()], vec!["lexer.rs".into()]],
//!     source_message: 0,
//!     asked_at: None,
//!     tier: None,
//!     ..Default::default()
//! };
//! let conversation = Conversation::new("c", ctx.to_messages());
//! let score = OfflineJudge.score(&conversation, &ctx, &probe);
//! assert_eq!(score.facts, [FoundIn::Verbatim, FoundIn::Lost]);
//! assert_eq!(score.score, 0.5);
//! ```

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use compaction::{Context, Conversation, Entry, Message, Origin, Probe};

use dataset::text::render_message;

use super::text::{find, Alias, Prepared, Variant};
use super::Judge;
use runlog::record::{Evidence, FoundIn, ProbeScore};

/// The offline judge (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineJudge;

/// By fact id and `code_counts`: the index of the first variant found (in the fact's
/// aliases, flattened) and where, or `None` when none is.
type FirstMatches = HashMap<(u32, bool), Option<(usize, Range<usize>)>>;

/// Each fact's aliases by its text, and the next fact's id.
type FactIds = (HashMap<Vec<String>, Arc<Facts>>, Option<u32>);

/// A message rendered and normalized for matching. A recorded message's is shared by every
/// checkpoint and configuration of its conversation, and keeps where each of the
/// conversation's alias variants was found in it ([`Shared`]): the same probes are asked of
/// the same messages at every later checkpoint, under every configuration.
#[derive(Debug, Default)]
pub(crate) struct PreparedMessage {
    text: String,
    prepared: Prepared,
    /// By fact id ([`Facts`]) and `code_counts`: the first of the fact's variants found in
    /// the message, and where ([`PreparedMessage::first_match`]); `None` for a message prepared
    /// for one context only.
    found: Option<Mutex<FirstMatches>>,
}

impl PreparedMessage {
    fn new(message: &Message, shared: bool) -> PreparedMessage {
        let text = render_message(message);
        let prepared = Prepared::new(&text);
        PreparedMessage { text, prepared, found: shared.then(Mutex::default) }
    }

    /// The first variant of `aliases` (in order) that [`find`] finds in the message, and
    /// where; kept under `id` (a shared fact's id) when given.
    fn first_match<'v>(
        &self,
        id: Option<u32>,
        aliases: &'v [Alias],
        code_counts: bool,
    ) -> Option<(&'v Variant, Range<usize>)> {
        let mut variants = aliases.iter().flat_map(|a| &a.variants);
        let search = || {
            aliases
                .iter()
                .flat_map(|a| &a.variants)
                .enumerate()
                .find_map(|(k, v)| find(&self.prepared, v, code_counts).map(|r| (k, r)))
        };
        let (Some(id), Some(found)) = (id, &self.found) else {
            return search().and_then(|(k, r)| Some((variants.nth(k)?, r)));
        };
        let key = (id, code_counts);
        let kept = lock(found).get(&key).cloned();
        let hit = match kept {
            Some(hit) => hit,
            None => {
                let hit = search();
                lock(found).insert(key, hit.clone());
                hit
            }
        };
        hit.and_then(|(k, r)| Some((variants.nth(k)?, r)))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fact's aliases, shared by every checkpoint of a conversation, and the fact's id there
/// (none, and nothing kept, past `u32::MAX` facts).
#[derive(Debug)]
pub(crate) struct Facts {
    aliases: Vec<Alias>,
    id: Option<u32>,
}

/// What the offline judge keeps for a conversation while its pairs run, shared by every
/// worker: each recorded message prepared once, and each fact's aliases. The replay hands it
/// to [`Judge::score_checkpoint_with`] (a run keeps one per conversation beside the
/// conversation's shared entries).
#[derive(Debug, Default)]
pub struct Store {
    /// The conversation's shared entries: what is kept for a message applies to a context's
    /// entry only when it holds the same message (not a copy, nor one a strategy changed).
    entries: Vec<Entry>,
    messages: Vec<OnceLock<Arc<PreparedMessage>>>,
    facts: Mutex<FactIds>,
}

impl Store {
    /// An empty store for the conversation whose recorded messages are `entries`.
    pub fn new(entries: &[Entry]) -> Store {
        Store {
            entries: entries.to_vec(),
            messages: (0..entries.len()).map(|_| OnceLock::new()).collect(),
            facts: Mutex::new((HashMap::new(), Some(0))),
        }
    }

    /// The slot of recorded message `index`, when `message` is that shared entry's own.
    fn slot(&self, index: usize, message: &Message) -> Option<&OnceLock<Arc<PreparedMessage>>> {
        self.entries.get(index).filter(|e| std::ptr::eq(e.message(), message))?;
        self.messages.get(index)
    }

    /// The aliases of `fact`, made once per conversation.
    fn facts<S: AsRef<str>>(&self, fact: &[S]) -> Arc<Facts> {
        let key: Vec<String> = fact.iter().map(|a| a.as_ref().to_string()).collect();
        let mut kept = lock(&self.facts);
        let (map, next) = &mut *kept;
        if let Some(f) = map.get(&key) {
            return f.clone();
        }
        let f = Arc::new(Facts { aliases: Alias::of(fact), id: *next });
        *next = next.and_then(|n| n.checked_add(1));
        map.insert(key, f.clone());
        f
    }
}

/// One entry of a context, prepared for matching.
#[derive(Debug, Clone)]
struct Prepared1 {
    entry: usize,
    found: FoundIn,
    recorded: Option<usize>,
    rendered: Arc<PreparedMessage>,
}

/// A context prepared once per checkpoint: each entry's text normalized (a recorded message's
/// once per conversation, `prepared_message`), grouped by where a fact can be found.
#[derive(Debug, Clone, Default)]
pub struct RenderedContext {
    /// The recorded messages the context holds verbatim.
    recorded: HashSet<usize>,
    /// Verbatim entries first, then summaries, then other entries.
    entries: Vec<Prepared1>,
    /// The conversation's store, when the caller keeps one.
    shared: Option<Arc<Store>>,
}

/// Recorded message `index` of `conversation`, rendered and normalized once per conversation
/// when the conversation has a [`Store`] and `message` is its shared entry's: every checkpoint
/// and configuration that keeps it reuses the work, in every worker. Otherwise it is prepared
/// afresh.
fn prepared_message(shared: Option<&Store>, index: usize, message: &Message) -> Arc<PreparedMessage> {
    match shared.and_then(|r| r.slot(index, message)) {
        Some(slot) => slot.get_or_init(|| Arc::new(PreparedMessage::new(message, true))).clone(),
        None => Arc::new(PreparedMessage::new(message, false)),
    }
}

impl RenderedContext {
    /// Render and normalize every entry of `ctx` (no conversation: nothing is reused).
    pub fn new(ctx: &Context) -> RenderedContext {
        RenderedContext::build(ctx, None)
    }

    /// [`RenderedContext::new`] with the conversation's [`Store`], where the prepared
    /// recorded messages and the facts' aliases are kept for every worker.
    pub fn in_store(ctx: &Context, store: &Arc<Store>) -> RenderedContext {
        RenderedContext::build(ctx, Some(store))
    }

    fn build(ctx: &Context, store: Option<&Arc<Store>>) -> RenderedContext {
        let mut r = RenderedContext { shared: store.cloned(), ..Default::default() };
        for (k, e) in ctx.entries().iter().enumerate() {
            let (found, recorded) = match e.origin() {
                Origin::Recorded { index } => {
                    r.recorded.insert(*index);
                    (FoundIn::Verbatim, Some(*index))
                }
                Origin::Summary { .. } => (FoundIn::Summary, None),
                Origin::Masked { .. } | Origin::Inserted { .. } => (FoundIn::Other, None),
            };
            let rendered = match recorded {
                Some(i) => prepared_message(r.shared.as_deref(), i, e.message()),
                None => Arc::new(PreparedMessage::new(e.message(), false)),
            };
            r.entries.push(Prepared1 { entry: k, found, recorded, rendered });
        }
        let rank = |f: FoundIn| match f {
            FoundIn::Verbatim => 0,
            FoundIn::Summary => 1,
            _ => 2,
        };
        r.entries.sort_by_key(|e| (rank(e.found), e.entry));
        r
    }

    /// True when recorded message `index` is in the context verbatim ([`is_verbatim`]).
    pub fn is_verbatim(&self, index: usize) -> bool {
        self.recorded.contains(&index)
    }

    /// Where the first alias of `fact` that is found occurs, preferring verbatim messages, then
    /// summaries, then other entries.
    pub fn locate<S: AsRef<str>>(&self, fact: &[S]) -> FoundIn {
        self.locate_with_evidence(&Alias::of(fact)).0
    }

    /// Where `aliases` are found first (verbatim, summary, other), and the evidence.
    pub fn locate_with_evidence(&self, aliases: &[Alias]) -> (FoundIn, Option<Evidence>) {
        self.locate_ids(aliases, None)
    }

    /// [`RenderedContext::locate_with_evidence`] for the aliases of `fact`, made once per
    /// conversation when its store is shared.
    fn locate_fact<S: AsRef<str>>(&self, fact: &[S]) -> (FoundIn, Option<Evidence>) {
        match &self.shared {
            Some(r) => {
                let facts = r.facts(fact);
                self.locate_ids(&facts.aliases, facts.id)
            }
            None => self.locate_with_evidence(&Alias::of(fact)),
        }
    }

    /// The search behind [`RenderedContext::locate_with_evidence`]; with `id` (a shared
    /// fact's, [`Facts`]), the shared messages keep their answers.
    fn locate_ids(&self, aliases: &[Alias], id: Option<u32>) -> (FoundIn, Option<Evidence>) {
        for e in &self.entries {
            let text = &e.rendered.text;
            let code_counts = e.found == FoundIn::Verbatim;
            if let Some((v, range)) = e.rendered.first_match(id, aliases, code_counts) {
                let span = e.rendered.prepared.source_span(&range);
                let chars = |b: usize| text.get(..b).map_or(0, |t| t.chars().count());
                let evidence = Evidence {
                    alias: v.text.clone(),
                    entry: e.entry,
                    message: e.recorded,
                    start: chars(span.start),
                    end: chars(span.end),
                };
                return (e.found, Some(evidence));
            }
        }
        (FoundIn::Lost, None)
    }
}

/// True when recorded message `index` is in `ctx` verbatim. O(context): for many probes of one
/// context, ask a [`RenderedContext`] (or a set of the recorded indices) instead.
pub fn is_verbatim(ctx: &Context, index: usize) -> bool {
    ctx.entries().iter().any(|e| e.origin().verbatim_index() == Some(index))
}

impl OfflineJudge {
    /// Score `probe` against an already rendered context.
    pub fn score_rendered(&self, conversation: &Conversation, rendered: &RenderedContext, probe: &Probe) -> ProbeScore {
        let located: Vec<(FoundIn, Option<Evidence>)> = if probe.facts.is_empty() {
            vec![rendered.locate_fact(std::slice::from_ref(&probe.answer))]
        } else {
            probe.facts.iter().map(|f| rendered.locate_fact(f)).collect()
        };
        let (facts, evidence): (Vec<FoundIn>, Vec<Option<Evidence>>) = located.into_iter().unzip();
        let retained = facts.iter().filter(|f| **f != FoundIn::Lost).count();
        let score = if facts.is_empty() { 0.0 } else { retained as f64 / facts.len() as f64 };
        ProbeScore {
            probe_id: probe.id.clone(),
            kind: probe.kind,
            tier: Some(probe.tier()),
            asked_at: probe.asked_at.unwrap_or(conversation.messages.len()).min(conversation.messages.len()),
            checkpoint: 100,
            at_risk: !rendered.is_verbatim(probe.source_message),
            score,
            facts,
            judge: self.name(),
            llm: None,
            if_sent: None,
            verdict: Default::default(),
            evidence,
            written: probe.is_written(),
        }
    }
}

impl Judge for OfflineJudge {
    fn name(&self) -> String {
        "offline".to_string()
    }
    fn score(&self, conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore {
        self.score_rendered(conversation, &RenderedContext::new(ctx), probe)
    }
    fn score_checkpoint(&self, conversation: &Conversation, ctx: &Context, probes: &[&Probe]) -> Vec<ProbeScore> {
        let rendered = RenderedContext::new(ctx);
        probes.iter().map(|p| self.score_rendered(conversation, &rendered, p)).collect()
    }
    fn score_checkpoint_with(
        &self,
        conversation: &Conversation,
        ctx: &Context,
        probes: &[&Probe],
        store: Option<&Arc<Store>>,
    ) -> Vec<ProbeScore> {
        let Some(store) = store else { return self.score_checkpoint(conversation, ctx, probes) };
        let rendered = RenderedContext::in_store(ctx, store);
        probes.iter().map(|p| self.score_rendered(conversation, &rendered, p)).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::{Inserted, Message, ProbeKind, ToolCall};
    use dataset::text::{expand_aliases, is_weak_alias, matches, normalize, occurs};

    #[test]
    fn a_conversations_shared_messages_answer_as_a_fresh_render_does() {
        let conversation = Arc::new(Conversation::new(
            "c",
            vec![
                Message::user("Fix the crash in (SRC\\Parser.rs) for ticket PAY-4411."),
                Message::assistant("Twelve files changed; lib/parser.rs is another file."),
                Message::user("cancelReservation still fails"),
            ],
        ));
        let entries: Vec<Entry> =
            conversation.messages.iter().enumerate().map(|(i, m)| Entry::recorded(i, m.clone())).collect();
        let store = Arc::new(Store::new(&entries));
        let mut ctx = Context::new();
        for e in &entries {
            ctx.push(e.clone());
        }
        ctx.push(Entry::new(Message::user("a summary naming PAY-4411"), Origin::Summary { round: 1, covers: vec![0] }));
        let facts: [&[&str]; 6] = [
            &["src/parser.rs"],
            &["12"],
            &["cancel_reservation"],
            &["PAY-4411"],
            &["nowhere", "absent"],
            &["parser.rs"],
        ];
        let fresh = RenderedContext::new(&ctx);
        let expected: Vec<(FoundIn, Option<Evidence>)> =
            facts.iter().map(|f| fresh.locate_with_evidence(&Alias::of(f))).collect();
        assert_eq!(expected[4].0, FoundIn::Lost);
        assert_eq!(expected[1].1.as_ref().map(|e| e.alias.as_str()), Some("twelve"));
        // Twice: the second time every answer comes from the shared store.
        for _ in 0..2 {
            let shared = RenderedContext::in_store(&ctx, &store);
            assert!(shared.shared.is_some(), "the store is used");
            let got: Vec<(FoundIn, Option<Evidence>)> = facts.iter().map(|f| shared.locate_fact(f)).collect();
            assert_eq!(got, expected);
        }
        let kept = store.messages[0].get().and_then(|m| m.found.as_ref().map(|f| lock(f).len()));
        assert_eq!(kept, Some(facts.len()), "each fact's answer is kept with the message");
    }

    fn probe(facts: &[&[&str]], source: usize) -> Probe {
        Probe {
            id: "p".into(),
            kind: ProbeKind::Recall,
            question: "q".into(),
            answer: "the answer".into(),
            facts: facts.iter().map(|f| f.iter().map(|a| a.to_string()).collect()).collect(),
            source_message: source,
            asked_at: None,
            tier: None,
            ..Default::default()
        }
    }

    #[test]
    fn normalization_lowercases_collapses_and_strips_punctuation() {
        assert_eq!(normalize("  See (SRC\\Main.rs).\n\n  Then\t\"ABC-12\",  "), "see src/main.rs then abc-12");
        assert_eq!(normalize("'quoted': [x] ... **bold**"), "quoted x bold");
        assert_eq!(normalize("C:\\Users\\me"), "c:/users/me");
        assert_eq!(normalize("..."), "");
    }

    #[test]
    fn matching_respects_word_boundaries() {
        assert!(occurs("built in 2012 ok", "2012"));
        assert!(!occurs("built in 2012 ok", "12"));
        assert!(!occurs("abc-1234", "abc-123"));
        assert!(occurs("edited src/a.rs today", "a.rs"));
        assert!(occurs("ticket abc-1234's status", "abc-1234"));
        assert!(occurs("cost $42.50 total", "$42.50"));
        assert!(occurs("snake my_var_2 here", "my_var_2"));
        assert!(!occurs("snake my_var_2 here", "var_2"));
        assert!(!occurs("anything", ""));
        // No match across entries.
        assert!(!occurs("first line\nsecond", "line second"));
    }

    #[test]
    fn renders_tool_calls_with_unescaped_arguments() {
        let m = Message::assistant_calls(
            "Reading.",
            vec![ToolCall {
                id: "1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src\\lib.rs","n":3}"#.into(),
            }],
        );
        let text = normalize(&render_message(&m));
        assert!(text.starts_with("reading read_file "), "{text}");
        assert!(text.contains("path src/lib.rs") && text.contains("n 3"), "{text}");
        let raw = Message::assistant_calls(
            "",
            vec![ToolCall { id: "1".into(), name: "bash".into(), arguments: "not json {".into() }],
        );
        assert!(render_message(&raw).ends_with("bash not json {"));
    }

    #[test]
    fn records_where_each_fact_was_found() {
        let ctx = Context::from_entries(vec![
            Entry::recorded(0, Message::system("You are an agent.")),
            Entry::new(
                Message::assistant("## Summary\n- reservation ZFA04Y"),
                Origin::Summary { round: 1, covers: vec![1, 2] },
            ),
            Entry::new(Message::tool_result("c", "bash", "[output cleared: 12 lines]"), Origin::Masked { index: 3 }),
            Entry::new(Message::assistant("Understood."), Origin::Inserted { what: Inserted::Acknowledgement }),
            Entry::recorded(4, Message::user("Now book flight HAT170.")),
        ]);
        let conversation = Conversation::new("c", ctx.to_messages());
        let p = probe(&[&["hat170"], &["zfa04y", "HAT170"], &["ZFA04Y"], &["output cleared"], &["ABC-1"]], 2);
        let s = OfflineJudge.score(&conversation, &ctx, &p);
        assert_eq!(s.facts, [FoundIn::Verbatim, FoundIn::Verbatim, FoundIn::Summary, FoundIn::Other, FoundIn::Lost]);
        assert_eq!(s.score, 0.8);
        assert!(s.at_risk, "message 2 is only in the summary");
        assert_eq!(s.judge, "offline");
        let kept = probe(&[&["flight"]], 4);
        assert!(!OfflineJudge.score(&conversation, &ctx, &kept).at_risk);
    }

    #[test]
    fn a_probe_without_facts_is_scored_on_its_answer() {
        let ctx = Context::from_messages(vec![Message::user("The answer is here.")]);
        let conversation = Conversation::new("c", ctx.to_messages());
        let mut p = probe(&[], 0);
        p.answer = "elsewhere".into();
        assert_eq!(OfflineJudge.score(&conversation, &ctx, &p).score, 0.0);
        p.answer = "answer is here".into();
        let s = OfflineJudge.score(&conversation, &ctx, &p);
        assert_eq!((s.score, s.facts.as_slice()), (1.0, [FoundIn::Verbatim].as_slice()));
    }

    #[test]
    fn checkpoint_scoring_matches_one_by_one_scoring() {
        let ctx = Context::from_messages(vec![Message::user("alpha beta"), Message::assistant("gamma")]);
        let conversation = Conversation::new("c", ctx.to_messages());
        let a = probe(&[&["alpha"], &["delta"]], 0);
        let b = probe(&[&["gamma"]], 1);
        let all = OfflineJudge.score_checkpoint(&conversation, &ctx, &[&a, &b]);
        assert_eq!(all, vec![OfflineJudge.score(&conversation, &ctx, &a), OfflineJudge.score(&conversation, &ctx, &b)]);
        assert_eq!(all[0].score, 0.5);
    }

    #[test]
    fn aliases_expand_as_summaries_write_them() {
        let e = expand_aliases(&["src/app/.gitignore"]);
        assert_eq!(e, ["src/app/.gitignore", ".gitignore"]);
        assert_eq!(expand_aliases(&["requests.exceptions.HTTPError"]), ["requests.exceptions.httperror", "httperror"]);
        assert_eq!(expand_aliases(&["42"]), ["42", "forty-two", "forty two"]);
        assert_eq!(expand_aliases(&["7"]), ["7", "seven"]);
        // A weak alias is set aside when the fact has a stronger one, and kept when alone.
        assert_eq!(expand_aliases(&["3 passengers", "3"]), ["3 passengers"]);
        assert_eq!(expand_aliases(&["change_flight", "change"]), ["change_flight", "change flight", "change-flight"]);
        assert_eq!(expand_aliases(&["3"]), ["3", "three"]);
        assert!(is_weak_alias("the") && is_weak_alias("42") && is_weak_alias("ok"));
        assert!(!is_weak_alias("4466") && !is_weak_alias("ZX-9") && !is_weak_alias("parser"));
        assert_eq!(expand_aliases(&["250"]), ["250"]);
        assert_eq!(expand_aliases(&["gift_card"]), ["gift_card", "gift card", "gift-card"]);
        assert_eq!(expand_aliases(&["mia_li_3668"]), ["mia_li_3668"]);
        let r = RenderedContext::new(&Context::from_messages(vec![Message::user("Ran forty-two tests.")]));
        assert_eq!(r.locate(&["42"]), FoundIn::Verbatim);
    }

    #[test]
    fn a_short_word_matches_only_a_whole_token() {
        let text = normalize("Opened src/main.rs and main_loop; the main reason.");
        assert!(matches(&text, "main"));
        assert!(!matches(&normalize("Opened src/main.rs and main_loop."), "main"));
        assert!(matches(&normalize("Opened src/main.rs."), "main.rs"));
        assert!(!matches(&normalize("See tests/test_a.py"), "test"));
        // Longer words and numbers keep boundary matching.
        assert!(matches(&normalize("version 1.2.3"), "1.2"));
        assert!(matches(&normalize("the config/app.toml"), "config"));
    }
}
