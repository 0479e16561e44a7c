//! Progress: while the cluster is settled, it does its job — writes are acknowledged and reads
//! answered. A run in which every write is refused or times out, or an edge's read port only
//! errors, passes every safety checker (nothing wrong was ever applied or read); this one says
//! what stalled and since when.
//!
//! Settled, as for `lag`: no fault active, the last healed more than the scenario's `lag_max`
//! ago (the time it allows for recovery), past start-up, and in the safety phase (the liveness
//! phase stops the workload). Then:
//! - **writes** (when the scenario has writers): some write must be acknowledged at least once
//!   every `lag_max` — a stall is the first sample past that with none since the later of the
//!   last acknowledgement and the moment the cluster settled;
//! - **reads**, per edge with readers: a stall is `lag_max` of read samples in which every
//!   read errored (connection refused, timed out, refused as not ready) and none was answered.
//!
//! Each stall is reported once, when it passes the bound; a new one can start after progress.
//! Guarantees: never blames a node for a stall a fault explains; deterministic (a function of
//! the trace).

use std::collections::BTreeMap;

use super::FaultQuiet;
use crate::trace::{Checker, Event, Observer, RunPhase};

#[derive(Debug)]
pub struct Progress {
    bound_ms: u64,
    has_writers: bool,
    faults: FaultQuiet,
    in_safety: bool,
    /// When the last write was acknowledged.
    last_ack_ms: u64,
    /// A write stall already reported, until the next acknowledgement.
    writes_stalled: bool,
    /// Per edge: since when every read sample only errored (none while reads are answered),
    /// and whether that stall was reported.
    reads_failing_since: BTreeMap<String, (u64, bool)>,
}

impl Progress {
    pub fn new(bound_ms: u64, has_writers: bool) -> Progress {
        Progress {
            bound_ms,
            has_writers,
            faults: FaultQuiet::default(),
            in_safety: false,
            last_ack_ms: 0,
            writes_stalled: false,
            reads_failing_since: BTreeMap::new(),
        }
    }

    /// How long the cluster has been settled at `at_ms` beyond the recovery allowance, if it is.
    fn settled_since(&self, at_ms: u64) -> Option<u64> {
        if !self.in_safety {
            return None;
        }
        let quiet = self.faults.quiet_for_ms(at_ms)?;
        (quiet > self.bound_ms).then(|| at_ms - quiet + self.bound_ms)
    }

    fn violation(at_ms: u64, node: &str, message: String) -> Vec<Event> {
        vec![Event::Violation { at_ms, checker: Checker::Progress, node: node.into(), index: 0, message }]
    }
}

impl Observer for Progress {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        if self.faults.observe(event) {
            return Vec::new();
        }
        match event {
            Event::Phase { phase, .. } => {
                self.in_safety = *phase == RunPhase::Safety;
                Vec::new()
            }
            Event::WriteAcked { at_ms, .. } => {
                self.last_ack_ms = *at_ms;
                self.writes_stalled = false;
                Vec::new()
            }
            Event::LagSample { at_ms, .. } if self.has_writers && !self.writes_stalled => {
                let Some(settled) = self.settled_since(*at_ms) else { return Vec::new() };
                let since = self.last_ack_ms.max(settled);
                if at_ms - since > self.bound_ms {
                    self.writes_stalled = true;
                    let message = format!(
                        "no write acknowledged since {since} ms ({} ms) with every fault healed; writers are sending",
                        at_ms - since
                    );
                    return Self::violation(*at_ms, "root", message);
                }
                Vec::new()
            }
            Event::ReadSample { at_ms, node, reads, errors, .. } => {
                if *reads > 0 || *errors == 0 {
                    self.reads_failing_since.remove(node);
                    return Vec::new();
                }
                let settled = self.settled_since(*at_ms);
                let (since, reported) = self.reads_failing_since.entry(node.clone()).or_insert((*at_ms, false));
                let Some(settled) = settled else { return Vec::new() };
                let since_settled = (*since).max(settled);
                if !*reported && at_ms - since_settled >= self.bound_ms {
                    *reported = true;
                    let message = format!(
                        "every read errored since {since_settled} ms ({} ms; {errors} errors in the last second) with every fault healed",
                        at_ms - since_settled
                    );
                    return Self::violation(*at_ms, node, message);
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{FaultKind, FaultPhase};

    fn phase(at_ms: u64, phase: RunPhase) -> Event {
        Event::Phase { at_ms, phase }
    }
    fn tick(at_ms: u64) -> Event {
        Event::LagSample { at_ms, node: "edge-1".into(), lag_ms: 0, applied: 1 }
    }
    fn acked(at_ms: u64) -> Event {
        Event::WriteAcked { at_ms, key: "cfg0:1".into(), index: 1, version: 1, deleted: false }
    }
    fn reads(at_ms: u64, reads: u64, errors: u64) -> Event {
        Event::ReadSample { at_ms, node: "edge-1".into(), reads, misses: 0, p50_us: 0, p99_us: 0, max_us: 0, errors }
    }
    fn fault(at_ms: u64, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: "root".into(), kind: FaultKind::Partition, phase, detail: String::new() }
    }

    fn run(check: &mut Progress, events: &[Event]) -> Vec<(u64, String)> {
        events
            .iter()
            .flat_map(|e| check.observe(e))
            .map(|v| match v {
                Event::Violation { at_ms, node, .. } => (at_ms, node),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn a_write_stall_while_settled_is_caught_once_and_a_fault_excuses_one() {
        let mut check = Progress::new(10_000, true);
        let mut events = vec![phase(0, RunPhase::Safety), acked(500)];
        // No acknowledgement after 0.5 s: settled from 10 s (start-up), stalled past 20.5 s.
        events.extend((1..=30).map(|s| tick(s * 1000)));
        assert_eq!(run(&mut check, &events), [(21_000, "root".to_string())], "once, when it passed the bound");
        // Progress resumes, then a fault stops writes: excused while active and for the bound after.
        let mut events = vec![acked(31_000), fault(32_000, FaultPhase::Start)];
        events.extend((33..=50).map(|s| tick(s * 1000)));
        events.push(fault(50_000, FaultPhase::End));
        events.extend((51..=70).map(|s| tick(s * 1000)));
        // Settled again from 60 s (50 s + the bound): stalled past 70 s.
        assert_eq!(run(&mut check, &events), [] as [(u64, String); 0]);
        assert_eq!(run(&mut check, &[tick(71_000)]), [(71_000, "root".to_string())]);
        // In the liveness phase the writers stop: nothing is judged.
        let mut check = Progress::new(10_000, true);
        let mut events = vec![phase(0, RunPhase::Liveness)];
        events.extend((1..=60).map(|s| tick(s * 1000)));
        assert!(run(&mut check, &events).is_empty());
        // Without writers, there is no write to wait for.
        let mut check = Progress::new(10_000, false);
        let mut events = vec![phase(0, RunPhase::Safety)];
        events.extend((1..=60).map(|s| tick(s * 1000)));
        assert!(run(&mut check, &events).is_empty());
    }

    #[test]
    fn a_read_port_that_only_errors_is_caught_and_answered_reads_reset_it() {
        let mut check = Progress::new(5_000, false);
        let mut events = vec![phase(0, RunPhase::Safety)];
        // Answered reads, then only errors from 10 s: a stall at 15 s.
        events.extend((1..=9).map(|s| reads(s * 1000, 10, 0)));
        events.extend((10..=20).map(|s| reads(s * 1000, 0, 10)));
        assert_eq!(run(&mut check, &events), [(15_000, "edge-1".to_string())]);
        // Answered again: reset; a later all-error run is a new stall.
        let mut events = vec![reads(21_000, 5, 1)];
        events.extend((22..=30).map(|s| reads(s * 1000, 0, 3)));
        assert_eq!(run(&mut check, &events), [(27_000, "edge-1".to_string())]);
        // Idle readers (no reads, no errors) are not a stall.
        let mut check = Progress::new(5_000, false);
        let mut events = vec![phase(0, RunPhase::Safety)];
        events.extend((1..=30).map(|s| reads(s * 1000, 0, 0)));
        assert!(run(&mut check, &events).is_empty());
    }
}
