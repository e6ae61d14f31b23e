//! The strategy catalog as an experiment file is checked against: [`Catalog`] gives the run log
//! (which knows no strategy) the names, parameters and resolution of `compaction_strategies`,
//! and [`strategy_config`] reads a configuration's resolved strategy back as the catalog's type.

use compaction_strategies::{ParamError, StrategyConfig};
use runlog::catalog::{Resolved, StrategyCatalog};

/// The strategies of `compaction_strategies` (and its references), for
/// `runlog::experiment::Experiment::load` and `parse`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Catalog;

impl StrategyCatalog for Catalog {
    fn names(&self) -> Vec<&str> {
        compaction_strategies::NAMES.to_vec()
    }

    fn default_for(&self, name: &str) -> Option<Resolved> {
        StrategyConfig::default_for(name).and_then(|c| Resolved::of(&c).ok())
    }

    fn params(&self, name: &str) -> Vec<String> {
        compaction_strategies::catalog()
            .into_iter()
            .find(|s| s.name == name)
            .map(|s| s.params.into_iter().map(|p| p.name).collect())
            .unwrap_or_default()
    }

    /// Deserialize and build one expanded configuration; an error names the key when it can.
    fn resolve(
        &self,
        name: &str,
        params: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Resolved, (Option<String>, String)> {
        let with_name = |p: serde_json::Map<String, serde_json::Value>| {
            let mut obj = p;
            obj.insert("name".into(), serde_json::Value::String(name.to_string()));
            serde_json::from_value::<StrategyConfig>(serde_json::Value::Object(obj))
        };
        let config = match with_name(params.clone()) {
            Ok(c) => c,
            Err(whole) => {
                // Find the key whose value alone does not deserialize.
                for (k, v) in params {
                    let mut one = serde_json::Map::new();
                    one.insert(k.clone(), v.clone());
                    if let Err(e) = with_name(one) {
                        return Err((Some(k.clone()), e.to_string()));
                    }
                }
                return Err((None, whole.to_string()));
            }
        };
        config.build().map_err(|e| (Some(e.param.to_string()), e.problem))?;
        Resolved::of(&config).map_err(|e| (None, e.to_string()))
    }
}

/// A configuration's resolved strategy as the catalog's type (an error when it names no
/// strategy of the catalog or a parameter does not read, e.g. in a `run.json` of another
/// version).
pub fn strategy_config(resolved: &Resolved) -> Result<StrategyConfig, ParamError> {
    serde_json::from_value(resolved.to_value()).map_err(|e| ParamError {
        strategy: "?",
        param: "name",
        problem: format!("{} does not read as a strategy: {e}", resolved.name().unwrap_or("?")),
    })
}

#[cfg(test)]
mod tests;
