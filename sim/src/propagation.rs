//! Propagation: how long each entry takes from the root's commit to its apply on each replica,
//! per tier — the figure Quicksilver publishes for its fleet (p99 ≈ 2.29 s from the root to
//! every machine).
//!
//! Measured from the events every checker sees (kept in the trace or not), on the simulator's
//! clock, never from what a node says of itself: an entry is committed when the first root (or
//! root group member) applies it, and reaches a replica when that replica first applies it. An
//! entry a replica took in a store copy (a bootstrap) was never applied one by one and is not
//! counted; an index a replica applies again (after losing it) counts once, the first time. A
//! root that writes indices again after losing unsynced commits restarts their clocks, as the
//! `lag` checker's account does.
//!
//! Each tier's delays are kept exactly, as counts per millisecond, so the quantiles are exact
//! whatever the tree's size.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use qs_reports::schema::PropagationRow;

use crate::sync::Locked;
use crate::trace::{Event, Observer, is_root};

/// The propagation measure of one run: an observer of its events, shared with whoever reads
/// the result at the end.
#[derive(Clone, Debug, Default)]
pub struct Propagation(Arc<Mutex<Measure>>);

#[derive(Debug, Default)]
struct Measure {
    /// Each replica's tier.
    tiers: BTreeMap<String, String>,
    /// The root's commits: the last index of each, and when it was first applied.
    commits: BTreeMap<u64, u64>,
    /// Each root member's last applied index.
    root_heads: BTreeMap<String, u64>,
    root_applied: u64,
    /// Each replica's highest index counted.
    counted: BTreeMap<String, u64>,
    /// Per tier, how many entries reached a replica after how many milliseconds.
    delays: BTreeMap<String, BTreeMap<u64, u64>>,
}

impl Propagation {
    /// A measure for a run whose nodes are `nodes` (each with its tier).
    pub fn new(nodes: &[qs_reports::schema::NodeInfo]) -> Propagation {
        let tiers = nodes.iter().filter(|n| !is_root(&n.name)).map(|n| (n.name.clone(), n.tier.clone())).collect();
        Propagation(Arc::new(Mutex::new(Measure { tiers, ..Measure::default() })))
    }

    /// Per tier, in topology order: how many entries reached its replicas, and the 50th and
    /// 99th percentile and the longest of the times they took.
    pub fn rows(&self, tier_order: &[String]) -> Vec<PropagationRow> {
        let measure = self.0.locked();
        tier_order
            .iter()
            .filter_map(|tier| {
                let delays = measure.delays.get(tier)?;
                let entries: u64 = delays.values().sum();
                let at = |q: f64| quantile(delays, entries, q);
                Some(PropagationRow {
                    tier: tier.clone(),
                    entries,
                    p50_ms: at(0.5),
                    p99_ms: at(0.99),
                    max_ms: delays.keys().next_back().copied().unwrap_or(0),
                })
            })
            .collect()
    }
}

/// The smallest delay at or below which at least `q` of `entries` fall (nearest rank).
fn quantile(delays: &BTreeMap<u64, u64>, entries: u64, q: f64) -> u64 {
    let rank = ((q * entries as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (&delay, &count) in delays {
        seen += count;
        if seen >= rank {
            return delay;
        }
    }
    0
}

impl Measure {
    fn root_applied(&mut self, node: &str, first: u64, last: u64, at_ms: u64) {
        let previous = self.root_heads.insert(node.to_string(), last).unwrap_or(0);
        if first <= previous {
            // Written again after a loss: the newer commit wins.
            self.commits.split_off(&first);
            self.commits.insert(last, at_ms);
            self.root_applied = last;
        } else if last > self.root_applied {
            self.commits.insert(last, at_ms);
            self.root_applied = last;
        }
    }

    fn replica_applied(&mut self, node: &str, first: u64, last: u64, at_ms: u64) {
        let Some(tier) = self.tiers.get(node) else { return };
        let counted = self.counted.entry(node.to_string()).or_default();
        let from = first.max(*counted + 1);
        if from > last {
            return;
        }
        *counted = last;
        // Commit batches overlapping from..=last: the batch ending at `end` holds the indices
        // after the batch before it.
        let delays = self.delays.entry(tier.clone()).or_default();
        let mut next = from;
        for (&end, &committed_ms) in self.commits.range(from..) {
            let upto = end.min(last);
            *delays.entry(at_ms.saturating_sub(committed_ms)).or_default() += upto - next + 1;
            next = upto + 1;
            if next > last {
                break;
            }
        }
        // Indices the root has not been seen to apply (a replica never runs ahead of its
        // root; a store copied from a member that lost them could): not counted.
    }
}

impl Observer for Propagation {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Applied { at_ms, node, first, last, .. } => {
                let mut measure = self.0.locked();
                if is_root(node) {
                    measure.root_applied(node, *first, *last, *at_ms);
                } else {
                    measure.replica_applied(node, *first, *last, *at_ms);
                }
            }
            Event::Bootstrapped { node, index, .. } => {
                let mut measure = self.0.locked();
                let counted = measure.counted.entry(node.clone()).or_default();
                *counted = (*counted).max(*index);
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(at_ms: u64, node: &str, first: u64, last: u64) -> Event {
        Event::Applied { at_ms, node: node.into(), first, last, hash: String::new() }
    }

    fn info(name: &str, tier: &str) -> qs_reports::schema::NodeInfo {
        qs_reports::schema::NodeInfo { name: name.into(), tier: tier.into(), depth: 0, datacenter: None }
    }

    #[test]
    fn each_entry_counts_from_its_commit_to_its_first_apply() {
        let mut measure = Propagation::new(&[info("root", "root"), info("mid-1", "mid"), info("edge-1", "edge")]);
        for event in [
            applied(1_000, "root", 1, 2),
            applied(2_000, "root", 3, 3),
            applied(2_500, "mid-1", 1, 3),  // 1500, 1500, 500
            applied(3_000, "edge-1", 1, 1), // 2000
            applied(9_000, "edge-1", 1, 3), // 1 again: not counted; 2: 8000, 3: 7000
            Event::Bootstrapped { at_ms: 9_500, node: "mid-1".into(), index: 10, hash: String::new() },
            applied(9_600, "root", 4, 12),
            applied(9_900, "mid-1", 11, 12), // 300, 300
        ] {
            assert!(measure.observe(&event).is_empty());
        }
        let rows = measure.rows(&["root".into(), "mid".into(), "edge".into()]);
        let rows: Vec<(&str, u64, u64, u64, u64)> =
            rows.iter().map(|r| (r.tier.as_str(), r.entries, r.p50_ms, r.p99_ms, r.max_ms)).collect();
        assert_eq!(rows, vec![("mid", 5, 500, 1_500, 1_500), ("edge", 3, 7_000, 8_000, 8_000)]);
    }

    #[test]
    fn a_root_group_commits_when_its_first_member_applies() {
        let mut measure = Propagation::new(&[info("root", "root"), info("root-2", "root"), info("edge-1", "edge")]);
        measure.observe(&applied(1_000, "root-2", 1, 1));
        measure.observe(&applied(1_400, "root", 1, 1));
        measure.observe(&applied(1_700, "edge-1", 1, 1));
        assert_eq!(measure.rows(&["edge".into()])[0].p50_ms, 700);
    }
}
