//! `prune-then-summarize`: NOT YET IMPLEMENTED (skeleton).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ParamError;
use crate::context::Context;
use crate::strategy::{Budget, Plan, Promises, Strategy, Trigger};
use crate::tokens::{CharsOver4Role4, TokenCounter};

pub const SUMMARY: &str = "TODO";

/// Parameters of `prune-then-summarize`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {}

/// The `prune-then-summarize` strategy.
#[derive(Debug, Clone, Default)]
pub struct PruneThenSummarize {
    estimator: CharsOver4Role4,
}

impl PruneThenSummarize {
    pub fn new(_params: Params) -> Result<PruneThenSummarize, ParamError> {
        Ok(PruneThenSummarize::default())
    }
}

impl Strategy for PruneThenSummarize {
    fn name(&self) -> &'static str {
        "prune-then-summarize"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        None
    }
    fn plan(&self, _ctx: &Context, _budget: &Budget, _trigger: Trigger) -> Option<Plan> {
        None
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        Promises { keeps_system_prompt: true, recent_window: ctx.len(), documented_deviations: Vec::new() }
    }
}
