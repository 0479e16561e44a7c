//! Hash chain: every node's chain hash at index i equals the root's.
//!
//! Chain hashes are cumulative, so equal hashes at the end of each applied batch mean equal
//! histories up to it. The root applies every index first; a replica reporting an index the root
//! has not reported is itself a violation. In a root group the first member to apply an index
//! sets the root's hash there, and every other member's must equal it too: the members hold one
//! log, entry for entry.

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, Observer};

#[derive(Debug, Default)]
pub struct Chain {
    /// By index: the hash the root applied there, and which root member applied it first.
    root: BTreeMap<u64, (String, String)>,
}

impl Observer for Chain {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        let (at_ms, node, index, hash) = match event {
            Event::Applied { at_ms, node, last, hash, .. } => (*at_ms, node, *last, hash),
            Event::Bootstrapped { at_ms, node, index, hash } => (*at_ms, node, *index, hash),
            _ => return Vec::new(),
        };
        if crate::trace::is_root(node) {
            match self.root.get(&index) {
                Some((first, expected)) if first != node && expected != hash => {
                    let message =
                        format!("chain hash {hash} at index {index}, where root member {first} has {expected}");
                    return vec![Event::Violation {
                        at_ms,
                        checker: Checker::Chain,
                        node: node.clone(),
                        index,
                        message,
                    }];
                }
                // The same member again: a root that lost unsynced commits wrote the index anew.
                Some((first, _)) if first != node => {}
                _ => {
                    self.root.insert(index, (node.clone(), hash.clone()));
                }
            }
            return Vec::new();
        }
        let message = match self.root.get(&index) {
            Some((_, expected)) if expected == hash => return Vec::new(),
            Some((_, expected)) => format!("chain hash {hash} at index {index}, the root's is {expected}"),
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

    #[test]
    fn root_group_members_hold_one_log() {
        let mut check = Chain::default();
        assert!(check.observe(&applied("root-2", 1, "aa")).is_empty(), "the first member sets the hash");
        assert!(check.observe(&applied("root", 1, "aa")).is_empty());
        assert!(check.observe(&applied("edge-1", 1, "aa")).is_empty());
        assert_eq!(check.observe(&applied("root-3", 1, "bb")).len(), 1, "a member's log forked");
        assert!(check.observe(&applied("root-2", 1, "cc")).is_empty(), "the setter rewrote its own index");
    }
}
