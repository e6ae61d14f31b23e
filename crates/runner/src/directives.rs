//! Invented instructions: user directives a summary states that no user message holds.
//!
//! A summary that puts in the user's mouth a step the user never asked for (a commit, a
//! deploy, a re-run of the compaction instructions) is one the agent then takes. The check
//! reads each sentence of a summary for what it attributes to the user:
//!
//! - text in quotes (`"..."`, `“...”`) in a sentence that names the user (`the user said
//!   "ship it"`, `User: "ship it"`): the quote, normalized ([`dataset::text::normalize`]), must
//!   occur in one user message, normalized;
//! - otherwise the words after `the user asked / said / confirmed / approved / requested /
//!   instructed / wants / told` (up to the end of the sentence, without a leading `to` or
//!   `that`): at least half of its content words (four letters or more, not a stop word) must
//!   occur in one user message. A directive of fewer than two content words (`the user
//!   approved.`) names nothing to check and is left alone.
//!
//! The user messages are those of the conversation up to the compaction (tool results and
//! text the agent harness injected are not the user's). The check is deterministic and runs
//! offline. It applies to summaries a model wrote (the LLM summarizer, the recorded agent's own
//! under `recorded`, an external program's through a model): the offline stand-in summarizer
//! copies sentences from the conversation and cannot invent an instruction, so its summaries
//! are not checked.
//!
//! **With the LLM judge** the grading model also lists the directives each such summary states
//! (`prompts/judge_directives.md`: the summary's sentence, copied, and the directive in its
//! words), which catches what the patterns above do not read ("Per the user's request, ...").
//! Each listed one is checked by the same rule ([`fabricated_listed`]): a directive that stands
//! in quotes in its sentence as a phrase, any other by its content words. A sentence the
//! offline reading already parsed keeps the offline verdict; a listed sentence the summary does
//! not hold is the grader's text, not the summary's: left out, and counted by the judge.

use std::collections::BTreeSet;

use dataset::text::normalize;

/// The verbs that attribute a directive to the user.
const VERBS: [&str; 11] = [
    "asked",
    "said",
    "confirmed",
    "approved",
    "requested",
    "instructed",
    "wants",
    "wanted",
    "told",
    "insisted",
    "agreed",
];

/// Words that carry no content of a directive.
const STOP: [&str; 24] = [
    "that",
    "this",
    "with",
    "from",
    "then",
    "than",
    "they",
    "them",
    "their",
    "there",
    "should",
    "would",
    "could",
    "about",
    "into",
    "also",
    "have",
    "been",
    "will",
    "just",
    "please",
    "user",
    "assistant",
    "what",
];

/// One directive a summary attributes to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// What the summary attributes to the user.
    pub text: String,
    /// The summary's sentence that states it.
    pub sentence: String,
    /// The directive is a quotation (checked as a phrase, not by its words).
    pub quoted: bool,
}

/// The sentences of `text`: split at line ends and at `.`, `!` or `?` followed by a space.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_some_and(|n| *n == b' ') {
                out.push(line[start..=i].trim());
                start = i + 1;
            }
        }
        out.push(line[start..].trim());
    }
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

/// The quoted spans of `sentence` (straight or curly double quotes), each with the text between
/// the previous quote (or the sentence's start) and its opening quote.
fn quotes(sentence: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = sentence;
    while let Some(open) = rest.find(['"', '\u{201c}']) {
        let before = &rest[..open];
        let after = &rest[open + rest[open..].chars().next().map_or(1, char::len_utf8)..];
        let Some(close) = after.find(['"', '\u{201d}']) else { break };
        let quoted = after[..close].trim();
        if !quoted.is_empty() {
            out.push((before, quoted));
        }
        rest = &after[close + after[close..].chars().next().map_or(1, char::len_utf8)..];
    }
    out
}

/// Whether a quote is put in the user's mouth: the words outside quotes between the last
/// mention of the user and the quote are few (`User asked to "..."`, `the user said: "..."`),
/// and the quote is not a name the sentence gives something (`an epic titled "..."`).
fn attributed(gaps: &[&str]) -> bool {
    let joined = gaps.join(" ").to_lowercase();
    let Some(&at) = user_word(&joined).last() else { return false };
    let words: Vec<&str> = joined[at..].split_whitespace().skip(1).collect();
    let names = words.last().is_some_and(|w| {
        matches!(w.trim_matches(|c: char| !c.is_alphabetic()), "titled" | "named" | "called" | "is" | "was" | "reads")
    });
    words.len() <= 4 && !names
}

/// Where the word `user` stands alone in lowercase `text` (`the user`, `user's`), not inside an
/// identifier (`UserLinesAdded`, `user_lines_added`, `username`).
fn user_word(text: &str) -> Vec<usize> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices("user")
        .map(|(at, _)| at)
        .filter(|&at| {
            !text[..at].chars().next_back().is_some_and(word) && !text[at + 4..].chars().next().is_some_and(word)
        })
        .collect()
}

/// The directives `summary` attributes to the user.
pub fn directives(summary: &str) -> Vec<Directive> {
    let mut out = Vec::new();
    for sentence in sentences(summary) {
        let lower = sentence.to_lowercase();
        let Some(&user_at) = user_word(&lower).first() else { continue };
        let quoted = quotes(sentence);
        if !quoted.is_empty() {
            let mut gaps = Vec::new();
            for (before, q) in quoted {
                gaps.push(before);
                if attributed(&gaps) {
                    out.push(Directive { text: q.to_string(), sentence: sentence.to_string(), quoted: true });
                }
            }
            continue;
        }
        // `user` followed (after at most one word, such as `explicitly`) by an attributing verb.
        let words: Vec<&str> = lower[user_at..].split_whitespace().collect();
        let Some(verb) =
            words.iter().take(3).position(|w| VERBS.contains(&w.trim_matches(|c: char| !c.is_alphabetic())))
        else {
            continue;
        };
        let mut rest: Vec<&str> = words[verb + 1..].to_vec();
        while rest.first().is_some_and(|w| {
            matches!(*w, "to" | "that" | "for" | "me" | "us" | "the" | "assistant" | "agent" | "me," | ":")
        }) {
            rest.remove(0);
        }
        let text = rest.join(" ");
        let text = text.trim_end_matches(['.', '!', '?', ';', ',']).trim().to_string();
        if !text.is_empty() {
            out.push(Directive { text, sentence: sentence.to_string(), quoted: false });
        }
    }
    out
}

/// The content words of normalized text.
fn content_words(normalized: &str) -> BTreeSet<&str> {
    normalized.split(' ').filter(|w| w.chars().count() >= 4 && !STOP.contains(w)).collect()
}

/// Whether one of `user_messages` holds `d` (see the module docs).
pub fn holds(d: &Directive, user_messages: &[String]) -> bool {
    let wanted = normalize(&d.text);
    if d.quoted {
        return user_messages.iter().any(|m| normalize(m).contains(&wanted));
    }
    let words = content_words(&wanted);
    if words.len() < 2 {
        return true;
    }
    user_messages.iter().any(|m| {
        let m = normalize(m);
        let have = content_words(&m);
        2 * words.iter().filter(|w| have.contains(*w)).count() >= words.len()
    })
}

/// The words a person wrote that a recording keeps outside user messages: the reason they gave
/// when they rejected a tool call (Claude Code's "... the user said:\nno, don't commit"), and
/// the answers they chose to the agent's questions ("User has answered your questions: ...").
pub fn person_words(message: &compaction::Message) -> Option<String> {
    if message.role != compaction::Role::Tool {
        return None;
    }
    let text = &message.content;
    let after = |marker: &str| text.find(marker).map(|at| text[at + marker.len()..].trim().to_string());
    let words = after("the user said:").or_else(|| {
        after("User has answered your questions:")
            .map(|a| a.split("You can now continue").next().unwrap_or_default().trim().to_string())
    })?;
    (!words.is_empty()).then_some(words)
}

/// Whether `text` carries the request `request`: its normalized text, or (for a request of two
/// content words or more) at least half of its content words.
pub fn carries(request: &str, text: &str) -> bool {
    let wanted = normalize(request);
    let have = normalize(text);
    if have.contains(&wanted) {
        return true;
    }
    let words = content_words(&wanted);
    if words.len() < 2 {
        return false;
    }
    let present = content_words(&have);
    2 * words.iter().filter(|w| present.contains(*w)).count() >= words.len()
}

/// The person's sentence nearest to a flagged directive: of every sentence in `user_messages`,
/// the one sharing the most content words with it (the latest on a tie), cut to 240
/// characters; `None` when no sentence shares a word. Shown beside each flag so a reader can
/// tell an invention from a paraphrase the check missed.
pub fn nearest(directive: &str, user_messages: &[String]) -> Option<String> {
    let wanted = normalize(directive);
    let words = content_words(&wanted);
    let mut best: Option<(usize, &str)> = None;
    for m in user_messages {
        for s in sentences(m) {
            let normalized = normalize(s);
            let have = content_words(&normalized);
            let shared = words.iter().filter(|w| have.contains(*w)).count();
            if shared > 0 && best.is_none_or(|(n, _)| shared >= n) {
                best = Some((shared, s));
            }
        }
    }
    best.map(|(_, s)| {
        let mut out: String = s.chars().take(240).collect();
        if s.chars().count() > 240 {
            out.push('…');
        }
        out
    })
}

/// The directives of `summary` that no user message holds.
pub fn fabricated(summary: &str, user_messages: &[String]) -> Vec<Directive> {
    directives(summary).into_iter().filter(|d| !holds(d, user_messages)).collect()
}

/// One directive the grading model listed for a summary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listed {
    /// The summary's sentence that states it, as the grader copied it.
    pub sentence: String,
    /// The directive, in the summary's words.
    pub directive: String,
}

/// Whether the summary holds the sentence the grader copied (normalized): a listed sentence
/// it does not hold is the grader's text, not the summary's.
pub fn stated_in(summary: &str, listed: &Listed) -> bool {
    let sentence = normalize(&listed.sentence);
    !sentence.is_empty() && normalize(summary).contains(&sentence)
}

/// The directives the grader listed for `summary` that no user message holds (see the module
/// docs); listed sentences the summary does not hold are left out ([`stated_in`]).
pub fn fabricated_listed(summary: &str, listed: &[Listed], user_messages: &[String]) -> Vec<Directive> {
    let parsed: BTreeSet<String> = directives(summary).iter().map(|d| normalize(&d.sentence)).collect();
    let mut out: Vec<Directive> = Vec::new();
    for l in listed {
        let text = l.directive.trim().trim_matches(['"', '\u{201c}', '\u{201d}']).trim();
        if text.is_empty() || !stated_in(summary, l) || parsed.contains(&normalize(&l.sentence)) {
            continue;
        }
        let wanted = normalize(text);
        let quoted = quotes(&l.sentence).iter().any(|(_, q)| normalize(q) == wanted);
        let d = Directive { text: text.to_string(), sentence: l.sentence.trim().to_string(), quoted };
        if !holds(&d, user_messages) && !out.iter().any(|o| normalize(&o.text) == wanted) {
            out.push(d);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_nearest_user_sentence_shares_the_most_words() {
        let said = users(&[
            "Please fix the flaky login test. Then deploy the staging server.",
            "no, I did not say commit anything",
        ]);
        assert_eq!(nearest("commit the changes and push", &said).as_deref(), Some("no, I did not say commit anything"));
        assert_eq!(nearest("deploy the production server", &said).as_deref(), Some("Then deploy the staging server."));
        assert_eq!(nearest("rewrite everything in haskell", &said), None);
    }

    #[test]
    fn user_inside_an_identifier_attributes_nothing() {
        let summary = "UserLinesAdded    int            `json:\"user_lines_added\"`\nUserAddedPerFile: map[string]int{\"main.go\": 2}, // Added this";
        assert!(super::directives(summary).is_empty(), "{:?}", super::directives(summary));
        assert_eq!(super::directives("The user's request: \"ship it\".").len(), 1);
    }

    use super::*;

    fn users(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn a_commit_step_the_user_never_asked_for_is_found_with_its_sentence() {
        let said = users(&["Fix the failing login test in auth/session.rs.", "Looks good, thanks."]);
        let summary =
            "We fixed the login test in auth/session.rs. The user asked to commit and push the changes to main. \
                       Next: run the suite.";
        let found = fabricated(summary, &said);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].text, "commit and push the changes to main");
        assert_eq!(found[0].sentence, "The user asked to commit and push the changes to main.");
    }

    #[test]
    fn what_the_user_did_ask_is_not_fabricated_paraphrased_or_quoted() {
        let said = users(&["Please fix the failing login test in auth/session.rs", "yes, ship it"]);
        let summary = "The user asked to fix the failing login test. The user said \"Ship it!\" after the review.";
        assert_eq!(fabricated(summary, &said), Vec::new());
    }

    #[test]
    fn a_quote_put_in_the_users_mouth_must_occur_in_a_user_message() {
        let said = users(&["deploy to staging when the tests pass"]);
        let summary = "User: \u{201c}deploy to production tonight\u{201d}.";
        let found = fabricated(summary, &said);
        assert_eq!(found.len(), 1);
        assert!(found[0].quoted);
        assert_eq!(found[0].text, "deploy to production tonight");
    }

    #[test]
    fn a_quoted_title_in_a_sentence_about_the_user_is_not_put_in_the_users_mouth() {
        let said = users(&["Work on bead spotter-a0y and continue until all are done"]);
        let summary = "User asked to \"Work on bead spotter-a0y\" and \"continue until all are done\" \
                       while the epic spotter-a0y is \"Single-session transcript bootstrap sync\". \
                       The user asked to work on bead `spotter-dov`, a P1 epic titled \"Unified transcript\".";
        assert_eq!(fabricated(summary, &said), Vec::new());
        let invented = "User asked to \"Work on bead spotter-a0y\" and \"push to main\".";
        let found = fabricated(invented, &said);
        assert_eq!(found.iter().map(|d| d.text.as_str()).collect::<Vec<_>>(), ["push to main"]);
    }

    fn listed(sentence: &str, directive: &str) -> Listed {
        Listed { sentence: sentence.to_string(), directive: directive.to_string() }
    }

    #[test]
    fn a_listed_directive_is_checked_like_an_offline_one_and_a_stray_sentence_is_set_apart() {
        let said = users(&["Fix the failing login test in auth/session.rs.", "yes, \"ship it\""]);
        let summary = "Per the user's request, the fix will be committed and pushed to main. \
                       Following the user's go-ahead, \"ship it\" was done. \
                       The user asked to fix the login test.";
        let stray = listed("The user asked to delete the database.", "delete the database");
        assert!(!stated_in(summary, &stray) && stated_in(summary, &listed("the user asked to fix the LOGIN test", "")));
        let found = fabricated_listed(
            summary,
            &[
                // Not a pattern the offline reading knows: the grader finds it.
                listed(
                    "Per the user's request, the fix will be committed and pushed to main.",
                    "commit and push the fix to main",
                ),
                // Quoted in its sentence, and a user said it: held.
                listed("Following the user's go-ahead, \"ship it\" was done.", "\"ship it\""),
                // Parsed offline already: the offline verdict stands (held).
                listed("The user asked to fix the login test.", "fix the login test"),
                // Not the summary's sentence: the grader's own text.
                listed("The user asked to delete the database.", "delete the database"),
            ],
            &said,
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].text, "commit and push the fix to main");
        assert_eq!(found[0].sentence, "Per the user's request, the fix will be committed and pushed to main.");
        assert!(!found[0].quoted);
        // A quoted directive no user message holds is checked as a phrase.
        let found = fabricated_listed(
            "As agreed with the user earlier in the session, the team ran \"deploy it\" next.",
            &[listed("As agreed with the user earlier in the session, the team ran \"deploy it\" next.", "deploy it")],
            &users(&["deploy the docs site, not it"]),
        );
        assert_eq!(found.len(), 1);
        assert!(found[0].quoted);
    }

    #[test]
    fn a_directive_naming_nothing_and_sentences_without_the_user_are_left_alone() {
        let said = users(&["go"]);
        assert_eq!(fabricated("The user approved. The assistant decided to rewrite the parser.", &said), Vec::new());
    }
}
