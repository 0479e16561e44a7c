//! Where a member's Raft state lives: the [`RaftDisk`] it persists to (the store, in the
//! node), and in memory raft-rs's log beside the member's latest snapshot ([`MemberLog`]).

use std::sync::{Arc, Mutex};

use raft::prelude::{Entry, Snapshot};
use raft::storage::MemStorage;

use super::RaftWrite;

/// Where a member keeps what it must not forget: the hard state (term, vote, commit) and its
/// Raft log, each write durable when [`persist`](RaftDisk::persist) returns. The node's is the
/// store (`Store::persist_raft`, one synced commit); [`Volatile`] keeps nothing.
pub trait RaftDisk: Send {
    /// Persists `write` in one durable commit (see [`RaftWrite`]). An error stops the member:
    /// it must not vouch for state it could not keep.
    fn persist(&mut self, write: RaftWrite) -> Result<(), crate::store::StoreError>;
    /// Records `snapshot` as the one the log starts after and drops the entries before
    /// `first_kept`, in one commit.
    fn compact(&mut self, snapshot: Vec<u8>, first_kept: u64) -> Result<(), crate::store::StoreError>;
}

/// A disk that keeps nothing: a member on it forgets its vote and log when it restarts, which
/// breaks Raft's safety. For tests of the consensus alone, and for the planted bug "a member
/// that forgets its vote" — never a real root's disk.
#[derive(Debug, Default)]
pub struct Volatile;

impl RaftDisk for Volatile {
    fn persist(&mut self, _: RaftWrite) -> Result<(), crate::store::StoreError> {
        Ok(())
    }

    fn compact(&mut self, _: Vec<u8>, _: u64) -> Result<(), crate::store::StoreError> {
        Ok(())
    }
}

/// raft-rs's in-memory log, and beside it the member's latest snapshot, which is what a
/// leader sends a member its log no longer reaches (raft-rs's `MemStorage` would make an
/// empty one at its commit index: the data must say where the store stood).
#[derive(Clone)]
pub(super) struct MemberLog {
    pub(super) entries: MemStorage,
    pub(super) snapshot: Arc<Mutex<Option<Snapshot>>>,
}

impl raft::Storage for MemberLog {
    fn initial_state(&self) -> raft::Result<raft::RaftState> {
        self.entries.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: raft::GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.entries.entries(low, high, max_size, context)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        self.entries.term(index)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.entries.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.entries.last_index()
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        match &*self.snapshot.lock().expect("the snapshot lock is never poisoned") {
            Some(snapshot) if snapshot.get_metadata().index >= request_index => Ok(snapshot.clone()),
            // None yet (the log was never compacted, so no member needs one), or an older one
            // than asked for: raft-rs retries later.
            _ => Err(raft::Error::Store(raft::StorageError::SnapshotTemporarilyUnavailable)),
        }
    }
}
