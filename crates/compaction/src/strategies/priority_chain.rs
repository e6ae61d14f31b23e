//! `priority-chain`: NOT YET IMPLEMENTED (skeleton).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ParamError;
use crate::context::Context;
use crate::strategy::{Budget, Plan, Promises, Strategy, Trigger};
use crate::tokens::{CharsOver4, TokenCounter};

pub const SUMMARY: &str = "TODO";

/// Parameters of `priority-chain`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {}

/// The `priority-chain` strategy.
#[derive(Debug, Clone, Default)]
pub struct PriorityChain {
    estimator: CharsOver4,
}

impl PriorityChain {
    pub fn new(_params: Params) -> Result<PriorityChain, ParamError> {
        Ok(PriorityChain::default())
    }
}

impl Strategy for PriorityChain {
    fn name(&self) -> &'static str {
        "priority-chain"
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
