//! An external strategy as an experiment names it: a `[[strategy]]` table with
//! `name = "external"`, the `command` that starts it, an optional `label` (its name in every
//! CSV and the report) and `timeout_s`, and any other keys, sent to it as `params`. The
//! protocol is `docs/external-strategies.md`; the process is the runner's
//! (`runner::external`).

use serde::{Deserialize, Serialize};

/// The strategy name that makes a `[[strategy]]` table an external strategy.
pub const EXTERNAL: &str = "external";

/// The default seconds an external strategy has for each answer.
pub const DEFAULT_TIMEOUT_S: u64 = 60;

/// An external strategy, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalSpec {
    /// The program and its arguments; a relative program path is relative to the experiment
    /// file's folder (a bare name is looked up on `PATH`).
    pub command: Vec<String>,
    /// Its name in results (`external` unless the table sets `label`).
    pub label: String,
    /// Seconds allowed per answer.
    pub timeout_s: u64,
    /// The table's other keys, sent in `init`.
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl ExternalSpec {
    /// Read a `[[strategy]]` table whose name is `external`; `builtin` are the built-in
    /// strategies' names, which a label may not take. An error is (key, problem).
    pub fn from_table(table: &toml::Table, builtin: &[&str]) -> Result<ExternalSpec, (Option<String>, String)> {
        let problem = |key: &str, p: &str| (Some(key.to_string()), p.to_string());
        let command = match table.get("command") {
            Some(toml::Value::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| problem("command", "every item is a string: the program, then its arguments"))?,
            Some(_) => return Err(problem("command", "a non-empty list: the program, then its arguments")),
            None => {
                return Err(problem(
                    "command",
                    "missing; an external strategy names the program to start, e.g. [\"python3\", \"mine.py\"]",
                ))
            }
        };
        if command[0].trim().is_empty() {
            return Err(problem("command", "the program is empty"));
        }
        let label = match table.get("label") {
            None => EXTERNAL.to_string(),
            Some(toml::Value::String(s)) => s.clone(),
            Some(_) => return Err(problem("label", "a string")),
        };
        let label_ok = !label.is_empty()
            && label.len() <= 64
            && label.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !label_ok {
            return Err(problem("label", "1 to 64 letters, digits, `-`, `_` or `.` (it names files and CSV rows)"));
        }
        if label != EXTERNAL && builtin.contains(&label.as_str()) {
            return Err(problem("label", "is a built-in strategy's name; pick another so the rows are told apart"));
        }
        let timeout_s = match table.get("timeout_s") {
            None => DEFAULT_TIMEOUT_S,
            Some(toml::Value::Integer(n)) if *n > 0 => *n as u64,
            Some(_) => return Err(problem("timeout_s", "a whole number of seconds, at least 1")),
        };
        let mut params = serde_json::Map::new();
        for (k, v) in table {
            if matches!(k.as_str(), "name" | "command" | "label" | "timeout_s") {
                continue;
            }
            if let toml::Value::Float(f) = v {
                if !f.is_finite() {
                    return Err(problem(k, "not a finite number"));
                }
            }
            let j = serde_json::to_value(v).map_err(|e| (Some(k.clone()), format!("cannot send it as JSON: {e}")))?;
            params.insert(k.clone(), j);
        }
        Ok(ExternalSpec { command, label, timeout_s, params })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(toml: &str) -> Result<ExternalSpec, (Option<String>, String)> {
        ExternalSpec::from_table(&toml.parse::<toml::Table>().unwrap(), &["none", "keep-last-n"])
    }

    #[test]
    fn the_table_reads_with_defaults_and_passes_other_keys_as_params() {
        let s = spec("name = \"external\"\ncommand = [\"python3\", \"mine.py\"]\nkeep = 12\nmode = \"fast\"").unwrap();
        assert_eq!(s.command, ["python3", "mine.py"]);
        assert_eq!((s.label.as_str(), s.timeout_s), ("external", DEFAULT_TIMEOUT_S));
        assert_eq!(serde_json::Value::Object(s.params), serde_json::json!({"keep": 12, "mode": "fast"}));
    }

    #[test]
    fn bad_tables_name_the_key() {
        for (toml, key) in [
            ("name = \"external\"", "command"),
            ("command = []", "command"),
            ("command = [\"x\", 3]", "command"),
            ("command = [\"x\"]\nlabel = \"my label\"", "label"),
            ("command = [\"x\"]\nlabel = \"keep-last-n\"", "label"),
            ("command = [\"x\"]\ntimeout_s = 0", "timeout_s"),
        ] {
            let (k, _) = spec(toml).unwrap_err();
            assert_eq!(k.as_deref(), Some(key), "{toml}");
        }
    }
}
