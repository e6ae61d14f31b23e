//! The families that probe what an agent needs to go on: the facts of a request, the user's
//! choices, the lessons (an error and its fix), the agent's decisions and its next step.

use compaction::{ProbeKind, Role, Tier};

use super::facts::{self, is_month, FactType};
use super::{
    clip, clip_words, command_of, is_common_word, is_real_user, request_text, term_score, tokens, Candidate, Deriver,
};

/// Capitalized words that never open a named entity.
const DETERMINERS: [&str; 16] = [
    "the", "a", "an", "my", "our", "your", "this", "that", "these", "those", "i", "hi", "hello", "hey", "please",
    "thanks",
];

/// Words that open a user's confirmation or choice.
const CONFIRMS: [&str; 18] = [
    "yes",
    "yeah",
    "yep",
    "sure",
    "ok",
    "okay",
    "confirm",
    "confirmed",
    "correct",
    "proceed",
    "go ahead",
    "sounds good",
    "please do",
    "that works",
    "approved",
    "lgtm",
    "do it",
    "i'll go with",
];

/// The most words of a confirmation ([`is_confirmation`]).
pub(super) const CONFIRMATION_WORDS: usize = 16;

/// A short reply that approves or picks what the agent proposed ("yes", "Yes, let's go with
/// the economy class for this option, please"): [`CONFIRMATION_WORDS`] words at most, opening
/// with a confirmation, not a question ("Okay, could you tell me the sum of my balances?" asks
/// for something new).
pub(super) fn is_confirmation(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    lower.split_whitespace().count() <= CONFIRMATION_WORDS
        && CONFIRMS.iter().any(|c| lower.starts_with(c))
        && !lower.ends_with('?')
}

/// How far back (in messages) a confirmation's object is looked for.
const PROPOSAL_REACH: usize = 24;

/// Messages after a failed command within which a working rerun makes its lesson a detail.
pub(super) const FIXED_AT_ONCE: usize = 3;

/// The verbs a tool's name opens with when the call changes something.
const CHANGE_VERBS: [&str; 24] = [
    "create", "update", "modify", "cancel", "book", "exchange", "return", "transfer", "send", "delete", "add",
    "remove", "set", "place", "change", "edit", "assign", "close", "merge", "post", "apply", "grant", "upgrade",
    "refund",
];

/// Phrases that state a decision and its reason.
const DECISIONS: [&str; 9] = [
    "instead of",
    "rather than",
    "decided to",
    "i chose",
    "we chose",
    "going with",
    "the root cause",
    "the fix is",
    "so that",
];

/// Phrases that state the agent's own next step.
const NEXT: [&str; 8] =
    ["next step", "next, i", "i'll ", "i will ", "let me ", "we'll ", "still need to", "remaining:"];

/// Lines that state a failure's cause.
const CAUSES: [&str; 22] = [
    "nothing to commit",
    "not found",
    "no such",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "unable to",
    "denied",
    "invalid",
    "missing",
    "unknown",
    "unexpected",
    "expected",
    "refused",
    "timed out",
    "exceeded",
    "conflict",
    "undefined",
    "not allowed",
    "ignored by",
    "does not",
];

/// The facts of a request, best first, at most `max`: identifiers (ids, paths, symbols,
/// numbers with units), quoted values, dates, then named entities (several capitalized
/// words together, or one capitalized word inside a sentence). Never a lone plain word or a
/// code fragment.
pub(super) fn request_facts(text: &str, max: usize) -> Vec<Vec<String>> {
    let raw: Vec<&str> = text.split_whitespace().collect();
    // (rank, position, fact)
    let mut found: Vec<(u8, usize, String)> = Vec::new();
    let toks = tokens(text);
    for (k, (pos, token, _)) in toks.iter().enumerate() {
        let start = *pos == 0 || raw.get(pos - 1).is_some_and(|w| w.ends_with(['.', '!', '?', ':']));
        let score = term_score(token, start);
        if score == 3 && facts::allowed(token) {
            found.push((0, *pos, token.clone()));
        }
        // A month and its day.
        if is_month(token) {
            if let Some((p, next, _)) = toks.get(k + 1).filter(|(p, _, _)| *p == pos + 1) {
                let date = format!("{token} {next}");
                if facts::fact_type(&date) == FactType::Date {
                    found.push((0, *p - 1, date));
                }
            }
        }
        // Capitalized words together (`New York`), or one inside a sentence; a determiner
        // does not open an entity.
        let capital = |t: &str| {
            t.chars().next().is_some_and(char::is_uppercase)
                && t.chars().all(char::is_alphabetic)
                && !is_month(t)
                && !DETERMINERS.contains(&t.to_lowercase().as_str())
        };
        let joined = raw.get(*pos).is_some_and(|w| !w.ends_with([',', '.', ';', ':', '!', '?']));
        if capital(token) && !(k > 0 && capital(&toks[k - 1].1) && toks[k - 1].0 + 1 == *pos) {
            let mut words = vec![token.clone()];
            let mut last_joined = joined;
            let mut j = k + 1;
            while let Some((p, t, _)) = toks.get(j) {
                if *p != pos + words.len() || !capital(t) || !last_joined {
                    break;
                }
                last_joined = raw.get(*p).is_some_and(|w| !w.ends_with([',', '.', ';', ':', '!', '?']));
                words.push(t.clone());
                j += 1;
            }
            let entity = words.join(" ");
            let single = words.len() == 1 && !start && token.chars().count() >= 4 && !is_common_word(token);
            // A run of short capitals (`AM EST`) is units or codes, not a name.
            let several = words.len() > 1
                && words.iter().any(|w| !is_common_word(w))
                && words.iter().any(|w| w.chars().count() > 3);
            if (single || several) && facts::allowed(&entity) {
                found.push((2, *pos, entity));
            }
        }
    }
    for q in quoted(text) {
        if facts::allowed(&q) && facts::fact_type(&q) != FactType::Digits {
            found.push((1, text.find(&q).map_or(usize::MAX, |at| text[..at].split_whitespace().count()), q));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut out: Vec<(usize, String)> = Vec::new();
    for (_, pos, f) in found {
        let lower = f.to_lowercase();
        // One fact once: a value inside a longer one already taken (or the reverse) is the same.
        if out.iter().any(|(_, o)| {
            let o = o.to_lowercase();
            o.contains(&lower) || lower.contains(&o)
        }) {
            continue;
        }
        out.push((pos, f));
        if out.len() == max {
            break;
        }
    }
    out.sort_by_key(|o| o.0);
    out.into_iter().map(|(_, f)| vec![f]).collect()
}

/// Words that open a request without saying what it is.
const FILLERS: [&str; 39] = [
    "hi", "hello", "hey", "there", "please", "can", "could", "would", "you", "let's", "lets", "i'd", "i", "we", "like",
    "to", "need", "want", "now", "ok", "okay", "so", "i'm", "im", "it's", "also", "actually", "just", "well",
    "alright", "thanks", "thank", "great", "perfect", "i've", "we've", "here's", "i'll", "we'll",
];

/// Words a key phrase does not end on, and before which a phrase longer than
/// [`KEY_PHRASE_WORDS`] words is cut: a phrase ends on what it says, not on a joining word.
const JOINERS: [&str; 36] = [
    "about", "a", "an", "the", "to", "of", "in", "on", "at", "for", "from", "with", "by", "into", "and", "or", "but",
    "so", "because", "that", "that's", "which", "who", "if", "when", "while", "then", "as", "is", "are", "was", "be",
    "my", "your", "our", "its",
];

/// True when `word` is a joining word ([`JOINERS`]): a phrase does not end on one.
pub(super) fn is_joiner(word: &str) -> bool {
    JOINERS.contains(&word.to_lowercase().replace('’', "'").as_str())
}

/// The words that ask for something; what follows them is the request.
const REQUEST_MARKERS: [&str; 10] = [
    "need to ",
    "want to ",
    "like to ",
    "could you ",
    "can you ",
    "would you ",
    "please ",
    "help me ",
    "i need ",
    "i want ",
];

/// The most words of a key phrase.
pub(super) const KEY_PHRASE_WORDS: usize = 6;

/// The key phrase of a request: its first sentence of two words or more once the opening
/// fillers (`Hi! Can you`, `I'd like to`) are left out, up to its first clause break (a
/// comma, a colon, a dash) and at most [`KEY_PHRASE_WORDS`] words; a longer clause is cut
/// before a joining word (a preposition, an article, a conjunction), so the phrase is a
/// group of words of its own, never a clause cut inside one.
pub(super) fn key_phrase(text: &str) -> Option<String> {
    key_phrase_where(text, &|_| true)
}

/// The first key phrase of `text` ([`key_phrase`]) that `keep` accepts: a clause's phrase,
/// else the same clause at up to twice [`KEY_PHRASE_WORDS`] words (the words after the cut
/// can say what the short phrase does not: "use the gift card with the smallest balance"),
/// else the next clause's.
pub(super) fn key_phrase_where(text: &str, keep: &dyn Fn(&str) -> bool) -> Option<String> {
    // What the person asks for follows the words that ask ("I really need to cancel any
    // orders", "could you please check"): the first such clause, before an opening that
    // only sets the scene ("I'm a bit all over the place right now").
    for sentence in split_sentences(text) {
        // Byte offsets of `sentence` itself (the markers are ASCII; case is ignored).
        let bytes = sentence.as_bytes();
        let Some(at) = REQUEST_MARKERS
            .iter()
            .filter_map(|m| {
                (0..bytes.len().saturating_sub(m.len() - 1))
                    .find(|&k| {
                        bytes[k..k + m.len()].eq_ignore_ascii_case(m.as_bytes())
                            && (k == 0 || !bytes[k - 1].is_ascii_alphanumeric())
                    })
                    .map(|k| k + m.len())
            })
            .min()
        else {
            continue;
        };
        let rest = sentence.get(at..).unwrap_or_default();
        let clause = rest.split([',', ':', '(', ')', '—', '–']).next().unwrap_or_default();
        let short = clause_phrase(clause, KEY_PHRASE_WORDS);
        if let Some(p) = short.clone().filter(|p| keep(p)) {
            return Some(p);
        }
        if let Some(p) = clause_phrase(clause, 2 * KEY_PHRASE_WORDS).filter(|p| Some(p) != short.as_ref() && keep(p)) {
            return Some(p);
        }
    }
    for sentence in split_sentences(text) {
        for clause in sentence.split([',', ':', '(', ')', '—', '–']) {
            let Some(short) = clause_phrase(clause, KEY_PHRASE_WORDS) else { continue };
            if keep(&short) {
                return Some(short);
            }
            if let Some(long) = clause_phrase(clause, 2 * KEY_PHRASE_WORDS).filter(|p| *p != short && keep(p)) {
                return Some(long);
            }
        }
    }
    None
}

/// The sentences of `text`: split at a line break, `;`, and `.`, `!` or `?` before a space or
/// the end (a dot inside `utils.py` or `v1.2` does not end a sentence).
pub(super) fn split_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(at, c)) in chars.iter().enumerate() {
        let next_blank = chars.get(k + 1).is_none_or(|(_, n)| n.is_whitespace());
        if c == '\n' || c == ';' || (matches!(c, '.' | '!' | '?') && next_blank) {
            out.push(&text[start..at]);
            start = at + c.len_utf8();
        }
    }
    out.push(&text[start..]);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// The phrase of one clause: without opening fillers and joining words, at most
/// [`KEY_PHRASE_WORDS`] words (a longer clause cut before a joining word), not ending on a
/// joining word; two words or more, one of them not a common word.
fn clause_phrase(clause: &str, max_words: usize) -> Option<String> {
    let words: Vec<&str> = clause
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '-' && c != '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let lower = |w: &str| w.to_lowercase().replace('’', "'");
    let start =
        words.iter().position(|w| !FILLERS.contains(&lower(w).as_str()) && !is_joiner(w)).unwrap_or(words.len());
    let mut kept: Vec<&str> = words[start..].to_vec();
    if kept.len() > max_words {
        // Cut before the last joining word that leaves two words or more.
        let cut = (2..=max_words).rev().find(|&k| is_joiner(kept[k]));
        kept.truncate(cut.unwrap_or(max_words));
    }
    while kept.last().is_some_and(|w| is_joiner(w)) {
        kept.pop();
    }
    let phrase = kept.join(" ");
    let distinctive = kept.iter().any(|w| !is_common_word(w) && !FILLERS.contains(&lower(w).as_str()));
    (kept.len() >= 2 && distinctive && facts::allowed(&phrase)).then_some(phrase)
}

/// Quoted values of `text` (`"..."`, `“...”`, `` `...` ``) of one to eight words.
fn quoted(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('"', '"'), ('“', '”'), ('`', '`')] {
        let mut rest = text;
        while let Some(a) = rest.find(open) {
            let after = &rest[a + open.len_utf8()..];
            let Some(b) = after.find(close) else { break };
            let inner = after[..b].trim();
            let words = inner.split_whitespace().count();
            if (1..=8).contains(&words) && inner.chars().count() <= 80 && !inner.contains('\n') {
                out.push(inner.to_string());
            }
            rest = &after[b + close.len_utf8()..];
        }
    }
    out
}

/// True when `fact` is an identifier, a date or a quoted value (not a named entity): what a
/// later request must carry to be a task of its own.
pub(super) fn is_strong(fact: &str) -> bool {
    matches!(facts::fact_type(fact), FactType::Identifier | FactType::Date | FactType::Digits | FactType::Phrase)
}

/// The fact of a failure's cause line: the line itself without code tokens (clipped to whole
/// words), with its identifiers as further aliases; none when nothing of it may be a fact.
pub(super) fn cause_facts(line: &str) -> Vec<Vec<String>> {
    let mut aliases: Vec<String> = Vec::new();
    // The line from its first prose token up to the next code token (`error[E0425]:` opens
    // it, `***` is punctuation the judge does not read).
    let code = |w: &&str| facts::is_code_fragment(w.trim_matches(|c: char| "(),:.'\"`".contains(c)));
    let words: Vec<&str> = line
        .split_whitespace()
        .filter(|w| !crate::text::normalize(w).is_empty())
        .skip_while(code)
        .take_while(|w| !code(w))
        .collect();
    let phrase = clip_words(&words.join(" "), 80);
    if phrase.split_whitespace().count() > 1 && facts::allowed(&phrase) {
        aliases.push(phrase);
    }
    for (_, t, _) in tokens(line) {
        // Identifiers, also those inside code (`error[E0425]:` holds `E0425`).
        for part in t.split(['[', ']', '(', ')', '{', '}', '`']) {
            let part = part.trim_matches(|c: char| ":;,.'\"".contains(c));
            if aliases.len() < 3
                && term_score(part, false) == 3
                && facts::allowed(part)
                && !aliases.iter().any(|a| a == part)
            {
                aliases.push(part.to_string());
            }
        }
    }
    if aliases.is_empty() {
        Vec::new()
    } else {
        vec![aliases]
    }
}

/// The line of an output that states its failure's cause: the last line with a cause phrase
/// (`nothing to commit`, `not found`, `denied`, ...), if any.
pub(super) fn cause_line(output: &str) -> Option<String> {
    output
        .lines()
        .rev()
        .map(str::trim)
        .filter(|l| l.split_whitespace().count() >= 2 && l.len() <= 300)
        .find(|l| {
            let lower = l.to_lowercase();
            CAUSES.iter().any(|c| lower.contains(c))
        })
        .map(str::to_string)
}

/// Keywords that open a definition, in the languages agents edit most.
const DEFINES: [&str; 14] = [
    "fn",
    "func",
    "def",
    "class",
    "struct",
    "type",
    "interface",
    "function",
    "enum",
    "trait",
    "impl",
    "const",
    "let",
    "var",
];

/// The name a line of code defines: the word after its first definition keyword (`def
/// parse(`, `func (r *T) Name(`, `class Foo:`), when it can be a fact.
pub(super) fn defined_symbol(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    for (k, w) in words.iter().enumerate() {
        if !DEFINES.contains(w) {
            continue;
        }
        // Go's receiver: `func (r *T) Name(`.
        let mut rest = words[k + 1..].iter();
        let mut next = rest.next();
        if next.is_some_and(|n| n.starts_with('(')) {
            next = rest.find(|n| n.ends_with(')'));
            next = next.and_then(|_| rest.next());
        }
        if let Some(s) = next.and_then(|n| symbol_name(n.trim_start_matches(['*', '&']))) {
            return Some(s);
        }
    }
    None
}

/// The identifier `t` opens with, when it can be a fact (four characters or more, not a
/// common word).
fn symbol_name(t: &str) -> Option<String> {
    let name: String = t.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (name.chars().count() >= 4 && facts::allowed(&name) && !is_common_word(&name)).then_some(name)
}

/// The symbol a change defines or touches: the name after the first definition keyword of its
/// new text, else the first identifier of the new text that the old text lacks.
pub(super) fn edit_symbol(old: &str, new: &str) -> Option<String> {
    if let Some(s) = new.lines().find_map(defined_symbol) {
        return Some(s);
    }
    // Else a code name (`snake_case`, `camelCase`) the change brings in.
    let code_name = |t: &str| {
        t.contains('_')
            || (t.chars().skip(1).any(char::is_uppercase) && t.chars().next().is_some_and(char::is_lowercase))
    };
    tokens(new)
        .into_iter()
        .map(|(_, t, _)| t)
        .filter(|t| code_name(t) && t.chars().count() >= 6 && !old.contains(t.as_str()))
        .find_map(|t| symbol_name(&t).filter(|s| *s == t))
}

/// The program of a shell command: its first word after any `cd DIR &&`.
fn program(cmd: &str) -> Vec<String> {
    let first = cmd.lines().next().unwrap_or_default();
    let part = first.split("&&").map(str::trim).find(|p| !p.starts_with("cd ")).unwrap_or(first);
    part.split_whitespace().take(2).map(str::to_string).collect()
}

impl Deriver<'_> {
    /// True when a command run after message `i` by the same program (and subcommand)
    /// succeeded: the failure at `i` is resolved.
    pub(super) fn succeeded_later(&self, i: usize, cmd: &str) -> bool {
        self.fixed_by(i, cmd, usize::MAX).is_some()
    }

    /// The first later call (within `within` messages) of the same program as `cmd` whose
    /// result did not fail: (message of the call, its command).
    fn fixed_by(&self, i: usize, cmd: &str, within: usize) -> Option<(usize, String)> {
        let prog = program(cmd);
        let results: std::collections::HashMap<&str, &compaction::Message> = self
            .conv
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .filter_map(|m| m.tool_call_id.as_deref().map(|id| (id, m)))
            .collect();
        let end = self.conv.messages.len().min(i.saturating_add(within));
        for j in i + 1..end {
            for call in &self.msg(j).tool_calls {
                let Some(c) = command_of(&call.arguments) else { continue };
                if program(&c) != prog {
                    continue;
                }
                let Some(result) = results.get(call.id.as_str()) else { continue };
                let failed = result.is_error
                    || result.content.contains("Exit code")
                    || super::error_line(&result.content, false, false).is_some();
                if !failed {
                    return Some((j, c));
                }
            }
        }
        None
    }

    /// Lessons: a command that failed, then the same program run differently that worked.
    /// The facts are what changed (`git add -f`, a new flag or identifier), the answer names
    /// the line that states the cause; the source is the call that worked. Useful, or a
    /// detail when the fix came within [`FIXED_AT_ONCE`] messages of the error.
    pub(super) fn lessons(&self) -> Vec<Candidate> {
        let calls = self.calls();
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            if !self.usable[i] || m.role != Role::Tool {
                continue;
            }
            let Some((_, args)) = m.tool_call_id.as_deref().and_then(|id| calls.get(id)) else { continue };
            let Some(cmd) = command_of(args) else { continue };
            let failed = m.is_error || m.content.contains("Exit code");
            if !failed {
                continue;
            }
            let Some((j, fixed)) = self.fixed_by(i, &cmd, 12) else { continue };
            let before: Vec<&str> = cmd.lines().next().unwrap_or_default().split_whitespace().collect();
            let after_line = fixed.lines().next().unwrap_or_default();
            let after: Vec<&str> = after_line.split_whitespace().collect();
            let new: Vec<&str> = after.iter().filter(|w| !before.contains(w)).copied().collect();
            let gone = before.iter().filter(|w| !after.contains(w)).count();
            // The same command run differently, not another command.
            if new.is_empty() || new.len() > 3 || gone > 2 {
                continue;
            }
            let mut facts: Vec<Vec<String>> = Vec::new();
            // The fix: the new flags with the program, or the new identifiers.
            let flags: Vec<&str> = new.iter().filter(|w| w.starts_with('-') && w.len() >= 2).copied().collect();
            if !flags.is_empty() {
                let upto = after.iter().rposition(|w| flags.contains(w)).unwrap_or(0);
                let fix = after[..=upto].join(" ");
                if fix.split_whitespace().count() <= 6 && facts::allowed(&fix) {
                    facts.push(vec![fix]);
                }
            }
            for w in new.iter().filter(|w| !w.starts_with('-') && term_score(w, false) == 3 && facts::allowed(w)) {
                if facts.len() < 2 {
                    facts.push(vec![w.to_string()]);
                }
            }
            if facts.is_empty() || !seen.insert(facts[0][0].to_lowercase()) {
                continue;
            }
            // The cause is in the answer; the facts are what the fix call holds.
            let cause = cause_line(&m.content).or_else(|| super::error_line(&m.content, true, false));
            out.push(Candidate {
                kind: ProbeKind::Recall,
                question: format!(
                    "`{}` failed; what was the cause, and how did the agent make it work?",
                    clip(cmd.lines().next().unwrap_or_default(), 60)
                ),
                answer: format!("{}; then `{}` worked", cause.unwrap_or_default(), clip(after_line, 120)),
                facts,
                source: j,
                // An error fixed within three messages is a detail: the next attempt worked.
                tier: if j <= i + FIXED_AT_ONCE { Tier::Detail } else { Tier::Useful },
                ..Candidate::default()
            });
        }
        out
    }

    /// The user's choices and confirmations: a short reply that approves or picks ("yes",
    /// "I'll go with the first option") asks for what was chosen together with what it was
    /// chosen for: the choice in the user's own words (the reply's key phrase, when it has
    /// one) and the identifiers of the assistant message it answers, never one without the
    /// other when both are there. Critical: they are decisions the agent must not take again.
    pub(super) fn choices(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (turn, i) in self.user_requests().into_iter().enumerate() {
            let text = request_text(&self.msg(i).content);
            if !is_confirmation(&text) {
                continue;
            }
            // What was proposed: the identifiers that close the agent's message the reply
            // answers; when it names none (`the total on your card will be $1,172`), those of
            // the agent's latest message before it that names what is being chosen (the
            // flights, the order), back to the user's previous confirmation.
            let texts: Vec<usize> = (i.saturating_sub(PROPOSAL_REACH)..i)
                .rev()
                .take_while(|&k| {
                    k + 1 == i || !(is_real_user(self.msg(k)) && is_confirmation(&request_text(&self.msg(k).content)))
                })
                .filter(|&k| self.msg(k).role == Role::Assistant && !self.msg(k).content.trim().is_empty())
                .collect();
            let Some(&prev) = texts.first() else { continue };
            let proposed = |k: usize| -> Vec<Vec<String>> {
                let content = &self.msg(k).content;
                let tail = content.char_indices().rev().nth(600).map_or(content.as_str(), |(at, _)| &content[at..]);
                request_facts(tail, self.params.max_facts * 2)
                    .into_iter()
                    .filter(|f| f.iter().any(|a| is_strong(a)))
                    .take(self.params.max_facts.saturating_sub(1).max(1))
                    .collect()
            };
            let names_object =
                |f: &Vec<Vec<String>>| f.iter().flatten().any(|a| facts::fact_type(a) == FactType::Identifier);
            let (prev, mut facts) = texts
                .iter()
                .map(|&k| (k, proposed(k)))
                .find(|(_, f)| names_object(f))
                .unwrap_or_else(|| (prev, proposed(prev)));
            let mut fact_sources = vec![prev; facts.len()];
            // The choice in the user's words: the reply without its confirmation.
            let lower = text.trim().to_lowercase();
            let opener = CONFIRMS.iter().filter(|c| lower.starts_with(*c)).map(|c| c.len()).max().unwrap_or(0);
            if let Some(said) = text.trim().get(opener..).and_then(key_phrase) {
                facts.insert(0, vec![said]);
                fact_sources.insert(0, i);
            }
            if facts.is_empty() {
                continue;
            }
            out.push(Candidate {
                kind: ProbeKind::Decision,
                question: format!(
                    "What did the user approve or choose in their message {}, and what was it for?",
                    turn + 1
                ),
                answer: format!("{} (answering: {})", clip(&text, 200), clip(&self.msg(prev).content, 300)),
                facts,
                source: i,
                fact_sources,
                tier: Tier::Critical,
                ..Candidate::default()
            });
        }
        // The latest first: what stands now.
        out.reverse();
        out
    }

    /// The changes the agent made through a domain tool (`update_reservation_flights`,
    /// `cancel_pending_order`, `mcp__tracker__create_issue`): a call whose name opens with a
    /// verb of change ([`CHANGE_VERBS`]), that is not a file or shell call, and whose result
    /// is not an error (a failed call changed nothing). Its facts are the identifiers among
    /// its arguments, the object and what it was changed to together. Critical: what was done
    /// must not be done again.
    pub(super) fn actions(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            if !self.usable[i] || m.role != Role::Assistant {
                continue;
            }
            for call in &m.tool_calls {
                let name = call.name.rsplit("__").next().unwrap_or_default().to_lowercase();
                let verb = name.split(['_', '-', '.']).next().unwrap_or_default();
                if !CHANGE_VERBS.contains(&verb) || command_of(&call.arguments).is_some() {
                    continue;
                }
                if !super::touches(&call.name, &call.arguments).is_empty() {
                    continue;
                }
                let Some(j) = (i + 1..self.conv.messages.len())
                    .take(64)
                    .find(|&j| self.msg(j).role == Role::Tool && self.msg(j).tool_call_id.as_deref() == Some(&call.id))
                else {
                    continue;
                };
                let result = self.msg(j);
                if result.is_error || result.content.trim_start().to_lowercase().starts_with("error") {
                    continue;
                }
                let Ok(args) = serde_json::from_str::<serde_json::Value>(&call.arguments) else { continue };
                let mut values = Vec::new();
                super::scalar_values(&args, &mut values);
                let mut facts: Vec<Vec<String>> = Vec::new();
                for v in values {
                    let v = v.trim().to_string();
                    let strong = is_strong(&v) && facts::fact_type(&v) != FactType::Digits || v.contains('_');
                    if v.chars().count() < 3 || v.chars().count() > 60 || !strong || !facts::allowed(&v) {
                        continue;
                    }
                    if !facts.iter().any(|f| f[0] == v) {
                        facts.push(vec![v]);
                    }
                }
                facts.truncate(self.params.max_facts);
                if facts.is_empty() {
                    continue;
                }
                out.push(Candidate {
                    kind: ProbeKind::WorkState,
                    question: format!(
                        "What did the agent change with {} at call {}, and on what?",
                        call.name,
                        self.call_number(i)
                    ),
                    answer: format!("{}({})", call.name, clip(&call.arguments, 300)),
                    facts,
                    source: i,
                    tier: Tier::Critical,
                    ..Candidate::default()
                });
            }
        }
        out
    }

    /// Sentences of the agent's text that state a decision with its reason, with their
    /// identifiers as facts; the latest first.
    pub(super) fn decisions(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate().rev() {
            if !self.usable[i] || m.role != Role::Assistant {
                continue;
            }
            for sentence in sentences(&m.content) {
                let lower = sentence.to_lowercase();
                if !DECISIONS.iter().any(|d| lower.contains(d)) {
                    continue;
                }
                // A bare number in a decision is a reference (a comment id, a line), not what
                // was decided.
                let facts: Vec<Vec<String>> = request_facts(&sentence, self.params.max_facts)
                    .into_iter()
                    .filter(|f| f.iter().any(|a| is_strong(a) && facts::fact_type(a) != FactType::Digits))
                    .collect();
                if facts.is_empty() {
                    continue;
                }
                out.push(Candidate {
                    kind: ProbeKind::Decision,
                    question: format!("What did the agent decide at call {}, and why?", self.call_number(i)),
                    answer: clip(&sentence, 400),
                    facts,
                    source: i,
                    tier: Tier::Useful,
                    ..Candidate::default()
                });
            }
        }
        out
    }

    /// The plans the agent stated: a list of two items or more (`1. ...`, `- ...`) after a line
    /// that says what comes next ("I'll update:", "Next steps:", "Let me ..."), asked by the
    /// identifiers of its first items (symbols, paths), else their key phrases. Critical: at
    /// a checkpoint, the last plan stated is what the agent goes on with.
    pub(super) fn plans(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            if !self.usable[i] || m.role != Role::Assistant || m.content.trim_start().starts_with(['{', '[']) {
                continue;
            }
            let lines: Vec<&str> = m.content.lines().collect();
            let is_item = |l: &str| {
                let t = l.trim_start();
                let numbered =
                    t.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
                numbered || t.starts_with("- ") || t.starts_with("* ")
            };
            let Some(first) = lines.iter().position(|l| is_item(l)) else { continue };
            let intro = lines[..first].join(" ").to_lowercase().replace('’', "'");
            if (!NEXT.iter().any(|n| intro.contains(n)) && !intro.contains("plan")) || intro.contains("summar") {
                continue;
            }
            let items: Vec<&str> = lines[first..]
                .iter()
                .copied()
                .take_while(|l| is_item(l) || l.trim().is_empty() || l.starts_with("   "))
                .filter(|l| is_item(l))
                .collect();
            // A list of what was done (`Explored ...`, `Modified ...`) is a report, not a plan.
            let done = items
                .iter()
                .filter(|l| {
                    let t = l.trim_start().trim_start_matches(|c: char| c.is_ascii_digit() || ".-* ".contains(c));
                    t.split_whitespace().next().is_some_and(|w| w.to_lowercase().ends_with("ed"))
                })
                .count();
            if items.len() < 2 || done * 2 > items.len() {
                continue;
            }
            let mut facts: Vec<Vec<String>> = Vec::new();
            for item in &items {
                let item = item.trim_start().trim_start_matches(|c: char| c.is_ascii_digit() || ".-* ".contains(c));
                let ids: Vec<Vec<String>> =
                    request_facts(item, 2).into_iter().filter(|f| f.iter().any(|a| is_strong(a))).collect();
                let fact = ids.into_iter().next().or_else(|| key_phrase(item).map(|p| vec![p]));
                if let Some(f) = fact {
                    if !facts.iter().any(|g| g[0] == f[0]) {
                        facts.push(f);
                    }
                }
                if facts.len() == self.params.max_facts {
                    break;
                }
            }
            if facts.is_empty() {
                continue;
            }
            out.push(Candidate {
                kind: ProbeKind::NextStep,
                question: format!("What did the agent plan to do at call {}?", self.call_number(i)),
                answer: clip(&items.join("; "), 400),
                facts,
                source: i,
                tier: Tier::Critical,
                ..Candidate::default()
            });
        }
        out
    }

    /// The next step the agent last stated: the last sentence of its last text that says what
    /// comes next, with its identifiers as facts.
    pub(super) fn next_step(&self) -> Option<Candidate> {
        let (i, m) = self
            .conv
            .messages
            .iter()
            .enumerate()
            .rev()
            .find(|(i, m)| self.usable[*i] && m.role == Role::Assistant && !m.content.trim().is_empty())?;
        // A structured reply (`{"message": ...}`) is data, not a stated plan.
        if m.content.trim_start().starts_with(['{', '[']) {
            return None;
        }
        let sentence = sentences(&m.content).into_iter().rev().find(|s| {
            let lower = s.to_lowercase().replace('’', "'");
            NEXT.iter().any(|n| lower.contains(n))
        })?;
        let facts: Vec<Vec<String>> = request_facts(&sentence, self.params.max_facts)
            .into_iter()
            .filter(|f| f.iter().any(|a| is_strong(a)))
            .collect();
        if facts.is_empty() {
            return None;
        }
        Some(Candidate {
            kind: ProbeKind::Continuation,
            question: "What did the agent say it would do next?".into(),
            answer: clip(&sentence, 400),
            facts,
            source: i,
            tier: Tier::Critical,
            ..Candidate::default()
        })
    }
}

/// The lines of `text` outside its code blocks (and without their fences).
pub(super) fn lines_outside_code(text: &str) -> impl Iterator<Item = &str> {
    let mut in_code = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            return false;
        }
        !in_code
    })
}

/// The sentences (and list items) of a text, without code blocks.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in lines_outside_code(text) {
        let mut current = String::new();
        for w in line.split_whitespace() {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(w);
            if w.ends_with(['.', '!', '?']) && !w.contains('/') && w.chars().filter(|c| *c == '.').count() == 1 {
                out.push(std::mem::take(&mut current));
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}
