//! A member's consensus as its store holds it: restored from the Raft records at start, and
//! persisted through the store, each persist one synced commit (the member's [`RaftDisk`]).

use std::sync::Arc;

use crate::consensus::{self, Member, RaftDisk, RaftWrite, Restored};
use crate::state::NodeState;

/// Member `me` as the store holds it: its Raft log and hard state, and the last Raft index its
/// store applied.
pub(super) fn restore(
    state: &Arc<NodeState>,
    me: u64,
    voters: &[u64],
) -> Result<(Member, u64), consensus::MemberError> {
    let records =
        state.read_store(|store| store.raft_records()).map_err(|e| consensus::MemberError::Damaged(e.to_string()))?;
    let restored = Restored {
        hard_state: records.hard_state,
        entries: records.entries,
        applied: records.applied,
        snapshot: records.snapshot,
    };
    let planted = state.config.planted();
    let disk = StoreDisk { state: state.clone(), forget_vote: planted.raft_forget_vote };
    let lost_hard_state = match planted.raft_forget_vote {
        true => consensus::LostHardState::Trust,
        false => consensus::LostHardState::Refuse,
    };
    let member = Member::restore_as(me, voters, restored, Box::new(disk), lost_hard_state)?;
    super::membership::held(state, member.configuration());
    #[cfg(any(madsim, qsim_harness))]
    let member = plant_member_bugs(member, planted, records.applied, voters);
    Ok((member, records.applied))
}

/// The planted bugs a member takes at its start; harness builds only, where the methods exist.
#[cfg(any(madsim, qsim_harness))]
fn plant_member_bugs(
    mut member: Member,
    planted: &crate::config::LegacyConfig,
    applied: u64,
    voters: &[u64],
) -> Member {
    if planted.raft_apply_before_commit {
        member.apply_before_commit(applied);
    }
    if planted.raft_snapshot_first_configuration {
        member.snapshot_first_configuration(voters);
    }
    if planted.raft_without_pre_vote {
        member.without_pre_vote_or_check_quorum();
    }
    member
}

/// The store as a member's [`RaftDisk`]: each persist one synced commit.
struct StoreDisk {
    state: Arc<NodeState>,
    /// PLANTED BUG (legacy `raft_forget_vote`): the hard state is never persisted.
    forget_vote: bool,
}

impl RaftDisk for StoreDisk {
    fn persist(&mut self, mut write: RaftWrite) -> Result<(), crate::store::StoreError> {
        if self.forget_vote {
            write.hard_state = None;
        }
        self.state.with_store(|store| store.persist_raft(&write)).inspect_err(|e| {
            if e.is_damage() {
                self.state.found_damage(); // healed from a peer's copy, not by a reopen (`recover`)
            }
        })
    }

    fn compact(&mut self, snapshot: Vec<u8>, first_kept: u64) -> Result<(), crate::store::StoreError> {
        self.state.with_store(|store| store.compact_raft(snapshot, first_kept))
    }
}
