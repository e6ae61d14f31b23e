//! Experiment files: a TOML matrix of datasets, windows and strategy parameter grids.
//!
//! An experiment names the datasets to replay, the context windows, the tokenizer, the
//! provider's cache profile, the price of the replayed model, the summarizer, the judge, the
//! bootstrap seed, and one `[[strategy]]` table per strategy. In a strategy table every
//! list-valued parameter is a grid axis and the cross product of the axes is run; scalars are
//! fixed. Every key is documented in `experiments/README.md`.
//!
//! Parsing is eager: each expanded configuration is resolved and built by the strategy catalog
//! the caller supplies ([`StrategyCatalog`]: the run log knows no strategy), so an unknown key or
//! a bad value is reported before anything runs, naming the file, the line of the
//! `[[strategy]]` table, its index and the key.
//!
//! ```
//! use runlog::catalog::{Resolved, StrategyCatalog};
//! use runlog::experiment::Experiment;
//!
//! /// A catalog of one strategy with two parameters and no defaults to fill in.
//! struct One;
//! impl StrategyCatalog for One {
//!     fn names(&self) -> Vec<&str> {
//!         vec!["keep-last-n"]
//!     }
//!     fn default_for(&self, name: &str) -> Option<Resolved> {
//!         (name == "keep-last-n").then(|| Resolved::of(&serde_json::json!({ "name": name })).unwrap())
//!     }
//!     fn params(&self, _: &str) -> Vec<String> {
//!         vec!["recent_messages_to_keep".into(), "threshold_percent".into()]
//!     }
//!     fn resolve(
//!         &self,
//!         name: &str,
//!         params: &serde_json::Map<String, serde_json::Value>,
//!     ) -> Result<Resolved, (Option<String>, String)> {
//!         let mut all = params.clone();
//!         all.insert("name".into(), name.into());
//!         Resolved::of(&all).map_err(|e| (None, e.to_string()))
//!     }
//! }
//!
//! let text = r#"
//! name = "demo"
//! datasets = ["data"]
//! windows = [32000, 128000]
//! judge = "offline"
//!
//! [[strategy]]
//! name = "keep-last-n"
//! recent_messages_to_keep = [5, 10]
//! threshold_percent = 0.8
//! "#;
//! let exp = Experiment::parse(text, std::path::Path::new("experiments/demo.toml"), &One).unwrap();
//! // two keep counts x two windows
//! assert_eq!(exp.configurations.len(), 4);
//! assert!(exp.configurations[0].config_id.starts_with("keep-last-n-32k-"));
//!
//! let bad = text.replace("threshold_percent", "threshold_pct");
//! let err = Experiment::parse(&bad, std::path::Path::new("demo.toml"), &One).unwrap_err();
//! assert!(err.to_string().contains("`threshold_pct`"), "{err}");
//! ```
//!
//! The configuration id ([`Configuration::config_id`]) is a readable prefix (strategy and
//! window) and 16 hexadecimal digits of the SHA-256 ([`id_hash`]) of a canonical JSON of everything that defines the
//! configuration: the strategy, its parameters as written (after grid expansion, not with
//! defaults filled in, so that changing a default keeps the id and the regression gate
//! compares the old and new behaviour), the window, the tokenizer, the cache profile, the
//! price, the summarizer and the judge, and the overflow policy when it is not the default. It does not depend on the order of tables or keys.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use compaction::Encoding;
use serde::{Deserialize, Serialize};

use crate::catalog::{Resolved, StrategyCatalog};
use crate::external::{ExternalSpec, EXTERNAL};
use crate::llm_settings::{self as llm_setup, LlmSettings, RawLlm, RawRole};
pub use crate::llm_settings::{JudgeSpec, SummarizerSpec};
use crate::settings::{read_price_file, PriceTable};
use crate::settings::{CacheProfile, OverflowPolicy};
pub use crate::settings::{CacheTtl, PriceSpec};

/// The default price table, looked up beside the experiment file.
pub const PRICES_FILE: &str = "prices.toml";

/// A parsed, validated experiment with its expanded configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    pub name: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The experiment file as it was given.
    pub file: String,
    /// Dataset files or folders, as written (relative to the experiment file).
    pub datasets: Vec<String>,
    /// Context windows (a grid axis); empty: each conversation's own `context_window`.
    pub windows: Vec<u64>,
    pub tokenizer: Encoding,
    pub cache: CacheProfile,
    /// What a request over the window does: `fail` (the default: the provider rejects it and
    /// the conversation ends) or `continue` (it proceeds; for diagnosis).
    #[serde(default)]
    pub overflow: OverflowPolicy,
    /// The replayed model's price, if any (`None` prices every call at zero).
    pub price: Option<PriceSpec>,
    pub summarizer: SummarizerSpec,
    pub judge: JudgeSpec,
    /// The models of an `llm` summarizer, judge or next-action model, the judge's repeats and
    /// the response cache (see `runner::llm_setup`); `None` when every role is offline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
    /// Seed of the bootstrap confidence intervals.
    pub seed: u64,
    /// Answer keys per dataset: a dataset entry as `datasets` writes it, and the keys file
    /// attached to its conversations (both relative to the experiment file).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub keys: std::collections::BTreeMap<String, String>,
    /// The `[[strategy]]` tables as written.
    pub strategies: Vec<serde_json::Value>,
    /// Every configuration of the matrix, in order: table by table, the table's grid in
    /// lexicographic order of its axes (keys sorted), then each window.
    pub configurations: Vec<Configuration>,
}

/// One configuration of the matrix (besides the conversation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Configuration {
    /// Stable id: `<strategy>-<window>-<hash>`, e.g. `keep-last-n-32k-991c790a6d861978`.
    pub config_id: String,
    pub strategy: String,
    /// The parameters as written, after grid expansion (an object; defaults not filled in).
    pub params: serde_json::Value,
    /// The window in tokens; `None`: each conversation's own `context_window`.
    pub window: Option<u64>,
    /// The strategy with every parameter resolved (defaults filled in), validated. For an
    /// external strategy, `none`'s: what runs is [`Configuration::external`].
    pub resolved: Resolved,
    /// The external strategy this configuration runs, when it is one (`strategy` is then its
    /// label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalSpec>,
}

/// Why an experiment file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// TOML syntax, a missing or unknown top-level key, or a value of the wrong type; the
    /// message shows the line.
    #[error("{}: {message}", path.display())]
    Toml { path: PathBuf, message: String },
    /// A top-level key with a bad value.
    #[error("{}: key `{key}`: {problem}", path.display())]
    Key { path: PathBuf, key: String, problem: String },
    /// A `[[strategy]]` table with an unknown key or a bad value.
    #[error("{}:{line}: [[strategy]] #{index} ({name}){}: {problem}", path.display(), key_part(key))]
    Strategy {
        path: PathBuf,
        /// The line of the table header.
        line: usize,
        /// 1-based index of the table in the file.
        index: usize,
        name: String,
        key: Option<String>,
        problem: String,
    },
}

fn key_part(key: &Option<String>) -> String {
    key.as_ref().map(|k| format!(", key `{k}`")).unwrap_or_default()
}

/// The file as written; unknown keys are errors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    name: String,
    #[serde(default)]
    description: Option<String>,
    datasets: Vec<String>,
    #[serde(default)]
    windows: Vec<u64>,
    #[serde(default = "default_tokenizer")]
    tokenizer: Encoding,
    #[serde(default, alias = "provider")]
    cache: Option<CacheProfile>,
    #[serde(default)]
    overflow: OverflowPolicy,
    #[serde(default)]
    price: Option<toml::Value>,
    #[serde(default)]
    prices: Option<String>,
    #[serde(default)]
    cache_ttl: CacheTtl,
    #[serde(default, deserialize_with = "llm_setup::summarizer_role")]
    summarizer: RawRole,
    #[serde(default, deserialize_with = "llm_setup::judge_role")]
    judge: RawRole,
    #[serde(default, deserialize_with = "llm_setup::next_action_role")]
    next_action: RawRole,
    #[serde(default)]
    llm: Option<llm::LlmConfig>,
    #[serde(default)]
    judge_repeats: Option<u32>,
    #[serde(default)]
    cache_mode: Option<llm::CacheMode>,
    #[serde(default)]
    on_llm_error: Option<crate::llm_settings::OnLlmError>,
    #[serde(default)]
    cache_dir: Option<String>,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    keys: std::collections::BTreeMap<String, String>,
    #[serde(default, rename = "strategy")]
    strategies: Vec<toml::Spanned<toml::Table>>,
}

fn default_tokenizer() -> Encoding {
    Encoding::O200kBase
}

impl Experiment {
    /// Read and parse an experiment file, its strategies checked against `catalog`.
    pub fn load(path: &Path, catalog: &dyn StrategyCatalog) -> Result<Experiment, ExperimentError> {
        Experiment::load_with_env(path, &|_| None, catalog)
    }

    /// [`Experiment::load`], reading the variables an `[llm]` table names (`model_env`,
    /// `base_url_env`) with `env` (the caller's environment: this crate never reads it).
    pub fn load_with_env(
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        catalog: &dyn StrategyCatalog,
    ) -> Result<Experiment, ExperimentError> {
        let text = inputs::read_to_string(path, inputs::Kind::Settings)
            .map_err(|e| ExperimentError::Read { path: path.to_path_buf(), source: e.into_io() })?;
        Experiment::parse_with_env(&text, path, env, catalog)
    }

    /// Parse an experiment whose file is `path` (relative paths in it are resolved against
    /// its folder; the price table is read from there when `price` names a model), its
    /// strategies checked against `catalog`.
    pub fn parse(text: &str, path: &Path, catalog: &dyn StrategyCatalog) -> Result<Experiment, ExperimentError> {
        Experiment::parse_with_env(text, path, &|_| None, catalog)
    }

    /// [`Experiment::parse`] with the variables an `[llm]` table names read by `env`.
    pub fn parse_with_env(
        text: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        catalog: &dyn StrategyCatalog,
    ) -> Result<Experiment, ExperimentError> {
        // More `[[strategy]]` tables than configurations an experiment may hold is refused
        // from the headers alone, before the TOML is parsed (which would take minutes).
        let tables = text.lines().filter(|l| l.trim_start().starts_with("[[strategy]]")).count();
        if tables > MAX_CONFIGURATIONS {
            return Err(ExperimentError::Key {
                path: path.to_path_buf(),
                key: "strategy".into(),
                problem: format!(
                    "{tables} [[strategy]] tables, over the limit of {MAX_CONFIGURATIONS} configurations; split the experiment"
                ),
            });
        }
        let raw: RawExperiment = toml::from_str(text).map_err(|e| ExperimentError::Toml {
            path: path.to_path_buf(),
            message: cap_lines(e.to_string().trim(), ECHO_LINE_CHARS),
        })?;
        let key_err = |key: &str, problem: String| ExperimentError::Key {
            path: path.to_path_buf(),
            key: key.to_string(),
            problem,
        };
        if raw.name.trim().is_empty() {
            return Err(key_err("name", "must not be empty".into()));
        }
        if raw.datasets.is_empty() {
            return Err(key_err("datasets", "name at least one dataset file or folder".into()));
        }
        if let Some(entry) = raw.keys.keys().find(|k| !raw.datasets.contains(k)) {
            return Err(key_err(
                "keys",
                format!("{entry:?} is not one of `datasets` (name a dataset entry exactly as `datasets` writes it)"),
            ));
        }
        for (i, w) in raw.windows.iter().enumerate() {
            if *w == 0 {
                return Err(key_err(
                    "windows",
                    format!("window #{} is 0; windows are in tokens and must be positive", i + 1),
                ));
            }
            if raw.windows[..i].contains(w) {
                return Err(key_err("windows", format!("window {w} is listed twice")));
            }
        }
        let raw_llm = RawLlm {
            summarizer: raw.summarizer.clone(),
            judge: raw.judge.clone(),
            next_action: raw.next_action.clone(),
            llm: raw.llm.clone(),
            judge_repeats: raw.judge_repeats,
            cache_mode: raw.cache_mode,
            on_llm_error: raw.on_llm_error,
            cache_dir: raw.cache_dir.clone(),
            price_table: raw
                .price
                .as_ref()
                .map(|_| path.parent().unwrap_or(Path::new("")).join(raw.prices.as_deref().unwrap_or(PRICES_FILE))),
            prices_file: Some(
                path.parent().unwrap_or(Path::new("")).join(raw.prices.as_deref().unwrap_or(PRICES_FILE)),
            ),
        };
        let base = path.parent().unwrap_or(Path::new(""));
        let (summarizer, judge, llm) =
            llm_setup::resolve(raw_llm, base, env).map_err(|(key, problem)| key_err(&key, problem))?;
        let price = match &raw.price {
            None => None,
            Some(value) => Some(resolve_price(value, raw.prices.as_deref(), raw.cache_ttl, path)?),
        };
        if raw.strategies.is_empty() {
            return Err(key_err("strategy", "add at least one [[strategy]] table".into()));
        }
        let cache = raw.cache.unwrap_or(CacheProfile::None);
        let shared = SharedSettings {
            tokenizer: raw.tokenizer,
            cache,
            overflow: raw.overflow,
            price: price.as_ref(),
            summarizer,
            judge,
            llm: llm.as_ref(),
        };

        let mut configurations = Vec::new();
        let mut strategies = Vec::new();
        let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, table) in raw.strategies.iter().enumerate() {
            let line = line_of(text, table.span().start);
            let index = i + 1;
            strategies.push(serde_json::to_value(table.get_ref()).unwrap_or(serde_json::Value::Null));
            let windows_n = raw.windows.len();
            for (strategy, params, resolved, external) in
                expand_table(table.get_ref(), path, line, index, windows_n, configurations.len(), catalog)?
            {
                let windows: Vec<Option<u64>> =
                    if raw.windows.is_empty() { vec![None] } else { raw.windows.iter().copied().map(Some).collect() };
                for window in windows {
                    let config_id = config_id(&strategy, &params, window, &shared);
                    if let Some(first) = first_seen.insert(config_id.clone(), index) {
                        return Err(ExperimentError::Strategy {
                            path: path.to_path_buf(),
                            line,
                            index,
                            name: strategy.clone(),
                            key: None,
                            problem: format!(
                                "configuration {config_id} is the same as one of [[strategy]] #{first}; remove the duplicate"
                            ),
                        });
                    }
                    configurations.push(Configuration {
                        config_id,
                        strategy: strategy.clone(),
                        params: params.clone(),
                        window,
                        resolved: resolved.clone(),
                        external: external.clone(),
                    });
                }
            }
        }

        Ok(Experiment {
            name: raw.name,
            description: raw.description,
            file: path.display().to_string(),
            datasets: raw.datasets,
            windows: raw.windows,
            tokenizer: raw.tokenizer,
            cache,
            overflow: raw.overflow,
            price,
            summarizer,
            judge,
            llm,
            seed: raw.seed,
            keys: raw.keys,
            strategies,
            configurations,
        })
    }

    /// The folder relative paths in the file are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        Path::new(&self.file).parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// The dataset entries resolved against the experiment file's folder.
    pub fn dataset_paths(&self) -> Vec<PathBuf> {
        let base = self.base_dir();
        self.datasets.iter().map(|d| base.join(d)).collect()
    }
}

/// The run-level settings that enter every configuration id.
struct SharedSettings<'a> {
    tokenizer: Encoding,
    cache: CacheProfile,
    overflow: OverflowPolicy,
    price: Option<&'a PriceSpec>,
    summarizer: SummarizerSpec,
    judge: JudgeSpec,
    llm: Option<&'a LlmSettings>,
}

/// 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

fn resolve_price(
    value: &toml::Value,
    prices: Option<&str>,
    ttl: CacheTtl,
    path: &Path,
) -> Result<PriceSpec, ExperimentError> {
    let key_err =
        |key: &str, problem: String| ExperimentError::Key { path: path.to_path_buf(), key: key.to_string(), problem };
    match value {
        toml::Value::String(model) => {
            let base = path.parent().unwrap_or(Path::new(""));
            let table_path = base.join(prices.unwrap_or(PRICES_FILE));
            let file = read_price_file(&table_path).map_err(|(io, message)| match io {
                Some(e) => {
                    key_err("price", format!("model {model:?} needs the price table {}: {e}", table_path.display()))
                }
                None => ExperimentError::Toml { path: table_path.clone(), message },
            })?;
            let Some(p) = file.models.get(model) else {
                let known: Vec<&str> = file.models.keys().map(String::as_str).collect();
                return Err(key_err(
                    "price",
                    format!("unknown model {model:?} in {} (known: {})", table_path.display(), known.join(", ")),
                ));
            };
            check_price(p, &table_path, model)?;
            Ok(p.spec(Some(model.clone()), ttl))
        }
        toml::Value::Table(t) => {
            let p: PriceTable = toml::Value::Table(t.clone()).try_into().map_err(|e: toml::de::Error| {
                key_err("price", format!("{} (an inline price has input, cached_input and output)", e.message()))
            })?;
            check_price(&p, path, "inline")?;
            Ok(p.spec(None, ttl))
        }
        other => Err(key_err(
            "price",
            format!("expected a model name or a table {{ input, cached_input, output }}, found a {}", other.type_str()),
        )),
    }
}

fn check_price(p: &PriceTable, path: &Path, model: &str) -> Result<(), ExperimentError> {
    let writes = [("cache_write_5m", p.cache_write_5m), ("cache_write_1h", p.cache_write_1h)];
    let given = writes.into_iter().filter_map(|(k, v)| Some((k, v?)));
    for (key, v) in
        [("input", p.input), ("cached_input", p.cached_input), ("output", p.output)].into_iter().chain(given)
    {
        if !(v.is_finite() && v >= 0.0) {
            return Err(ExperimentError::Key {
                path: path.to_path_buf(),
                key: format!("price.{key}"),
                problem: format!("{model}: {v} is not a price (a non-negative number of dollars per million tokens)"),
            });
        }
    }
    Ok(())
}

/// The most configurations an experiment may expand to (a grid past it is almost always a
/// mistake, and at 10^8 the expansion alone would exhaust memory).
pub const MAX_CONFIGURATIONS: usize = 100_000;

/// The longest line of an experiment file a parse error echoes, in characters.
pub const ECHO_LINE_CHARS: usize = 200;

/// `message` with every line longer than `max` characters cut there, saying how long it was.
pub fn cap_lines(message: &str, max: usize) -> String {
    message
        .lines()
        .map(|line| {
            let n = line.chars().count();
            if n <= max {
                line.to_string()
            } else {
                format!("{}… ({n} characters, cut)", line.chars().take(max).collect::<String>())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One expanded configuration: (name, params as written, resolved, the external strategy).
type Expanded = (String, serde_json::Value, Resolved, Option<ExternalSpec>);

/// Expand one `[[strategy]]` table into its configurations.
/// `windows` is how many windows each expanded configuration runs at, `earlier` how many
/// configurations the tables before this one gave.
fn expand_table(
    table: &toml::Table,
    path: &Path,
    line: usize,
    index: usize,
    windows: usize,
    earlier: usize,
    catalog: &dyn StrategyCatalog,
) -> Result<Vec<Expanded>, ExperimentError> {
    let err = |name: &str, key: Option<&str>, problem: String| ExperimentError::Strategy {
        path: path.to_path_buf(),
        line,
        index,
        name: name.to_string(),
        key: key.map(String::from),
        problem,
    };
    let name = match table.get("name") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(err("?", Some("name"), format!("expected one strategy name, found a {}", other.type_str())))
        }
        None => return Err(err("?", Some("name"), "missing; every [[strategy]] table names its strategy".into())),
    };
    if name == EXTERNAL {
        // A process: its table is sent as written (no grid; a list is a parameter's value).
        let spec = ExternalSpec::from_table(table, &catalog.names())
            .map_err(|(key, problem)| err(&name, key.as_deref(), problem))?;
        let written: serde_json::Map<String, serde_json::Value> = table
            .iter()
            .filter(|(k, _)| k.as_str() != "name")
            .filter_map(|(k, v)| serde_json::to_value(v).ok().map(|j| (k.clone(), j)))
            .collect();
        let none = catalog.default_for("none").expect("`none` is in the catalog");
        return Ok(vec![(spec.label.clone(), serde_json::Value::Object(written), none, Some(spec))]);
    }
    if catalog.default_for(&name).is_none() {
        return Err(err(
            &name,
            Some("name"),
            format!("unknown strategy (known: {}, {EXTERNAL})", catalog.names().join(", ")),
        ));
    }
    let known: Vec<String> = catalog.params(&name);

    // Axes in sorted key order; a scalar is an axis of one value.
    let mut keys: Vec<&String> = table.keys().filter(|k| k.as_str() != "name").collect();
    keys.sort();
    for key in &keys {
        if !known.iter().any(|k| k == *key) {
            let allowed = if known.is_empty() {
                format!("{name} takes no parameters")
            } else {
                format!("allowed: {}", known.join(", "))
            };
            return Err(err(&name, Some(key), format!("unknown parameter ({allowed})")));
        }
        if matches!(&table[key.as_str()], toml::Value::Array(items) if items.is_empty()) {
            return Err(err(&name, Some(key), "an empty list gives no configuration".into()));
        }
    }
    // Refuse a grid too large from the axes' sizes, before any value is read or expanded.
    let sizes: Vec<(&str, usize)> = keys
        .iter()
        .map(|k| match &table[k.as_str()] {
            toml::Value::Array(items) => (k.as_str(), items.len()),
            _ => (k.as_str(), 1),
        })
        .collect();
    let combinations = sizes.iter().try_fold(1usize, |n, (_, len)| n.checked_mul(*len));
    let total = combinations.and_then(|c| c.checked_mul(windows.max(1))).and_then(|t| t.checked_add(earlier));
    if total.is_none_or(|t| t > MAX_CONFIGURATIONS) {
        let factors: Vec<String> = sizes.iter().map(|(k, len)| format!("{len} {k}")).collect();
        let product = combinations.map_or("more than 2^64".to_string(), |c| c.to_string());
        return Err(err(
            &name,
            None,
            format!(
                "the grid expands to {} = {product} parameter combinations x {} windows{}, over the limit of \
                 {MAX_CONFIGURATIONS} configurations; narrow an axis or split the experiment",
                factors.join(" x "),
                windows.max(1),
                if earlier > 0 { format!(" (+ {earlier} from the tables before)") } else { String::new() },
            ),
        ));
    }
    let mut axes: Vec<(&str, Vec<serde_json::Value>)> = Vec::new();
    for key in keys {
        let values: Vec<&toml::Value> = match &table[key.as_str()] {
            toml::Value::Array(items) => items.iter().collect(),
            scalar => vec![scalar],
        };
        let mut json_values = Vec::with_capacity(values.len());
        let mut seen = std::collections::HashSet::with_capacity(values.len());
        for v in values {
            // JSON has no NaN or infinity: serde_json would turn them into `null`.
            if let toml::Value::Float(f) = v {
                if !f.is_finite() {
                    return Err(err(&name, Some(key), format!("{f} is not a finite number")));
                }
            }
            let j = serde_json::to_value(v)
                .map_err(|e| err(&name, Some(key), format!("cannot represent {v} as a parameter: {e}")))?;
            // A set of the values' JSON text: linear, where a list search was quadratic.
            if !seen.insert(j.to_string()) {
                return Err(err(&name, Some(key), format!("value {v} is listed twice")));
            }
            json_values.push(j);
        }
        axes.push((key.as_str(), json_values));
    }
    let mut out = Vec::new();
    let mut cursor = vec![0usize; axes.len()];
    loop {
        let mut params = serde_json::Map::new();
        for (a, (key, values)) in axes.iter().enumerate() {
            params.insert((*key).to_string(), values[cursor[a]].clone());
        }
        let resolved = catalog.resolve(&name, &params).map_err(|(key, problem)| {
            // Show the value: with a grid, it tells which point of the grid is bad.
            let problem = match key.as_deref().and_then(|k| params.get(k)) {
                Some(v) => format!("{v}: {problem}"),
                None => problem,
            };
            err(&name, key.as_deref(), problem)
        })?;
        out.push((name.clone(), serde_json::Value::Object(params), resolved, None));
        // Odometer over the axes, last axis fastest.
        let mut a = axes.len();
        loop {
            if a == 0 {
                return Ok(out);
            }
            a -= 1;
            cursor[a] += 1;
            if cursor[a] < axes[a].1.len() {
                break;
            }
            cursor[a] = 0;
        }
    }
}

/// A short label for a window: `32k`, `1m`, `50500`, or `own`.
pub fn window_label(window: Option<u64>) -> String {
    match window {
        None => "own".into(),
        Some(w) if w % 1_000_000 == 0 => format!("{}m", w / 1_000_000),
        Some(w) if w % 1_000 == 0 => format!("{}k", w / 1_000),
        Some(w) => w.to_string(),
    }
}

fn config_id(strategy: &str, params: &serde_json::Value, window: Option<u64>, shared: &SharedSettings<'_>) -> String {
    let mut identity = serde_json::json!({
        "strategy": strategy,
        "params": params,
        "window": window,
        "tokenizer": shared.tokenizer,
        "cache": shared.cache,
        "price": shared.price,
        "summarizer": shared.summarizer,
        "judge": shared.judge,
    });
    // Only present when not the default, so configuration ids stay as they were and the gate
    // compares the same configurations across the change of default.
    if shared.overflow != OverflowPolicy::Fail {
        identity["overflow"] = serde_json::json!(shared.overflow);
    }
    // Only present with a model, so offline configuration ids stay as they were.
    if let Some(llm) = shared.llm {
        identity["llm"] = llm.identity();
    }
    format!("{strategy}-{}-{}", window_label(window), id_hash(&canonical_json(&identity)))
}

/// The first 16 hexadecimal digits (64 bits) of the SHA-256 of `text`: the hash part of
/// configuration and experiment ids. 64 bits keep an accidental collision out of reach of any
/// grid (a 32-bit hash made `output_reserve = 71730` and `89147` one id); SHA-256 makes the id
/// reproducible with any standard tool (`printf %s TEXT | sha256sum | cut -c1-16`).
pub fn id_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// JSON with object keys sorted at every level and no whitespace, independent of how the
/// value was built.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests;
