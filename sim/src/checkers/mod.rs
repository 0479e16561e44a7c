//! Invariant checkers, one family per file, fed by trace events as they happen.
//!
//! Each checker reports a violation with the node, the simulated time, the index, and what was
//! expected against what was found.

pub mod chain;
pub mod cursor;
pub mod lag;
pub mod reads;
pub mod sequence;

use crate::scenario::Scenario;
use crate::trace::Observer;

/// The checkers that watch every run of `scenario`; `reads` is shared with the readers, which
/// feed it each read.
pub fn all(scenario: &Scenario, reads: &reads::Reads) -> Vec<Box<dyn Observer>> {
    vec![
        Box::new(sequence::Sequence::default()),
        Box::new(chain::Chain::default()),
        Box::new(lag::Lag::new(scenario.checks.lag_max.as_millis() as u64)),
        Box::new(cursor::Cursor::default()),
        Box::new(reads.clone()),
    ]
}

/// Checker names, in the order verdicts are printed. `convergence` is judged at the end of the
/// liveness phase rather than per event.
pub const NAMES: [&str; 6] = ["sequence", "chain", "lag", "cursor", "reads", "convergence"];
