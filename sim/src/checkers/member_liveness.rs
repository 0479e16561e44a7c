//! A root group's members come back and do their job, two rules true of any correct group,
//! reported under the `raft` verdict:
//!
//! - **a member rejoins**: a member clear of faults for the bound, in a group whose majority
//!   (itself included) is clear for as long, has applied everything the group had applied the
//!   bound ago. A member whose consensus stopped after a failure, that waits for ever on a peer
//!   that cannot help it, or that keeps healing, fails here while the group goes on without it;
//! - **a group with a clear majority commits**: then the group's newest applied index moved
//!   within the bound. Every leader proposes a heartbeat each `heartbeat_interval`, so a member
//!   that claims to lead and commits nothing (its consensus stopped, its writes refused for
//!   ever) or a majority that never elects fails here, named by who claims to lead.
//!
//! "Clear" is per member: none of its own faults active, the last ended (or its process failed
//! to start) at least the bound ago. A cut link is a fault of its two ends; a fault on several
//! nodes or the whole network (a split, latency, loss) clears no member until the bound after
//! it ends. A member whose store
//! rotted is never clear (the damage surfaces whenever it is read, and it heals by copying a
//! peer's store); a member that starts a new life (its disk replaced, its damaged store set
//! aside) does not count toward the majority until it holds what the group had applied when it
//! lost its state — until then its peers may be all that hold some commit — and before the
//! group's first commit, every member must be clear (a group's first start is the case of
//! every member starting with nothing). The bound is the
//! `lag` checker's per-node bound (`staleness_failover + heartbeat_interval +` a margin for a
//! catch-up) plus an election ([`leadership::ELECT_WITHIN_MS`](super::leadership::ELECT_WITHIN_MS)).
//!
//! The group is its configuration as the members applied it: the first voters until a
//! membership change commits, then the change's voters (both sides while it is joint, each side
//! needing its own majority). A member on standby is judged from the moment it becomes a voter,
//! given the bound to catch up as if a fault had ended then, and counted toward a majority only
//! once it holds what the group had applied when it joined; a member removed is judged no more.
//! A member that does not count toward a majority yet (it lost its state, or just joined) is
//! still judged when clear: one that never catches up fails here.
//!
//! Judged at each member's lag sample (once a simulated second); each breach is reported once,
//! until the member catches up or the group commits again. Deterministic: a function of the
//! trace.

use std::collections::BTreeMap;

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer, RaftRole};

#[derive(Debug, Default)]
struct MemberState {
    /// Its own faults now active (a count: two may overlap).
    faults: u32,
    /// When its last own fault ended, or its process last failed to start (0: never).
    troubled_ms: u64,
    /// Its store rotted at some point in the run: never judged, never counted.
    rotted: bool,
    /// It lost its state (a replaced disk, a store set aside) and has not yet applied this
    /// index, the group's newest when it did: it does not count toward a majority.
    fresh_until: Option<u64>,
    /// Its newest applied index, from its samples and applies.
    applied: u64,
    /// Its last reported term and role.
    role: Option<(u64, RaftRole)>,
    /// A rejoin breach already reported, until it catches up.
    reported: bool,
}

#[derive(Debug)]
pub struct MemberLiveness {
    bound_ms: u64,
    /// Every member of the roster: the first voters and those on standby.
    members: BTreeMap<String, MemberState>,
    /// The voters of the newest configuration a member applied, and while it is joint the
    /// outgoing side's (empty otherwise); the index that made it.
    voters: Vec<String>,
    outgoing: Vec<String>,
    configuration_index: u64,
    /// Faults on several nodes or the whole network now active, and when the last ended.
    wide_faults: u32,
    wide_ended_ms: u64,
    /// Each rise of the group's newest applied index (any member's), in time order.
    high_water: Vec<(u64, u64)>,
    /// A commit stall already reported, until the group commits again.
    stall_reported: bool,
}

impl MemberLiveness {
    /// For a group whose first voters are `first` and whose members on standby are `standby`,
    /// judged with `bound_ms` (see the module doc).
    pub fn new(first: &[String], standby: &[String], bound_ms: u64) -> MemberLiveness {
        assert!(first.len() > 1, "member liveness judges a root group, not a root of one");
        MemberLiveness {
            bound_ms,
            members: first.iter().chain(standby).map(|m| (m.clone(), MemberState::default())).collect(),
            voters: first.to_vec(),
            outgoing: Vec::new(),
            configuration_index: 0,
            wide_faults: 0,
            wide_ended_ms: 0,
            high_water: Vec::new(),
            stall_reported: false,
        }
    }

    fn newest(&self) -> u64 {
        self.high_water.last().map_or(0, |&(_, index)| index)
    }

    /// The group's newest applied index at `at_ms`.
    fn newest_at(&self, at_ms: u64) -> u64 {
        let reached = self.high_water.partition_point(|&(when, _)| when <= at_ms);
        if reached == 0 { 0 } else { self.high_water[reached - 1].1 }
    }

    fn applied(&mut self, at_ms: u64, node: &str, index: u64) {
        let newest = self.newest();
        let Some(member) = self.members.get_mut(node) else { return };
        member.applied = index;
        if member.fresh_until.is_some_and(|until| index >= until) {
            member.fresh_until = None;
        }
        if member.reported && index >= newest {
            member.reported = false;
        }
        if index > newest {
            self.high_water.push((at_ms, index));
            self.stall_reported = false;
        }
    }

    fn fault(&mut self, at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase, detail: &str) {
        let starts = phase == FaultPhase::Start;
        if kind == FaultKind::ClogLink
            && let Some(peer) = crate::scenario::Fault::clogged_peer(detail)
        {
            // One link cut: a fault of its two ends alone. The members on neither end still
            // reach each other and every other member, so a majority of them clear can elect
            // and commit, and each of them can follow whoever leads.
            self.own_fault(at_ms, node, kind, starts);
            self.own_fault(at_ms, peer, kind, starts);
            return;
        }
        if kind.touches_several_nodes() || node == "network" {
            if starts {
                self.wide_faults += 1;
            } else {
                self.wide_faults = self.wide_faults.saturating_sub(1);
                self.wide_ended_ms = at_ms;
            }
            return;
        }
        self.own_fault(at_ms, node, kind, starts);
    }

    /// A fault of `node` alone starts or ends (nothing when it is no member).
    fn own_fault(&mut self, at_ms: u64, node: &str, kind: FaultKind, starts: bool) {
        let newest = self.newest();
        let Some(member) = self.members.get_mut(node) else { return };
        if starts {
            member.faults += 1;
            member.rotted |= kind == FaultKind::BitRot;
        } else {
            member.faults = member.faults.saturating_sub(1);
            member.troubled_ms = at_ms;
            if kind == FaultKind::Sigbus {
                member.fresh_until = Some(newest); // its disk was replaced: it starts empty
            }
        }
    }

    /// A configuration a member applied: the newest becomes the group's. A member that becomes
    /// a voter is given the bound from now, and counts once it holds what the group holds now.
    fn configured(&mut self, at_ms: u64, index: u64, voters: &[u64], outgoing: &[u64]) {
        if index <= self.configuration_index {
            return;
        }
        let names = |ids: &[u64]| -> Vec<String> {
            ids.iter().map(|id| crate::scenario::root_member_name(*id as usize)).collect()
        };
        let (voters, outgoing) = (names(voters), names(outgoing));
        assert!(!voters.is_empty(), "a configuration with no voter (index {index})");
        let newest = self.newest();
        for name in voters.iter().chain(&outgoing) {
            let joined = !self.voters.contains(name) && !self.outgoing.contains(name);
            if let (true, Some(member)) = (joined, self.members.get_mut(name)) {
                member.troubled_ms = member.troubled_ms.max(at_ms);
                if member.applied < newest {
                    member.fresh_until = Some(newest);
                }
            }
        }
        (self.voters, self.outgoing, self.configuration_index) = (voters, outgoing, index);
    }

    /// Whether `node` is a voter of the group's configuration (either side, while joint).
    fn votes(&self, node: &str) -> bool {
        self.voters.iter().chain(&self.outgoing).any(|v| v == node)
    }

    /// Whether `node` has been clear of its own faults for the bound at `at_ms`.
    fn clear(&self, at_ms: u64, member: &MemberState) -> bool {
        !member.rotted && member.faults == 0 && at_ms >= member.troubled_ms + self.bound_ms
    }

    /// The members clear at `at_ms` that count toward a majority, if they are one and no fault
    /// on several nodes is active or recent.
    fn clear_majority(&self, at_ms: u64) -> Option<Vec<&str>> {
        if self.wide_faults > 0 || at_ms < self.wide_ended_ms + self.bound_ms {
            return None;
        }
        let counts = |name: &String| {
            let member = &self.members[name];
            self.clear(at_ms, member) && member.fresh_until.is_none()
        };
        // Before its first commit a group needs every member: a member that starts with
        // nothing cannot tell the group's first start from its disk replaced, and a correct
        // one votes only for a candidate it knows holds every commit — which, before it heard
        // a leader, means having heard every other member campaign.
        let first_commit = self.newest() == 0;
        let majority = |side: &[String]| {
            let needed = if first_commit { side.len() } else { side.len() / 2 + 1 };
            side.iter().filter(|name| counts(name)).count() >= needed
        };
        if !majority(&self.voters) || !(self.outgoing.is_empty() || majority(&self.outgoing)) {
            return None;
        }
        let mut clear: Vec<&str> =
            self.voters.iter().chain(&self.outgoing).filter(|name| counts(name)).map(String::as_str).collect();
        clear.sort_unstable();
        clear.dedup();
        Some(clear)
    }

    fn judge(&mut self, at_ms: u64, node: &str) -> Vec<Event> {
        let Some(clear) = self.clear_majority(at_ms) else { return Vec::new() };
        let clear_names = clear.join(", ");
        let mut found = Vec::new();
        // Judged when clear, whether or not it counts toward the majority yet: a member that
        // lost its state, or just joined, must catch up within the bound too.
        if self.votes(node) && self.clear(at_ms, &self.members[node]) && !self.members[node].reported {
            let since_ms = at_ms - self.bound_ms;
            let owed = self.newest_at(since_ms);
            let member = &self.members[node];
            if member.applied < owed {
                let message = format!(
                    "{node} has applied to index {}, but the group had applied to index {owed} by {since_ms} ms, \
                     {} s ago; {node} has been clear of faults since {} ms, and with it a majority ({clear_names}): \
                     a member rejoins its group within {} s",
                    member.applied,
                    self.bound_ms / 1000,
                    member.troubled_ms,
                    self.bound_ms / 1000,
                );
                found.push(violation(at_ms, node, member.applied, message));
                self.members.get_mut(node).expect("a member").reported = true;
            }
        }
        let last_commit_ms = self.high_water.last().map_or(0, |&(when, _)| when);
        if !self.stall_reported && at_ms >= last_commit_ms + self.bound_ms {
            let claimant = self
                .members
                .iter()
                .filter(|(name, _)| self.votes(name))
                .filter_map(|(name, m)| match m.role {
                    // A member a fault stopped may still be the last to have said it leads.
                    Some((term, RaftRole::Leader)) if m.faults == 0 => Some((term, name.as_str())),
                    _ => None,
                })
                .max();
            let (blamed, who) = match claimant {
                Some((term, name)) => (name.to_string(), format!("{name} claims to lead term {term}")),
                None => (node.to_string(), "no member claims to lead".to_string()),
            };
            let message = format!(
                "the group has applied nothing since index {} at {last_commit_ms} ms, {} s ago, though a majority \
                 ({clear_names}) has been clear of faults for {} s and every leader proposes a heartbeat each \
                 heartbeat_interval; {who}",
                self.newest(),
                (at_ms - last_commit_ms) / 1000,
                self.bound_ms / 1000,
            );
            found.push(violation(at_ms, &blamed, self.newest(), message));
            self.stall_reported = true;
        }
        found
    }
}

fn violation(at_ms: u64, node: &str, index: u64, message: String) -> Event {
    Event::Violation { at_ms, checker: Checker::Raft, node: node.to_string(), index, message }
}

impl Observer for MemberLiveness {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Fault { at_ms, node, kind, phase, detail } => self.fault(*at_ms, node, *kind, *phase, detail),
            Event::StoreSetAside { at_ms, node } => {
                let newest = self.newest();
                if let Some(member) = self.members.get_mut(node) {
                    member.fresh_until = Some(newest);
                    member.troubled_ms = *at_ms;
                }
            }
            Event::StartFailed { at_ms, node, .. } => {
                if let Some(member) = self.members.get_mut(node) {
                    member.troubled_ms = *at_ms;
                }
            }
            Event::RaftRole { node, term, role, .. } => {
                if let Some(member) = self.members.get_mut(node) {
                    member.role = Some((*term, *role));
                }
            }
            Event::RaftConfiguration { at_ms, index, voters, outgoing, .. } => {
                self.configured(*at_ms, *index, voters, outgoing);
            }
            Event::Applied { at_ms, node, last, .. } => self.applied(*at_ms, node, *last),
            Event::Bootstrapped { at_ms, node, index, .. } => self.applied(*at_ms, node, *index),
            Event::LagSample { at_ms, node, applied, .. } if self.members.contains_key(node) => {
                self.applied(*at_ms, node, *applied);
                return self.judge(*at_ms, node);
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests;
