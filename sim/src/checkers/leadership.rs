//! A root group's leadership while links between its members are cut (a partial partition: A↔B
//! and B↔C up, A↔C down — the shape of the etcd outage that left a configuration store
//! read-only for hours), two rules true of any Raft group that runs pre-vote and check-quorum,
//! reported under the `raft` verdict:
//!
//! - **a leader that reaches a majority is not deposed**: while the only faults touching the
//!   group are cut member-to-member links, and the leader of the highest term can still talk to
//!   a majority (itself included), no member starts a higher term. A member cut off from the
//!   leader may campaign, but its pre-vote is refused by every member that hears the leader —
//!   without pre-vote and check-quorum its every election timeout deposes the leader, and
//!   leadership flaps for as long as the link is down;
//! - **a connected majority elects**: when some majority of members can all talk to each other,
//!   a leader that reaches a majority is known within [`ELECT_WITHIN_MS`] of the last change of
//!   faults.
//!
//! The group is whoever its newest configuration names (`raft_configuration` events; the first
//! voters before any): a member added by a membership change may lead, and a majority is one of
//! the voters now. While a configuration is joint (a change in flight) the rules are suspended,
//! as for a fault.
//!
//! Both are suspended while any other fault touches the group (a member killed, paused, on a
//! slow or failing disk, partitioned, a split, network-wide latency or loss: each may legitimately
//! cost a term) and for [`SETTLE_MS`] after, and for the whole run when fault points are on
//! (a stalled commit can starve heartbeats) or a member's store rots (the member heals by
//! copying a peer's store, silent meanwhile). Faults on nodes outside the group, and links from a
//! member to a replica, change nothing here. Deterministic: a function of the trace.

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer, RaftRole};

/// How long after the faults touching the group last changed (to link cuts only) a leader that
/// reaches a majority must be known: an election timeout (1–2 s), a pre-vote and a vote round,
/// and a candidate that lost a split vote trying again, with room to spare.
pub const ELECT_WITHIN_MS: u64 = 10_000;
/// How long after any other fault touching the group ended before the rules apply again: a
/// member that restarted, or was cut off, has heard the leader again within it.
pub const SETTLE_MS: u64 = 5_000;

#[derive(Debug)]
pub struct Leadership {
    /// Every member the roster names (the first voters, then those on standby).
    roster: Vec<String>,
    /// The voters of the newest configuration any member applied (the first voters before).
    members: Vec<String>,
    /// The newest configuration's index, and whether it is joint (a change in flight).
    configuration: (u64, bool),
    /// The rules never apply in this run (fault points on, or a member's store rotted).
    off: bool,
    /// Active faults touching the group that are not member-to-member link cuts.
    other_faults: super::ActiveFaults<(String, FaultKind, String)>,
    /// Active member-to-member link cuts, each pair in name order.
    cuts: BTreeMap<(String, String), usize>,
    /// When the faults touching the group last changed (0: never).
    changed_ms: u64,
    /// When the last fault other than a link cut ended (0: never).
    other_ended_ms: u64,
    /// By member: its last reported term and role.
    roles: BTreeMap<String, (u64, RaftRole)>,
    /// The change of faults an election violation was reported for (one per change).
    reported_unelected: Option<u64>,
}

impl Leadership {
    /// For a group whose first voters are `members` and whose roster also names `standby`;
    /// `fault_points`: the run has them on (the rules are off).
    pub fn new(members: Vec<String>, standby: Vec<String>, fault_points: bool) -> Leadership {
        Leadership {
            roster: members.iter().chain(&standby).cloned().collect(),
            members,
            configuration: (0, false),
            off: fault_points,
            other_faults: super::ActiveFaults::default(),
            cuts: BTreeMap::new(),
            changed_ms: 0,
            other_ended_ms: 0,
            roles: BTreeMap::new(),
            reported_unelected: None,
        }
    }

    /// Whether `node` is on the group's roster (a voter now or not).
    fn is_member(&self, node: &str) -> bool {
        self.roster.iter().any(|m| m == node)
    }

    /// A member applied configuration `index`: the newest one names the voters from now on.
    fn configured(&mut self, at_ms: u64, index: u64, voters: &[u64], outgoing: &[u64]) {
        if index <= self.configuration.0 {
            return;
        }
        let names: Vec<String> = voters.iter().map(|id| crate::scenario::root_member_name(*id as usize)).collect();
        assert!(!names.is_empty(), "a configuration with no voter (index {index})");
        self.members = names;
        self.configuration = (index, !outgoing.is_empty());
        self.changed_ms = at_ms;
    }

    /// Follows a fault's start or end.
    fn fault(&mut self, at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase, detail: &str) {
        let cut = match kind {
            FaultKind::ClogLink => crate::scenario::Fault::clogged_peer(detail).map(|peer| (node, peer)),
            _ => None,
        };
        let starts = phase == FaultPhase::Start;
        match cut {
            Some((a, b)) if !(self.is_member(a) && self.is_member(b)) => return, // a replica's link
            Some((a, b)) => {
                let pair = if a < b { (a.to_string(), b.to_string()) } else { (b.to_string(), a.to_string()) };
                let count = self.cuts.entry(pair.clone()).or_default();
                if starts {
                    *count += 1;
                } else {
                    *count = count.saturating_sub(1);
                    if *count == 0 {
                        self.cuts.remove(&pair);
                    }
                }
            }
            None => {
                let touches = self.is_member(node) || kind.touches_several_nodes();
                if !touches {
                    return;
                }
                if kind == FaultKind::BitRot {
                    self.off = true; // the damage surfaces whenever it is read: any time after
                }
                let fault = (node.to_string(), kind, detail.to_string());
                self.other_faults.follow(fault, starts);
                if !starts {
                    self.other_ended_ms = at_ms;
                }
            }
        }
        self.changed_ms = at_ms;
    }

    /// Whether the rules apply at `at_ms`.
    fn applies(&self, at_ms: u64) -> bool {
        !self.off && !self.configuration.1 && self.other_faults.is_empty() && at_ms >= self.other_ended_ms + SETTLE_MS
    }

    fn connected(&self, a: &str, b: &str) -> bool {
        let pair = if a < b { (a.to_string(), b.to_string()) } else { (b.to_string(), a.to_string()) };
        a == b || !self.cuts.contains_key(&pair)
    }

    fn majority(&self) -> usize {
        self.members.len() / 2 + 1
    }

    /// The member leading the highest term any member reported, and that term.
    fn leader(&self) -> Option<(&str, u64)> {
        let highest = self.roles.values().map(|(term, _)| *term).max()?;
        self.roles
            .iter()
            .find(|(_, (term, role))| *term == highest && *role == RaftRole::Leader)
            .map(|(node, _)| (node.as_str(), highest))
    }

    /// The voters `node` can talk to, itself included when it votes (a leader that applied its
    /// own removal leads no majority of its own).
    fn reach(&self, node: &str) -> usize {
        self.members.iter().filter(|m| self.connected(node, m)).count()
    }

    /// Whether some majority of members can all talk to each other.
    fn connected_majority_exists(&self) -> bool {
        let n = self.members.len();
        (0u32..1 << n).any(|set| {
            let chosen: Vec<&String> = (0..n).filter(|i| set & (1 << i) != 0).map(|i| &self.members[i]).collect();
            chosen.len() >= self.majority() && chosen.iter().all(|a| chosen.iter().all(|b| self.connected(a, b)))
        })
    }

    fn cuts_in_words(&self) -> String {
        if self.cuts.is_empty() {
            return "no link cut".into();
        }
        let cuts: Vec<String> = self.cuts.keys().map(|(a, b)| format!("{a}↔{b}")).collect();
        format!("only the link{} {} cut", if cuts.len() == 1 { "" } else { "s" }, cuts.join(", "))
    }

    /// A member reported `term`: a violation when it is past the term of a leader that reaches a
    /// majority.
    fn deposes(&self, at_ms: u64, node: &str, term: u64) -> Option<Event> {
        let (leader, leader_term) = self.leader()?;
        if term <= leader_term || !self.applies(at_ms) || self.reach(leader) < self.majority() {
            return None;
        }
        let message = format!(
            "{node} started term {term} while {leader} led term {leader_term} and reached a majority, with {}: a \
             member that cannot hear the leader must not depose it (pre-vote and check-quorum refuse its \
             election while the others hear the leader)",
            self.cuts_in_words()
        );
        Some(Event::Violation { at_ms, checker: Checker::Raft, node: node.to_string(), index: term, message })
    }

    /// At any event: a violation when a connected majority has had [`ELECT_WITHIN_MS`] since
    /// the faults last changed and no leader that reaches a majority is known.
    fn unelected(&mut self, at_ms: u64) -> Option<Event> {
        let since = self.changed_ms.max(self.other_ended_ms + SETTLE_MS);
        if !self.applies(at_ms) || at_ms < since + ELECT_WITHIN_MS || self.reported_unelected == Some(self.changed_ms) {
            return None;
        }
        let led = self.leader().is_some_and(|(leader, _)| self.reach(leader) >= self.majority());
        if led || !self.connected_majority_exists() {
            return None;
        }
        self.reported_unelected = Some(self.changed_ms);
        let known = match self.leader() {
            Some((leader, term)) => format!("{leader} leads term {term} but reaches {} member(s)", self.reach(leader)),
            None => "no member leads the highest term".into(),
        };
        let message = format!(
            "no leader that reaches a majority {} ms after the faults last changed ({}), though a majority of \
             members can all talk to each other: {known}",
            at_ms - self.changed_ms,
            self.cuts_in_words()
        );
        let index = self.roles.values().map(|(term, _)| *term).max().unwrap_or(0);
        Some(Event::Violation { at_ms, checker: Checker::Raft, node: crate::trace::ROOT.to_string(), index, message })
    }
}

impl Observer for Leadership {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        let mut found = Vec::new();
        match event {
            Event::Fault { at_ms, node, kind, phase, detail } => self.fault(*at_ms, node, *kind, *phase, detail),
            Event::RaftRole { at_ms, node, term, role, .. } if self.is_member(node) => {
                found.extend(self.deposes(*at_ms, node, *term));
                self.roles.insert(node.clone(), (*term, *role));
            }
            Event::RaftConfiguration { at_ms, index, voters, outgoing, .. } => {
                self.configured(*at_ms, *index, voters, outgoing);
            }
            _ => {}
        }
        // Judged at every event: samples arrive every simulated second.
        if self.roles.values().any(|(_, role)| *role == RaftRole::Leader) || self.changed_ms > 0 {
            found.extend(self.unelected(event.at_ms()));
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members() -> Vec<String> {
        vec!["root".into(), "root-2".into(), "root-3".into()]
    }

    fn role(at_ms: u64, node: &str, term: u64, role: RaftRole) -> Event {
        Event::RaftRole { at_ms, node: node.into(), term, role, leader: 0 }
    }

    fn cut(at_ms: u64, a: &str, b: &str, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: a.into(), kind: FaultKind::ClogLink, phase, detail: format!("link to {b}") }
    }

    fn sample(at_ms: u64) -> Event {
        Event::LagSample { at_ms, node: "root".into(), lag_ms: 0, applied: 1 }
    }

    #[test]
    fn a_member_cut_from_a_leader_that_reaches_a_majority_must_not_depose_it() {
        let mut check = Leadership::new(members(), Vec::new(), false);
        for (node, r) in [("root", RaftRole::Leader), ("root-2", RaftRole::Follower), ("root-3", RaftRole::Follower)] {
            assert!(check.observe(&role(1_000, node, 2, r)).is_empty());
        }
        assert!(check.observe(&cut(20_000, "root", "root-3", FaultPhase::Start)).is_empty());
        assert!(
            check.observe(&role(21_500, "root-3", 2, RaftRole::PreCandidate)).is_empty(),
            "pre-vote keeps the term"
        );
        let found = check.observe(&role(22_000, "root-3", 3, RaftRole::Candidate));
        assert_eq!(found.len(), 1, "{found:?}");
        let Event::Violation { checker, node, index, message, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!((*checker, node.as_str(), *index), (Checker::Raft, "root-3", 3));
        assert!(message.contains("root led term 2") && message.contains("root↔root-3"), "{message}");
    }

    #[test]
    fn a_new_term_is_no_violation_when_the_leader_reaches_no_majority_or_another_fault_explains_it() {
        let mut check = Leadership::new(members(), Vec::new(), false);
        assert!(check.observe(&role(1_000, "root", 2, RaftRole::Leader)).is_empty());
        check.observe(&cut(20_000, "root", "root-2", FaultPhase::Start));
        check.observe(&cut(20_000, "root", "root-3", FaultPhase::Start));
        assert!(check.observe(&role(22_000, "root-2", 3, RaftRole::Leader)).is_empty(), "root was cut off");
        let killed = Event::Fault {
            at_ms: 40_000,
            node: "root-2".into(),
            kind: FaultKind::Kill,
            phase: FaultPhase::Start,
            detail: String::new(),
        };
        check.observe(&killed);
        assert!(check.observe(&role(42_000, "root-3", 4, RaftRole::Leader)).is_empty(), "a member was killed");
        let replica = Event::Fault {
            at_ms: 2_000,
            node: "mid-1".into(),
            kind: FaultKind::Kill,
            phase: FaultPhase::Start,
            detail: String::new(),
        };
        let mut quiet = Leadership::new(members(), Vec::new(), false);
        quiet.observe(&role(1_000, "root", 2, RaftRole::Leader));
        quiet.observe(&replica);
        assert_eq!(
            quiet.observe(&role(9_000, "root-3", 3, RaftRole::Candidate)).len(),
            1,
            "a replica's fault is no excuse"
        );
        let mut with_fault_points = Leadership::new(members(), Vec::new(), true);
        with_fault_points.observe(&role(1_000, "root", 2, RaftRole::Leader));
        assert!(with_fault_points.observe(&role(9_000, "root-3", 3, RaftRole::Candidate)).is_empty());
    }

    #[test]
    fn a_connected_majority_must_elect_within_the_bound() {
        let mut check = Leadership::new(members(), Vec::new(), false);
        check.observe(&role(1_000, "root", 2, RaftRole::Leader));
        check.observe(&cut(20_000, "root", "root-2", FaultPhase::Start));
        check.observe(&cut(20_000, "root", "root-3", FaultPhase::Start));
        assert!(check.observe(&sample(29_000)).is_empty(), "within the bound");
        let found = check.observe(&sample(30_000));
        assert_eq!(found.len(), 1, "root-2 and root-3 can talk and elected no one: {found:?}");
        assert!(check.observe(&sample(31_000)).is_empty(), "reported once per change");
        let mut elected = Leadership::new(members(), Vec::new(), false);
        elected.observe(&role(1_000, "root", 2, RaftRole::Leader));
        elected.observe(&cut(20_000, "root", "root-2", FaultPhase::Start));
        elected.observe(&cut(20_000, "root", "root-3", FaultPhase::Start));
        elected.observe(&role(23_000, "root-3", 3, RaftRole::Leader));
        assert!(elected.observe(&sample(40_000)).is_empty());
        let mut no_majority = Leadership::new(members(), Vec::new(), false);
        no_majority.observe(&role(1_000, "root", 2, RaftRole::Leader));
        for (a, b) in [("root", "root-2"), ("root", "root-3"), ("root-2", "root-3")] {
            no_majority.observe(&cut(20_000, a, b, FaultPhase::Start));
        }
        assert!(no_majority.observe(&sample(40_000)).is_empty(), "no two members can talk");
    }

    fn configuration(at_ms: u64, index: u64, voters: &[u64], outgoing: &[u64]) -> Event {
        Event::RaftConfiguration {
            at_ms,
            node: "root-2".into(),
            index,
            voters: voters.to_vec(),
            outgoing: outgoing.to_vec(),
        }
    }

    /// A member added by a membership change that then leads is the group's leader (the rule
    /// once knew only the first voters, and called a group led by `root-4` leaderless).
    #[test]
    fn a_member_added_by_a_membership_change_leads_and_the_majority_follows_the_configuration() {
        let standby = vec!["root-4".to_string()];
        let mut check = Leadership::new(members(), standby.clone(), false);
        check.observe(&role(1_000, "root", 1, RaftRole::Leader));
        check.observe(&configuration(15_000, 482, &[1, 2, 3, 4], &[]));
        let kill = |at_ms, phase| Event::Fault {
            at_ms,
            node: "root".into(),
            kind: FaultKind::Kill,
            phase,
            detail: String::new(),
        };
        check.observe(&kill(35_000, FaultPhase::Start));
        assert!(check.observe(&role(36_000, "root-4", 2, RaftRole::Leader)).is_empty(), "its leader was killed");
        check.observe(&kill(43_000, FaultPhase::End));
        check.observe(&role(43_000, "root", 2, RaftRole::Follower));
        assert!(check.observe(&sample(60_000)).is_empty(), "root-4 leads the group");

        // The voters now: root-2, root-3 and root-4. Cut root-4 from both: it reaches one voter
        // of three (itself), and root-2 and root-3 can talk: they must elect.
        let mut cut_off = Leadership::new(members(), standby.clone(), false);
        cut_off.observe(&configuration(15_000, 482, &[2, 3, 4], &[]));
        cut_off.observe(&role(36_000, "root-4", 2, RaftRole::Leader));
        cut_off.observe(&cut(40_000, "root-4", "root-2", FaultPhase::Start));
        cut_off.observe(&cut(40_000, "root-4", "root-3", FaultPhase::Start));
        let found = cut_off.observe(&sample(50_000));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            matches!(&found[0], Event::Violation { message, .. } if message.contains("root-4 leads term 2 but reaches 1"))
        );

        // A joint configuration is a change in flight: the rules wait for it to end.
        let mut joint = Leadership::new(members(), standby, false);
        joint.observe(&role(1_000, "root", 1, RaftRole::Leader));
        joint.observe(&configuration(15_000, 482, &[2, 3, 4], &[1, 2, 3]));
        joint.observe(&role(16_000, "root", 1, RaftRole::Follower));
        assert!(joint.observe(&sample(40_000)).is_empty(), "no rule while the configuration is joint");
        joint.observe(&configuration(41_000, 483, &[2, 3, 4], &[]));
        assert_eq!(joint.observe(&sample(51_000)).len(), 1, "left joint, and nobody leads");
    }
}
