//! Shared machinery of the generators: a conversation builder that meters tokens as it goes
//! and records probes, a JSON writer with a fixed key order, calendar arithmetic and a few
//! text helpers. Everything is integer arithmetic, so output bytes depend only on the seed.

use std::collections::BTreeMap;

use compaction::{Conversation, Exact, Message, Probe, ProbeKind, Role, TokenCounter, ToolCall};

use super::rng::Rng;

/// How tool-call ids look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdStyle {
    /// `toolu_01` + 22 base62 characters (Anthropic).
    Anthropic,
    /// `call_` + 24 base62 characters (OpenAI).
    OpenAi,
}

/// One tool call with its result, for [`Builder::tools`].
pub(crate) struct Call {
    pub name: &'static str,
    pub args: String,
    pub result: String,
    pub is_error: bool,
}

impl Call {
    pub fn ok(name: &'static str, args: impl Into<String>, result: impl Into<String>) -> Call {
        Call { name, args: args.into(), result: result.into(), is_error: false }
    }
    pub fn err(name: &'static str, args: impl Into<String>, result: impl Into<String>) -> Call {
        Call { name, args: args.into(), result: result.into(), is_error: true }
    }
}

/// Where one tool round landed: the calling message and each result.
pub(crate) struct Round {
    pub call: usize,
    pub results: Vec<usize>,
}

/// Builds one conversation, metering it with o200k as it grows.
pub(crate) struct Builder {
    messages: Vec<Message>,
    probes: Vec<Probe>,
    tokens: u64,
    meter: Exact,
    ids: Rng,
    style: IdStyle,
    last_call_id: Option<String>,
}

impl Builder {
    pub fn new(ids: Rng, style: IdStyle) -> Builder {
        Builder {
            messages: Vec::new(),
            probes: Vec::new(),
            tokens: 0,
            meter: Exact::o200k(),
            ids,
            style,
            last_call_id: None,
        }
    }

    /// Exact (o200k) tokens so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Index the next message will get.
    pub fn next_index(&self) -> usize {
        self.messages.len()
    }

    /// Append a message. An assistant message right after an assistant message that only has
    /// text is merged into it (one model call writes the text and then calls tools), and a
    /// user message right after a user message becomes one message, so the recording
    /// alternates as chat APIs require; the merged message keeps the earlier index.
    pub fn push(&mut self, mut m: Message) -> usize {
        if m.role == Role::Assistant || m.role == Role::User {
            if let Some(prev) = self.messages.last() {
                let mergeable = prev.role == m.role && prev.tool_calls.is_empty() && prev.stage == m.stage;
                if mergeable {
                    let prev = self.messages.pop().expect("checked: there is a last message");
                    self.tokens -= self.meter.message_tokens(&prev);
                    m.content =
                        if m.content.is_empty() { prev.content } else { format!("{}\n\n{}", prev.content, m.content) };
                    for (k, v) in prev.meta {
                        m.meta.entry(k).or_insert(v);
                    }
                }
            }
        }
        self.tokens += self.meter.message_tokens(&m);
        self.messages.push(m);
        self.messages.len() - 1
    }

    pub fn system(&mut self, text: impl Into<String>) -> usize {
        self.push(Message::system(text))
    }

    pub fn user(&mut self, text: impl Into<String>) -> usize {
        self.push(Message::user(text))
    }

    pub fn assistant(&mut self, text: impl Into<String>) -> usize {
        let mut m = Message::assistant(text);
        m.finish_reason = Some("stop".to_string());
        self.push(m)
    }

    /// A fresh call id in this conversation's style.
    pub fn call_id(&mut self) -> String {
        let id = match self.style {
            IdStyle::Anthropic => format!("toolu_01{}", self.ids.base62(22)),
            IdStyle::OpenAi => format!("call_{}", self.ids.base62(24)),
        };
        self.last_call_id = Some(id.clone());
        id
    }

    /// One assistant message making `calls` in parallel, then their results in call order.
    pub fn tools(&mut self, text: impl Into<String>, calls: Vec<Call>) -> Round {
        let ids: Vec<String> = calls.iter().map(|_| self.call_id()).collect();
        self.tools_with_ids(text, calls, ids)
    }

    /// One call whose id repeats the previous call's id, as some recorded agents do (results
    /// then pair by position).
    pub fn tool_reusing_id(&mut self, text: impl Into<String>, call: Call) -> Round {
        let id = match self.last_call_id.clone() {
            Some(id) => id,
            None => self.call_id(),
        };
        self.tools_with_ids(text, vec![call], vec![id])
    }

    fn tools_with_ids(&mut self, text: impl Into<String>, calls: Vec<Call>, ids: Vec<String>) -> Round {
        let tool_calls = calls
            .iter()
            .zip(&ids)
            .map(|(c, id)| ToolCall { id: id.clone(), name: c.name.to_string(), arguments: c.args.clone() })
            .collect();
        let mut m = Message::assistant_calls(text, tool_calls);
        m.finish_reason = Some("tool_calls".to_string());
        let call = self.push(m);
        let mut results = Vec::with_capacity(calls.len());
        for (c, id) in calls.into_iter().zip(ids) {
            let mut r = Message::tool_result(id, c.name, c.result);
            r.is_error = c.is_error;
            results.push(self.push(r));
        }
        Round { call, results }
    }

    /// Convenience: one call, one result.
    pub fn tool(&mut self, text: impl Into<String>, call: Call) -> Round {
        self.tools(text, vec![call])
    }

    pub fn message_mut(&mut self, index: usize) -> &mut Message {
        &mut self.messages[index]
    }

    /// Record a probe. `slug` names it; a number is appended when the name is taken.
    pub fn probe(&mut self, kind: ProbeKind, slug: &str, q: Q, source: usize) -> String {
        let base = format!("{}-{}", kind.as_str(), slug);
        let mut id = base.clone();
        let mut n = 2;
        while self.probes.iter().any(|p| p.id == id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        self.probes.push(Probe {
            id: id.clone(),
            kind,
            question: q.question,
            answer: q.answer,
            facts: q.facts,
            source_message: source,
            asked_at: None,
            tier: None,
            ..Default::default()
        });
        id
    }

    pub fn count_probes(&self, kind: ProbeKind) -> usize {
        self.probes.iter().filter(|p| p.kind == kind).count()
    }

    /// Ask the probe `id` once `after` messages are in context instead of at the end. Only
    /// moves it when the answer is in context by then (`after > source_message`).
    pub fn ask_probe_at(&mut self, id: &str, after: usize) {
        if let Some(p) = self.probes.iter_mut().find(|p| p.id == id) {
            if after > p.source_message && after <= self.messages.len() {
                p.asked_at = Some(after);
            }
        }
    }

    pub fn finish(self, spec: Finish) -> Conversation {
        let mut meta = BTreeMap::new();
        meta.insert("synth_seed".to_string(), serde_json::Value::from(spec.seed));
        meta.insert("synth_index".to_string(), serde_json::Value::from(spec.index as u64));
        meta.insert("scenario".to_string(), serde_json::Value::from(spec.scenario));
        Conversation {
            id: spec.id,
            source: format!("synthetic/{}", spec.family),
            context_window: Some(spec.window),
            model: spec.model.map(str::to_string),
            messages: self.messages,
            probes: self.probes,
            meta,
        }
    }
}

/// The question, answer and facts of a probe.
pub(crate) struct Q {
    pub question: String,
    pub answer: String,
    pub facts: Vec<Vec<String>>,
}

/// A probe's text: `facts` is a list of alias groups.
pub(crate) fn q(question: impl Into<String>, answer: impl Into<String>, facts: &[&[&str]]) -> Q {
    Q {
        question: question.into(),
        answer: answer.into(),
        facts: facts.iter().map(|g| g.iter().map(|a| a.to_string()).collect()).collect(),
    }
}

/// What [`Builder::finish`] stamps on a conversation.
pub(crate) struct Finish {
    pub id: String,
    pub family: &'static str,
    pub window: u64,
    pub model: Option<&'static str>,
    pub seed: u64,
    pub index: usize,
    pub scenario: String,
}

/// JSON with keys in the order written, so tool outputs read like the API that produced them
/// and do not depend on how a map type orders keys.
#[derive(Debug, Clone)]
pub(crate) enum J {
    Null,
    Bool(bool),
    Int(i64),
    /// A number already formatted (`12.50`): decimals come from integer arithmetic.
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

pub(crate) fn s(text: impl Into<String>) -> J {
    J::Str(text.into())
}

pub(crate) fn int(n: i64) -> J {
    J::Int(n)
}

/// An object from `(key, value)` pairs.
pub(crate) fn obj(pairs: Vec<(&str, J)>) -> J {
    J::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// `cents` as a decimal number with two places (`1250` -> `12.50`).
pub(crate) fn money(cents: i64) -> J {
    J::Num(decimal(cents, 2))
}

/// `value / 10^places` written with exactly `places` decimals, by integer arithmetic.
pub(crate) fn decimal(value: i64, places: u32) -> String {
    if places == 0 {
        return value.to_string();
    }
    let scale = 10i64.pow(places);
    let sign = if value < 0 { "-" } else { "" };
    let v = value.unsigned_abs();
    let scale = scale as u64;
    format!("{sign}{}.{:0width$}", v / scale, v % scale, width = places as usize)
}

/// A JSON string literal for `text`.
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl J {
    /// Compact form with a space after `:` and `,` (as Python's `json.dumps` writes).
    pub fn spaced(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None, 0, true);
        out
    }

    /// Compact form with no spaces (as `JSON.stringify` writes).
    pub fn compact(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None, 0, false);
        out
    }

    /// Indented by two spaces (as `JSON.stringify(v, null, 2)` writes).
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(2), 0, false);
        out
    }

    fn write(&self, out: &mut String, indent: Option<usize>, depth: usize, spaced: bool) {
        let nl = |out: &mut String, d: usize| {
            if let Some(w) = indent {
                out.push('\n');
                out.push_str(&" ".repeat(w * d));
            }
        };
        let sep = if spaced { ", " } else { "," };
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Int(n) => out.push_str(&n.to_string()),
            J::Num(n) => out.push_str(n),
            J::Str(t) => out.push_str(&quote(t)),
            J::Arr(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(if indent.is_some() { "," } else { sep });
                    }
                    nl(out, depth + 1);
                    v.write(out, indent, depth + 1, spaced);
                }
                nl(out, depth);
                out.push(']');
            }
            J::Obj(pairs) => {
                if pairs.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(if indent.is_some() { "," } else { sep });
                    }
                    nl(out, depth + 1);
                    out.push_str(&quote(k));
                    out.push_str(if indent.is_some() || spaced { ": " } else { ":" });
                    v.write(out, indent, depth + 1, spaced);
                }
                nl(out, depth);
                out.push('}');
            }
        }
    }
}

/// Calendar date of a day count since 1970-01-01 (proleptic Gregorian; H. Hinnant's
/// `civil_from_days`).
pub(crate) fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a calendar date (inverse of [`civil`]).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD`.
/// A fixture text (a file under `synth/texts/`, loaded with `include_str!`) with each `{name}`
/// replaced by its value. A placeholder left unfilled is a bug in the generator: it panics,
/// so a test catches it before a dataset ships with a `{name}` in it.
pub(crate) fn fill_text(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in vars {
        let key = format!("{{{name}}}");
        assert!(out.contains(&key), "the text has no {key}");
        out = out.replace(&key, value);
    }
    if let Some(start) = out.find('{') {
        let rest = &out[start + 1..];
        let ident = rest.split('}').next().unwrap_or("");
        let unfilled =
            !ident.is_empty() && ident.len() < 40 && ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        assert!(!unfilled, "placeholder {{{ident}}} was not filled");
    }
    out
}

pub(crate) fn date(days: i64) -> String {
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch.
pub(crate) fn timestamp(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    format!("{}T{:02}:{:02}:{:02}Z", date(days), rem / 3600, rem / 60 % 60, rem % 60)
}

/// Thousands separators: `48213774` -> `48,213,774`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    let first = match digits.len() % 3 {
        0 => 3,
        r => r,
    };
    out.push_str(&digits[..first]);
    for chunk in digits.as_bytes()[first..].chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
    }
    out
}

/// Upper-case the first letter.
pub(crate) fn capitalize(text: &str) -> String {
    let mut c = text.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// `snake_case` -> `CamelCase`.
pub(crate) fn camel(text: &str) -> String {
    text.split('_').map(capitalize).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips_and_knows_leap_years() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(days_from_civil(2024, 2, 29)), "2024-02-29");
        assert_eq!(date(days_from_civil(2024, 2, 29) + 1), "2024-03-01");
        assert_eq!(timestamp(days_from_civil(2024, 4, 2) * 86_400 + 2 * 3600 + 14 * 60 + 7), "2024-04-02T02:14:07Z");
        for d in [-1000, 0, 19_000, 20_000, 30_000] {
            let (y, m, dd) = civil(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn numbers_are_written_without_floats() {
        assert_eq!(decimal(1250, 2), "12.50");
        assert_eq!(decimal(-5, 2), "-0.05");
        assert_eq!(decimal(7, 0), "7");
        assert_eq!(grouped(48_213_774), "48,213,774");
        assert_eq!(grouped(999), "999");
    }

    #[test]
    fn json_keeps_key_order_and_escapes() {
        let v = obj(vec![("b", int(1)), ("a", s("x\"y\n")), ("c", J::Arr(vec![J::Null, J::Bool(true), money(5)]))]);
        assert_eq!(v.compact(), r#"{"b":1,"a":"x\"y\n","c":[null,true,0.05]}"#);
        assert_eq!(v.spaced(), r#"{"b": 1, "a": "x\"y\n", "c": [null, true, 0.05]}"#);
        assert_eq!(
            v.pretty(),
            "{\n  \"b\": 1,\n  \"a\": \"x\\\"y\\n\",\n  \"c\": [\n    null,\n    true,\n    0.05\n  ]\n}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&v.pretty()).expect("valid JSON");
        assert_eq!(parsed["a"], "x\"y\n");
    }
}
