//! `cut-point`: NOT YET IMPLEMENTED (skeleton).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ParamError;
use crate::context::Context;
use crate::strategy::{Budget, Plan, Promises, Strategy, Trigger};
use crate::tokens::{CharsOver4Role4, TokenCounter};

pub const SUMMARY: &str = "TODO";

/// Parameters of `cut-point`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {}

/// The `cut-point` strategy.
#[derive(Debug, Clone, Default)]
pub struct CutPoint {
    estimator: CharsOver4Role4,
}

impl CutPoint {
    pub fn new(_params: Params) -> Result<CutPoint, ParamError> {
        Ok(CutPoint::default())
    }
}

impl Strategy for CutPoint {
    fn name(&self) -> &'static str {
        "cut-point"
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
