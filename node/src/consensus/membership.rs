//! Membership changes: which members vote in the group, changed through the group's own log
//! (raft-rs's `ConfChangeV2`), so that every member moves from one configuration to the next
//! at the same Raft index.
//!
//! Guarantees:
//! - **One change at a time, never two majorities.** A change of one voter is applied as it
//!   commits; a change of more (replacing a member: one out, one in) goes through joint
//!   consensus — while the group is joint, a commit or an election needs a majority of the old
//!   voters *and* of the new — and the group leaves it by itself (raft-rs's automatic
//!   transition, and [`super::Member::tick`] for a leader that finds it joint with nothing
//!   pending). A leader refuses a change while one is pending.
//! - **A configuration is a function of the Raft index.** Every member applies the same
//!   changes at the same indexes; the configuration a snapshot records is the one at the
//!   snapshot's index, and a restart replays the changes its log holds up to what it applied.
//! - **A leader never removes itself.** It hands its leadership on first (the caller asks
//!   again at the new leader): raft-rs would let a removed leader keep leading a group it is
//!   not a voter of.
//!
//! The group's first configuration is `[[root.members]]` without `standby` (index 0, in no
//! log); members listed `standby` are known by their addresses and vote only once added.

use raft::prelude::{ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState};

use super::{MemberError, Output};

/// The voters of the group at a Raft index, as a member applied them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Configuration {
    /// The index of the change that made it (0: the group's first configuration, or the
    /// snapshot the member's log starts after).
    pub index: u64,
    /// The voters (sorted).
    pub voters: Vec<u64>,
    /// While joint: the voters before the change (sorted), whose majority is needed too.
    pub outgoing: Vec<u64>,
}

impl Configuration {
    pub(super) fn of(index: u64, conf: &ConfState) -> Configuration {
        let sorted = |ids: &[u64]| {
            let mut ids = ids.to_vec();
            ids.sort_unstable();
            ids
        };
        Configuration { index, voters: sorted(&conf.voters), outgoing: sorted(&conf.voters_outgoing) }
    }

    /// Whether the group is between two configurations (joint consensus).
    pub fn is_joint(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// Every member that votes in it: the voters, and while joint the outgoing ones too.
    pub fn members(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self.voters.iter().chain(&self.outgoing).copied().collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// A change an operator asks of the group: members to add as voters, voters to remove.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MembershipChange {
    #[serde(default)]
    pub add: Vec<u64>,
    #[serde(default)]
    pub remove: Vec<u64>,
}

/// Why a change was not proposed (nothing was: the caller may ask again).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    #[error("not the leader; the leader is {}", leader.map_or("not known".to_string(), |l| format!("member {l}")))]
    NotLeader { leader: Option<u64> },
    #[error("a change asks to add or remove at least one member")]
    Empty,
    #[error("member {0} is both added and removed")]
    Both(u64),
    #[error("member {0} is already a voter")]
    AlreadyVoter(u64),
    #[error("member {0} is not a voter")]
    NotVoter(u64),
    #[error("member id {0} is not valid (ids start at 1)")]
    BadId(u64),
    #[error("the change would leave {left} voter(s); a group keeps at least 3")]
    TooFew { left: usize },
    #[error("the change at Raft index {0} has not been applied yet; one change at a time")]
    Pending(u64),
    #[error("the group is between two configurations; it leaves the joint one first")]
    Joint,
    #[error("this member leads and is to be removed: it hands its leadership to member {0} first; ask there")]
    RemovesLeader(u64),
}

/// Fewest voters a change may leave: a group of fewer survives no failure.
pub const VOTERS_MIN: usize = 3;

/// The voters `change` leaves of `current`, or why it may not be made. `leader` is the member
/// asked (which must not be removed: see [`MembershipError::RemovesLeader`]).
pub(super) fn validate(current: &Configuration, change: &MembershipChange) -> Result<Vec<u64>, MembershipError> {
    if change.add.is_empty() && change.remove.is_empty() {
        return Err(MembershipError::Empty);
    }
    if current.is_joint() {
        return Err(MembershipError::Joint);
    }
    let mut voters = current.voters.clone();
    for &id in &change.add {
        if id == 0 {
            return Err(MembershipError::BadId(id));
        }
        if change.remove.contains(&id) {
            return Err(MembershipError::Both(id));
        }
        if voters.contains(&id) {
            return Err(MembershipError::AlreadyVoter(id));
        }
        voters.push(id);
    }
    for &id in &change.remove {
        let Some(at) = voters.iter().position(|&v| v == id) else { return Err(MembershipError::NotVoter(id)) };
        voters.remove(at);
    }
    voters.sort_unstable();
    voters.dedup();
    if voters.len() < VOTERS_MIN {
        return Err(MembershipError::TooFew { left: voters.len() });
    }
    Ok(voters)
}

/// raft-rs's form of `change`: one change applied at once, more through joint consensus that
/// the group leaves by itself.
pub(super) fn conf_change(change: &MembershipChange) -> ConfChangeV2 {
    let single =
        |change_type: ConfChangeType, node_id: u64| ConfChangeSingle { change_type: change_type as i32, node_id };
    ConfChangeV2 {
        changes: change
            .add
            .iter()
            .map(|&id| single(ConfChangeType::AddNode, id))
            .chain(change.remove.iter().map(|&id| single(ConfChangeType::RemoveNode, id)))
            .collect(),
        transition: ConfChangeTransition::Auto as i32,
        context: Vec::new(),
    }
}

/// A committed entry's change, refused as damage unless every field is one this build
/// proposes (raft-rs panics on an enum value it does not know).
pub(super) fn decode(index: u64, bytes: &[u8]) -> Result<ConfChangeV2, super::MemberError> {
    let damaged =
        |what: String| super::MemberError::Damaged(format!("the membership change at Raft index {index}: {what}"));
    let cc: ConfChangeV2 = prost::Message::decode(bytes).map_err(|e| damaged(e.to_string()))?;
    if ConfChangeTransition::from_i32(cc.transition).is_none() {
        return Err(damaged(format!("transition {} is not one raft-rs knows", cc.transition)));
    }
    for single in &cc.changes {
        match ConfChangeType::from_i32(single.change_type) {
            Some(ConfChangeType::AddNode | ConfChangeType::RemoveNode) if single.node_id != 0 => {}
            _ => return Err(damaged(format!("change {:?} is not one this build makes", single))),
        }
    }
    Ok(cc)
}

impl super::Member {
    /// The group's configuration as this member applied it.
    pub fn configuration(&self) -> Configuration {
        let (index, conf) = self.configurations.last().expect("a member always has a configuration");
        Configuration::of(*index, conf)
    }

    /// Proposes `change` of the group's voters (see `consensus::membership`): `Ok((Ok(index), output))`
    /// once it is in the leader's log at `index` — it is made once a
    /// [`super::MemberEvent::Configured`] at or after `index` comes out — or why it was not proposed.
    /// A leader asked to remove itself hands its leadership to the voter that holds most of
    /// the log (the output carries that message) and proposes nothing.
    pub fn propose_membership(
        &mut self,
        change: &MembershipChange,
    ) -> Result<(Result<u64, MembershipError>, Output), MemberError> {
        if !self.is_leader() {
            return Ok((Err(MembershipError::NotLeader { leader: self.leader() }), Output::default()));
        }
        if self.raw.raft.has_pending_conf() {
            return Ok((Err(MembershipError::Pending(self.raw.raft.pending_conf_index)), Output::default()));
        }
        let voters = match validate(&self.configuration(), change) {
            Ok(voters) => voters,
            Err(refused) => return Ok((Err(refused), Output::default())),
        };
        if change.remove.contains(&self.id()) {
            let staying = voters.iter().copied().filter(|id| !change.add.contains(id));
            let heir = self.heir(staying).expect("a change leaves at least VOTERS_MIN voters, not all of them added");
            self.raw.transfer_leader(heir);
            return Ok((Err(MembershipError::RemovesLeader(heir)), self.drain()?));
        }
        match self.raw.propose_conf_change(Vec::new(), conf_change(change)) {
            Ok(()) => {}
            // Dropped: a leadership transfer is under way.
            Err(raft::Error::ProposalDropped) => {
                return Ok((Err(MembershipError::NotLeader { leader: None }), Output::default()));
            }
            Err(e) => return Err(e.into()),
        }
        let index = self.raw.raft.raft_log.last_index();
        Ok((Ok(index), self.drain()?))
    }

    /// Of `candidates`, the one a leader hands its leadership to: the one whose log this leader
    /// knows to reach furthest (the lowest id among equals), so the transfer waits least.
    fn heir(&self, candidates: impl Iterator<Item = u64>) -> Option<u64> {
        let progress = self.raw.raft.prs();
        candidates.max_by_key(|id| (progress.get(*id).map_or(0, |p| p.matched), std::cmp::Reverse(*id)))
    }

    /// A leader the configuration it just applied does not hold as a voter hands its
    /// leadership to the voter that holds most of the log. It proposed no such change (see
    /// [`super::Member::propose_membership`]), but another leader may have, before this member was
    /// elected; raft-rs would let it go on leading a group it is not a voter of.
    pub(super) fn hand_over_if_removed(&mut self, configuration: &Configuration) {
        if !self.is_leader() || configuration.voters.contains(&self.id()) {
            return;
        }
        if let Some(heir) = self.heir(configuration.voters.iter().copied()) {
            tracing::info!(member = self.id(), heir, "this leader is no longer a voter: it hands its leadership on");
            self.raw.transfer_leader(heir);
        }
    }

    /// A leader that finds the group joint with no change pending proposes the leave. raft-rs
    /// proposes it as a leader applies through its pending change (which covers a leader
    /// elected mid-change: its pending index is its log's end at election), and marks the
    /// paths it does not cover as a TODO ("it may never auto_leave if leader steps down before
    /// enter joint is applied"); a group left joint would need both majorities for ever.
    pub(super) fn leave_stranded_joint(&mut self) -> Result<(), MemberError> {
        let conf = self.raw.raft.prs().conf().to_conf_state();
        if !self.is_leader() || conf.voters_outgoing.is_empty() || !conf.auto_leave || self.raw.raft.has_pending_conf()
        {
            return Ok(());
        }
        tracing::info!(member = self.id(), configuration = ?self.configuration(), "leaving a joint configuration a former leader entered");
        match self.raw.propose_conf_change(Vec::new(), raft::prelude::ConfChangeV2::default()) {
            Ok(()) | Err(raft::Error::ProposalDropped) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configuration(voters: &[u64], outgoing: &[u64]) -> Configuration {
        Configuration { index: 5, voters: voters.to_vec(), outgoing: outgoing.to_vec() }
    }

    fn change(add: &[u64], remove: &[u64]) -> MembershipChange {
        MembershipChange { add: add.to_vec(), remove: remove.to_vec() }
    }

    #[test]
    fn a_change_is_refused_unless_it_leaves_a_group_that_can_run() {
        let three = configuration(&[1, 2, 3], &[]);
        assert_eq!(validate(&three, &change(&[4], &[3])), Ok(vec![1, 2, 4]), "a replacement");
        assert_eq!(validate(&three, &change(&[4], &[])), Ok(vec![1, 2, 3, 4]));
        assert_eq!(validate(&three, &change(&[], &[])), Err(MembershipError::Empty));
        assert_eq!(validate(&three, &change(&[], &[3])), Err(MembershipError::TooFew { left: 2 }));
        assert_eq!(validate(&three, &change(&[2], &[])), Err(MembershipError::AlreadyVoter(2)));
        assert_eq!(validate(&three, &change(&[], &[7])), Err(MembershipError::NotVoter(7)));
        assert_eq!(validate(&three, &change(&[4], &[4])), Err(MembershipError::Both(4)));
        assert_eq!(validate(&three, &change(&[0], &[])), Err(MembershipError::BadId(0)));
        let joint = configuration(&[1, 2, 4], &[1, 2, 3]);
        assert_eq!(validate(&joint, &change(&[5], &[])), Err(MembershipError::Joint));
    }

    #[test]
    fn one_change_is_simple_and_more_go_through_joint_consensus() {
        assert_eq!(conf_change(&change(&[4], &[])).enter_joint(), None, "one voter added: applied at once");
        assert_eq!(conf_change(&change(&[4], &[3])).enter_joint(), Some(true), "a replacement: joint, left by itself");
    }

    /// Bytes no proposal writes are refused, not handed to raft-rs to panic on. (What raft-rs
    /// writes into the entry, through raft-proto's protobuf-trait wrapper, is read back by
    /// every membership test in `consensus::tests`.)
    #[test]
    fn bogus_changes_are_refused() {
        let cc = conf_change(&change(&[4], &[3]));
        assert_eq!(decode(9, &prost::Message::encode_to_vec(&cc)).unwrap(), cc);
        assert!(decode(9, &[]).unwrap().leave_joint(), "an empty entry is the leave raft-rs proposes");
        let mut bogus = cc.clone();
        bogus.transition = 7;
        let refused = decode(9, &prost::Message::encode_to_vec(&bogus)).unwrap_err().to_string();
        assert!(refused.contains("Raft index 9") && refused.contains("transition 7"), "{refused}");
        let mut learner = cc;
        learner.changes[0].change_type = ConfChangeType::AddLearnerNode as i32;
        assert!(decode(9, &prost::Message::encode_to_vec(&learner)).is_err(), "learners are never proposed");
        assert!(decode(9, &[0xff, 0xff]).is_err(), "not a message");
    }
}
