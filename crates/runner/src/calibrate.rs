//! Judge calibration: how often a judge agrees with a person on whether a fact is stated.
//!
//! A labels file is JSONL, one item a line:
//! `{"id": "...", "context": "text the judge reads", "facts": [["alias", "alias"], ...],
//! "retained": [true, false, ...]}`, with one human verdict per fact (is the fact stated in the
//! context, in any words?). [`calibrate`] asks a [`Judge`] about every fact of every item, one
//! fact at a time, against a context of one message holding the item's text, and counts where
//! it agrees. A fact is retained by the judge when its score is at least one half (the offline
//! judge scores a single fact 0 or 1; an LLM judge's grade is normalized to 0..1, and its
//! per-fact word is used when the grader gave one); an LLM verdict that did not parse, and a
//! fact the grader quoted from outside the context, are counted apart (unscored), not as
//! disagreements.
//!
//! ```
//! use runner::calibrate::{calibrate, parse_labels};
//! use runner::judge::OfflineJudge;
//!
//! let text = r#"{"id":"a","context":"Edited src/parser.rs.","facts":[["src/parser.rs"],["lexer.rs"]],"retained":[true,false]}"#;
//! let items = parse_labels(text, "labels.jsonl".as_ref()).unwrap();
//! let report = calibrate(&items, &OfflineJudge);
//! assert_eq!(report.accuracy(), Some(1.0));
//! assert!(report.disagreements.is_empty());
//! ```

use std::path::{Path, PathBuf};

use compaction::{Context, Conversation, Message, Probe, ProbeKind};
use serde::Deserialize;

use crate::judge::Judge;

/// One labelled item.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelledItem {
    pub id: String,
    /// The text the judge reads.
    pub context: String,
    /// Each fact's aliases.
    pub facts: Vec<Vec<String>>,
    /// One human verdict per fact: stated in the context, in any words.
    pub retained: Vec<bool>,
    /// Where the item comes from (`paraphrase`, `extractive`, `near-miss`); optional.
    #[serde(default)]
    pub group: Option<String>,
    /// What the item tests ([`CATEGORIES`]): the facts stated in other words (`paraphrase`),
    /// an alias occurring in another sense or a longer token (`near-miss`), the facts copied
    /// as written (`verbatim`), or not stated at all (`absent`). Figures are given per category.
    #[serde(default)]
    pub category: Option<String>,
}

/// The categories a labelled item may have.
pub const CATEGORIES: [&str; 4] = ["paraphrase", "near-miss", "verbatim", "absent"];

/// A labels file that cannot be used: the file, the line and the field.
#[derive(Debug, thiserror::Error)]
pub enum LabelsError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}: {detail}")]
    Json { file: PathBuf, line: usize, detail: String },
    #[error("{file}:{line}: item {id}, field {field}: {problem}")]
    Item { file: PathBuf, line: usize, id: String, field: String, problem: String },
}

/// Read a labels file.
pub fn load_labels(path: &Path) -> Result<Vec<LabelledItem>, LabelsError> {
    let text = inputs::read_to_string(path, inputs::Kind::Recording)
        .map_err(|e| LabelsError::Io { file: path.into(), source: e.into_io() })?;
    parse_labels(&text, path)
}

/// Parse the text of a labels file (`path` names it in errors).
pub fn parse_labels(text: &str, path: &Path) -> Result<Vec<LabelledItem>, LabelsError> {
    let mut out: Vec<LabelledItem> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let item: LabelledItem = serde_json::from_str(line).map_err(|e| LabelsError::Json {
            file: path.into(),
            line: line_no,
            detail: e.to_string(),
        })?;
        let problem = |field: &str, problem: String| LabelsError::Item {
            file: path.into(),
            line: line_no,
            id: item.id.clone(),
            field: field.into(),
            problem,
        };
        if item.facts.len() != item.retained.len() {
            return Err(problem(
                "retained",
                format!("{} verdicts for {} facts: one per fact", item.retained.len(), item.facts.len()),
            ));
        }
        if item.facts.is_empty() {
            return Err(problem("facts", "no fact".into()));
        }
        if let Some(k) = item.facts.iter().position(|f| f.iter().all(|a| a.trim().is_empty())) {
            return Err(problem(&format!("facts[{k}]"), "no alias".into()));
        }
        if item.context.trim().is_empty() {
            return Err(problem("context", "empty".into()));
        }
        if let Some(c) = item.category.as_deref().filter(|c| !CATEGORIES.contains(c)) {
            return Err(problem("category", format!("{c:?} is not one of {}", CATEGORIES.join(", "))));
        }
        if out.iter().any(|o| o.id == item.id) {
            return Err(problem("id", "used by an earlier item".into()));
        }
        out.push(item);
    }
    Ok(out)
}

/// A fact where the judge and the label differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    pub item: String,
    pub fact: usize,
    pub aliases: Vec<String>,
    /// The human verdict.
    pub label: bool,
    /// The judge's verdict.
    pub judged: bool,
}

/// Agreement counts of one judge on some facts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub true_positives: usize,
    pub false_positives: usize,
    pub true_negatives: usize,
    pub false_negatives: usize,
}

impl Counts {
    fn add(&mut self, label: bool, judged: bool) {
        match (label, judged) {
            (true, true) => self.true_positives += 1,
            (false, true) => self.false_positives += 1,
            (false, false) => self.true_negatives += 1,
            (true, false) => self.false_negatives += 1,
        }
    }
    /// Facts scored.
    pub fn scored(&self) -> usize {
        self.true_positives + self.false_positives + self.true_negatives + self.false_negatives
    }
    /// Share of scored facts where the judge agrees with the label.
    pub fn accuracy(&self) -> Option<f64> {
        ratio(self.true_positives + self.true_negatives, self.scored())
    }
    /// Of the facts the judge credits, the share a person credits too.
    pub fn precision(&self) -> Option<f64> {
        ratio(self.true_positives, self.true_positives + self.false_positives)
    }
    /// Of the facts a person credits, the share the judge credits too.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.true_positives, self.true_positives + self.false_negatives)
    }
    /// Cohen's kappa: agreement beyond what the two sides' rates of "stated" give by chance.
    /// `None` without facts, or when chance agreement is total (one verdict only on both sides).
    pub fn kappa(&self) -> Option<f64> {
        let n = self.scored() as f64;
        if n == 0.0 {
            return None;
        }
        let observed = (self.true_positives + self.true_negatives) as f64 / n;
        let judged_yes = (self.true_positives + self.false_positives) as f64 / n;
        let label_yes = (self.true_positives + self.false_negatives) as f64 / n;
        let chance = judged_yes * label_yes + (1.0 - judged_yes) * (1.0 - label_yes);
        (chance < 1.0).then(|| (observed - chance) / (1.0 - chance))
    }
}

/// How a judge did on a labels set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CalibrationReport {
    pub judge: String,
    /// The counts per item category (items without one under `uncategorized`).
    pub by_category: std::collections::BTreeMap<String, Counts>,
    /// Labelled retained, judged retained.
    pub true_positives: usize,
    /// Labelled not retained, judged retained: false credit.
    pub false_positives: usize,
    /// Labelled not retained, judged not retained.
    pub true_negatives: usize,
    /// Labelled retained, judged not retained: a miss.
    pub false_negatives: usize,
    /// Facts the judge could not score (an LLM verdict that did not parse).
    pub unscored: usize,
    pub disagreements: Vec<Disagreement>,
}

impl CalibrationReport {
    /// Facts scored.
    pub fn scored(&self) -> usize {
        self.counts().scored()
    }

    /// Share of scored facts where the judge agrees with the label ([`Counts::accuracy`]).
    pub fn accuracy(&self) -> Option<f64> {
        self.counts().accuracy()
    }

    /// Of the facts the judge credits, the share a person credits too ([`Counts::precision`]).
    pub fn precision(&self) -> Option<f64> {
        self.counts().precision()
    }

    /// Of the facts a person credits, the share the judge credits too ([`Counts::recall`]).
    pub fn recall(&self) -> Option<f64> {
        self.counts().recall()
    }

    /// All facts' counts together.
    pub fn counts(&self) -> Counts {
        Counts {
            true_positives: self.true_positives,
            false_positives: self.false_positives,
            true_negatives: self.true_negatives,
            false_negatives: self.false_negatives,
        }
    }

    /// Cohen's kappa over all facts ([`Counts::kappa`]).
    pub fn kappa(&self) -> Option<f64> {
        self.counts().kappa()
    }
}

fn ratio(a: usize, b: usize) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// Score every fact of `items` with `judge` (see the module docs).
pub fn calibrate(items: &[LabelledItem], judge: &dyn Judge) -> CalibrationReport {
    let mut report = CalibrationReport { judge: judge.name(), ..CalibrationReport::default() };
    for item in items {
        let message = Message::user(item.context.clone());
        let conversation = Conversation::new(item.id.clone(), vec![message.clone()]);
        let ctx = Context::from_messages(vec![message]);
        for (k, (fact, &label)) in item.facts.iter().zip(&item.retained).enumerate() {
            let probe = Probe {
                id: format!("{}#{k}", item.id),
                kind: ProbeKind::Recall,
                question: format!("What does the context say about {}?", fact.first().map_or("", String::as_str)),
                answer: fact.first().cloned().unwrap_or_default(),
                facts: vec![fact.clone()],
                source_message: 0,
                asked_at: None,
                tier: None,
                ..Default::default()
            };
            let score = judge.score(&conversation, &ctx, &probe);
            if !runlog::record::is_scored(&score) {
                report.unscored += 1;
                continue;
            }
            // An LLM grader's word on the fact itself, when it gave one: stated with a quote
            // the context holds, or not stated; a quote from outside the context is unscored.
            let word = score.llm.as_ref().and_then(|d| d.pointer("/facts/0")).cloned();
            if word.as_ref().is_some_and(|f| f["verified"] == serde_json::Value::Bool(false)) {
                report.unscored += 1;
                continue;
            }
            let judged = match word.as_ref().and_then(|f| f["stated"].as_bool()) {
                Some(stated) => stated,
                None => score.score >= 0.5,
            };
            match (label, judged) {
                (true, true) => report.true_positives += 1,
                (false, true) => report.false_positives += 1,
                (false, false) => report.true_negatives += 1,
                (true, false) => report.false_negatives += 1,
            }
            let category = item.category.as_deref().unwrap_or("uncategorized");
            report.by_category.entry(category.to_string()).or_default().add(label, judged);
            if label != judged {
                report.disagreements.push(Disagreement {
                    item: item.id.clone(),
                    fact: k,
                    aliases: fact.clone(),
                    label,
                    judged,
                });
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::OfflineJudge;

    #[test]
    fn counts_agreement_and_lists_disagreements() {
        let text = [
            r#"{"id":"p1","context":"We updated the ignore file.","facts":[[".gitignore"]],"retained":[true]}"#,
            r#"{"id":"e1","context":"Edited src/a.rs and ran cargo test.","facts":[["src/a.rs"],["b.rs"]],"retained":[true,false]}"#,
        ]
        .join("\n");
        let items = parse_labels(&text, Path::new("l.jsonl")).expect("parses");
        let r = calibrate(&items, &OfflineJudge);
        assert_eq!((r.true_positives, r.false_positives, r.true_negatives, r.false_negatives), (1, 0, 1, 1));
        assert_eq!(r.accuracy(), Some(2.0 / 3.0));
        assert_eq!(r.precision(), Some(1.0));
        assert_eq!(r.recall(), Some(0.5));
        assert_eq!(r.disagreements.len(), 1);
        // Kappa: observed 2/3; chance 1/3 * 2/3 + 2/3 * 1/3 = 4/9; (2/3 - 4/9) / (5/9) = 2/5.
        assert!((r.kappa().unwrap() - 0.4).abs() < 1e-9);
        assert_eq!(r.by_category["uncategorized"].scored(), 3);
        assert_eq!((r.disagreements[0].item.as_str(), r.disagreements[0].label), ("p1", true));
    }

    #[test]
    fn bad_labels_name_the_line_and_field() {
        let text = "\n{\"id\":\"a\",\"context\":\"x\",\"facts\":[[\"x\"]],\"retained\":[true,false]}";
        let e = parse_labels(text, Path::new("l.jsonl")).expect_err("one verdict too many");
        assert_eq!(e.to_string(), "l.jsonl:2: item a, field retained: 2 verdicts for 1 facts: one per fact");
        let e = parse_labels("{\"id\":\"a\"}", Path::new("l.jsonl")).expect_err("fields missing");
        assert!(e.to_string().starts_with("l.jsonl:1: missing field"), "{e}");
        let two = "{\"id\":\"a\",\"context\":\"x\",\"facts\":[[\"x\"]],\"retained\":[true]}\n".repeat(2);
        let e = parse_labels(&two, Path::new("l.jsonl")).expect_err("duplicate id");
        assert!(e.to_string().contains("field id"), "{e}");
        let bad = "{\"id\":\"a\",\"context\":\"x\",\"facts\":[[\"x\"]],\"retained\":[true],\"category\":\"other\"}";
        let e = parse_labels(bad, Path::new("l.jsonl")).expect_err("unknown category");
        assert!(e.to_string().contains("field category"), "{e}");
    }

    #[test]
    fn figures_are_given_per_category() {
        let text = [
            r#"{"id":"p","context":"We updated the ignore file.","facts":[[".gitignore"]],"retained":[true],"category":"paraphrase"}"#,
            r#"{"id":"n","context":"the main reason","facts":[["main"]],"retained":[false],"category":"near-miss"}"#,
            r#"{"id":"v","context":"Edited src/a.rs.","facts":[["src/a.rs"],["b.rs"]],"retained":[true,false],"category":"verbatim"}"#,
        ]
        .join("\n");
        let r = calibrate(&parse_labels(&text, Path::new("l.jsonl")).expect("parses"), &OfflineJudge);
        assert_eq!(r.by_category.len(), 3);
        assert_eq!(r.by_category["paraphrase"].false_negatives, 1);
        assert_eq!(r.by_category["near-miss"].false_positives, 1, "a short word in another sense");
        assert_eq!(r.by_category["verbatim"].accuracy(), Some(1.0));
        assert_eq!(r.by_category["verbatim"].kappa(), Some(1.0));
        // One verdict on both sides: kappa is undefined.
        assert_eq!(Counts { true_positives: 3, ..Counts::default() }.kappa(), None);
    }
}
