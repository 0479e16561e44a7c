//! The cache formula, checked: a node's page-cache miss ratio for reads over each 5 s window
//! stays under the scenario's `miss_ratio_max` while the cluster is settled. Reads, because the
//! 1–2 % rule sizes the read path: applies of uniformly random keys miss at any cache share
//! short of the whole data, whatever the sizing (they are reported, not judged).
//!
//! A window is judged when: no fault is active and the last one healed at least a window ago
//! (a restarted or partitioned node's cache is not the formula's business), the node's cache is
//! warm (it has filled once, or its process has run the scenario's `cache_warmup` — a cold cache
//! misses by definition), and the window saw at least
//! [`CACHE_WINDOW_TOUCHES_MIN`] page reads.

use super::FaultQuiet;
use crate::resources::{CACHE_WINDOW, CACHE_WINDOW_TOUCHES_MIN};
use crate::trace::{Checker, Event, Observer};

#[derive(Debug)]
pub struct Cache {
    miss_ratio_max: f64,
    faults: FaultQuiet,
}

impl Cache {
    pub fn new(miss_ratio_max: f64) -> Cache {
        assert!(miss_ratio_max > 0.0 && miss_ratio_max <= 1.0, "validated by the scenario");
        Cache { miss_ratio_max, faults: FaultQuiet::default() }
    }

    /// A window ending at `at_ms` lies wholly in a settled stretch.
    fn settled(&self, at_ms: u64) -> bool {
        self.faults.quiet_for_ms(at_ms).is_some_and(|quiet| quiet >= CACHE_WINDOW.as_millis() as u64)
    }
}

impl Observer for Cache {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        if self.faults.observe(event) {
            return Vec::new();
        }
        match event {
            Event::CacheSample { at_ms, node, hits, misses, pages_held, capacity_pages, warm, .. } => {
                let reads = hits + misses;
                if !*warm || reads < CACHE_WINDOW_TOUCHES_MIN || !self.settled(*at_ms) {
                    return Vec::new();
                }
                let ratio = *misses as f64 / reads as f64;
                if ratio <= self.miss_ratio_max {
                    return Vec::new();
                }
                let message = format!(
                    "cache miss ratio of reads {:.1} % over the 5 s window ending at {at_ms} ms ({misses} misses, {hits} hits; \
                     {pages_held} of {capacity_pages} pages held), above the bound {:.1} %",
                    ratio * 100.0,
                    self.miss_ratio_max * 100.0
                );
                vec![Event::Violation { at_ms: *at_ms, checker: Checker::Cache, node: node.clone(), index: 0, message }]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{FaultKind, FaultPhase};

    fn sample(at_ms: u64, hits: u64, misses: u64, warm: bool) -> Event {
        Event::CacheSample {
            at_ms,
            node: "e".into(),
            hits,
            misses,
            apply_hits: 0,
            apply_misses: 1000,
            pages_held: 4,
            capacity_pages: 4,
            warm,
        }
    }

    fn fault(at_ms: u64, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: "e".into(), kind: FaultKind::Kill, phase, detail: String::new() }
    }

    #[test]
    fn a_warm_settled_window_over_the_bound_is_a_violation_naming_the_counts() {
        let mut check = Cache::new(0.05);
        let found = check.observe(&sample(10_000, 60, 40, true));
        assert_eq!(found.len(), 1);
        let Event::Violation { message, node, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!(node, "e");
        assert!(message.contains("40.0 %") && message.contains("40 misses, 60 hits"), "{message}");
        assert!(check.observe(&sample(15_000, 99, 1, true)).is_empty(), "1 % is under the bound");
    }

    #[test]
    fn cold_small_or_faulted_windows_are_not_judged() {
        let mut check = Cache::new(0.05);
        assert!(check.observe(&sample(10_000, 0, 100, false)).is_empty(), "cold");
        assert!(check.observe(&sample(15_000, 10, 30, true)).is_empty(), "too few reads");
        check.observe(&fault(16_000, FaultPhase::Start));
        assert!(check.observe(&sample(20_000, 0, 100, true)).is_empty(), "fault active");
        check.observe(&fault(21_000, FaultPhase::End));
        assert!(check.observe(&sample(25_000, 0, 100, true)).is_empty(), "window overlaps the fault");
        assert_eq!(check.observe(&sample(30_000, 0, 100, true)).len(), 1);
    }
}
