//! The JSON Schema of a dataset line, and a shape check driven by it.
//!
//! The schema is generated from [`compaction::Conversation`] with schemars and committed as
//! `datasets/conversation.schema.json` (a test fails when they drift). The same schema drives
//! [`check_shape`], so the loader's messages for missing fields, wrong types and unknown
//! roles follow the types without repeating them here. It understands the subset of JSON
//! Schema that schemars emits for these types: `type`, `properties`, `required`, `items`,
//! `$ref` into `$defs`, `enum`, `oneOf` of constants and `minimum`.

use std::sync::OnceLock;

use serde_json::Value;

/// The schema of one dataset line (a [`compaction::Conversation`]), as JSON.
pub fn conversation_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(compaction::Conversation)).unwrap_or(Value::Null)
}

/// The schema as committed: pretty JSON with a trailing newline.
pub fn conversation_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&conversation_schema()).unwrap_or_default();
    s.push('\n');
    s
}

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(conversation_schema)
}

/// A step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// A shape problem at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShapeIssue {
    pub path: Vec<Step>,
    pub problem: super::Problem,
}

/// Check `value` against the conversation schema; every problem found, in document order.
pub(crate) fn check_shape(value: &Value) -> Vec<ShapeIssue> {
    let root = schema();
    let mut out = Vec::new();
    let mut path = Vec::new();
    walk(root, root, None, value, &mut path, &mut out);
    out
}

/// The definition name behind a `$ref`, turned into words: `ProbeKind` -> `probe kind`.
fn words(def: &str) -> String {
    let mut s = String::new();
    for (i, c) in def.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            s.push(' ');
        }
        s.extend(c.to_lowercase());
    }
    s
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A short description of a value for error messages.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("{} {n}", type_name(v)),
        Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            if short.len() < s.len() {
                format!("string {short:?}...")
            } else {
                format!("string {s:?}")
            }
        }
        Value::Array(a) => format!("array of {}", a.len()),
        Value::Object(_) => "object".to_string(),
    }
}

fn matches_type(t: &str, v: &Value) -> bool {
    match t {
        "integer" => matches!(v, Value::Number(n) if n.is_u64() || n.is_i64()),
        "number" => v.is_number(),
        other => type_name(v) == other,
    }
}

fn walk(
    root: &Value,
    schema: &Value,
    def: Option<&str>,
    value: &Value,
    path: &mut Vec<Step>,
    out: &mut Vec<ShapeIssue>,
) {
    use super::Problem;
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        if let Some(target) = root.get("$defs").and_then(|d| d.get(name)) {
            walk(root, target, Some(name), value, path, out);
        }
        return;
    }
    // Closed sets of strings: `enum`, or `oneOf` alternatives that are all constants.
    let allowed: Option<Vec<&Value>> =
        schema.get("enum").and_then(Value::as_array).map(|a| a.iter().collect()).or_else(|| {
            let alts = schema.get("oneOf")?.as_array()?;
            alts.iter().map(|a| a.get("const")).collect::<Option<Vec<_>>>()
        });
    if let Some(allowed) = allowed {
        if !allowed.contains(&value) {
            let names: Vec<String> =
                allowed.iter().map(|a| a.as_str().map(str::to_string).unwrap_or_else(|| a.to_string())).collect();
            let problem = match value {
                Value::String(s) => Problem::UnknownValue {
                    what: def.map(words).unwrap_or_else(|| "value".to_string()),
                    value: s.clone(),
                    allowed: names,
                },
                other => {
                    Problem::WrongType { expected: format!("one of {}", names.join(", ")), found: describe(other) }
                }
            };
            out.push(ShapeIssue { path: path.clone(), problem });
        }
        return;
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| matches_type(t, value)) {
            let mut expected = types.join(" or ");
            let minimum = schema.get("minimum").and_then(Value::as_f64);
            if types.contains(&"integer") && minimum == Some(0.0) {
                expected = expected.replace("integer", "non-negative integer");
            }
            out.push(ShapeIssue {
                path: path.clone(),
                problem: Problem::WrongType { expected, found: describe(value) },
            });
            return;
        }
    }
    match value {
        Value::Number(n) => {
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                if n.as_f64().is_some_and(|x| x < min) {
                    out.push(ShapeIssue {
                        path: path.clone(),
                        problem: Problem::WrongType {
                            expected: "non-negative integer".to_string(),
                            found: describe(value),
                        },
                    });
                }
            }
        }
        Value::Object(map) => {
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for name in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(name) {
                        path.push(Step::Key(name.to_string()));
                        out.push(ShapeIssue { path: path.clone(), problem: Problem::MissingField });
                        path.pop();
                    }
                }
            }
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                // Walk in the schema's order so problems come out in a stable order.
                for (name, sub) in props {
                    if let Some(v) = map.get(name) {
                        path.push(Step::Key(name.clone()));
                        walk(root, sub, None, v, path, out);
                        path.pop();
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    walk(root, sub, None, v, path, out);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}
