//! `none`: never compacts. The baseline that shows what overflow costs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ParamError;
use compaction::context::Context;
use compaction::tokens::{CharsOver4Role4, TokenCounter};
use compaction::{Budget, Plan, Promises, Strategy, Trigger};

/// Every prompt this strategy asks for: none, it never summarizes.
pub fn prompts() -> Vec<compaction::Prompt> {
    Vec::new()
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str =
    "Never compacts: every request carries the whole history, and overflows once it outgrows the window.";

/// `none` has no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {}

/// The `none` baseline.
#[derive(Debug, Clone, Default)]
pub struct NoCompaction {
    estimator: CharsOver4Role4,
}

impl NoCompaction {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(_params: Params) -> Result<NoCompaction, ParamError> {
        Ok(NoCompaction::default())
    }
}

impl Strategy for NoCompaction {
    fn name(&self) -> &'static str {
        "none"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        None
    }
    fn reacts_to(&self, _trigger: Trigger) -> bool {
        false
    }
    fn plan(&self, _ctx: &Context, _budget: &Budget, _trigger: Trigger) -> Option<Plan> {
        None
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        Promises { keeps_system_prompt: true, recent_window: ctx.len(), documented_deviations: Vec::new() }
    }
}
