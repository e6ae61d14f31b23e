//! Where imported data comes from: JSON paths, source locations, and the line of a JSON path
//! in a pretty-printed file.

use std::fmt;

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// A JSON path inside one record, displayed as `traj[3].tool_calls[0].id` (empty at the root).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Field(Vec<Step>);

impl Field {
    /// The root of the record.
    pub fn root() -> Field {
        Field(Vec::new())
    }
    /// This path, then object key `key`.
    pub fn key(&self, key: &str) -> Field {
        let mut steps = self.0.clone();
        steps.push(Step::Key(key.to_string()));
        Field(steps)
    }
    /// This path, then array index `index`.
    pub fn at(&self, index: usize) -> Field {
        let mut steps = self.0.clone();
        steps.push(Step::Index(index));
        Field(steps)
    }
    pub fn steps(&self) -> &[Step] {
        &self.0
    }
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(k) if i == 0 => f.write_str(k)?,
                Step::Key(k) => write!(f, ".{k}")?,
                Step::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// Where a piece of a record is: the 1-based line of a JSONL record (`None` in a whole-file
/// JSON document, where the line is found from the path) and the JSON path inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct At {
    pub line: Option<usize>,
    pub field: Field,
}

impl At {
    /// The root of JSONL line `line`.
    pub fn line(line: usize) -> At {
        At { line: Some(line), field: Field::root() }
    }
    /// A path in a whole-file JSON document.
    pub fn path(field: Field) -> At {
        At { line: None, field }
    }
    pub fn key(&self, key: &str) -> At {
        At { line: self.line, field: self.field.key(key) }
    }
    pub fn at(&self, index: usize) -> At {
        At { line: self.line, field: self.field.at(index) }
    }
}

/// The 1-based line where the value at `path` starts in the JSON document `text`, found by
/// scanning the text. When the path goes further than the document (a missing field), the line
/// of the deepest value on the path that exists. `None` for an empty text.
pub fn line_of(text: &str, path: &[Step]) -> Option<usize> {
    let bytes = text.as_bytes();
    let pos = locate(text, path).unwrap_or_else(|(deepest, _)| deepest);
    (!text.trim().is_empty()).then(|| 1 + bytes[..pos].iter().filter(|b| **b == b'\n').count())
}

/// The position of the value at `path`, or `Err((position of the deepest value found, steps
/// found))`.
fn locate(text: &str, path: &[Step]) -> Result<usize, (usize, usize)> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, 0);
    for (n, step) in path.iter().enumerate() {
        let next = match step {
            Step::Key(key) => find_key(text, pos, key),
            Step::Index(index) => find_index(bytes, pos, *index),
        };
        pos = next.ok_or((pos, n))?;
    }
    Ok(pos)
}

/// The JSON text of the value at `path` in `text`, as written.
pub fn raw_at<'a>(text: &'a str, path: &[Step]) -> Option<&'a str> {
    let start = locate(text, path).ok()?;
    let end = skip_value(text.as_bytes(), start)?;
    text.get(start..end)
}

/// JSON text without the whitespace outside strings (key order and number spelling kept).
pub fn compact_json(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in raw.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while pos < bytes.len() && matches!(bytes[pos], b' ' | b'\t' | b'\n' | b'\r' | 0xEF | 0xBB | 0xBF) {
        pos += 1;
    }
    pos
}

/// The position just after the string that starts at `pos` (a `"`).
fn skip_string(bytes: &[u8], mut pos: usize) -> Option<usize> {
    pos += 1;
    while pos < bytes.len() {
        match bytes[pos] {
            b'\\' => pos += 2,
            b'"' => return Some(pos + 1),
            _ => pos += 1,
        }
    }
    None
}

/// The position just after the value that starts at `pos`.
fn skip_value(bytes: &[u8], pos: usize) -> Option<usize> {
    match bytes.get(pos)? {
        b'"' => skip_string(bytes, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut p = pos;
            while p < bytes.len() {
                match bytes[p] {
                    b'"' => {
                        p = skip_string(bytes, p)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(p + 1);
                        }
                    }
                    _ => {}
                }
                p += 1;
            }
            None
        }
        _ => {
            let mut p = pos;
            while p < bytes.len() && !matches!(bytes[p], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                p += 1;
            }
            Some(p)
        }
    }
}

/// In the object at `pos`, the position of the value of `key`.
fn find_key(text: &str, pos: usize, key: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.get(pos) != Some(&b'{') {
        return None;
    }
    let mut p = skip_ws(bytes, pos + 1);
    loop {
        if bytes.get(p) != Some(&b'"') {
            return None;
        }
        let end = skip_string(bytes, p)?;
        let name: Option<String> = serde_json::from_str(&text[p..end]).ok();
        p = skip_ws(bytes, end);
        if bytes.get(p) != Some(&b':') {
            return None;
        }
        p = skip_ws(bytes, p + 1);
        if name.as_deref() == Some(key) {
            return Some(p);
        }
        p = skip_ws(bytes, skip_value(bytes, p)?);
        match bytes.get(p) {
            Some(b',') => p = skip_ws(bytes, p + 1),
            _ => return None,
        }
    }
}

/// In the array at `pos`, the position of item `index`.
fn find_index(bytes: &[u8], pos: usize, index: usize) -> Option<usize> {
    if bytes.get(pos) != Some(&b'[') {
        return None;
    }
    let mut p = skip_ws(bytes, pos + 1);
    if bytes.get(p) == Some(&b']') {
        return None;
    }
    for _ in 0..index {
        p = skip_ws(bytes, skip_value(bytes, p)?);
        match bytes.get(p) {
            Some(b',') => p = skip_ws(bytes, p + 1),
            _ => return None,
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_display_as_paths() {
        let f = Field::root().key("traj").at(3).key("tool_calls").at(0).key("id");
        assert_eq!(f.to_string(), "traj[3].tool_calls[0].id");
        assert_eq!(Field::root().at(2).key("x").to_string(), "[2].x");
        assert_eq!(Field::root().to_string(), "");
    }

    #[test]
    fn line_of_finds_values_in_pretty_json() {
        let text =
            "[\n  {\n    \"a\": \"x\\\"}]\",\n    \"b\": [\n      1,\n      {\"c\": 2}\n    ]\n  },\n  {\"a\": 3}\n]\n";
        let p = |f: Field| line_of(text, f.steps());
        assert_eq!(p(Field::root()), Some(1));
        assert_eq!(p(Field::root().at(0)), Some(2));
        assert_eq!(p(Field::root().at(0).key("a")), Some(3));
        assert_eq!(p(Field::root().at(0).key("b").at(1).key("c")), Some(6));
        assert_eq!(p(Field::root().at(1).key("a")), Some(9));
        // Past the document: the deepest value that exists.
        assert_eq!(p(Field::root().at(2)), Some(1));
        assert_eq!(p(Field::root().at(0).key("zzz")), Some(2));
        assert_eq!(line_of("  ", &[]), None);
    }

    #[test]
    fn raw_values_keep_their_key_order() {
        let text = "{\"a\": [1, {\"z\": 1,\n \"b\": \"x y\\\" }\"}]}";
        let raw = raw_at(text, Field::root().key("a").at(1).steps()).expect("found");
        assert_eq!(raw, "{\"z\": 1,\n \"b\": \"x y\\\" }\"}");
        assert_eq!(compact_json(raw), "{\"z\":1,\"b\":\"x y\\\" }\"}");
        assert_eq!(raw_at(text, Field::root().key("nope").steps()), None);
    }
}
