//! `split-fraction`: NOT YET IMPLEMENTED (skeleton).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ParamError;
use crate::context::Context;
use crate::strategy::{Budget, Plan, Promises, Strategy, Trigger};
use crate::tokens::{LenOver4Plus4, TokenCounter};

pub const SUMMARY: &str = "TODO";

/// Parameters of `split-fraction`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {}

/// The `split-fraction` strategy.
#[derive(Debug, Clone, Default)]
pub struct SplitFraction {
    estimator: LenOver4Plus4,
}

impl SplitFraction {
    pub fn new(_params: Params) -> Result<SplitFraction, ParamError> {
        Ok(SplitFraction::default())
    }
}

impl Strategy for SplitFraction {
    fn name(&self) -> &'static str {
        "split-fraction"
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
