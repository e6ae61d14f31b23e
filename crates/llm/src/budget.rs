//! A spending limit shared by every client of a run.
//!
//! A [`Budget`] holds a limit in US dollars, what was spent and what the requests in flight
//! may still cost. Before a client sends a request over the network (a response cache hit
//! costs nothing and is never refused) it reserves the request's worst case: its input tokens
//! at the input price and its whole output limit at the output price ([`Meter`]). The
//! reservation is refused when what was spent plus what is in flight plus this request would
//! pass the limit; from the first refusal on the budget is closed and refuses every request,
//! so a run stops starting requests while those in flight finish. When a response comes back
//! its reservation becomes what the provider's reported usage costs (the reservation itself
//! when the response reports no usage); a failed request costs nothing.
//!
//! ```
//! use llm::budget::{Budget, Rates};
//!
//! let budget = Budget::new(1.0);
//! let rates = Rates { input: 1.0, cached_input: 0.1, output: 4.0 };
//! // 500,000 input tokens and at most 100,000 output tokens: $0.90 at worst.
//! let r = budget.reserve("judge", rates.cost(500_000, 0, 100_000)).unwrap();
//! assert!(budget.reserve("judge", 0.2).is_err(), "0.90 in flight + 0.20 passes 1.00");
//! assert!(budget.closed());
//! r.settle(rates.cost(500_000, 0, 20_000));
//! assert!((budget.spent() - 0.58).abs() < 1e-9);
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::LlmError;
use crate::types::ChatMessage;

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub input: f64,
    pub cached_input: f64,
    pub output: f64,
}

impl Rates {
    /// Dollars for `input` tokens (of which `cached` were served from the provider's prefix
    /// cache) and `output` tokens.
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        let cached = cached.min(input);
        ((input - cached) as f64 * self.input + cached as f64 * self.cached_input + output as f64 * self.output)
            / 1_000_000.0
    }
}

/// Counts the input tokens of a request's messages (the caller's tokenizer).
pub type TokenCount = Arc<dyn Fn(&[ChatMessage]) -> u64 + Send + Sync>;

/// How a client prices its requests against a [`Budget`]: its role's name (for the account),
/// its model's rates and the token count of a request's messages.
#[derive(Clone)]
pub struct Meter {
    pub role: String,
    pub rates: Rates,
    pub count: TokenCount,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter").field("role", &self.role).field("rates", &self.rates).finish_non_exhaustive()
    }
}

impl Meter {
    /// The worst case of a request: its input tokens and its whole output limit.
    pub fn worst_case(&self, messages: &[ChatMessage], max_tokens: u32) -> f64 {
        self.rates.cost((self.count)(messages), 0, u64::from(max_tokens))
    }
}

#[derive(Debug, Default)]
struct State {
    spent: f64,
    in_flight: f64,
    /// Spent per role, in the order roles first spent.
    by_role: BTreeMap<String, f64>,
    refused: u64,
    closed: bool,
}

/// A run's spending limit (see the module docs).
#[derive(Debug)]
pub struct Budget {
    limit: f64,
    state: Mutex<State>,
}

/// What a [`Budget`] shows at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetReport {
    pub limit_usd: f64,
    pub spent_usd: f64,
    /// Spent per role (`summarizer`, `judge`, ...).
    pub by_role: BTreeMap<String, f64>,
    /// Requests refused because they would have passed the limit.
    pub refused: u64,
}

impl Budget {
    /// A budget of `limit` dollars, nothing spent.
    pub fn new(limit: f64) -> Budget {
        Budget { limit, state: Mutex::new(State::default()) }
    }
    fn state(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
    pub fn limit(&self) -> f64 {
        self.limit
    }
    /// Dollars spent so far (responses received).
    pub fn spent(&self) -> f64 {
        self.state().spent
    }
    /// True once a request was refused: every later one is.
    pub fn closed(&self) -> bool {
        self.state().closed
    }
    pub fn report(&self) -> BudgetReport {
        let s = self.state();
        BudgetReport { limit_usd: self.limit, spent_usd: s.spent, by_role: s.by_role.clone(), refused: s.refused }
    }
    /// Reserve `worst_case` dollars for one request of `role`, or refuse it (and close the
    /// budget) when spent plus in flight plus it would pass the limit.
    pub fn reserve(&self, role: &str, worst_case: f64) -> Result<Reservation<'_>, LlmError> {
        let mut s = self.state();
        if s.closed || s.spent + s.in_flight + worst_case > self.limit {
            s.closed = true;
            s.refused += 1;
            return Err(LlmError::OverBudget { limit_usd: self.limit, spent_usd: s.spent, in_flight_usd: s.in_flight });
        }
        s.in_flight += worst_case;
        Ok(Reservation { budget: self, role: role.to_string(), reserved: worst_case, settled: false })
    }
}

/// A request's reservation; dropped unsettled (the request failed), it costs nothing.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a Budget,
    role: String,
    reserved: f64,
    settled: bool,
}

impl Reservation<'_> {
    /// The request came back costing `actual` dollars.
    pub fn settle(mut self, actual: f64) {
        self.settled = true;
        let mut s = self.budget.state();
        s.in_flight = (s.in_flight - self.reserved).max(0.0);
        s.spent += actual;
        *s.by_role.entry(self.role.clone()).or_insert(0.0) += actual;
    }
    /// The dollars reserved (the request's worst case).
    pub fn reserved(&self) -> f64 {
        self.reserved
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.settled {
            let mut s = self.budget.state();
            s.in_flight = (s.in_flight - self.reserved).max(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_closes_the_budget_and_a_failed_request_costs_nothing() {
        let b = Budget::new(1.0);
        let r = b.reserve("summarizer", 0.6).expect("fits");
        drop(r);
        assert_eq!(b.spent(), 0.0);
        let r = b.reserve("summarizer", 0.6).expect("fits again: nothing in flight");
        r.settle(0.5);
        b.reserve("judge", 0.4).expect("0.5 + 0.4 fits").settle(0.4);
        assert!(b.reserve("judge", 0.2).is_err());
        // Closed: even a request that would fit is refused now.
        assert!(b.reserve("judge", 0.01).is_err());
        let report = b.report();
        assert_eq!(report.refused, 2);
        assert!((report.spent_usd - 0.9).abs() < 1e-12);
        assert_eq!(report.by_role.len(), 2);
    }
}
