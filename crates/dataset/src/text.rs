//! How a judge reads text: the rendering of a message (content, then each tool call's name and
//! flattened arguments), the normalization applied to a context and to an alias alike, alias
//! expansion and matching. The offline judge (`runner::judge`) scores with these, and probe
//! derivation ([`crate::probes`]) keeps only the aliases the judge can find in their source
//! message, so the two never disagree on what a fact's text is. The rules are stated in the
//! offline judge's module documentation.

use std::collections::HashSet;

use compaction::Message;

/// Leading punctuation stripped from every token.
const LEADING: &[char] = &['(', '"', '\'', '`', '[', '<', '*'];
/// Trailing punctuation stripped from every token.
const TRAILING: &[char] = &['.', ',', ';', ':', ')', '"', '\'', '`', ']', '>', '*', '!', '?'];
/// Separates entries in a rendered group; normalization never produces it.
pub const ENTRY_SEPARATOR: char = '\n';

/// Normalize `text` for matching (see the module docs).
pub fn normalize(text: &str) -> String {
    let lower = text.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    for token in lower.split_whitespace() {
        let token = token.trim_start_matches(LEADING).trim_end_matches(TRAILING);
        if token.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        for c in token.chars() {
            out.push(if c == '\\' { '/' } else { c });
        }
    }
    out
}

/// A message as the judge reads it: content, then tool call names and arguments.
pub fn render_message(message: &Message) -> String {
    let mut out = message.content.clone();
    for call in &message.tool_calls {
        out.push('\n');
        out.push_str(&call.name);
        out.push(' ');
        match serde_json::from_str::<serde_json::Value>(&call.arguments) {
            Ok(v) => flatten_json(&v, &mut out),
            Err(_) => out.push_str(&call.arguments),
        }
    }
    out
}

/// JSON as plain text: strings unquoted and unescaped, object keys before their values.
fn flatten_json(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Null => {}
        Value::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Value::Bool(_) | Value::Number(_) => {
            out.push_str(&value.to_string());
            out.push(' ');
        }
        Value::Array(items) => items.iter().for_each(|v| flatten_json(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push_str(k);
                out.push(' ');
                flatten_json(v, out);
            }
        }
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// True when normalized `needle` occurs in normalized `haystack` at word boundaries (see the
/// module docs).
pub fn occurs(haystack: &str, needle: &str) -> bool {
    let (Some(first), Some(last)) = (needle.chars().next(), needle.chars().next_back()) else {
        return false;
    };
    let check_start = is_word(first);
    let check_end = is_word(last);
    haystack.match_indices(needle).any(|(at, _)| {
        let before_ok = !check_start || !haystack[..at].chars().next_back().is_some_and(is_word);
        let after_ok = !check_end || !haystack[at + needle.len()..].chars().next().is_some_and(is_word);
        before_ok && after_ok
    })
}

/// The aliases of `fact`, normalized, with the other ways a summary writes them: a path also as
/// its file name (when the name has an extension), a qualified error class also without its
/// module (`requests.exceptions.HTTPError` as `HTTPError`), an identifier of `_`-joined words
/// also as those words (`gift_card` as `gift card` and `gift-card`), a number under a hundred
/// also in words (`3` as `three`, `42` as `forty-two` and `forty two`).
///
/// A weak alias ([`is_weak_alias`]: a common word, or a bare number under a hundred) is left
/// out when the fact has a stronger one: `3` of `[3 passengers, 3]` or `change` of
/// `[change_flight, change]` would credit the fact wherever the word or number occurs in another
/// sense. A fact with only weak aliases keeps them.
pub fn expand_aliases<S: AsRef<str>>(fact: &[S]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |a: String| {
        if !a.is_empty() && !out.contains(&a) {
            out.push(a);
        }
    };
    let strong = fact.iter().any(|a| !a.as_ref().trim().is_empty() && !is_weak_alias(a.as_ref()));
    for alias in fact.iter().filter(|a| !strong || !is_weak_alias(a.as_ref())) {
        let a = normalize(alias.as_ref());
        if a.is_empty() {
            continue;
        }
        push(a.clone());
        if !a.contains(' ') {
            if let Some((_, name)) = a.trim_end_matches('/').rsplit_once('/') {
                if name.contains('.') && name.chars().count() >= 4 {
                    push(name.to_string());
                }
            }
            let last = a.rsplit('.').next().unwrap_or_default();
            let class = alias.as_ref().trim().rsplit('.').next().unwrap_or_default();
            if a.contains('.') && !a.contains('/') && (class.ends_with("Error") || class.ends_with("Exception")) {
                push(last.to_string());
            }
            // An identifier of joined words as prose writes it: `gift_card` as `gift card`.
            let parts: Vec<&str> = a.split('_').collect();
            if parts.len() >= 2 && parts.iter().all(|p| p.len() >= 2 && p.chars().all(char::is_alphabetic)) {
                push(parts.join(" "));
                push(parts.join("-"));
            }
            if let Ok(n) = a.parse::<u32>() {
                if n < 100 && !a.starts_with('0') {
                    for w in number_words(n) {
                        push(w);
                    }
                }
            }
        }
    }
    out
}

/// An alias that says little alone: a common word (the derivation's stop-word list and
/// tokens under 3 characters that are not numbers, [`is_common_word`]) or a
/// bare number under a hundred.
pub fn is_weak_alias(alias: &str) -> bool {
    let t = alias.trim();
    is_common_word(t) || t.parse::<u32>().is_ok_and(|n| n < 100)
}

/// `n` (under 100) in English words: `forty-two` and `forty two`; one form below 21 and for
/// the tens.
pub fn number_words(n: u32) -> Vec<String> {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
    let n = n as usize;
    if n < 20 {
        return vec![ONES[n].to_string()];
    }
    let (t, o) = (n / 10, n % 10);
    if o == 0 {
        return vec![TENS[t].to_string()];
    }
    vec![format!("{}-{}", TENS[t], ONES[o]), format!("{} {}", TENS[t], ONES[o])]
}

/// A short single word (letters only, at most [`SHORT_WORD`] characters) matches only a whole
/// token of the text: `main` does not match `src/main.rs` or `main_loop`, nor `test` inside
/// `tests/test_a.py`. Every other alias matches as [`occurs`] says.
pub fn matches(haystack: &str, alias: &str) -> bool {
    let short = !alias.contains(' ') && alias.chars().count() <= SHORT_WORD && alias.chars().all(char::is_alphabetic);
    if short {
        return haystack.split([' ', '\n']).any(|t| t == alias);
    }
    occurs(haystack, alias)
}

/// The longest alias matched token by token ([`matches()`]).
pub const SHORT_WORD: usize = 5;

/// A stop word, or a token under 3 characters that is not a number or an id. Several words
/// are never common as a whole.
pub fn is_common_word(alias: &str) -> bool {
    let t = alias.trim();
    if t.split_whitespace().count() > 1 {
        return false;
    }
    let lower = t.to_lowercase();
    let n = lower.chars().count();
    if n < 3 {
        return !lower.chars().any(|c| c.is_ascii_digit());
    }
    lower.chars().all(char::is_alphabetic) && common_words().contains(lower.as_str())
}

/// [`STOPWORDS`] and [`COMMON`] as one set, built once: the judge asks for every alias it
/// expands, at every checkpoint.
fn common_words() -> &'static HashSet<&'static str> {
    static WORDS: std::sync::OnceLock<HashSet<&'static str>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| STOPWORDS.iter().chain(COMMON).copied().collect())
}

/// Frequent English words: never facts on their own (a general list, not drawn from any
/// recording).
#[rustfmt::skip]
const COMMON: &[&str] = &[
    "able", "about", "above", "account", "accounts", "across", "add", "added", "adding", "after", "again", "all",
    "allow", "allowed", "allows", "almost", "along", "already", "also", "although", "always", "among", "and",
    "another", "any", "are", "around", "ask", "asked", "asking", "asks", "back", "bad", "because", "been", "before",
    "behind", "below", "beside", "best", "better", "between", "beyond", "big", "both", "boy", "business", "but",
    "call", "called", "calling", "calls", "came", "can", "case", "cases", "change", "changed", "changing", "check",
    "checked", "checking", "class", "classes", "code", "come", "comes", "coming", "confirm", "confirmed",
    "confirming", "contain", "containing", "contains", "correct", "could", "create", "created", "creating",
    "current", "customer", "customers", "data", "date", "dates", "day", "delete", "deleted", "detail", "details",
    "did", "difference", "different", "done", "during", "each", "either", "empty", "enough", "error", "errors",
    "even", "ever", "every", "false", "few", "file", "files", "find", "finding", "finds", "fine", "first", "fix",
    "fixed", "fixing", "follow", "followed", "following", "follows", "for", "found", "from", "full", "function",
    "functions", "gave", "get", "gets", "getting", "give", "given", "gives", "giving", "go", "goes", "going", "gone",
    "good", "got", "great", "group", "groups", "had", "has", "have", "help", "helped", "helping", "her", "here",
    "high", "him", "his", "hour", "hours", "how", "important", "impossible", "include", "included", "including",
    "incorrect", "information", "input", "into", "issue", "issues", "item", "items", "its", "just", "keep",
    "keeping", "keeps", "kept", "kind", "knew", "know", "knowing", "known", "knows", "large", "last", "least",
    "left", "less", "let", "lets", "life", "like", "liked", "line", "list", "little", "long", "look", "looking",
    "looks", "low", "made", "make", "makes", "making", "man", "many", "maybe", "method", "methods", "might",
    "minute", "minutes", "month", "more", "most", "move", "moved", "moving", "much", "must", "name", "names", "need",
    "needed", "needs", "neither", "never", "new", "next", "none", "not", "note", "notes", "now", "null", "number",
    "numbers", "object", "objects", "often", "okay", "old", "once", "one", "only", "onto", "open", "option",
    "options", "order", "orders", "other", "our", "out", "output", "over", "part", "parts", "people", "perhaps",
    "person", "place", "places", "point", "points", "possible", "previous", "probably", "problem", "problems",
    "process", "provide", "provided", "providing", "put", "quite", "ran", "rather", "read", "reading", "reads",
    "ready", "really", "remove", "removed", "removing", "request", "requested", "requests", "require", "required",
    "requires", "response", "result", "results", "right", "run", "running", "same", "saw", "say", "second", "see",
    "seeing", "seem", "seen", "sees", "send", "sending", "sent", "service", "services", "set", "sets", "setting",
    "several", "shall", "she", "short", "should", "show", "showed", "showing", "shown", "shows", "side", "since",
    "small", "some", "sometimes", "sorry", "sound", "start", "started", "starting", "starts", "state", "step",
    "steps", "still", "string", "strings", "such", "sure", "system", "systems", "take", "taken", "takes", "taking",
    "tell", "telling", "tells", "test", "tested", "testing", "tests", "text", "than", "thank", "thanks", "that",
    "the", "them", "then", "there", "they", "thing", "things", "think", "thinking", "thinks", "third", "this",
    "though", "thought", "three", "through", "time", "times", "today", "told", "tomorrow", "too", "took", "tried",
    "tries", "true", "try", "trying", "turn", "two", "type", "types", "unable", "under", "unless", "until", "update",
    "updated", "updating", "upon", "use", "used", "user", "users", "uses", "using", "usually", "value", "values",
    "version", "very", "want", "wanted", "wants", "was", "water", "way", "ways", "week", "welcome", "well", "went",
    "were", "what", "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with",
    "within", "without", "word", "words", "work", "worked", "working", "works", "world", "worse", "worst", "would",
    "write", "writes", "writing", "written", "wrong", "wrote", "year", "years", "yes", "yesterday", "yet", "you",
    "your",
];

/// Common words that are never facts.
#[rustfmt::skip]
pub(crate) const STOPWORDS: &[&str] = &[
    "about", "above", "absolutely", "actually", "after", "again", "against", "already", "also", "although", "always",
    "another", "anymore", "anything", "appreciate", "around", "assistance", "available", "basically", "because",
    "before", "being", "below", "between", "cannot", "certainly", "change", "changes", "complete", "completed",
    "consider", "continue", "continuing", "could", "currently", "definitely", "description", "different", "directory",
    "during", "either", "ensure", "everything", "example", "finished", "following", "further", "great", "having",
    "hello", "however", "information", "instead", "itself", "looking", "making", "might", "myself", "need", "needs",
    "nothing", "other", "perfect", "please", "possible", "probably", "provide", "question", "questions", "really",
    "regarding", "repository", "requirements", "should", "similar", "since", "something", "specifically", "still",
    "subtasks", "thank", "thanks", "their", "there", "these", "thing", "things", "think", "those", "though",
    "through", "under", "until", "using", "whether", "which", "while", "within", "without", "would", "yourself",
];
