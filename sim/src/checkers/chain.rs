//! Hash chain: every node's chain hash at index i equals the root's.
//!
//! Chain hashes are cumulative, so equal hashes at the end of each applied batch mean equal
//! histories up to it. The root applies every index first; a replica reporting an index the root
//! has not reported is itself a violation.

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, Observer};

#[derive(Debug, Default)]
pub struct Chain {
    root: BTreeMap<u64, String>,
}

impl Observer for Chain {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        let (at_ms, node, index, hash) = match event {
            Event::Applied { at_ms, node, last, hash, .. } => (*at_ms, node, *last, hash),
            Event::Bootstrapped { at_ms, node, index, hash } => (*at_ms, node, *index, hash),
            _ => return Vec::new(),
        };
        if node == "root" {
            self.root.insert(index, hash.clone());
            return Vec::new();
        }
        let message = match self.root.get(&index) {
            Some(expected) if expected == hash => return Vec::new(),
            Some(expected) => format!("chain hash {hash} at index {index}, the root's is {expected}"),
            None => format!("reached index {index}, which the root never applied"),
        };
        vec![Event::Violation { at_ms, checker: Checker::Chain, node: node.clone(), index, message }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(node: &str, last: u64, hash: &str) -> Event {
        Event::Applied { at_ms: 0, node: node.into(), first: last, last, hash: hash.into() }
    }

    #[test]
    fn compares_every_node_with_the_root() {
        let mut check = Chain::default();
        assert!(check.observe(&applied("root", 1, "aa")).is_empty());
        assert!(check.observe(&applied("edge-1", 1, "aa")).is_empty());
        assert_eq!(check.observe(&applied("edge-2", 1, "bb")).len(), 1, "diverged");
        assert_eq!(check.observe(&applied("edge-1", 2, "cc")).len(), 1, "ahead of the root");
    }
}
