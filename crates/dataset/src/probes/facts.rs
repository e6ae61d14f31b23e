//! What sort of text a fact is, and which sorts may be facts at all.
//!
//! A fact must let a judge tell a context that kept it from one that did not, and be
//! something an agent needs: an identifier, a path or symbol, a number (with its unit), a
//! date, a quoted value, a named entity or a multi-word key phrase. A lone plain word
//! (`commands`, `thorough`) is found in any context about the topic; a code fragment
//! (`error ->`, `[test] $ go test ./...`) is an accident of formatting, not a fact.
//!
//! ```
//! use dataset::probes::facts::{fact_type, FactType};
//!
//! assert_eq!(fact_type("multiply_numbers"), FactType::Identifier);
//! assert_eq!(fact_type("Suite 641"), FactType::Phrase);
//! assert_eq!(fact_type("Seattle"), FactType::Entity);
//! assert_eq!(fact_type("together"), FactType::PlainWord);
//! assert_eq!(fact_type("error ->"), FactType::CodeFragment);
//! assert_eq!(fact_type("2024-05-20"), FactType::Date);
//! assert!(!FactType::PlainWord.allowed() && !FactType::CodeFragment.allowed());
//! ```

use serde::Serialize;

/// The sorts of fact, as `probes audit` counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FactType {
    /// One word of letters only, not capitalized (`together`), or a common word.
    PlainWord,
    /// Under four characters and not a number (`SEA`, `ok`).
    Short,
    /// Digits only, possibly with separators (`305`, `1,250`).
    Digits,
    /// A date (`2024-05-20`, `May 20th`, `20/05/2024`).
    Date,
    /// Text with code punctuation (`error ->`, `foo(x, y)`, `{ ok: true }`, `$ go test`).
    CodeFragment,
    /// One capitalized word that is not a common word (`Seattle`, `PayPal`).
    Entity,
    /// An identifier, path, symbol, flag, id or number with a unit (`HAT136`, `src/a.rs`,
    /// `--force`, `3pm`).
    Identifier,
    /// Several words (`Suite 641`, `git add -f`, `nothing to commit, working tree clean`).
    Phrase,
}

impl FactType {
    /// Every type, in report order.
    pub const ALL: [FactType; 8] = [
        FactType::PlainWord,
        FactType::Short,
        FactType::Digits,
        FactType::Date,
        FactType::CodeFragment,
        FactType::Entity,
        FactType::Identifier,
        FactType::Phrase,
    ];

    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FactType::PlainWord => "plain_word",
            FactType::Short => "short",
            FactType::Digits => "digits",
            FactType::Date => "date",
            FactType::CodeFragment => "code_fragment",
            FactType::Entity => "entity",
            FactType::Identifier => "identifier",
            FactType::Phrase => "phrase",
        }
    }

    /// May a derived fact be of this type: never a plain word, a code fragment, or a short
    /// token that is not a number.
    pub fn allowed(self) -> bool {
        !matches!(self, FactType::PlainWord | FactType::CodeFragment | FactType::Short)
    }
}

/// Month names (and their short forms) that start a date.
const MONTHS: [&str; 24] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
];

/// True when `word` names a month.
pub fn is_month(word: &str) -> bool {
    let w = word.trim_end_matches('.').to_lowercase();
    w.chars().count() >= 3 && MONTHS.contains(&w.as_str())
}

/// What sort of fact `alias` is (see the module docs).
pub fn fact_type(alias: &str) -> FactType {
    let t = alias.trim();
    let words: Vec<&str> = t.split_whitespace().collect();
    if is_code_fragment(t) {
        return FactType::CodeFragment;
    }
    if is_date(t) {
        return FactType::Date;
    }
    if words.len() > 1 {
        return FactType::Phrase;
    }
    let n = t.chars().count();
    let digits = t.chars().filter(char::is_ascii_digit).count();
    let letters = t.chars().filter(|c| c.is_alphabetic()).count();
    if digits > 0 && t.chars().all(|c| c.is_ascii_digit() || ",.'".contains(c)) {
        return FactType::Digits;
    }
    if n < 4 && !(digits > 0 && letters > 0) {
        return FactType::Short;
    }
    if letters == n {
        let capital = t.chars().next().is_some_and(char::is_uppercase);
        if capital && !super::is_common_word(t) {
            return FactType::Entity;
        }
        let camel = t.chars().skip(1).any(char::is_uppercase) && t.chars().any(char::is_lowercase);
        if camel && n >= 6 {
            return FactType::Identifier;
        }
        return FactType::PlainWord;
    }
    FactType::Identifier
}

/// A date: ISO (`2024-05-20`), slashed (`20/05/2024`), or a month with a day or year
/// (`May 20th`, `20 May`, `May 2024`).
fn is_date(t: &str) -> bool {
    let iso = |s: &str| {
        let parts: Vec<&str> = s.split(['-', '/']).collect();
        parts.len() == 3
            && parts.iter().all(|p| !p.is_empty() && p.len() <= 4 && p.chars().all(|c| c.is_ascii_digit()))
            && parts.iter().any(|p| p.len() == 4)
    };
    let words: Vec<&str> = t.split_whitespace().map(|w| w.trim_matches(|c: char| ",.".contains(c))).collect();
    match words.as_slice() {
        [one] => iso(one),
        [a, b] => {
            let day = |w: &str| {
                let d = w.trim_end_matches(|c: char| c.is_alphabetic());
                !d.is_empty() && d.len() <= 4 && d.chars().all(|c| c.is_ascii_digit())
            };
            (is_month(a) && day(b)) || (day(a) && is_month(b))
        }
        _ => false,
    }
}

/// Text with code punctuation: a call or an index (`f(x)`, `a[0]`), braces, `;`, assignment
/// or arrows, a shell prompt, or an operator at either end; a path, a flag, a namespaced name
/// (`a::b`) or prose in parentheses is not.
pub fn is_code_fragment(t: &str) -> bool {
    let t = t.trim();
    if t.is_empty() {
        return false;
    }
    let spaced = t.contains(char::is_whitespace);
    let code_chars = t.chars().any(|c| "{};|<>".contains(c)) || t.starts_with("$ ") || t.contains(" $ ");
    let operators = ["->", "=>", "==", "!=", "&&", "||", ":=", "+=", " = "].iter().any(|o| t.contains(o));
    // A bracket right after a name calls or indexes (`f(x)`, `a[0]`); prose parentheses
    // (`(or any of the parents)`) open after a space.
    let chars: Vec<char> = t.chars().collect();
    let brackets = chars.windows(2).any(|w| (w[0].is_alphanumeric() || w[0] == '_') && (w[1] == '(' || w[1] == '['))
        || t.contains("()")
        || t.contains("[]");
    let first = t.chars().next().unwrap_or(' ');
    let last = t.chars().last().unwrap_or(' ');
    let dangling = "=+*&|^%~(,".contains(last) || "=+*&|^%~)],".contains(first);
    if spaced {
        code_chars || operators || brackets || dangling
    } else {
        // A tagged value (`FLAG{d0n3}`, `ENV{x}`) is a value, not code.
        let tagged = t.split_once('{').is_some_and(|(tag, rest)| {
            !tag.is_empty()
                && tag.chars().all(|c| c.is_alphanumeric() || c == '_')
                && rest.strip_suffix('}').is_some_and(|v| !v.is_empty() && !v.contains(['{', '}', ';', '(', ')']))
        });
        if tagged {
            return false;
        }
        // One token: brackets that call or index (`foo()`, `a[0]`), braces, `;` or an arrow.
        code_chars || operators || brackets || dangling
    }
}

/// True when `alias` may be a derived fact.
pub fn allowed(alias: &str) -> bool {
    fact_type(alias).allowed()
}
