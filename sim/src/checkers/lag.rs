//! Bounded lag: a node with a healthy path to the root stays within `lag_max` of it.
//!
//! Lag is sampled from every running node once a simulated second (the age of its newest
//! applied entry, which root heartbeats keep fresh). A sample over the bound is a violation only
//! while the cluster is healthy: no fault active, the last one healed more than `lag_max` ago
//! (the time the scenario allows for catching up), and the run older than `lag_max` (start-up).
//! This is conservative — a fault anywhere pauses the check everywhere — and never blames a
//! node for lag a fault explains.
//!
//! No flapping: in the same settled window a node must not change its source. Nothing broke,
//! so a failover then is a false alarm (a staleness threshold tighter than the heartbeat, a
//! backoff that never settles) that churns connections across the tree.

use super::FaultQuiet;
use crate::trace::{Event, Observer};

#[derive(Debug)]
pub struct Lag {
    lag_max_ms: u64,
    faults: FaultQuiet,
}

impl Lag {
    pub fn new(lag_max_ms: u64) -> Lag {
        Lag { lag_max_ms, faults: FaultQuiet::default() }
    }

    /// No fault active, the last healed over `lag_max` ago, and past start-up.
    fn settled(&self, at_ms: u64) -> bool {
        self.faults.quiet_for_ms(at_ms).is_some_and(|quiet| quiet > self.lag_max_ms)
    }
}

impl Observer for Lag {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        if self.faults.observe(event) {
            return Vec::new();
        }
        match event {
            Event::SourceChanged { at_ms, node, source, reason } if self.settled(*at_ms) && reason != "start" => {
                let message = format!(
                    "flapping: moved to source {source} ({reason}) with every fault healed for over {} ms",
                    self.lag_max_ms
                );
                vec![Event::Violation { at_ms: *at_ms, checker: "lag".into(), node: node.clone(), index: 0, message }]
            }
            Event::LagSample { at_ms, node, lag_ms, applied } => {
                let settled = self.settled(*at_ms);
                if settled && *lag_ms > self.lag_max_ms {
                    let message =
                        format!("lag {lag_ms} ms with every fault healed; the bound is {} ms", self.lag_max_ms);
                    return vec![Event::Violation {
                        at_ms: *at_ms,
                        checker: "lag".into(),
                        node: node.clone(),
                        index: *applied,
                        message,
                    }];
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

    fn sample(at_ms: u64, lag_ms: u64) -> Event {
        Event::LagSample { at_ms, node: "edge-1".into(), lag_ms, applied: 1 }
    }

    fn fault(at_ms: u64, phase: &str) -> Event {
        Event::Fault { at_ms, node: "mid-1".into(), kind: "kill".into(), phase: phase.into(), detail: String::new() }
    }

    #[test]
    fn blames_lag_only_when_no_fault_explains_it() {
        let mut check = Lag::new(1_000);
        assert!(check.observe(&sample(500, 5_000)).is_empty(), "start-up grace");
        assert_eq!(check.observe(&sample(2_000, 5_000)).len(), 1, "healthy and lagging");
        assert!(check.observe(&fault(3_000, "start")).is_empty());
        assert!(check.observe(&sample(4_000, 9_000)).is_empty(), "a fault is active");
        assert!(check.observe(&fault(5_000, "end")).is_empty());
        assert!(check.observe(&sample(5_500, 9_000)).is_empty(), "catching up after healing");
        assert_eq!(check.observe(&sample(6_500, 9_000)).len(), 1, "still behind after the grace");
        assert!(check.observe(&sample(7_500, 200)).is_empty());
        let moved = |at_ms, reason: &str| Event::SourceChanged {
            at_ms,
            node: "edge-1".into(),
            source: "10.0.1.2:7000".into(),
            reason: reason.into(),
        };
        assert_eq!(check.observe(&moved(8_000, "stale")).len(), 1, "flapping while healthy");
        assert!(check.observe(&moved(8_000, "start")).is_empty(), "a (re)start is not a flap");
        assert!(check.observe(&fault(9_000, "start")).is_empty());
        assert!(check.observe(&moved(9_500, "disconnected")).is_empty(), "a fault explains it");
    }
}
