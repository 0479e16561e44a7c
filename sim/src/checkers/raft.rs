//! A root group's consensus, from the members' typed role reports (`raft_role` events, never
//! log text): at most one member leads in any term — Raft's election safety, true of any
//! correct implementation. (That no acknowledged write is lost across leader changes, and
//! that every member holds one log, are the `convergence`, `reads` and `chain` checkers'
//! judgements, which cover root members as they cover replicas.)

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, Observer, RaftRole};

#[derive(Debug, Default)]
pub struct Raft {
    /// By term: the member that said it leads, and when.
    leaders: BTreeMap<u64, (String, u64)>,
}

impl Observer for Raft {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        let Event::RaftRole { at_ms, node, term, role: RaftRole::Leader, .. } = event else { return Vec::new() };
        match self.leaders.get(term) {
            Some((first, since)) if first != node => {
                let message = format!(
                    "{node} leads term {term}, which {first} has led since {since} ms: two leaders in one term"
                );
                vec![Event::Violation {
                    at_ms: *at_ms,
                    checker: Checker::Raft,
                    node: node.clone(),
                    index: *term,
                    message,
                }]
            }
            Some(_) => Vec::new(),
            None => {
                self.leaders.insert(*term, (node.clone(), *at_ms));
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(node: &str, term: u64, role: RaftRole) -> Event {
        Event::RaftRole { at_ms: term * 1000, node: node.into(), term, role, leader: 0 }
    }

    #[test]
    fn two_leaders_in_one_term_are_a_violation_and_one_per_term_is_not() {
        let mut check = Raft::default();
        assert!(check.observe(&role("root", 1, RaftRole::Leader)).is_empty());
        assert!(check.observe(&role("root-2", 1, RaftRole::Follower)).is_empty());
        assert!(check.observe(&role("root", 1, RaftRole::Leader)).is_empty(), "the same leader again");
        assert!(check.observe(&role("root-2", 2, RaftRole::Leader)).is_empty(), "a new term, a new leader");
        let found = check.observe(&role("root-3", 2, RaftRole::Leader));
        assert_eq!(found.len(), 1);
        let Event::Violation { checker, node, index, message, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!((*checker, node.as_str(), *index), (Checker::Raft, "root-3", 2));
        assert!(message.contains("root-2 has led since 2000 ms"), "{message}");
    }
}
