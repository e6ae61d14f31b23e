//! What an experiment file is checked against: the strategies it may name, their parameters
//! and how a table of them resolves. The run log knows no strategy: the caller that holds the
//! catalog supplies it as a [`StrategyCatalog`] (the runner's is `runner::catalog::Catalog`),
//! and a configuration keeps the resolved strategy as data ([`Resolved`]).

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The strategies an experiment may name.
pub trait StrategyCatalog {
    /// The built-in strategies' names, in catalog order (an unknown name's error lists them,
    /// and an external strategy's label may not be one of them).
    fn names(&self) -> Vec<&str>;

    /// `name` with every parameter at its default; `None` when `name` is no strategy. A
    /// reference (a configuration that replays what the recording did) is one, though it is not
    /// among [`StrategyCatalog::names`].
    fn default_for(&self, name: &str) -> Option<Resolved>;

    /// The parameters strategy `name` takes, in catalog order (none for a reference).
    fn params(&self, name: &str) -> Vec<String>;

    /// Strategy `name` with `params` as written: read, defaults filled in, and built. An error
    /// is (the key to blame when there is one, the problem).
    fn resolve(
        &self,
        name: &str,
        params: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Resolved, (Option<String>, String)>;
}

/// A strategy with every parameter resolved: its fields (`name` first, as the catalog writes
/// them) in the catalog's order, which `run.json` keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    fields: Vec<(String, serde_json::Value)>,
}

impl Resolved {
    /// The resolved strategy serialized by `value`'s own `Serialize` (an object), its fields kept
    /// in the order it writes them.
    pub fn of<T: Serialize>(value: &T) -> Result<Resolved, serde_json::Error> {
        serde_json::from_str(&serde_json::to_string(value)?)
    }

    /// The strategy's name (its `name` field), if it has one.
    pub fn name(&self) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == "name").and_then(|(_, v)| v.as_str())
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[(String, serde_json::Value)] {
        &self.fields
    }

    /// As a JSON object (its keys then sorted, as `serde_json` keeps them).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::Value::Object(self.fields.iter().cloned().collect())
    }
}

impl Serialize for Resolved {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Resolved {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Resolved, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Resolved;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a resolved strategy (an object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Resolved, A::Error> {
                let mut fields = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                    fields.push((k, v));
                }
                Ok(Resolved { fields })
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Params {
        name: &'static str,
        zeta: u32,
        alpha: f64,
    }

    #[test]
    fn the_fields_keep_the_order_they_were_written_in() {
        let r = Resolved::of(&Params { name: "keep", zeta: 3, alpha: 0.5 }).expect("an object");
        assert_eq!(serde_json::to_string(&r).expect("serializes"), r#"{"name":"keep","zeta":3,"alpha":0.5}"#);
        let back: Resolved = serde_json::from_str(&serde_json::to_string_pretty(&r).expect("pretty")).expect("reads");
        assert_eq!(back, r);
        assert_eq!(r.name(), Some("keep"));
        assert_eq!(r.to_value(), serde_json::json!({"alpha": 0.5, "name": "keep", "zeta": 3}));
    }

    #[test]
    fn a_non_object_is_refused() {
        assert!(serde_json::from_str::<Resolved>("[1, 2]").is_err());
        assert!(Resolved::of(&3u32).is_err());
    }
}
