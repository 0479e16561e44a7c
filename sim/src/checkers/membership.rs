//! A root group's membership, from the members' typed configuration reports
//! (`raft_configuration` events: the voters after each membership change a member applied),
//! under the `raft` verdict. Rules true of any correct implementation of Raft's joint consensus:
//!
//! - **one configuration per index**: every member that applied the change at an index holds
//!   the same voters there (a fork of the configuration is a fork of the group);
//! - **the configuration never regresses**: within one life of a member (until it is killed,
//!   stopped or loses its disk) the index of the configuration it applied only grows;
//! - **one legal step at a time**: from a configuration outside joint consensus the next is
//!   either one voter added or removed, or a joint one whose outgoing voters are exactly the
//!   old ones; from a joint one the next leaves it, keeping its incoming voters — never two
//!   majorities that need not overlap;
//! - **a configuration held is the group's**: one a member takes up without applying a change
//!   (restored at start, or held by a snapshot it was sent: `raft_configuration_held`) is the
//!   configuration the group had at the index it names — the newest change at or before it;
//! - **a leader is a voter**: a member that says it leads is among the voters (incoming or
//!   outgoing) of the newest configuration it applied in this life (one that applied none since
//!   it started is not judged: the configuration it restored is not reported); and a leader
//!   that applies a configuration outside joint consensus without itself among the voters (the
//!   new one committed) stops leading within
//!   [`STEP_DOWN_WITHIN_MS`] (raft-rs alone would let it lead on);
//! - **an asked change is made**: each `membership` fault's change shows in a configuration
//!   without joint consensus by the end of the run (the operator asks until the safety phase
//!   ends).

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer, RaftRole};

/// A configuration: its voters and, while joint, the outgoing ones (sorted).
type Voters = (Vec<u64>, Vec<u64>);

/// How long a leader that applied its own removal may go on leading: a leadership transfer
/// takes an election's round trip; two election timeouts (2 s at the shipped tick) is ample.
pub const STEP_DOWN_WITHIN_MS: u64 = 2_000;

#[derive(Debug)]
pub struct Membership {
    /// The group's first voters (configuration index 0).
    first: Vec<u64>,
    /// By index: the configuration the first member to apply it reported, and which member.
    history: BTreeMap<u64, (Voters, String)>,
    /// By member, this life: the newest configuration index it applied and its voters.
    applied: BTreeMap<String, (u64, Voters)>,
    /// The changes asked (`membership` faults): when, to add, to remove.
    asked: Vec<(u64, Vec<u64>, Vec<u64>)>,
    judged_asked: bool,
    /// By member: whether the last role it reported is leader.
    leading: BTreeMap<String, bool>,
    /// Leaders that applied their own removal: by member, when they must have stopped leading
    /// and the configuration's index.
    removed_leaders: BTreeMap<String, (u64, u64)>,
}

impl Membership {
    /// For a group whose first voters are `first`, asked the changes `asked` (their times in
    /// ms, the ids to add and to remove).
    pub fn new(first: Vec<u64>, asked: Vec<(u64, Vec<u64>, Vec<u64>)>) -> Membership {
        Membership {
            first,
            history: BTreeMap::new(),
            applied: BTreeMap::new(),
            asked,
            judged_asked: false,
            leading: BTreeMap::new(),
            removed_leaders: BTreeMap::new(),
        }
    }

    fn violation(at_ms: u64, node: &str, index: u64, message: String) -> Event {
        Event::Violation { at_ms, checker: Checker::Raft, node: node.to_string(), index, message }
    }

    /// The configuration before `index` in the group's history (the first voters before any).
    fn before(&self, index: u64) -> Voters {
        self.history.range(..index).next_back().map_or((self.first.clone(), Vec::new()), |(_, (v, _))| v.clone())
    }

    fn configured(&mut self, at_ms: u64, node: &str, index: u64, voters: Voters) -> Vec<Event> {
        let mut found = Vec::new();
        match self.history.get(&index) {
            Some((known, by)) if *known != voters => found.push(Self::violation(
                at_ms,
                node,
                index,
                format!(
                    "{node} applied voters {:?} (outgoing {:?}) at Raft index {index}, where {by} applied {:?} \
                     (outgoing {:?}): every member holds one configuration per index",
                    voters.0, voters.1, known.0, known.1
                ),
            )),
            Some(_) => {}
            None => {
                let previous = self.before(index);
                if let Some(wrong) = illegal_step(&previous, &voters) {
                    found.push(Self::violation(
                        at_ms,
                        node,
                        index,
                        format!(
                            "{node} applied voters {:?} (outgoing {:?}) at Raft index {index} after {:?} (outgoing \
                             {:?}): {wrong}",
                            voters.0, voters.1, previous.0, previous.1
                        ),
                    ));
                }
                self.history.insert(index, (voters.clone(), node.to_string()));
            }
        }
        if let Some((newest, _)) = self.applied.get(node)
            && index <= *newest
        {
            found.push(Self::violation(
                at_ms,
                node,
                index,
                format!(
                    "{node} applied the configuration at Raft index {index} after the one at {newest}, in the same \
                     life: a member's configuration never goes back"
                ),
            ));
        }
        // Outside joint consensus only: a leader may manage the joint phase it is leaving (the
        // Raft paper's leader steps down once the new configuration is committed).
        let outside = member_id(node).is_some_and(|id| !voters.0.contains(&id));
        if self.leading.get(node).copied().unwrap_or(false) && voters.1.is_empty() && outside {
            self.removed_leaders.insert(node.to_string(), (at_ms + STEP_DOWN_WITHIN_MS, index));
        }
        self.applied.insert(node.to_string(), (index, voters));
        found
    }

    /// Leaders that applied their own removal and still lead past their deadline.
    fn overdue(&mut self, now_ms: u64) -> Vec<Event> {
        let overdue: Vec<(String, (u64, u64))> =
            self.removed_leaders.iter().filter(|(_, (by, _))| now_ms > *by).map(|(n, d)| (n.clone(), *d)).collect();
        overdue
            .into_iter()
            .map(|(node, (by, index))| {
                self.removed_leaders.remove(&node);
                Self::violation(
                    now_ms,
                    &node,
                    index,
                    format!(
                        "{node} applied the configuration at Raft index {index}, which does not hold it as a \
                         voter, while it led, and still leads {} ms later: a leader removed from its group \
                         hands its leadership on",
                        now_ms - (by - STEP_DOWN_WITHIN_MS)
                    ),
                )
            })
            .collect()
    }

    /// `node` took up `voters` as the group's at `index` without applying a change.
    fn held(&mut self, at_ms: u64, node: &str, index: u64, voters: Voters) -> Vec<Event> {
        let (known, since) = self
            .history
            .range(..=index)
            .next_back()
            .map_or(((self.first.clone(), Vec::new()), 0), |(at, (v, _))| (v.clone(), *at));
        let mut found = Vec::new();
        if known != voters {
            found.push(Self::violation(
                at_ms,
                node,
                index,
                format!(
                    "{node} took up voters {:?} (outgoing {:?}) as the group's at Raft index {index} (restored, or \
                     held by a snapshot), but the group's configuration there is {:?} (outgoing {:?}), made at \
                     index {since}: a snapshot and a restart carry the configuration at their index",
                    voters.0, voters.1, known.0, known.1
                ),
            ));
        }
        self.applied.insert(node.to_string(), (index, voters));
        found
    }

    fn leads(&self, at_ms: u64, node: &str, term: u64) -> Option<Event> {
        let id = member_id(node)?;
        // Nothing applied in this life yet: the configuration it restarted with is not
        // reported (it restores it from its log and snapshot), so it is not judged.
        let (index, (voters, outgoing)) = self.applied.get(node).cloned()?;
        (!voters.contains(&id) && !outgoing.contains(&id)).then(|| {
            Self::violation(
                at_ms,
                node,
                term,
                format!(
                    "{node} (member {id}) leads term {term}, but the newest configuration it applied (Raft index \
                     {index}) has voters {voters:?} and outgoing {outgoing:?}: a leader is a voter"
                ),
            )
        })
    }

    /// At the end of the run: every asked change shows in a configuration outside joint
    /// consensus.
    fn judge_asked(&mut self, at_ms: u64) -> Vec<Event> {
        self.judged_asked = true;
        let newest = self.history.last_key_value().map(|(index, (v, _))| (*index, v.clone()));
        let (index, (voters, outgoing)) = newest.unwrap_or((0, (self.first.clone(), Vec::new())));
        self.asked
            .iter()
            .filter(|(_, add, remove)| {
                !outgoing.is_empty()
                    || !add.iter().all(|id| voters.contains(id))
                    || remove.iter().any(|id| voters.contains(id))
            })
            .map(|(asked_ms, add, remove)| {
                Self::violation(
                    at_ms,
                    "root group",
                    index,
                    format!(
                        "the operator asked at {asked_ms} ms to add {add:?} and remove {remove:?}; by the end of the \
                         run the group's newest configuration (Raft index {index}) has voters {voters:?} and \
                         outgoing {outgoing:?}: a change asked of a group that can commit is made"
                    ),
                )
            })
            .collect()
    }
}

/// Why going from `from` to `to` is not one step of Raft's membership changes, if it is not.
fn illegal_step(from: &Voters, to: &Voters) -> Option<String> {
    let (old, old_outgoing) = from;
    let (new, new_outgoing) = to;
    if !old_outgoing.is_empty() {
        // Joint: the next leaves it, keeping the incoming voters.
        return (!new_outgoing.is_empty() || new != old)
            .then(|| "a joint configuration is followed by leaving it, its incoming voters kept".to_string());
    }
    if !new_outgoing.is_empty() {
        return (new_outgoing != old)
            .then(|| "entering joint consensus keeps the voters before the change as the outgoing ones".to_string());
    }
    let changed = old.iter().filter(|id| !new.contains(id)).count() + new.iter().filter(|id| !old.contains(id)).count();
    (changed != 1).then(|| {
        format!("{changed} voters changed at once without joint consensus: a simple change adds or removes one")
    })
}

/// A root member's id from its node name (`root` is 1, `root-n` is n).
pub fn member_id(node: &str) -> Option<u64> {
    match node.strip_prefix(crate::trace::ROOT)? {
        "" => Some(1),
        rest => rest.strip_prefix('-')?.parse().ok(),
    }
}

impl Observer for Membership {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        let mut found = self.overdue(event.at_ms());
        if let Event::RaftRole { node, role, .. } = event {
            let leads = *role == RaftRole::Leader;
            self.leading.insert(node.clone(), leads);
            if !leads {
                self.removed_leaders.remove(node);
            }
        }
        found.extend(self.judge(event));
        found
    }
}

impl Membership {
    fn judge(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::RaftConfiguration { at_ms, node, index, voters, outgoing } => {
                self.configured(*at_ms, node, *index, (voters.clone(), outgoing.clone()))
            }
            Event::RaftConfigurationHeld { at_ms, node, index, voters, outgoing } => {
                self.held(*at_ms, node, *index, (voters.clone(), outgoing.clone()))
            }
            Event::RaftRole { at_ms, node, term, role: RaftRole::Leader, .. } => {
                self.leads(*at_ms, node, *term).into_iter().collect()
            }
            // A new life: a restart replays what its store had not applied, from its own
            // (older) configuration.
            Event::Fault { node, kind, phase: FaultPhase::Start, .. } if kind.stops_the_node() => {
                self.applied.remove(node);
                self.leading.remove(node);
                self.removed_leaders.remove(node);
                Vec::new()
            }
            // Retired: it leads nothing any more.
            Event::Fault { node, kind: FaultKind::Membership, phase: FaultPhase::Start, .. } => {
                self.leading.remove(node);
                self.removed_leaders.remove(node);
                Vec::new()
            }
            Event::Fault { node, kind: FaultKind::Sigbus, phase: FaultPhase::End, .. }
            | Event::StoreSetAside { node, .. } => {
                self.applied.remove(node);
                Vec::new()
            }
            Event::Probes { at_ms, .. } if !self.judged_asked => self.judge_asked(*at_ms),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configuration(at_ms: u64, node: &str, index: u64, voters: &[u64], outgoing: &[u64]) -> Event {
        Event::RaftConfiguration {
            at_ms,
            node: node.into(),
            index,
            voters: voters.to_vec(),
            outgoing: outgoing.to_vec(),
        }
    }

    fn leads(at_ms: u64, node: &str, term: u64) -> Event {
        Event::RaftRole { at_ms, node: node.into(), term, role: RaftRole::Leader, leader: 0 }
    }

    fn end(at_ms: u64) -> Event {
        Event::Probes { at_ms, hits: Default::default() }
    }

    fn messages(found: Vec<Event>) -> Vec<String> {
        found
            .into_iter()
            .map(|e| match e {
                Event::Violation { message, .. } => message,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_replacement_through_joint_consensus_passes() {
        let mut check = Membership::new(vec![1, 2, 3], vec![(5_000, vec![4], vec![3])]);
        for node in ["root", "root-2", "root-4"] {
            assert!(check.observe(&configuration(6_000, node, 40, &[1, 2, 4], &[1, 2, 3])).is_empty());
            assert!(check.observe(&configuration(6_100, node, 41, &[1, 2, 4], &[])).is_empty());
        }
        assert!(check.observe(&leads(7_000, "root-4", 3)).is_empty(), "root-4 is a voter now");
        // A simple change after: one voter added.
        assert!(check.observe(&configuration(9_000, "root", 60, &[1, 2, 4, 5], &[])).is_empty());
        assert!(check.observe(&end(20_000)).is_empty(), "the asked change shows: 4 votes, 3 does not");
    }

    #[test]
    fn a_fork_a_regression_and_illegal_steps_are_found() {
        let mut check = Membership::new(vec![1, 2, 3], Vec::new());
        assert!(check.observe(&configuration(1_000, "root", 10, &[1, 2, 3, 4], &[])).is_empty());
        let fork = messages(check.observe(&configuration(1_100, "root-2", 10, &[1, 2, 4], &[])));
        assert!(fork[0].contains("one configuration per index") && fork[0].contains("root applied"), "{fork:?}");
        let back = messages(check.observe(&configuration(1_200, "root", 8, &[1, 2, 3, 4], &[3])));
        assert!(back.iter().any(|m| m.contains("never goes back")), "{back:?}");
        // Two voters swapped at once, without joint consensus.
        let mut check = Membership::new(vec![1, 2, 3], Vec::new());
        let swap = messages(check.observe(&configuration(1_000, "root", 10, &[1, 4, 5], &[])));
        assert!(swap[0].contains("4 voters changed at once"), "{swap:?}");
        // Entering joint with other outgoing voters than the old ones, and leaving joint for
        // another set than the incoming one.
        let mut check = Membership::new(vec![1, 2, 3], Vec::new());
        let entering = messages(check.observe(&configuration(1_000, "root", 10, &[1, 2, 4], &[1, 2])));
        assert!(entering[0].contains("outgoing ones"), "{entering:?}");
        let mut check = Membership::new(vec![1, 2, 3], Vec::new());
        assert!(check.observe(&configuration(1_000, "root", 10, &[1, 2, 4], &[1, 2, 3])).is_empty());
        let leaving = messages(check.observe(&configuration(1_100, "root", 11, &[1, 2, 5], &[])));
        assert!(leaving[0].contains("followed by leaving it"), "{leaving:?}");
    }

    #[test]
    fn a_restart_may_replay_an_older_configuration() {
        let mut check = Membership::new(vec![1, 2, 3], Vec::new());
        assert!(check.observe(&configuration(1_000, "root-2", 10, &[1, 2, 3, 4], &[])).is_empty());
        let killed = Event::Fault {
            at_ms: 2_000,
            node: "root-2".into(),
            kind: FaultKind::Kill,
            phase: FaultPhase::Start,
            detail: String::new(),
        };
        assert!(check.observe(&killed).is_empty());
        assert!(check.observe(&configuration(3_000, "root-2", 10, &[1, 2, 3, 4], &[])).is_empty(), "replayed");
    }

    #[test]
    fn a_removed_leader_and_an_unmade_change_are_found() {
        let mut check = Membership::new(vec![1, 2, 3], vec![(5_000, vec![4], vec![3])]);
        assert!(check.observe(&leads(1_000, "root-3", 1)).is_empty(), "a first voter");
        assert!(check.observe(&configuration(6_000, "root-3", 40, &[1, 2, 4], &[1, 2, 3])).is_empty());
        assert!(check.observe(&leads(6_500, "root-3", 2)).is_empty(), "outgoing, still a voter while joint");
        assert!(check.observe(&configuration(6_600, "root-3", 41, &[1, 2, 4], &[])).is_empty());
        let removed = messages(check.observe(&leads(7_000, "root-3", 3)));
        assert!(removed[0].contains("a leader is a voter"), "{removed:?}");
        assert!(check.observe(&leads(7_000, "root-4", 3)).is_empty(), "root-4 applied nothing in this life: unjudged");

        let mut check = Membership::new(vec![1, 2, 3], vec![(5_000, vec![4], vec![3])]);
        assert!(check.observe(&configuration(6_000, "root", 40, &[1, 2, 4], &[1, 2, 3])).is_empty());
        let stuck = messages(check.observe(&end(60_000)));
        assert!(
            stuck[0].contains("asked at 5000 ms to add [4] and remove [3]") && stuck[0].contains("outgoing [1, 2, 3]")
        );
        assert!(check.observe(&end(60_001)).is_empty(), "judged once");
    }

    #[test]
    fn a_configuration_held_is_the_groups_at_its_index() {
        let held = |at_ms, node: &str, index, voters: &[u64]| Event::RaftConfigurationHeld {
            at_ms,
            node: node.into(),
            index,
            voters: voters.to_vec(),
            outgoing: Vec::new(),
        };
        let mut check = Membership::new(vec![1, 2, 3], Vec::new());
        assert!(check.observe(&held(0, "root", 0, &[1, 2, 3])).is_empty(), "the first voters at start");
        assert!(check.observe(&configuration(5_000, "root", 40, &[1, 2, 4], &[1, 2, 3])).is_empty());
        assert!(check.observe(&configuration(5_100, "root", 41, &[1, 2, 4], &[])).is_empty());
        assert!(check.observe(&held(9_000, "root-4", 300, &[1, 2, 4])).is_empty(), "a snapshot past the change");
        assert!(check.observe(&held(9_000, "root-2", 30, &[1, 2, 3])).is_empty(), "one before it");
        let stale = messages(check.observe(&held(9_500, "root-4", 600, &[1, 2, 3])));
        assert!(stale[0].contains("made at index 41") && stale[0].contains("carry the configuration"), "{stale:?}");
    }

    #[test]
    fn a_leader_that_applied_its_own_removal_steps_down_in_time() {
        let role = |at_ms, node: &str, role| Event::RaftRole { at_ms, node: node.into(), term: 2, role, leader: 0 };
        let mut check = Membership::new(vec![1, 2, 3, 4], Vec::new());
        assert!(check.observe(&role(1_000, "root-3", RaftRole::Leader)).is_empty());
        assert!(check.observe(&configuration(2_000, "root-3", 30, &[1, 2, 4], &[])).is_empty());
        assert!(check.observe(&role(2_500, "root-3", RaftRole::Follower)).is_empty(), "handed over in time");
        assert!(check.observe(&end(9_000)).is_empty());

        let mut check = Membership::new(vec![1, 2, 3, 4], Vec::new());
        assert!(check.observe(&role(1_000, "root-3", RaftRole::Leader)).is_empty());
        assert!(check.observe(&configuration(2_000, "root-3", 30, &[1, 2, 4], &[])).is_empty());
        assert!(check.observe(&configuration(3_000, "root", 30, &[1, 2, 4], &[])).is_empty(), "within the bound");
        let late = messages(check.observe(&configuration(4_500, "root-2", 30, &[1, 2, 4], &[])));
        assert!(
            late[0].contains("root-3 applied the configuration at Raft index 30") && late[0].contains("2500 ms later")
        );
    }

    #[test]
    fn member_ids_come_from_node_names() {
        assert_eq!(member_id("root"), Some(1));
        assert_eq!(member_id("root-4"), Some(4));
        assert_eq!(member_id("mid-1"), None);
    }
}
