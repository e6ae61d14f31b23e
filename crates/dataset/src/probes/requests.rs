//! The requests a person made: every message they typed (injected, queued and command-output
//! text is not one; a slash command's arguments are), and the words they typed when they turned
//! down a call, each asked by one key phrase and its identifiers; and how a user message's text
//! is read (its instruction sections, the text it quotes from an issue).

use compaction::{ProbeKind, Role, Tier};

use super::{clip, is_rejection, structure, work, Candidate, Deriver};
use crate::text::{is_common_word, normalize, occurs};

impl Deriver<'_> {
    /// Every request a person typed (injected and queued text is not a request; a slash
    /// command's arguments are), but a short confirmation (a choice, see
    /// [`Deriver::choices`]): its facts are one key phrase of two to six words and its
    /// identifiers (ids, paths, names, numbers, quoted values). Critical, but for a later
    /// request of many words whose probe holds a single identifier: one identifier of a long
    /// request is useful.
    pub(super) fn task(&self) -> Vec<Candidate> {
        let requests = self.user_requests();
        let mut out = Vec::new();
        for (turn, &i) in requests.iter().enumerate() {
            let text = request_text(&self.msg(i).content);
            if turn > 0 && work::is_confirmation(&text) {
                continue;
            }
            let Some(c) = self.request(turn, i, &text) else { continue };
            out.push(c);
        }
        // The words a person typed when they turned down a call: a request too.
        for (i, words) in self.rejection_words() {
            let Some(mut c) = self.request(1, i, &words) else { continue };
            let tool = self.call_name(i).unwrap_or("a");
            c.question = format!(
                "What did the user say when they turned down the agent's {tool} call at call {}?",
                self.call_number(i)
            );
            out.push(c);
        }
        out.sort_by_key(|c| c.source);
        out
    }

    /// The words the user typed when they rejected a call (Claude Code reports them after
    /// "the user said:" in the call's result): (message, words). A plan turned down is a
    /// choice ([`Deriver::asked`]), not here.
    pub(super) fn rejection_words(&self) -> Vec<(usize, String)> {
        self.conv
            .messages
            .iter()
            .enumerate()
            .filter(|(i, m)| self.usable[*i] && m.role == Role::Tool && is_rejection(&m.content))
            .filter(|(i, _)| self.call_name(*i) != Some("ExitPlanMode"))
            .filter_map(|(i, m)| {
                let words = m.content.split_once("the user said:")?.1.trim();
                (!words.is_empty()).then(|| (i, words.to_string()))
            })
            .collect()
    }

    /// True when every word of `phrase` that is not a common word occurs in the system prompt.
    fn only_system_words(&self, phrase: &str) -> bool {
        let words: Vec<String> = phrase.split_whitespace().filter(|w| !is_common_word(w)).map(normalize).collect();
        !self.system.is_empty() && !words.is_empty() && words.iter().all(|w| occurs(&self.system, w))
    }

    /// The name of the call whose result is message `i`.
    fn call_name(&self, i: usize) -> Option<&str> {
        let id = self.msg(i).tool_call_id.as_deref()?;
        self.conv.messages[..i]
            .iter()
            .rev()
            .flat_map(|m| m.tool_calls.iter())
            .find(|c| c.id == id)
            .map(|c| c.name.as_str())
    }

    /// The probe of request `text` (the user's message `turn + 1`, at message `i`).
    fn request(&self, turn: usize, i: usize, text: &str) -> Option<Candidate> {
        {
            let text = text.to_string();
            // A later request's ask is its prose up to the first pasted paragraph (output, code,
            // a log): what follows that is not the request.
            let ask = if turn == 0 { text.clone() } else { prose_paragraphs(&text) };
            let ask = ask.as_str();
            // A phrase whose every distinctive word is in the system prompt says nothing the
            // context does not always hold: the clause at more words, or the next clause.
            // A task that quotes an issue is asked by the issue's title (its first line).
            // A request that hands over a written plan ("Implement the following plan:" and a
            // `# Title`) is asked by the plan's title.
            let phrase_from = match quoted_section(ask).filter(|_| turn == 0) {
                Some(q) => q.trim().lines().next().unwrap_or_default(),
                None => handed_over_title(ask).unwrap_or(ask),
            };
            let mut facts: Vec<Vec<String>> = work::key_phrase_where(phrase_from, &|p| !self.only_system_words(p))
                .map(|p| vec![p])
                .into_iter()
                .collect();
            let ids = work::request_facts(ask, self.params.max_facts);
            // A later message of a few words without an identifier ("Checking my phone...")
            // asks for nothing the rest of the work needs.
            if turn > 0 && ids.iter().flatten().all(|f| !work::is_strong(f)) && ask.split_whitespace().count() < 6 {
                return None;
            }
            facts.extend(ids.iter().cloned());
            facts.truncate(self.params.max_facts);
            if facts.is_empty() {
                return None;
            }
            let question = if turn == 0 {
                "What task did the user give at the start of the session?".to_string()
            } else {
                format!("What did the user ask for in their message {}?", turn + 1)
            };
            let strong = ids.iter().flatten().any(|f| work::is_strong(f));
            let long = ask.split_whitespace().count() > 40;
            let tier = if turn > 0 && long && facts.len() == 1 { Tier::Useful } else { Tier::Critical };
            Some(Candidate {
                kind: ProbeKind::Task,
                question,
                answer: clip(&text, 400),
                facts,
                source: i,
                // A later request without an identifier fills what those with one leave.
                secondary: turn > 0 && !strong,
                tier,
                ..Candidate::default()
            })
        }
    }
}

/// The title of a document a request hands over: the first line ends on a colon and the next
/// line that is not blank is a Markdown heading (`# Plan: Session lifecycle`), whose text
/// (without its `Plan:`) is returned.
fn handed_over_title(text: &str) -> Option<&str> {
    let mut lines = text.trim_start().lines();
    let first = lines.next()?.trim_end();
    if !first.ends_with(':') || first.split_whitespace().count() > 8 {
        return None;
    }
    let heading = lines.find(|l| !l.trim().is_empty())?.trim();
    let title = heading.strip_prefix('#')?.trim_start_matches('#').trim();
    let title = title.strip_prefix("Plan:").map_or(title, str::trim);
    (title.split_whitespace().count() >= 2).then_some(title)
}

/// The paragraphs of a message up to the first that was pasted rather than written
/// ([`is_pasted`]), joined by blank lines; the first paragraph always.
fn prose_paragraphs(text: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for (k, p) in text.split("\n\n").enumerate() {
        if k > 0 && is_pasted(p) {
            break;
        }
        out.push(p);
    }
    out.join("\n\n")
}

/// True when a paragraph reads as pasted output rather than prose: a code fence or a tag
/// opens it, a line of it is indented, or fewer than two thirds of its words are words
/// (`error[E0308]:`, `src/x.rs:12:5`, `| 12 ++--`).
fn is_pasted(paragraph: &str) -> bool {
    let t = paragraph.trim_start_matches('\n');
    if t.trim().is_empty() {
        return false;
    }
    if t.trim_start().starts_with("```") || t.trim_start().starts_with('<') {
        return true;
    }
    if t.lines().any(|l| l.starts_with("    ") || l.starts_with('\t')) {
        return true;
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    let plain = words
        .iter()
        .filter(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            !w.is_empty() && w.chars().all(|c| c.is_alphabetic() || c == '\'' || c == '’' || c == '-')
        })
        .count();
    3 * plain < 2 * words.len()
}

/// Sections of a user message that are the agent's instructions, not the request.
const INSTRUCTION_TAGS: [&str; 4] = ["instructions", "example_response", "format_example", "important"];

/// The request a user message makes: without simulator markers (`###STOP###`), without
/// instruction sections (`<instructions>...</instructions>`, an `INSTRUCTIONS:` tail) that
/// harnesses append to the task.
pub(super) fn request_text(content: &str) -> String {
    let mut text = said_text(content);
    if structure::command_args(content).is_some() {
        return text;
    }
    for tag in INSTRUCTION_TAGS {
        loop {
            let lower = text.to_ascii_lowercase();
            let Some(start) = lower.find(&format!("<{tag}>")) else { break };
            let close = format!("</{tag}>");
            let end = lower[start..].find(&close).map_or(text.len(), |e| start + e + close.len());
            text.replace_range(start..end, "");
        }
    }
    if let Some(at) = text.find("\nINSTRUCTIONS:") {
        text.truncate(at);
    }
    text.trim().to_string()
}

/// Sections of a user message that quote text from elsewhere (an issue, a pull request's
/// description): what they say is the problem, not the user's own instruction.
const QUOTED_TAGS: [&str; 4] = ["issue_description", "pr_description", "issue", "problem_statement"];

/// The first quoted section of `text` ([`QUOTED_TAGS`]): its inner text.
fn quoted_section(text: &str) -> Option<&str> {
    let lower = text.to_ascii_lowercase();
    QUOTED_TAGS.iter().find_map(|tag| {
        let start = lower.find(&format!("<{tag}>"))? + tag.len() + 2;
        let end = start + lower[start..].find(&format!("</{tag}>"))?;
        text.get(start..end)
    })
}

/// `text` without its quoted sections ([`QUOTED_TAGS`]) and code blocks.
pub(super) fn without_quoted(text: &str) -> String {
    let mut out = text.to_string();
    for tag in QUOTED_TAGS {
        loop {
            let lower = out.to_ascii_lowercase();
            let open = format!("<{tag}>");
            let Some(start) = lower.find(&open) else { break };
            let close = format!("</{tag}>");
            // A section without its close is a mention of the tag: only the tag goes.
            let end = lower[start..].find(&close).map_or(start + open.len(), |e| start + e + close.len());
            out.replace_range(start..end, "");
        }
    }
    let mut kept = String::new();
    for line in work::lines_outside_code(&out) {
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

/// What a user message says, with its instruction sections: a slash command's arguments,
/// else the text without simulator markers (`###STOP###`).
pub(super) fn said_text(content: &str) -> String {
    if let Some(args) = structure::command_args(content) {
        return args;
    }
    without_markers(content).trim().to_string()
}

/// `text` without a user simulator's markers (`###STOP###`, `###TRANSFER###`): three `#`, a
/// word of capitals, digits, `_` or `-`, three `#`, wherever they stand (also glued to the
/// word before, as in `help.###STOP###`).
fn without_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("###") {
        let after = &rest[at + 3..];
        let word = after.find("###").map(|end| &after[..end]).filter(|w| {
            !w.is_empty() && w.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        });
        match word {
            Some(w) => {
                out.push_str(&rest[..at]);
                rest = &after[w.len() + 3..];
            }
            None => {
                out.push_str(&rest[..at + 3]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
