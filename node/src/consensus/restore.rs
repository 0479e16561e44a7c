//! A member from what its disk holds: its snapshot, its Raft log, its hard state and what its
//! store applied, checked for damage before raft-rs sees them; then the configuration at what
//! was applied (the snapshot's, then the membership changes its log holds up to there).

use std::sync::{Arc, Mutex};

use raft::prelude::{ConfState, Entry, EntryType, Snapshot};
use raft::storage::MemStorage;
use raft::{Config, RawNode};

use super::{
    APPEND_BYTES_MAX, ELECTION_TICKS, HEARTBEAT_TICKS, Member, MemberError, MemberLog, RaftDisk, Standing, StorePoint,
    Volatile, logger, membership,
};

/// What a restore does with a Raft log whose hard state was lost: the persisted term is below
/// its last entry's, or no hard state was persisted at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostHardState {
    /// Refuse it as damaged: the member would not know the term it voted in.
    Refuse,
    /// Start from it at term 0 — PLANTED BUG (legacy `raft_forget_vote`, the simulator's bug
    /// zoo only), so the members that forget their votes go on to elect twice in one term.
    Trust,
}

/// What a member restarts from: what its disk holds (see `store::RaftRecords`).
#[derive(Clone, Debug, Default)]
pub struct Restored {
    pub hard_state: Option<Vec<u8>>,
    pub entries: Vec<(u64, Vec<u8>)>,
    /// The last index whose entry was applied: committed entries after it come out again.
    pub applied: u64,
    /// The snapshot the log starts after, encoded, if it was ever compacted or replaced.
    pub snapshot: Option<Vec<u8>>,
}

impl Member {
    /// Member `id` of a group whose voters are `voters` (ids from 1; `id` among them), on a
    /// [`Volatile`] disk, from nothing.
    /// It takes part in elections at once (it has no disk that could have been replaced).
    pub fn new(id: u64, voters: &[u64]) -> Result<Member, MemberError> {
        assert!(voters.contains(&id), "member {id} is not among the voters {voters:?}");
        let mut member = Member::restore(id, voters, Restored::default(), Box::new(Volatile))?;
        member.standing = Standing::Voting;
        Ok(member)
    }

    /// Member `id` restarting from what `disk` held (`restored`), persisting to it from now on.
    /// `voters` is the group's first configuration (`[[root.members]]` but the standby ones):
    /// the configuration until a snapshot or a membership change in the log says otherwise.
    /// `id` need not be among them: a standby member takes part once the group adds it.
    pub fn restore(
        id: u64,
        voters: &[u64],
        restored: Restored,
        disk: Box<dyn RaftDisk>,
    ) -> Result<Member, MemberError> {
        Member::restore_as(id, voters, restored, disk, LostHardState::Refuse)
    }

    /// [`Member::restore`], with a log whose hard state was lost refused or — the planted
    /// `raft_forget_vote` only — trusted.
    pub fn restore_as(
        id: u64,
        voters: &[u64],
        restored: Restored,
        disk: Box<dyn RaftDisk>,
        lost_hard_state: LostHardState,
    ) -> Result<Member, MemberError> {
        let first = ConfState::from((voters.to_vec(), Vec::<u64>::new()));
        let log = RestoredLog::of(&restored, first.clone(), lost_hard_state)?;
        let config = Config {
            id,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            // A leader that cannot hear a majority steps down, so a partitioned leader stops
            // acknowledging; pre-vote keeps a member that was cut off from deposing a healthy
            // leader when it returns.
            check_quorum: true,
            pre_vote: true,
            applied: log.applied,
            max_size_per_msg: APPEND_BYTES_MAX as u64,
            ..Config::default()
        };
        config.validate()?;
        let base = log.snapshot.as_ref().map_or(first, |s| s.get_metadata().get_conf_state().clone());
        let (snapshot_index, applied, entries) = (log.snapshot_index(), log.applied, log.entries.clone());
        let mut raw = RawNode::new(&config, log.into_member_log(), &logger())?;
        let configurations = replay_configurations(&mut raw, (snapshot_index, base), &entries, applied)?;
        let fresh = restored.hard_state.is_none() && restored.entries.is_empty() && restored.snapshot.is_none();
        let standing = if fresh { Standing::fresh() } else { Standing::Voting };
        Ok(Member {
            raw,
            configurations,
            disk,
            applies_uncommitted: None,
            standing,
            snapshots_first_voters: None,
            term_start: std::cell::Cell::new(None),
            reported: None,
        })
    }
}

/// What a member's disk held, decoded and checked: raft-rs's log (its snapshot, the entries
/// after it, the hard state), and the index applied.
struct RestoredLog {
    storage: MemStorage,
    snapshot: Option<Snapshot>,
    /// The entries after the snapshot.
    entries: Vec<Entry>,
    /// What was applied: the store's applied index, or the snapshot's when that is later.
    applied: u64,
}

impl RestoredLog {
    /// `restored` decoded over the group's `first` configuration (a snapshot replaces it).
    fn of(restored: &Restored, first: ConfState, lost: LostHardState) -> Result<RestoredLog, MemberError> {
        let storage = MemStorage::new_with_conf_state(first);
        let snapshot = match &restored.snapshot {
            Some(bytes) => {
                let snapshot: Snapshot = prost::Message::decode(bytes.as_slice())
                    .map_err(|e| MemberError::Damaged(format!("the Raft snapshot: {e}")))?;
                StorePoint::split_snapshot_data(snapshot.get_data())?;
                storage.wl().apply_snapshot(snapshot.clone())?;
                Some(snapshot)
            }
            None => None,
        };
        let snapshot_index = snapshot.as_ref().map_or(0, |s| s.get_metadata().index);
        let entries = restored
            .entries
            .iter()
            .map(|(index, bytes)| {
                let entry: Entry = prost::Message::decode(bytes.as_slice())
                    .map_err(|e| MemberError::Damaged(format!("Raft entry {index}: {e}")))?;
                if entry.index != *index {
                    return Err(MemberError::Damaged(format!("Raft entry {index} says it is entry {}", entry.index)));
                }
                Ok(entry)
            })
            .collect::<Result<Vec<Entry>, MemberError>>()?;
        // A compaction keeps entries before its snapshot for members a little behind; they are
        // applied, and raft-rs's log starts after the snapshot.
        let entries: Vec<Entry> = entries.into_iter().filter(|e| e.index > snapshot_index).collect();
        if let Some(first) = entries.first().filter(|first| first.index != snapshot_index + 1) {
            return Err(MemberError::Damaged(format!(
                "the Raft log starts at entry {}, but its snapshot is at {snapshot_index}",
                first.index
            )));
        }
        storage.wl().append(&entries)?;
        let mut hard_state: raft::prelude::HardState = match &restored.hard_state {
            Some(bytes) => prost::Message::decode(bytes.as_slice())
                .map_err(|e| MemberError::Damaged(format!("the hard state: {e}")))?,
            None => raft::prelude::HardState::default(),
        };
        // What was applied was committed, whether or not a later commit index was persisted;
        // so was everything a snapshot holds. (A store behind its snapshot is caught up before
        // anything after the snapshot is applied: see `MemberEvent::Snapshot`.)
        let applied = restored.applied.max(snapshot_index);
        hard_state.commit = hard_state.commit.max(applied);
        if lost == LostHardState::Refuse {
            lost_hard_state(&hard_state, restored.hard_state.is_some(), entries.last())?;
        }
        let snapshot_term = snapshot.as_ref().map_or(0, |s| s.get_metadata().term);
        if hard_state.term < snapshot_term {
            // Its snapshot came from a later term than its hard state records (it cannot, from
            // this build): the vote it holds was cast in an older term.
            hard_state.term = snapshot_term;
            hard_state.vote = raft::INVALID_ID;
        }
        let last = raft::Storage::last_index(&storage)?;
        if hard_state.commit > last {
            let applied = hard_state.commit;
            return Err(MemberError::Damaged(format!("entry {applied} was applied, but the Raft log ends at {last}")));
        }
        storage.wl().set_hardstate(hard_state);
        Ok(RestoredLog { storage, snapshot, entries, applied })
    }

    fn snapshot_index(&self) -> u64 {
        self.snapshot.as_ref().map_or(0, |s| s.get_metadata().index)
    }

    fn into_member_log(self) -> MemberLog {
        MemberLog { entries: self.storage, snapshot: Arc::new(Mutex::new(self.snapshot)) }
    }
}

/// Refuses a log whose hard state was lost. A member learns a term before it appends an entry
/// of that term, and each persist writes the hard state with the entries in one synced commit
/// (see [`RaftDisk::persist`]), so the persisted term is never below its last entry's. When it
/// is, the term and the vote cast in it are gone: started anyway, the member could vote twice in
/// one term (two leaders), and raft-rs itself panics when a member at term 0 turns down a vote
/// ("term should be set"). Not healed from a peer either — a copy keeps the member's own hard
/// state, which is what was lost — so the node refuses to start and says what to do.
/// (A snapshot without a hard state is not this: see the snapshot's term below.)
fn lost_hard_state(
    hard_state: &raft::prelude::HardState,
    persisted: bool,
    last: Option<&Entry>,
) -> Result<(), MemberError> {
    let Some(last) = last.filter(|last| last.term > hard_state.term) else {
        return Ok(());
    };
    let recorded = match persisted {
        true => format!("records term {}", hard_state.term),
        false => "was never persisted".to_string(),
    };
    Err(MemberError::Damaged(format!(
        "the Raft hard state {recorded}, but the Raft log holds entry {} of term {}: the term and vote this \
         member cast were lost, and a member that forgets its vote may vote twice in one term. Move the store \
         aside and rejoin the member as a replaced disk (docs/operating.md, \"A replaced disk\")",
        last.index, last.term
    )))
}

/// The configurations a member applied up to `applied`: `base` (the snapshot's, or the
/// group's first, at its index), then every membership change its log holds up to there,
/// applied to `raw` as they are replayed. Later ones come out again as they commit.
fn replay_configurations(
    raw: &mut RawNode<MemberLog>,
    base: (u64, ConfState),
    entries: &[Entry],
    applied: u64,
) -> Result<Vec<(u64, ConfState)>, MemberError> {
    let mut configurations = vec![base];
    for entry in entries.iter().filter(|e| e.index <= applied) {
        if entry.get_entry_type() == EntryType::EntryConfChangeV2 {
            let cc = membership::decode(entry.index, &entry.data)?;
            let conf = raw.apply_conf_change(&cc).map_err(|e| {
                MemberError::Damaged(format!("the membership change at Raft index {} cannot apply: {e}", entry.index))
            })?;
            configurations.push((entry.index, conf));
        }
    }
    Ok(configurations)
}
