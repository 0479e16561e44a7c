//! A root group's consensus, from the members' typed role reports (`raft_role` events, never
//! log text), two rules true of any correct Raft implementation:
//!
//! - **at most one member leads any term** (election safety);
//! - **a member's term never decreases**, across its restarts too: the term (with the vote
//!   cast in it) is persisted before the member acts on it, so a member that comes back with
//!   an older term has forgotten a vote it may cast again. A member whose disk was replaced
//!   (the end of a `sigbus` fault), or that set its damaged store aside at start (a
//!   `store_set_aside` event), starts a new life, from term 0.
//!
//! (That no acknowledged write is lost across leader changes, and that every member holds one
//! log, are the `convergence`, `reads` and `chain` checkers' judgements, which cover root
//! members as they cover replicas.)

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer, RaftRole};

#[derive(Debug, Default)]
pub struct Raft {
    /// By term: the member that said it leads, and when.
    leaders: BTreeMap<u64, (String, u64)>,
    /// By member: the highest term it reported, and when.
    terms: BTreeMap<String, (u64, u64)>,
}

impl Observer for Raft {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        if let Event::Fault { node, kind: FaultKind::Sigbus, phase: FaultPhase::End, .. }
        | Event::StoreSetAside { node, .. } = event
        {
            // Its disk was replaced, or its damaged store set aside: a new life from term 0,
            // granting no vote until it holds what the group committed.
            self.terms.remove(node);
            return Vec::new();
        }
        let Event::RaftRole { at_ms, node, term, role, .. } = event else { return Vec::new() };
        let mut found = Vec::new();
        match self.terms.get(node) {
            Some(&(highest, since)) if *term < highest => {
                let message = format!(
                    "{node} is back at term {term} after it reached term {highest} (at {since} ms): a member's term \
                     never decreases — it persists its term and vote before it acts on them"
                );
                found.push(Event::Violation {
                    at_ms: *at_ms,
                    checker: Checker::Raft,
                    node: node.clone(),
                    index: *term,
                    message,
                });
            }
            Some(&(highest, _)) if *term == highest => {}
            _ => {
                self.terms.insert(node.clone(), (*term, *at_ms));
            }
        }
        if *role == RaftRole::Leader {
            found.extend(self.leads(*at_ms, node, *term));
        }
        found
    }
}

impl Raft {
    fn leads(&mut self, at_ms: u64, node: &str, term: u64) -> Vec<Event> {
        let (at_ms, node, term) = (&at_ms, &node.to_string(), &term);
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

    #[test]
    fn a_term_that_goes_back_is_a_violation_unless_the_disk_was_replaced() {
        let mut check = Raft::default();
        assert!(check.observe(&role("root", 3, RaftRole::Follower)).is_empty());
        let found = check.observe(&Event::RaftRole {
            at_ms: 9_000,
            node: "root".into(),
            term: 0,
            role: RaftRole::Follower,
            leader: 0,
        });
        assert_eq!(found.len(), 1, "back at term 0 after term 3: {found:?}");
        let replaced = Event::Fault {
            at_ms: 10_000,
            node: "root-2".into(),
            kind: FaultKind::Sigbus,
            phase: FaultPhase::End,
            detail: "disk replaced".into(),
        };
        assert!(check.observe(&role("root-2", 3, RaftRole::Follower)).is_empty());
        assert!(check.observe(&replaced).is_empty());
        let fresh =
            Event::RaftRole { at_ms: 11_000, node: "root-2".into(), term: 0, role: RaftRole::Follower, leader: 0 };
        assert!(check.observe(&fresh).is_empty(), "a replaced disk starts from term 0");
    }
}
