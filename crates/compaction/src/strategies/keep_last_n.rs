//! `keep-last-n`: NOT YET IMPLEMENTED (skeleton).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ParamError;
use crate::context::Context;
use crate::strategy::{Budget, Plan, Promises, Strategy, Trigger};
use crate::tokens::{CharsOver4Plus2, TokenCounter};

pub const SUMMARY: &str = "TODO";

/// Parameters of `keep-last-n`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {}

/// The `keep-last-n` strategy.
#[derive(Debug, Clone, Default)]
pub struct KeepLastN {
    estimator: CharsOver4Plus2,
}

impl KeepLastN {
    pub fn new(_params: Params) -> Result<KeepLastN, ParamError> {
        Ok(KeepLastN::default())
    }
}

impl Strategy for KeepLastN {
    fn name(&self) -> &'static str {
        "keep-last-n"
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
