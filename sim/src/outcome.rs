//! What one run produced — simulated (`crate::world`) or on real processes (`crate::real`):
//! the trace and what the end of the run found, from which `qsim run` and `qsim real` print
//! verdicts and write the summary and report alike.

use std::time::Duration;

use crate::trace::Event;

/// What one run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub events: Vec<Event>,
    /// Per-node series events the checkers saw and the trace left out (`crate::trace::Detail`).
    pub events_omitted: u64,
    /// The canonical trace of `events` (`trace.jsonl`), encoded once: the digest, the file and
    /// the determinism check all read it.
    pub trace: String,
    pub digest: String,
    /// Why the run has not converged, per node; empty when it has.
    pub pending: Vec<String>,
    /// How long the run took: simulated time, or in a real run the wall clock's.
    pub simulated: Duration,
    pub writes_acked: usize,
    /// When the liveness phase began (faults healed, writes stopped).
    pub liveness_from: Duration,
    /// How long after that the cluster converged; None if it did not within the bound.
    pub converged_after: Option<Duration>,
    /// Per tier, the sizing formulas against the configuration (with `[resources]`).
    pub sizing: Vec<qs_reports::schema::SizingRow>,
    /// Messages the simulated network carried (madsim's own count of what it put on its
    /// links), for the benchmark's cost per message; 0 in a real run.
    pub messages: u64,
    /// Per replica, what it read from its sources (the `fetch` checker's count), by name.
    pub fetched: Vec<qs_reports::schema::NodeFetched>,
    /// Per tier, how long entries took from the root's commit to their apply there
    /// (`crate::propagation`).
    pub propagation: Vec<qs_reports::schema::PropagationRow>,
    /// The knobs the run drew (`crate::knobs`), as `name = value`.
    pub knobs: Vec<String>,
    /// The hosts' clocks the run kept (`crate::clocks`), one line each.
    pub clocks: Vec<String>,
}

impl RunOutcome {
    pub fn violations(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| matches!(e, Event::Violation { .. }))
    }
}
