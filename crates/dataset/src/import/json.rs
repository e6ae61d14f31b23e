//! Small helpers to read loosely typed JSON records with located errors.

use serde_json::Value;

use super::source::{compact_json, raw_at, At, Step};
use super::{ImportProblem, Located, Sourced};

/// A string field, or `None` when absent, null or not a string.
pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The array at `key`, or a shape error located at `at.key`.
pub(crate) fn array<'a>(v: &'a Value, key: &str, at: &At) -> Result<&'a Vec<Value>, Located> {
    match v.get(key) {
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(Located::new(at.key(key), ImportProblem::Shape { expected: "an array".into() })),
        None => {
            Err(Located::new(at.key(key), ImportProblem::Shape { expected: "an array (the field is missing)".into() }))
        }
    }
}

/// A scalar or id-like value as a string: strings as they are, numbers and booleans written
/// out, anything else `None`.
pub(crate) fn scalar_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Message text from a content value: a string as it is; null or absent as empty; a list of
/// parts as their texts joined by a newline (images become `[image]`); one part on its own as a
/// part of a list; anything else as JSON.
pub(crate) fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let texts: Vec<String> = parts.iter().filter_map(part_text).collect();
            texts.join("\n")
        }
        // One block on its own reads as a part does: a pasted image is `[image]`, not its
        // base64 data as text (hundreds of thousands of tokens no model was ever sent).
        Some(object @ Value::Object(_)) => part_text(object).unwrap_or_else(|| object.to_string()),
        Some(other) => other.to_string(),
    }
}

/// The text of one content part, if it has any.
fn part_text(part: &Value) -> Option<String> {
    match part {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => {
            let kind = o.get("type").and_then(Value::as_str).unwrap_or("text");
            match kind {
                "image" | "image_url" | "input_image" => Some("[image]".to_string()),
                "document" | "file" | "input_file" => Some("[document]".to_string()),
                _ => o.get("text").and_then(Value::as_str).map(str::to_string),
            }
        }
        _ => None,
    }
}

/// Tool-call arguments as a JSON string: a string as the model produced it, anything else
/// (an object, as tau2 and Claude Code store them) serialized compactly; absent or null as `{}`.
pub(crate) fn arguments(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Parse a value that some formats store as a JSON string holding JSON (`"[{...}]"`).
pub(crate) fn maybe_embedded(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) => serde_json::from_str(s).ok(),
        other => Some(other.clone()),
    }
}

/// The JSON values of a file: the whole text as one document when it parses as one (located
/// at the root, no line), else one value per non-blank line (located at its line). A line that
/// does not parse is an error for that line only.
pub(crate) fn documents(text: &str) -> Vec<Result<(At, Value), Located>> {
    let body = text.trim_start_matches('\u{feff}');
    let whole_error = match serde_json::from_str::<Value>(body) {
        Ok(v) => return vec![Ok((At::default(), v))],
        Err(e) => e,
    };
    // A document broken somewhere (not JSON lines): one error where it breaks.
    let first_line = body.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if serde_json::from_str::<serde::de::IgnoredAny>(first_line).is_err() {
        let detail = json_error(&whole_error);
        return vec![Err(Located::new(At::line(whole_error.line()), ImportProblem::Json { detail }))];
    }
    let mut out = Vec::new();
    for (i, line) in body.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        out.push(match serde_json::from_str::<Value>(line) {
            Ok(v) => Ok((At::line(i + 1), v)),
            Err(e) => Err(Located::new(At::line(i + 1), ImportProblem::Json { detail: json_error(&e) })),
        });
    }
    out
}

/// serde_json's message without its position suffix (the line is reported separately), with
/// the column kept.
pub(crate) fn json_error(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let detail = full.strip_suffix(&suffix).unwrap_or(&full);
    format!("{detail} (column {})", e.column())
}

/// The role of a message, or a located error.
pub(crate) fn role<'a>(m: &'a Value, at: &At) -> Result<&'a str, Located> {
    str_of(m, "role")
        .ok_or_else(|| Located::new(at.key("role"), ImportProblem::Shape { expected: "a role string".into() }))
}

/// Give the calls of `s` whose arguments were a JSON object their object's text as written
/// (parsing sorts keys; the recording's order is the model's). `text` is the JSON document the
/// calls' locations are relative to, after skipping the first `skip` steps of each location;
/// `key` names the arguments field inside a call (`input`, `arguments`).
pub(crate) fn keep_argument_order(s: &mut Sourced, text: &str, skip: usize, key: &str) {
    for (j, call) in s.message.tool_calls.iter_mut().enumerate() {
        if !call.arguments.starts_with('{') {
            continue;
        }
        let Some(at) = s.calls.get(j) else { continue };
        let mut steps: Vec<Step> = at.field.steps().iter().skip(skip).cloned().collect();
        steps.push(Step::Key(key.to_string()));
        if let Some(raw) = raw_at(text, &steps).filter(|r| r.starts_with('{')) {
            call.arguments = compact_json(raw);
        }
    }
}
