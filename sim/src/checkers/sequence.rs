//! Sequence continuity: every node applies 1, 2, 3, … with no gap, no repeat and no reorder.
//!
//! A node's first batch after a restart continues from its persisted position (the store is on
//! a disk that outlives the process); a snapshot bootstrap moves it to the snapshot's index; a
//! replaced disk (the end of a `sigbus` fault) starts it over from 1.

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer};

#[derive(Debug, Default)]
pub struct Sequence {
    /// Last index each node applied.
    last: BTreeMap<String, u64>,
}

impl Observer for Sequence {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Applied { at_ms, node, first, last, .. } => {
                let previous = self.last.get(node).copied().unwrap_or(0);
                self.last.insert(node.clone(), *last);
                if *first != previous + 1 || last < first {
                    let message =
                        format!("applied {first}..={last}, expected the next batch to start at {}", previous + 1);
                    return vec![violation(*at_ms, node, *first, message)];
                }
                Vec::new()
            }
            Event::Bootstrapped { node, index, .. } => {
                self.last.insert(node.clone(), *index);
                Vec::new()
            }
            Event::Fault { node, kind, phase, .. } if *kind == FaultKind::Sigbus && *phase == FaultPhase::End => {
                // The failed disk was replaced by an empty one: the node starts over from 1.
                self.last.insert(node.clone(), 0);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}

fn violation(at_ms: u64, node: &str, index: u64, message: String) -> Event {
    Event::Violation { at_ms, checker: Checker::Sequence, node: node.into(), index, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(node: &str, first: u64, last: u64) -> Event {
        Event::Applied { at_ms: 0, node: node.into(), first, last, hash: String::new() }
    }

    #[test]
    fn catches_gaps_repeats_and_reorders() {
        let mut check = Sequence::default();
        assert!(check.observe(&applied("a", 1, 3)).is_empty());
        assert!(check.observe(&applied("a", 4, 4)).is_empty());
        assert_eq!(check.observe(&applied("a", 6, 7)).len(), 1, "gap");
        assert_eq!(check.observe(&applied("a", 7, 7)).len(), 1, "repeat");
        assert_eq!(check.observe(&applied("b", 2, 2)).len(), 1, "a node must start at 1");
    }
}
