//! Cursor-after-apply: a node's persisted resume position never runs ahead of what it applied.
//!
//! A position ahead of the data means a crash at the wrong moment resumes past entries that
//! were never applied: a silent skip. The node reports each position it persists (`cursor`
//! events: at start-up, the one it will resume from; the legacy side file, whenever written);
//! this checker compares it with the node's last applied index. (A position *behind* is a
//! replay, which the sequence checker sees when it happens.) A replaced disk starts from zero.

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer};

#[derive(Debug, Default)]
pub struct Cursor {
    applied: BTreeMap<String, u64>,
}

impl Observer for Cursor {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Applied { node, last, .. } => {
                self.applied.insert(node.clone(), *last);
            }
            Event::Bootstrapped { node, index, .. } => {
                self.applied.insert(node.clone(), *index);
            }
            Event::Fault { node, kind, phase, .. } if *kind == FaultKind::Sigbus && *phase == FaultPhase::End => {
                self.applied.insert(node.clone(), 0);
            }
            Event::Cursor { at_ms, node, index } => {
                let applied = self.applied.get(node).copied().unwrap_or(0);
                if *index > applied {
                    let message = format!(
                        "persisted resume position {index}, but applied only up to {applied}: a crash now would skip {}",
                        index - applied
                    );
                    return vec![Event::Violation {
                        at_ms: *at_ms,
                        checker: Checker::Cursor,
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

    #[test]
    fn a_position_ahead_of_the_data_is_a_violation() {
        let mut check = Cursor::default();
        let cursor = |index| Event::Cursor { at_ms: 0, node: "edge-1".into(), index };
        assert!(check.observe(&cursor(0)).is_empty(), "a fresh node starts at 0");
        check.observe(&Event::Applied { at_ms: 0, node: "edge-1".into(), first: 1, last: 5, hash: String::new() });
        assert!(check.observe(&cursor(5)).is_empty());
        assert!(check.observe(&cursor(3)).is_empty(), "behind is a replay, the sequence checker's business");
        assert_eq!(check.observe(&cursor(6)).len(), 1, "ahead of the data");
    }
}
