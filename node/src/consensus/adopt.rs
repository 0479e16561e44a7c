//! A member's Raft state over a copy of a peer's store.
//!
//! A member that copies a peer's store (catching up past every peer's log, or healing a
//! damaged store) keeps its own Raft state — its term, its vote, its log — since the copy's is
//! the peer's. But the copy may have applied Raft entries past the end of the member's own log
//! (the member fell behind while it copied): its store then stands for entries its log never
//! held, and a restart would find "entry N was applied, but the Raft log ends at M" and refuse
//! to start, again at every try.
//!
//! Guarantee: [`own_state_over_copy`] gives the member's state with a snapshot record at the
//! copy's applied Raft index (its term read from the copy's own Raft records, the store's
//! point as its data) whenever the copy is past the member's log, so a member restarts from
//! any copy it adopted. A snapshot's term is never guessed: a copy without a record of the
//! term at its applied index is refused as damaged (a term too high would win elections the
//! member must lose).

use raft::prelude::{ConfState, Entry, Snapshot};

use super::{MemberError, RaftWrite, StorePoint};
use crate::store::RaftRecords;

/// `own` (the member's Raft state, as [`super::Member::own_state`] wrote it), to be written
/// into `copy`'s store (whose Raft records are `copy`, at `point`) in place of the peer's.
pub fn own_state_over_copy(
    own: &RaftWrite,
    copy: &RaftRecords,
    voters: &[u64],
    point: StorePoint,
) -> Result<RaftWrite, MemberError> {
    let own_snapshot = own.snapshot.as_deref().map(decode_snapshot).transpose()?;
    let own_snapshot_index = own_snapshot.as_ref().map_or(0, |s| s.get_metadata().index);
    let own_last = own.entries.last().map_or(0, |(index, _)| *index).max(own_snapshot_index);
    let applied = copy.applied;
    if applied <= own_last {
        return Ok(own.clone()); // the member's own log reaches what the copy applied
    }
    let term = term_in_copy(copy, applied)?;
    let conf = conf_in_copy(copy, voters, applied)?;
    let mut snapshot = Snapshot::default();
    let metadata = snapshot.mut_metadata();
    metadata.index = applied;
    metadata.term = term;
    metadata.set_conf_state(conf);
    snapshot.data = point.encode();
    let snapshot = prost::Message::encode_to_vec(&snapshot);
    // Its entries all lie at or before the copy's applied index: the snapshot replaces them.
    Ok(RaftWrite { snapshot: Some(snapshot), hard_state: own.hard_state.clone(), entries: Vec::new() })
}

/// The term of Raft entry `index` by the copy's own records: its entry there, or its snapshot
/// when that is at `index`.
fn term_in_copy(copy: &RaftRecords, index: u64) -> Result<u64, MemberError> {
    if let Some((_, bytes)) = copy.entries.iter().find(|(at, _)| *at == index) {
        let entry: Entry = prost::Message::decode(bytes.as_slice())
            .map_err(|e| MemberError::Damaged(format!("the copy's Raft entry {index}: {e}")))?;
        return Ok(entry.term);
    }
    if let Some(snapshot) = copy.snapshot.as_deref().map(decode_snapshot).transpose()?
        && snapshot.get_metadata().index == index
    {
        return Ok(snapshot.get_metadata().term);
    }
    Err(MemberError::Damaged(format!(
        "the copy applied Raft entry {index} but holds no record of its term (neither the entry nor a snapshot at it)"
    )))
}

/// The group's configuration at Raft index `index` by the copy's own records: its snapshot's
/// (or the group's first, `voters`), then each membership change its log holds up to `index`.
fn conf_in_copy(copy: &RaftRecords, voters: &[u64], index: u64) -> Result<ConfState, MemberError> {
    let snapshot = copy.snapshot.as_deref().map(decode_snapshot).transpose()?;
    let (from, base) = match snapshot.filter(|s| s.get_metadata().index <= index) {
        Some(s) => (s.get_metadata().index, s.get_metadata().get_conf_state().clone()),
        None => (0, ConfState::from((voters.to_vec(), Vec::<u64>::new()))),
    };
    let mut changes = Vec::new();
    for (at, bytes) in copy.entries.iter().filter(|(at, _)| *at > from && *at <= index) {
        let entry: Entry = prost::Message::decode(bytes.as_slice())
            .map_err(|e| MemberError::Damaged(format!("the copy's Raft entry {at}: {e}")))?;
        if entry.get_entry_type() == raft::prelude::EntryType::EntryConfChangeV2 {
            changes.push(super::membership::decode(*at, &entry.data)?);
        }
    }
    if changes.is_empty() {
        return Ok(base);
    }
    // raft-rs's own rules, on a scratch member that never sends or persists anything.
    let any = base.voters.first().copied().unwrap_or(1);
    let storage = raft::storage::MemStorage::new_with_conf_state(base);
    let config = raft::Config { id: any, ..raft::Config::default() };
    let mut scratch = raft::RawNode::new(&config, storage, &super::logger())?;
    let mut conf = ConfState::default();
    for cc in changes {
        conf = scratch.apply_conf_change(&cc)?;
    }
    Ok(conf)
}

fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, MemberError> {
    prost::Message::decode(bytes).map_err(|e| MemberError::Damaged(format!("a Raft snapshot: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::{Member, Restored, Volatile};
    use crate::entry::ChainHash;

    fn entry(index: u64, term: u64) -> (u64, Vec<u8>) {
        let mut entry = Entry::default();
        (entry.index, entry.term) = (index, term);
        (index, prost::Message::encode_to_vec(&entry))
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> Vec<u8> {
        let mut hard_state = raft::prelude::HardState::default();
        (hard_state.term, hard_state.vote, hard_state.commit) = (term, vote, commit);
        prost::Message::encode_to_vec(&hard_state)
    }

    /// Member 3's log ends at entry 3 (term 1); it copied peer 1's store, which applied
    /// through entry 6 (term 2). Kept as it was, its state cannot restart ("entry 6 was
    /// applied, but the Raft log ends at 3"); over the copy, it restarts at a snapshot of the
    /// copy's entry 6, in that entry's term.
    #[test]
    fn a_member_restarts_from_a_copy_past_its_own_log() {
        let voters = [1, 2, 3];
        let own = RaftWrite {
            snapshot: None,
            hard_state: Some(hard_state(1, 1, 3)),
            entries: (1..=3).map(|i| entry(i, 1)).collect(),
        };
        let copy = RaftRecords {
            hard_state: Some(hard_state(2, 1, 6)),
            entries: (1..=6).map(|i| entry(i, if i > 4 { 2 } else { 1 })).collect(),
            applied: 6,
            snapshot: None,
        };
        let point = StorePoint { log_index: 40, hash: ChainHash([7; 32]) };
        let restart = |own: &RaftWrite| {
            let restored = Restored {
                hard_state: own.hard_state.clone(),
                entries: own.entries.clone(),
                applied: copy.applied,
                snapshot: own.snapshot.clone(),
            };
            Member::restore(3, &voters, restored, Box::new(Volatile))
        };
        let Err(kept) = restart(&own) else { panic!("its own log does not reach the copy's applied entry") };
        assert!(kept.to_string().contains("entry 6 was applied, but the Raft log ends at 3"), "{kept}");

        let adopted = own_state_over_copy(&own, &copy, &voters, point).unwrap();
        let member = restart(&adopted).expect("a member restarts from a copy it adopted");
        assert_eq!(member.snapshot(), Some((6, point)), "a snapshot of the copy's applied entry");
        assert_eq!((member.term(), member.commit_index()), (2, 6), "in that entry's term, committed");

        // A copy that does not reach past the member's log leaves its state as it was.
        let behind = RaftRecords { applied: 2, ..copy.clone() };
        assert_eq!(own_state_over_copy(&own, &behind, &voters, point).unwrap(), own);
        // A copy with no record of its applied entry's term is refused, never guessed.
        let unrecorded = RaftRecords { entries: Vec::new(), ..copy };
        let refused = own_state_over_copy(&own, &unrecorded, &voters, point).unwrap_err();
        assert!(refused.to_string().contains("no record of its term"), "{refused}");
    }
}
