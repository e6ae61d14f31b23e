//! How the offline judge reads a text and an alias: normalization with a map back to the
//! source, the ways a summary writes an alias, and token-boundary matching.
//!
//! - **Normalization** (the same for a context and for an alias): lowercase, `\` as `/`,
//!   whitespace collapsed, each token's surrounding punctuation stripped (as
//!   [`dataset::text::normalize`] does); then, token by token: a number's thousands separators
//!   and a leading `+` dropped (`6,594` and `+6594` read `6594`, `−5` reads `-5`); a date in
//!   another notation written `yyyy-mm-dd` (`May 19, 2024`, `19 May 2024`, `2024/05/19`,
//!   `05/19/2024`); status phrases written one way: `not committed`, `not yet committed`,
//!   `uncommitted` as `uncommitted`; `tests pass`, `all 42 tests passed` as `tests-pass`;
//!   `tests fail`, `failing tests` as `tests-fail`; `completed`, `finished` as `done`;
//!   `in progress` as `in-progress`; `not started`, `todo` as `pending`.
//! - **Variants** of an alias ([`Alias::of`]): a path also as its file name (only where it is
//!   unambiguous: not inside another path, and no other path in the same text ends with it),
//!   a qualified error class also without its module, an identifier of several words in any
//!   of snake_case, kebab-case, camelCase or spaced words, a qualified name
//!   (`Module.fun/2`, `Type::method`) also as its last segment and its qualifier both in the
//!   same entry (`fun/2` in Module), a number under a hundred in words and a number word as
//!   digits.
//! - **Boundaries**: a variant beginning (ending) with a letter, digit or `_` matches only
//!   where the character before (after) is not one, and is not a `-`, `.` or `,` joined to
//!   one: `12` is not found in `2012`, `12.5` or `1,200`; `parser.rs` not in `my-parser.rs`;
//!   `config` not in `config.toml`. A short word (letters only, at most
//!   [`dataset::text::SHORT_WORD`] characters) matches only a whole token.
//! - **Code fragments**: in a summary or other inserted text, a variant of several words
//!   found only inside a code fragment (a fenced block or an inline `` `...` `` span) is not
//!   credited: quoted code is not a statement (`error ->` in `` `rescue error ->` ``).
//!
//! Each recorded message is normalized once per conversation ([`Prepared`]); the map from
//! every normalized token back to its bytes in the rendered message gives the evidence's span.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::LazyLock;

use dataset::text::{is_weak_alias, SHORT_WORD};

/// Leading punctuation stripped from every token.
const LEADING: &[char] = &['(', '"', '\'', '`', '[', '<', '*', '{'];
/// Trailing punctuation stripped from every token.
const TRAILING: &[char] = &['.', ',', ';', ':', ')', '"', '\'', '`', ']', '>', '*', '!', '?', '}'];

/// A text normalized for matching, with where each token came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prepared {
    /// The normalized text: tokens separated by one space.
    pub text: String,
    /// Per normalized token: its byte range in `text` and in the source.
    tokens: Vec<(Range<u32>, Range<u32>)>,
    /// Byte ranges of `text` inside code fragments of the source.
    code: Vec<Range<u32>>,
}

const MONTHS: [(&str, u32); 24] = [
    ("january", 1),
    ("february", 2),
    ("march", 3),
    ("april", 4),
    ("may", 5),
    ("june", 6),
    ("july", 7),
    ("august", 8),
    ("september", 9),
    ("october", 10),
    ("november", 11),
    ("december", 12),
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("sept", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
];

fn month(t: &str) -> Option<u32> {
    MONTHS.iter().find(|(m, _)| *m == t).map(|(_, n)| *n)
}

/// A day of the month: `19`, `19th`, `1st`.
fn day(t: &str) -> Option<u32> {
    let d = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if d.is_empty() || d.len() > 2 || !(d.len() == t.len() || ["st", "nd", "rd", "th"].contains(&&t[d.len()..])) {
        return None;
    }
    d.parse().ok().filter(|n| (1..=31).contains(n))
}

fn year(t: &str) -> Option<u32> {
    (t.len() == 4).then(|| t.parse().ok()).flatten().filter(|y| (1900..=2100).contains(y))
}

/// A date written with `/` or `.`: `2024/05/19`, `05/19/2024`, `19.05.2024`.
fn numeric_date(t: &str) -> Option<String> {
    let sep = if t.contains('/') { '/' } else { '.' };
    let parts: Vec<&str> = t.split(sep).collect();
    if parts.len() != 3 || !parts.iter().all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let n: Vec<u32> = parts.iter().filter_map(|p| p.parse().ok()).collect();
    let (y, m, d) = if parts[0].len() == 4 {
        (n[0], n[1], n[2])
    } else if parts[2].len() == 4 {
        // 19/05/2024 when the first is no month, else the US order.
        if n[0] > 12 {
            (n[2], n[1], n[0])
        } else {
            (n[2], n[0], n[1])
        }
    } else {
        return None;
    };
    ((1900..=2100).contains(&y) && (1..=12).contains(&m) && (1..=31).contains(&d))
        .then(|| format!("{y:04}-{m:02}-{d:02}"))
}

/// A number with thousands separators or a sign, without them: `6,594` as `6594`, `+3` as
/// `3`, `−5` as `-5`.
fn plain_number(t: &str) -> Option<String> {
    let (sign, rest) = match t.chars().next()? {
        '+' => ("", &t[1..]),
        '−' => ("-", &t['−'.len_utf8()..]),
        '-' => ("-", &t[1..]),
        _ => ("", t),
    };
    let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
    if !frac.bytes().all(|b| b.is_ascii_digit()) || int.is_empty() {
        return None;
    }
    let groups: Vec<&str> = int.split(',').collect();
    let grouped = groups.len() > 1
        && (1..=3).contains(&groups[0].len())
        && groups[1..].iter().all(|g| g.len() == 3)
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit()));
    let bare = groups.len() == 1 && int.bytes().all(|b| b.is_ascii_digit());
    if !(grouped || (bare && t.starts_with(['+', '−']))) {
        return None;
    }
    let mut out = format!("{sign}{}", groups.concat());
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    Some(out)
}

const NEGATIONS: [&str; 9] = ["not", "never", "no", "hasn't", "haven't", "isn't", "wasn't", "aren't", "weren't"];
const TEST_WORDS: [&str; 6] = ["test", "tests", "suite", "specs", "checks", "testsuite"];
const PASS_WORDS: [&str; 5] = ["pass", "passes", "passed", "passing", "green"];
const FAIL_WORDS: [&str; 6] = ["fail", "fails", "failed", "failing", "failure", "failures"];

/// Builds a [`Prepared`] token by token.
struct Builder {
    out: Prepared,
}

impl Builder {
    fn push(&mut self, text: &str, src: Range<usize>) {
        if !self.out.text.is_empty() {
            self.out.text.push(' ');
        }
        let start = self.out.text.len() as u32;
        self.out.text.push_str(text);
        self.out.tokens.push((start..self.out.text.len() as u32, src.start as u32..src.end as u32));
    }
    /// The last `n` tokens' text (fewer when there are fewer).
    fn last(&self, n: usize) -> impl Iterator<Item = &str> {
        let k = self.out.tokens.len();
        self.out.tokens[k.saturating_sub(n)..]
            .iter()
            .rev()
            .map(|(r, _)| &self.out.text[r.start as usize..r.end as usize])
    }
    /// Replace the last `n` tokens and the next one by `text`.
    fn replace(&mut self, n: usize, text: &str, end: usize) {
        let k = self.out.tokens.len() - n;
        let src_start = self.out.tokens.get(k).map_or(end, |(_, s)| s.start as usize);
        let cut = self.out.tokens.get(k).map_or(self.out.text.len(), |(r, _)| r.start as usize);
        self.out.text.truncate(cut.saturating_sub(usize::from(cut > 0)));
        self.out.tokens.truncate(k);
        self.push(text, src_start..end);
    }
}

/// Byte ranges of code fragments in `src`: fenced blocks and inline backtick spans.
fn code_fragments(src: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    let b = src.as_bytes();
    while let Some(k) = src[i..].find('`') {
        let at = i + k;
        if b[at..].starts_with(b"```") {
            let close = src[at + 3..].find("```").map_or(src.len(), |c| at + 3 + c + 3);
            out.push(at..close);
            i = close;
        } else {
            // Inline: closed on the same line.
            let line_end = src[at + 1..].find('\n').map_or(src.len(), |c| at + 1 + c);
            match src[at + 1..line_end].find('`') {
                Some(c) => {
                    out.push(at..at + 1 + c + 1);
                    i = at + c + 2;
                }
                None => i = at + 1,
            }
        }
        if i >= src.len() {
            break;
        }
    }
    out
}

impl Prepared {
    /// Normalize `src` (see the module docs).
    pub fn new(src: &str) -> Prepared {
        let mut b = Builder { out: Prepared { text: String::with_capacity(src.len()), ..Prepared::default() } };
        let fragments = code_fragments(src);
        let mut frag = 0usize;
        let mut lowered = String::new();
        for (start, raw) in split_tokens(src) {
            let lead = raw.len() - raw.trim_start_matches(LEADING).len();
            let token = raw.trim_start_matches(LEADING).trim_end_matches(TRAILING);
            if token.is_empty() {
                continue;
            }
            let s = start + lead;
            let range = s..s + token.len();
            lowered.clear();
            for c in token.chars().flat_map(char::to_lowercase) {
                lowered.push(if c == '\\' { '/' } else { c });
            }
            let t = lowered.as_str();
            let tokens_before = b.out.tokens.len();
            if let Some(n) = plain_number(t) {
                b.push(&n, range.clone());
            } else if let Some(d) = numeric_date(t) {
                b.push(&d, range.clone());
            } else if let Some(y) = year(t) {
                // `may 19 2024` / `19 may 2024`
                let prev: Vec<String> = b.last(2).map(str::to_string).collect();
                let date = match prev.as_slice() {
                    [d, m, ..] if month(m).is_some() && day(d).is_some() => {
                        Some(format!("{y:04}-{:02}-{:02}", month(m).unwrap_or(1), day(d).unwrap_or(1)))
                    }
                    [m, d, ..] if month(m).is_some() && day(d).is_some() => {
                        Some(format!("{y:04}-{:02}-{:02}", month(m).unwrap_or(1), day(d).unwrap_or(1)))
                    }
                    _ => None,
                };
                match date {
                    Some(d) => b.replace(2, &d, range.end),
                    None => b.push(t, range.clone()),
                }
            } else if PASS_WORDS.contains(&t) && b.last(3).any(|w| TEST_WORDS.contains(&w)) {
                let n = b.last(3).position(|w| TEST_WORDS.contains(&w)).map_or(0, |p| p + 1);
                b.replace(n, "tests-pass", range.end);
            } else if FAIL_WORDS.contains(&t) && b.last(3).any(|w| TEST_WORDS.contains(&w)) {
                let n = b.last(3).position(|w| TEST_WORDS.contains(&w)).map_or(0, |p| p + 1);
                b.replace(n, "tests-fail", range.end);
            } else if TEST_WORDS.contains(&t) && b.last(1).any(|w| w == "failing" || w == "failed") {
                b.replace(1, "tests-fail", range.end);
            } else if matches!(t, "committed" | "pushed" | "merged" | "fixed" | "resolved" | "done") {
                let word = match t {
                    "committed" => "uncommitted",
                    "pushed" => "unpushed",
                    "merged" => "unmerged",
                    "fixed" => "unfixed",
                    "resolved" => "unresolved",
                    _ => "pending",
                };
                let negated = b.last(3).position(|w| NEGATIONS.contains(&w));
                match negated {
                    Some(p) => b.replace(p + 1, word, range.end),
                    None => b.push(t, range.clone()),
                }
            } else if matches!(t, "completed" | "finished")
                || t == "complete" && b.last(1).any(|w| matches!(w, "is" | "was" | "are" | "now" | "all" | "marked"))
            {
                b.push("done", range.clone());
            } else if matches!(t, "in_progress" | "in-progress") {
                b.push("in-progress", range.clone());
            } else if matches!(t, "progress") && b.last(1).any(|w| w == "in") {
                b.replace(1, "in-progress", range.end);
            } else if matches!(t, "started") && b.last(2).any(|w| w == "not") {
                let n = b.last(2).position(|w| w == "not").map_or(0, |p| p + 1);
                b.replace(n, "pending", range.end);
            } else if matches!(t, "todo" | "to-do" | "wip") {
                b.push(if t == "wip" { "in-progress" } else { "pending" }, range.clone());
            } else {
                b.push(t, range.clone());
            }
            // Mark the tokens pushed (or rewritten) inside a code fragment.
            while frag < fragments.len() && fragments[frag].end <= range.start {
                frag += 1;
            }
            if fragments.get(frag).is_some_and(|f| f.start <= range.start && range.end <= f.end) {
                let from = tokens_before.min(b.out.tokens.len().saturating_sub(1));
                for (r, _) in &b.out.tokens[from..] {
                    match b.out.code.last_mut() {
                        Some(last) if last.end + 1 >= r.start => last.end = r.end,
                        _ => b.out.code.push(r.clone()),
                    }
                }
            }
        }
        b.out
    }

    /// True when `range` of the normalized text lies in a code fragment.
    fn in_code(&self, range: &Range<usize>) -> bool {
        let i = self.code.partition_point(|c| (c.end as usize) < range.end);
        self.code.get(i).is_some_and(|c| (c.start as usize) <= range.start && range.end <= c.end as usize)
    }

    /// The byte range in the source of normalized `range`.
    pub fn source_span(&self, range: &Range<usize>) -> Range<usize> {
        let at = |pos: usize, end: bool| -> usize {
            let i = self.tokens.partition_point(|(r, _)| (r.end as usize) < pos + usize::from(!end));
            let Some((r, s)) = self.tokens.get(i) else { return self.tokens.last().map_or(0, |(_, s)| s.end as usize) };
            let same_length = r.end - r.start == s.end - s.start;
            if same_length {
                let off = pos.saturating_sub(r.start as usize).min((r.end - r.start) as usize);
                s.start as usize + off
            } else if end {
                s.end as usize
            } else {
                s.start as usize
            }
        };
        at(range.start, false)..at(range.end, true)
    }
}

/// Whitespace-separated tokens of `src` with their byte offsets.
fn split_tokens(src: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = 0usize;
    std::iter::from_fn(move || {
        let tail = &src[rest..];
        let skip = tail.len() - tail.trim_start().len();
        let start = rest + skip;
        if start >= src.len() {
            return None;
        }
        let len = src[start..].find(char::is_whitespace).unwrap_or(src.len() - start);
        rest = start + len;
        Some((start, &src[start..start + len]))
    })
}

/// Normalize one alias (see the module docs).
pub fn normalize(text: &str) -> String {
    Prepared::new(text).text
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// True when the occurrence `at..end` of a variant in `text` sits on token boundaries (see the
/// module docs).
fn on_boundaries(text: &str, at: usize, end: usize, check_start: bool, check_end: bool) -> bool {
    // The whitespace token around the occurrence: a `-` joins a compound only inside a file
    // name, path or identifier (`my-parser.rs`), or between digits (`235-237`), not in prose
    // (`timezone-aware`).
    let token_start = text[..at].rfind([' ', '\n']).map_or(0, |i| i + 1);
    let token_end = text[end..].find([' ', '\n']).map_or(text.len(), |i| end + i);
    let token = &text[token_start..token_end];
    let technical = token.contains(['.', '/', '_']);
    let joins = |c: char, other: Option<char>, inner: char| match c {
        '.' | ',' => other.is_some_and(is_word),
        '-' => {
            other.is_some_and(is_word)
                && (technical || other.is_some_and(|o| o.is_ascii_digit()) && inner.is_ascii_digit())
        }
        _ => false,
    };
    if check_start {
        let mut before = text[..at].chars().rev();
        let inner = text[at..].chars().next().unwrap_or(' ');
        match before.next() {
            Some(c) if is_word(c) => return false,
            Some(c) if joins(c, before.next(), inner) => return false,
            _ => {}
        }
    }
    if check_end {
        let mut after = text[end..].chars();
        let inner = text[..end].chars().next_back().unwrap_or(' ');
        match after.next() {
            Some(c) if is_word(c) => return false,
            Some(c) if joins(c, after.next(), inner) => return false,
            _ => {}
        }
    }
    true
}

/// One way an alias is written: its normalized text, and how it may match.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub text: String,
    /// A file name standing for `path`: not credited inside another path, nor where another
    /// path of the text ends with it.
    pub file_of: Option<String>,
    /// Must also occur in the same entry (a qualified name's qualifier).
    pub with: Option<Vec<String>>,
}

impl Variant {
    fn plain(text: String) -> Variant {
        Variant { text, file_of: None, with: None }
    }
}

/// A fact's aliases and their variants, prepared once per probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Alias {
    pub variants: Vec<Variant>,
}

/// Where a variant matched: the normalized range in a prepared text, and the variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub variant: String,
    pub range: Range<usize>,
}

/// `n` (under 100) in words: `forty-two` and `forty two` (the probes' own spelling of numbers).
fn number_words(n: usize) -> Vec<String> {
    u32::try_from(n).map(dataset::text::number_words).unwrap_or_default()
}

/// A number word (`twelve`, `forty-two`) as its value: the smallest number under a hundred
/// spelled so, looked up in a table built once.
fn word_number(t: &str) -> Option<usize> {
    static WORDS: LazyLock<HashMap<String, usize>> = LazyLock::new(|| {
        let mut words = HashMap::new();
        for n in 0..100 {
            for w in number_words(n) {
                words.entry(w).or_insert(n);
            }
        }
        words
    });
    WORDS.get(t).copied()
}

/// The words of an identifier: `cancel_reservation`, `cancel-reservation`, `cancelReservation`
/// and `CancelReservation` are all `[cancel, reservation]`. None unless two or more words of
/// letters (and digits after the first letter).
fn identifier_words(raw: &str) -> Option<Vec<String>> {
    if raw.is_empty()
        || raw.contains(char::is_whitespace)
        || !raw.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return None;
    }
    let mut words: Vec<String> = Vec::new();
    for part in raw.split(['_', '-']) {
        let mut cur = String::new();
        let chars: Vec<char> = part.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            let boundary = c.is_uppercase()
                && i > 0
                && (chars[i - 1].is_lowercase()
                    || chars.get(i + 1).is_some_and(|n| n.is_lowercase()) && chars[i - 1].is_uppercase());
            if boundary && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            cur.extend(c.to_lowercase());
        }
        if !cur.is_empty() {
            words.push(cur);
        }
    }
    let ok = words.len() >= 2
        && words.iter().all(|w| w.chars().count() >= 2 && w.chars().next().is_some_and(char::is_alphabetic));
    ok.then_some(words)
}

/// A single word's inflections as prose writes them: `refund` as `refunds`, `refunded`,
/// `refunding`; `deprecate` as `deprecated`. Words of letters only, from 4 characters.
fn word_forms(a: &str) -> Vec<String> {
    if a.chars().count() < 4 || !a.chars().all(|c| c.is_ascii_lowercase()) {
        return Vec::new();
    }
    match a.strip_suffix('e') {
        Some(stem) => vec![format!("{a}s"), format!("{a}d"), format!("{stem}ing")],
        None => vec![format!("{a}s"), format!("{a}ed"), format!("{a}ing")],
    }
}

/// A percentage or a dollar amount in words: `25%` as `25 percent` and `twenty-five percent`,
/// `$50` as `50 dollars` and `fifty dollars`.
fn amount_words(a: &str) -> Vec<String> {
    let (n, unit) = match (a.strip_suffix('%'), a.strip_prefix('$')) {
        (Some(n), _) => (n, "percent"),
        (_, Some(n)) => (n, "dollars"),
        _ => return Vec::new(),
    };
    let Ok(v) = n.parse::<usize>() else { return Vec::new() };
    let mut out = vec![format!("{n} {unit}")];
    if v < 100 {
        out.extend(number_words(v).into_iter().map(|w| format!("{w} {unit}")));
    }
    out
}

/// File extensions that make a dotted name a file, not a qualified name.
const FILE_EXTENSIONS: [&str; 30] = [
    "rs", "py", "ts", "tsx", "js", "jsx", "go", "java", "rb", "ex", "exs", "md", "txt", "json", "jsonl", "toml",
    "yaml", "yml", "lock", "html", "css", "sh", "c", "h", "cpp", "sql", "csv", "xml", "cfg", "ini",
];

/// A qualified name's last segment and its qualifier's last segment: `Mod.Sub.fun/2` as
/// (`fun/2`, `Sub`), `Type::method` as (`method`, `Type`), `obj.method()` as (`method`,
/// `obj`).
fn qualified(raw: &str) -> Option<(String, String)> {
    let t = raw.trim().trim_end_matches("()");
    if t.contains(char::is_whitespace)
        || t.contains('/') && !t.rsplit_once('/').is_some_and(|(_, a)| a.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let (qual, last) = t.rsplit_once("::").or_else(|| t.rsplit_once('.'))?;
    let qual = qual.rsplit(['.', ':']).next().unwrap_or(qual);
    let name = last.split('/').next().unwrap_or(last);
    let ident = |s: &str| {
        s.len() >= 2
            && s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    if !ident(qual) || !ident(name) || FILE_EXTENSIONS.contains(&name.to_lowercase().as_str()) {
        return None;
    }
    Some((last.to_string(), qual.to_string()))
}

impl Alias {
    /// The variants of every alias of `fact` (see the module docs). A weak alias (a common word,
    /// a bare number under a hundred) is set aside when the fact has a stronger one.
    pub fn of<S: AsRef<str>>(fact: &[S]) -> Vec<Alias> {
        let strong = fact.iter().any(|a| !a.as_ref().trim().is_empty() && !is_weak_alias(a.as_ref()));
        let mut out: Vec<Alias> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for raw in fact.iter().map(AsRef::as_ref).filter(|a| !strong || !is_weak_alias(a)) {
            let mut variants: Vec<Variant> = Vec::new();
            let mut push = |v: Variant, seen: &mut Vec<String>| {
                if !v.text.is_empty() && !seen.contains(&v.text) {
                    seen.push(v.text.clone());
                    variants.push(v);
                }
            };
            let a = normalize(raw);
            if a.is_empty() {
                continue;
            }
            push(Variant::plain(a.clone()), &mut seen);
            if !a.contains(' ') {
                if let Some((_, name)) = a.trim_end_matches('/').rsplit_once('/') {
                    if name.contains('.') && name.chars().count() >= 4 {
                        push(Variant { text: name.to_string(), file_of: Some(a.clone()), with: None }, &mut seen);
                    }
                }
                let class = raw.trim().rsplit('.').next().unwrap_or_default();
                if a.contains('.') && !a.contains('/') && (class.ends_with("Error") || class.ends_with("Exception")) {
                    push(Variant::plain(class.to_lowercase()), &mut seen);
                } else if let Some((last, qual)) = qualified(raw) {
                    let mut quals = vec![normalize(&qual)];
                    if let Some(words) = identifier_words(&qual) {
                        quals.push(words.join(" "));
                    }
                    push(Variant { text: normalize(&last), file_of: None, with: Some(quals) }, &mut seen);
                }
                if let Some(words) = identifier_words(raw.trim()) {
                    for sep in [" ", "_", "-", ""] {
                        push(Variant::plain(words.join(sep)), &mut seen);
                    }
                }
                if let Ok(n) = a.parse::<usize>() {
                    if n < 100 && !a.starts_with('0') {
                        for w in number_words(n) {
                            push(Variant::plain(w), &mut seen);
                        }
                    }
                }
            }
            if let Some(n) = word_number(&a) {
                push(Variant::plain(n.to_string()), &mut seen);
            }
            for form in word_forms(&a) {
                push(Variant::plain(form), &mut seen);
            }
            for form in amount_words(&a) {
                push(Variant::plain(form), &mut seen);
            }
            if !variants.is_empty() {
                out.push(Alias { variants });
            }
        }
        out
    }
}

/// The first place `variant` matches in `p` (see the module docs); `code_counts` is false for
/// summaries and other inserted text, where a phrase found only in quoted code does not count.
pub fn find(p: &Prepared, variant: &Variant, code_counts: bool) -> Option<Range<usize>> {
    let v = variant.text.as_str();
    let (first, last) = (v.chars().next()?, v.chars().next_back()?);
    let short = !v.contains(' ') && v.chars().count() <= SHORT_WORD && v.chars().all(char::is_alphabetic);
    let phrase = v.contains(' ');
    let text = p.text.as_str();
    let entry_of = |at: usize| {
        let s = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let e = text[at..].find('\n').map_or(text.len(), |i| at + i);
        &text[s..e]
    };
    for (at, _) in text.match_indices(v) {
        let end = at + v.len();
        if short {
            let before = text[..at].chars().next_back();
            let after = text[end..].chars().next();
            if before.is_some_and(|c| c != ' ' && c != '\n') || after.is_some_and(|c| c != ' ' && c != '\n') {
                continue;
            }
        } else if !on_boundaries(text, at, end, is_word(first), is_word(last)) {
            continue;
        }
        if phrase && !code_counts && p.in_code(&(at..end)) {
            continue;
        }
        if let Some(path) = &variant.file_of {
            // Inside a path: only a path the alias ends with.
            if text[..at].ends_with('/') {
                let s = text[..at].rfind([' ', '\n']).map_or(0, |i| i + 1);
                if !path.ends_with(&text[s..end]) {
                    continue;
                }
            } else if other_path_ends_with(text, v, path) {
                continue;
            }
        }
        if let Some(quals) = &variant.with {
            let entry = entry_of(at);
            let found = quals.iter().any(|q| {
                let probe = Variant::plain(q.clone());
                let scratch = Prepared { text: entry.to_string(), tokens: Vec::new(), code: Vec::new() };
                find(&scratch, &probe, true).is_some()
            });
            if !found {
                continue;
            }
        }
        return Some(at..end);
    }
    None
}

/// True when `text` holds a path ending in `/name` that `path` does not end with: the file
/// name alone is then ambiguous.
fn other_path_ends_with(text: &str, name: &str, path: &str) -> bool {
    let needle = format!("/{name}");
    text.match_indices(&needle).any(|(at, _)| {
        let end = at + needle.len();
        if text[end..].chars().next().is_some_and(is_word) {
            return false;
        }
        let s = text[..at].rfind([' ', '\n']).map_or(0, |i| i + 1);
        !path.ends_with(&text[s..end])
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn found(text: &str, alias: &str) -> bool {
        let p = Prepared::new(text);
        Alias::of(&[alias]).iter().flat_map(|a| &a.variants).any(|v| find(&p, v, false).is_some())
    }

    #[test]
    fn numbers_dates_and_status_read_one_way() {
        assert_eq!(normalize("Paid 6,594 (+12) and −5."), "paid 6594 12 and -5");
        assert_eq!(normalize("On May 19, 2024 and 19 May 2024"), "on 2024-05-19 and 2024-05-19");
        assert_eq!(normalize("2024/05/19 05/19/2024 19/05/2024"), "2024-05-19 2024-05-19 2024-05-19");
        assert_eq!(normalize("Changes are not yet committed."), "changes are uncommitted");
        assert_eq!(normalize("All 42 tests passed; the suite is green"), "all 42 tests-pass the tests-pass");
        assert_eq!(normalize("two failing tests"), "two tests-fail");
        assert_eq!(normalize("Step 3 completed, step 4 in progress"), "step 3 done step 4 in-progress");
    }

    #[test]
    fn aliases_match_as_a_summary_writes_them() {
        assert!(found("We paid 6,594 dollars", "6594"));
        assert!(found("flight on May 19, 2024", "2024-05-19"));
        assert!(found("asked to cancel reservation", "cancel_reservation"));
        assert!(found("calls cancelReservation()", "cancel_reservation"));
        assert!(found("uses get_pane_id/1 in the session registry", "SessionRegistry.get_pane_id/1"));
        assert!(!found("uses get_pane_id/1 elsewhere", "SessionRegistry.get_pane_id/1"));
        assert!(found("edited parser.rs", "src/parser.rs"));
        assert!(found("twelve files", "12"));
        assert!(found("12 files", "twelve"));
        assert!(found("The work is not committed yet", "not committed"));
        assert!(!found("The work is not committed yet", "committed"));
        assert!(found("cargo test: all tests pass", "tests passed"));
        assert!(found("migrated to timezone-aware datetimes", "timezone"));
        assert!(found("the balance was refunded", "refund"));
        assert!(found("twenty-five percent of it", "25%"));
        assert!(found("worth fifty dollars", "$50"));
        assert!(!found("Status: not yet fixed", "fixed"));
        assert!(found("Status: not yet fixed", "not fixed"));
        assert!(found("- [in_progress] add the flag", "in progress"));
    }

    #[test]
    fn boundaries_reject_longer_tokens() {
        assert!(!found("built in 2012", "12"));
        assert!(!found("costs 12.5 now", "12"));
        assert!(!found("about 1,200 rows", "200"));
        assert!(!found("edited my-parser.rs", "parser.rs"));
        assert!(!found("read config.toml", "config"));
        assert!(!found("edited lib/other/parser.rs", "src/parser.rs"));
        assert!(found("edited src/parser.rs", "src/parser.rs"));
        assert!(!found("edited parser.rs and lib/parser.rs", "src/parser.rs"), "ambiguous file name");
        assert!(!found("see tests/test_a.py", "test"));
        assert!(found("version 1.2.3 tagged", "1.2.3"));
        assert!(!found("version 1.2.3 tagged", "1.2"));
    }

    #[test]
    fn quoted_code_is_not_a_statement() {
        assert!(!found("Handled it with `rescue error -> log(error)`.", "error ->"));
        assert!(found("Handled it with `rescue error -> log(error)`.", "rescue"));
        assert!(found("The error -> message path is fixed.", "error ->"));
        let p = Prepared::new("```\nlet x = retry loop;\n```\nthe retry loop");
        assert!(find(&p, &Variant::plain("retry loop".into()), false).is_some());
    }

    #[test]
    fn spans_map_back_to_the_source() {
        let src = "Paid  (6,594) on May 19, 2024 to `src/a.rs`.";
        let p = Prepared::new(src);
        let at = p.text.find("6594").unwrap();
        assert_eq!(&src[p.source_span(&(at..at + 4))], "6,594");
        let at = p.text.find("2024-05-19").unwrap();
        assert_eq!(&src[p.source_span(&(at..at + 10))], "May 19, 2024");
        let at = p.text.find("a.rs").unwrap();
        assert_eq!(&src[p.source_span(&(at..at + 4))], "a.rs");
    }
}
