//! A root member's consensus state, kept in the store's `meta` table beside the data it orders.
//!
//! Guarantees:
//! - **Durable before it vouches.** [`Store::persist_raft`] writes new Raft log entries and the
//!   hard state (term, vote, commit) in one engine commit, synced when it returns: a member
//!   never answers a vote or an append for state a crash could take back (the planted bug
//!   "a member that forgets its vote" is the absence of this).
//! - **Applied exactly once.** [`Store::apply_raft`] commits the Quicksilver entries a Raft
//!   entry became and the Raft index they came from in the same commit as the data, so after a
//!   crash a member resumes applying at the first Raft entry its store does not hold: a
//!   committed batch is never applied twice (which would fork the chain) nor skipped.
//! - The records are opaque bytes here (raft-rs's own encoding, done in `consensus`): the store
//!   knows their order and atomicity, not their meaning.
//!
//! - **A snapshot and the log it cuts move together.** A compaction writes the member's new
//!   snapshot and removes the entries before the ones it keeps in one commit; a snapshot
//!   received from the leader replaces the whole log in the same commit as it is recorded. The
//!   snapshot is Raft's metadata (index, term, voters) and where the store stood at that index;
//!   the data is the store itself.
//!
//! Keys, all under `raft/` in `meta` (integers big-endian, so bytewise order is numeric):
//! `raft/hard_state` → encoded `HardState`; `raft/applied` → u64; `raft/entry/<index>` →
//! encoded `Entry`; `raft/snapshot` → encoded `Snapshot`. And, on a root of one as on every group
//! member, `root/quotas` → the producers' buckets as of the last commit, committed with it.

use super::engine::{Table, Write};
use super::{LogEntry, Store, StoreError};

const HARD_STATE: &[u8] = b"raft/hard_state";
const APPLIED: &[u8] = b"raft/applied";
const ENTRY_PREFIX: &[u8] = b"raft/entry/";
const SNAPSHOT: &[u8] = b"raft/snapshot";
/// A root's producers' buckets as of its last commit (`root::quota::Ledger`'s bytes).
const QUOTAS: &[u8] = b"root/quotas";

fn entry_key(index: u64) -> Vec<u8> {
    let mut key = ENTRY_PREFIX.to_vec();
    key.extend_from_slice(&index.to_be_bytes());
    key
}

/// What a store holds of its member's consensus state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftRecords {
    /// The encoded hard state, if one was ever persisted.
    pub hard_state: Option<Vec<u8>>,
    /// The encoded Raft log entries, in index order, each with its index.
    pub entries: Vec<(u64, Vec<u8>)>,
    /// The last Raft index whose batch this store applied (0: none).
    pub applied: u64,
    /// The encoded snapshot the log starts after, if the log was ever compacted or replaced.
    pub snapshot: Option<Vec<u8>>,
}

/// What one persist of a member's Raft state writes, in one durable commit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftWrite {
    /// A snapshot received from the leader: it replaces every held entry.
    pub snapshot: Option<Vec<u8>>,
    /// The encoded hard state, when it changed.
    pub hard_state: Option<Vec<u8>>,
    /// New entries (consecutive), replacing every held entry from the first one's index on.
    pub entries: Vec<(u64, Vec<u8>)>,
}

impl Store {
    /// The consensus state this store holds; empty for a store that never was a root member.
    pub fn raft_records(&self) -> Result<RaftRecords, StoreError> {
        let hard_state = self.engine.get(Table::Meta, HARD_STATE)?;
        let snapshot = self.engine.get(Table::Meta, SNAPSHOT)?;
        let applied = self.raft_applied()?;
        let mut entries = Vec::new();
        let mut bad_key = None;
        self.engine.scan(Table::Meta, ENTRY_PREFIX, &mut |key, value| {
            let Some(index) = key.strip_prefix(ENTRY_PREFIX) else { return false };
            match <[u8; 8]>::try_from(index) {
                Ok(index) => entries.push((u64::from_be_bytes(index), value.to_vec())),
                Err(_) => bad_key = Some(key.to_vec()),
            }
            bad_key.is_none()
        })?;
        if let Some(key) = bad_key {
            return Err(StoreError::CorruptMeta(format!(
                "a Raft entry under a malformed key {:?}",
                super::escape(&key)
            )));
        }
        if let Some(gap) = entries.windows(2).find(|pair| pair[1].0 != pair[0].0 + 1) {
            return Err(StoreError::CorruptMeta(format!("the Raft log jumps from index {} to {}", gap[0].0, gap[1].0)));
        }
        Ok(RaftRecords { hard_state, entries, applied, snapshot })
    }

    /// The last Raft index whose batch this store applied (0: none).
    pub fn raft_applied(&self) -> Result<u64, StoreError> {
        match self.engine.get(Table::Meta, APPLIED)? {
            Some(bytes) => Ok(u64::from_be_bytes(super::record::fixed(&bytes, "raft/applied")?)),
            None => Ok(0),
        }
    }

    /// Persists `write` in one durable commit: a received snapshot (removing every held entry),
    /// new entries (replacing every held entry from the first one's index on: a new leader's
    /// log overrides a follower's unacknowledged tail), and the hard state.
    pub fn persist_raft(&mut self, write: &RaftWrite) -> Result<(), StoreError> {
        let RaftWrite { snapshot, hard_state, entries } = write;
        assert!(
            entries.windows(2).all(|pair| pair[1].0 == pair[0].0 + 1),
            "Raft entries are persisted in consecutive runs"
        );
        self.check_settled()?;
        let mut writes = Vec::with_capacity(entries.len() + 3);
        if let Some(snapshot) = snapshot {
            writes.push(Write::DeleteRange { table: Table::Meta, start: entry_key(0), end: entry_key(u64::MAX) });
            writes.push(Write::Put { table: Table::Meta, key: SNAPSHOT.to_vec(), value: snapshot.clone() });
        }
        if let Some(&(first, _)) = entries.first() {
            writes.push(Write::DeleteRange { table: Table::Meta, start: entry_key(first), end: entry_key(u64::MAX) });
        }
        for (index, bytes) in entries {
            writes.push(Write::Put { table: Table::Meta, key: entry_key(*index), value: bytes.clone() });
        }
        if let Some(hard_state) = hard_state {
            writes.push(Write::Put { table: Table::Meta, key: HARD_STATE.to_vec(), value: hard_state.clone() });
        }
        self.commit_meta(writes)
    }

    /// Records `snapshot` as the one the member's log starts after, and removes the entries
    /// before `first_kept`, in one commit.
    pub fn compact_raft(&mut self, snapshot: Vec<u8>, first_kept: u64) -> Result<(), StoreError> {
        self.check_settled()?;
        self.commit_meta(vec![
            Write::DeleteRange { table: Table::Meta, start: entry_key(0), end: entry_key(first_kept) },
            Write::Put { table: Table::Meta, key: SNAPSHOT.to_vec(), value: snapshot },
        ])
    }

    /// Makes the store's Raft state this member's own after the store was copied from another
    /// member (a bootstrap from a store snapshot): the copy's hard state, log and snapshot are
    /// the other member's and are replaced by `own`; the copy's applied Raft index stays, with
    /// the data it describes.
    pub fn adopt_raft(&mut self, own: &RaftWrite) -> Result<(), StoreError> {
        self.check_settled()?;
        let mut writes = vec![
            Write::DeleteRange { table: Table::Meta, start: entry_key(0), end: entry_key(u64::MAX) },
            Write::Delete { table: Table::Meta, key: HARD_STATE.to_vec() },
            Write::Delete { table: Table::Meta, key: SNAPSHOT.to_vec() },
        ];
        if let Some(snapshot) = &own.snapshot {
            writes.push(Write::Put { table: Table::Meta, key: SNAPSHOT.to_vec(), value: snapshot.clone() });
        }
        for (index, bytes) in &own.entries {
            writes.push(Write::Put { table: Table::Meta, key: entry_key(*index), value: bytes.clone() });
        }
        if let Some(hard_state) = &own.hard_state {
            writes.push(Write::Put { table: Table::Meta, key: HARD_STATE.to_vec(), value: hard_state.clone() });
        }
        self.commit_meta(writes)
    }

    fn commit_meta(&mut self, writes: Vec<Write>) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.engine.commit(writes) {
            return Err(self.commit_failed(e));
        }
        Ok(())
    }

    /// Applies the Quicksilver `entries` that committed Raft entry `raft_index` became (none:
    /// a batch of identical rewrites), and records `raft_index` as applied and the producers'
    /// buckets it carried (`quotas`, when it carried them), in one commit.
    pub fn apply_raft(
        &mut self,
        entries: &[LogEntry],
        raft_index: u64,
        quotas: Option<Vec<u8>>,
    ) -> Result<(), StoreError> {
        let entries: Vec<(&LogEntry, Option<&[u8]>)> = entries.iter().map(|e| (e, None)).collect();
        let mut also =
            vec![Write::Put { table: Table::Meta, key: APPLIED.to_vec(), value: raft_index.to_be_bytes().to_vec() }];
        if let Some(quotas) = quotas {
            also.push(Write::Put { table: Table::Meta, key: QUOTAS.to_vec(), value: quotas });
        }
        self.apply_checked(&entries, true, also)
    }

    /// A root of one's commit: `entries` (none: a batch of identical rewrites) and the
    /// producers' buckets after the writes they hold, in one commit.
    pub fn apply_root(&mut self, entries: &[LogEntry], quotas: Vec<u8>) -> Result<(), StoreError> {
        let entries: Vec<(&LogEntry, Option<&[u8]>)> = entries.iter().map(|e| (e, None)).collect();
        self.apply_checked(&entries, true, vec![Write::Put { table: Table::Meta, key: QUOTAS.to_vec(), value: quotas }])
    }

    /// The producers' buckets as of the root's last commit that recorded them.
    pub fn quota_ledger(&self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.engine.get(Table::Meta, QUOTAS)?)
    }
}

#[cfg(test)]
mod tests {
    use super::RaftWrite;
    use crate::entry::{DatabaseId, Op};
    use crate::store::{MemDisk, OpenOptions, Store, StoreLocation};

    fn open(disk: &MemDisk) -> Store {
        Store::open(&StoreLocation::Memory(disk.clone()), &OpenOptions::new(DatabaseId(5))).unwrap()
    }

    #[test]
    fn raft_records_survive_a_reopen_and_a_new_tail_replaces_the_old() {
        let disk = MemDisk::default();
        let mut store = open(&disk);
        assert_eq!(store.raft_records().unwrap(), Default::default(), "a fresh store holds none");
        let entries = vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"c".to_vec())];
        store.persist_raft(&RaftWrite { hard_state: Some(b"hs1".to_vec()), entries, ..RaftWrite::default() }).unwrap();
        // A new leader's entry 2 overrides the follower's 2 and 3.
        store.persist_raft(&RaftWrite { entries: vec![(2, b"B".to_vec())], ..RaftWrite::default() }).unwrap();
        let entry = store.next_entry(7, vec![Op::Set { key: b"k".to_vec(), value: b"v".to_vec() }]).unwrap();
        store.apply_raft(&[entry], 2, Some(b"q".to_vec())).unwrap();
        store.apply_raft(&[], 3, None).unwrap();
        drop(store);
        let store = open(&disk);
        let records = store.raft_records().unwrap();
        assert_eq!(records.hard_state.as_deref(), Some(&b"hs1"[..]));
        assert_eq!(records.entries, vec![(1, b"a".to_vec()), (2, b"B".to_vec())]);
        assert_eq!((records.applied, store.applied_index()), (3, 1), "the empty batch moved only the Raft index");
        assert_eq!(store.quota_ledger().unwrap().as_deref(), Some(&b"q"[..]), "the buckets committed with entry 2");
    }

    #[test]
    fn a_compaction_cuts_the_log_before_what_it_keeps_and_a_received_snapshot_replaces_it() {
        let disk = MemDisk::default();
        let mut store = open(&disk);
        let entries: Vec<(u64, Vec<u8>)> = (1..=5).map(|i| (i, vec![i as u8])).collect();
        store.persist_raft(&RaftWrite { entries, ..RaftWrite::default() }).unwrap();
        store.compact_raft(b"snap@4".to_vec(), 3).unwrap();
        let records = open(&disk).raft_records().unwrap();
        assert_eq!(records.snapshot.as_deref(), Some(&b"snap@4"[..]));
        assert_eq!(records.entries.iter().map(|e| e.0).collect::<Vec<_>>(), vec![3, 4, 5]);
        drop(store);
        let mut store = open(&disk);
        let write = RaftWrite {
            snapshot: Some(b"snap@9".to_vec()),
            hard_state: Some(b"hs".to_vec()),
            entries: vec![(10, b"j".to_vec())],
        };
        store.persist_raft(&write).unwrap();
        let records = store.raft_records().unwrap();
        assert_eq!(records.snapshot.as_deref(), Some(&b"snap@9"[..]));
        assert_eq!(records.entries, vec![(10, b"j".to_vec())], "the old log is gone");
        // A copy of another member's store becomes this member's own.
        store.adopt_raft(&RaftWrite { hard_state: Some(b"mine".to_vec()), ..RaftWrite::default() }).unwrap();
        let records = store.raft_records().unwrap();
        assert_eq!(
            (records.hard_state.as_deref(), records.snapshot, records.entries.len()),
            (Some(&b"mine"[..]), None, 0)
        );
    }
}
