//! Installs: every snapshot a replica installs has a cause the trace shows. A replica that
//! re-bootstraps without one ends in the right state and passes every other checker — having
//! fetched its whole store again for nothing (wasted work the sweep would never see).
//!
//! A snapshot install at node X, which had applied index `a`, is justified when
//! - X's own data was in question: a `bit_rot`, `sigbus` or `disk_error` fault struck X since
//!   its last install (damage to heal, a replaced disk, a store lost to a failed swap); or
//! - some source S of X may no longer have held entry `a + 1`: every node keeps at least the
//!   scenario's `retention_entries` newest entries (`keep_entries_min`), and nothing before the
//!   snapshot it last installed, so S's first retained index is at most
//!   `max(S's last snapshot index, S's applied index − retention) + 1`; S may lack `a + 1` only
//!   when `a` is below that bound.
//!
//! Generous on purpose (the newest applied index known for each source, a fault's cause kept
//! until the next install): it never blames a replica that a correct node's rules send to a
//! snapshot, and still names one that bootstraps while every source holds its next entry.

use std::collections::{BTreeMap, BTreeSet};

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer};

#[derive(Debug)]
pub struct Installs {
    retention: u64,
    /// Each replica's sources (node names).
    sources: BTreeMap<String, Vec<String>>,
    /// Per node: the newest applied index seen.
    applied: BTreeMap<String, u64>,
    /// Per node: the index of the last snapshot it installed.
    snapshot_at: BTreeMap<String, u64>,
    /// Nodes whose own data a fault put in question since their last install.
    in_question: BTreeSet<String>,
}

impl Installs {
    pub fn new(retention: u64, sources: BTreeMap<String, Vec<String>>) -> Installs {
        Installs {
            retention,
            sources,
            applied: BTreeMap::new(),
            snapshot_at: BTreeMap::new(),
            in_question: BTreeSet::new(),
        }
    }

    /// The highest first retained index `source` may have had.
    fn first_retained_bound(&self, source: &str) -> u64 {
        let applied = self.applied.get(source).copied().unwrap_or(0);
        let snapshot = self.snapshot_at.get(source).copied().unwrap_or(0);
        snapshot.max(applied.saturating_sub(self.retention)) + 1
    }
}

impl Observer for Installs {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Applied { node, last, .. } => {
                let applied = self.applied.entry(node.clone()).or_default();
                *applied = (*applied).max(*last);
            }
            Event::Fault { node, kind, phase, .. } => match (kind, phase) {
                (FaultKind::BitRot | FaultKind::DiskError | FaultKind::Sigbus, FaultPhase::Start) => {
                    self.in_question.insert(node.clone());
                }
                // The disk was replaced: the node starts from nothing.
                (FaultKind::Sigbus, FaultPhase::End) => {
                    self.applied.insert(node.clone(), 0);
                    self.in_question.insert(node.clone());
                }
                _ => {}
            },
            Event::Bootstrapped { at_ms, node, index, .. } => {
                let had = self.applied.get(node).copied().unwrap_or(0);
                let justified = self.in_question.remove(node)
                    || self.sources.get(node).is_some_and(|sources| {
                        sources.iter().any(|source| had + 1 < self.first_retained_bound(source))
                    });
                self.applied.insert(node.clone(), *index);
                self.snapshot_at.insert(node.clone(), *index);
                if !justified {
                    let held: Vec<String> = self
                        .sources
                        .get(node)
                        .into_iter()
                        .flatten()
                        .map(|s| format!("{s} retained from {} at most", self.first_retained_bound(s)))
                        .collect();
                    let message = format!(
                        "installed a snapshot at index {index} without cause: it had applied {had}, its sources \
                         held entry {} ({}), and no fault put its own data in question",
                        had + 1,
                        held.join(", ")
                    );
                    return vec![Event::Violation {
                        at_ms: *at_ms,
                        checker: Checker::Installs,
                        node: node.clone(),
                        index: *index,
                        message,
                    }];
                }
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(node: &str, last: u64) -> Event {
        Event::Applied { at_ms: 0, node: node.into(), first: last, last, hash: String::new() }
    }

    fn installed(node: &str, index: u64) -> Event {
        Event::Bootstrapped { at_ms: 0, node: node.into(), index, hash: String::new() }
    }

    fn check() -> Installs {
        Installs::new(20, [("edge-1".to_string(), vec!["mid-1".to_string(), "mid-2".to_string()])].into())
    }

    #[test]
    fn an_install_while_every_source_holds_the_next_entry_is_a_violation() {
        let mut check = check();
        for event in [applied("mid-1", 100), applied("mid-2", 100), applied("edge-1", 90)] {
            check.observe(&event);
        }
        let found = check.observe(&installed("edge-1", 100));
        assert_eq!(found.len(), 1, "both mids keep 81..=100; edge-1 needed 91");
        let Event::Violation { checker, message, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!(*checker, Checker::Installs);
        assert!(message.contains("held entry 91"), "{message}");
    }

    #[test]
    fn a_source_past_retention_or_restored_from_a_snapshot_justifies_it() {
        let mut check = check();
        for event in [applied("mid-1", 100), applied("edge-1", 70)] {
            check.observe(&event);
        }
        assert!(check.observe(&installed("edge-1", 100)).is_empty(), "mid-1 may have collected 71");
        let mut check = self::check();
        for event in [applied("edge-1", 50), installed("mid-2", 60), applied("mid-1", 60)] {
            check.observe(&event);
        }
        assert!(check.observe(&installed("edge-1", 60)).is_empty(), "mid-2's log starts after 60");
    }

    #[test]
    fn damage_a_replaced_disk_or_a_disk_error_justifies_one_install() {
        for kind in [FaultKind::BitRot, FaultKind::DiskError, FaultKind::Sigbus] {
            let mut check = check();
            for event in [applied("mid-1", 100), applied("mid-2", 100), applied("edge-1", 95)] {
                check.observe(&event);
            }
            let fault =
                Event::Fault { at_ms: 0, node: "edge-1".into(), kind, phase: FaultPhase::Start, detail: String::new() };
            check.observe(&fault);
            assert!(check.observe(&installed("edge-1", 100)).is_empty(), "{kind}: its data was in question");
            assert_eq!(check.observe(&installed("edge-1", 100)).len(), 1, "{kind}: one install heals it");
        }
    }
}
