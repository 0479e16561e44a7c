//! Invariant checkers, one family per file, fed by trace events as they happen.
//!
//! Each checker reports a violation with the node, the simulated time, the index, and what was
//! expected against what was found.

pub mod chain;
pub mod lag;
pub mod sequence;

use crate::scenario::Scenario;
use crate::trace::Observer;

/// The checkers that watch every run of `scenario`.
pub fn all(scenario: &Scenario) -> Vec<Box<dyn Observer>> {
    vec![
        Box::new(sequence::Sequence::default()),
        Box::new(chain::Chain::default()),
        Box::new(lag::Lag::new(scenario.checks.lag_max.as_millis() as u64)),
    ]
}

/// Checker names, in the order verdicts are printed. `convergence` is judged at the end of the
/// liveness phase rather than per event.
pub const NAMES: [&str; 4] = ["sequence", "chain", "lag", "convergence"];
