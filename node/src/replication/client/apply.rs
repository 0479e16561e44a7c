//! Applying what a source sends: each frame decoded and checked entry by entry, then applied at
//! most `replication.apply_batch_entries_max` entries to a commit, each commit holding its applied
//! index so that a restart resumes exactly where it stopped. Shared by the replication client and
//! a root group member's catch-up (`root::catch_up`).

use crate::entry::VerifiedEntry;
use crate::state::NodeState;
use crate::store::{Store, StoreError};

/// Decodes one frame of entries, each checked against its own hash, keeping the bytes to store.
pub(crate) fn decode_frame(frames: Vec<Vec<u8>>) -> Result<Vec<VerifiedEntry>, String> {
    frames
        .into_iter()
        .map(|frame| VerifiedEntry::decompress(frame).map_err(|e| format!("undecodable entry: {e}")))
        .collect()
}

/// Why a frame was not applied: the source's doing, or this node's store's.
pub(crate) enum ApplyFailed {
    /// The entries were refused (a gap, a broken chain, another database): the source's fault.
    Refused(crate::store::ApplyRefusal),
    /// The store failed (damage, a disk error): this node's.
    Store(StoreError),
}

/// Checks and applies one frame of entries, at most `replication.apply_batch_entries_max` to a
/// commit.
pub(crate) fn apply_frame(state: &NodeState, entries: &[VerifiedEntry]) -> Result<(), ApplyFailed> {
    let per_commit = state.config.replication.apply_batch_entries_max.max(1);
    entries.chunks(per_commit).try_for_each(|batch| apply_batch(state, batch))
}

/// Checks and applies `entries` as one commit.
fn apply_batch(state: &NodeState, entries: &[VerifiedEntry]) -> Result<(), ApplyFailed> {
    let bytes: u64 = entries.iter().map(|e| e.logical_bytes()).sum();
    let applied = state.with_store(|store| {
        // After a failed commit the head is unknown until the store is reopened.
        state.settle(store)?;
        store_apply(state, store, entries)?;
        // Published under the store lock, as every apply is (see `NodeState::applied`).
        if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
            state.applied(first, last);
        }
        Ok(())
    });
    applied.map_err(|e| match e {
        StoreError::Refused(refusal) => ApplyFailed::Refused(refusal),
        // The commit met damage already in the store (a RocksDB compaction reading a corrupt
        // block stops every write): the entries are fine, the store is not.
        damage if damage.is_damage() => {
            state.found_damage();
            ApplyFailed::Store(damage)
        }
        other => ApplyFailed::Store(other),
    })?;
    state.metrics.entries_applied.inc_by(entries.len() as u64);
    state.metrics.bytes_applied.inc_by(bytes);
    Ok(())
}

/// The store's checked apply; in a harness build, the unchecked one when the planted
/// `apply_without_gap_check` is on (the method exists only there).
fn store_apply(state: &NodeState, store: &mut Store, entries: &[VerifiedEntry]) -> Result<(), StoreError> {
    #[cfg(any(madsim, qsim_harness))]
    if state.config.planted().apply_without_gap_check {
        return store.apply_without_gap_check(entries);
    }
    #[cfg(not(any(madsim, qsim_harness)))]
    let _ = state;
    store.apply_verified(entries)
}

// NodeState reads the clock, which under madsim needs its runtime: the tokio build runs these.
#[cfg(all(test, not(madsim)))]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::config::NodeConfig;
    use crate::entry::{DatabaseId, Op};
    use crate::observe::{NodeEvent, NodeObserver};
    use crate::state::SimHooks;
    use crate::store::{MemDisk, OpenOptions, Store, StoreLocation};

    /// The commits a replica made: each `Applied` event's first and last index.
    #[derive(Debug, Default)]
    struct Commits(Mutex<Vec<(u64, u64)>>);

    impl NodeObserver for Commits {
        fn observe(&self, _node: &str, event: NodeEvent) {
            if let NodeEvent::Applied { first, last, .. } = event {
                self.0.lock().unwrap().push((first, last));
            }
        }
    }

    /// A replica with `apply_batch_entries_max` at `per_commit` (None: the shipped default).
    fn replica(per_commit: Option<usize>) -> (Arc<NodeState>, Arc<Commits>) {
        let limit = per_commit.map_or(String::new(), |n| format!("apply_batch_entries_max = {n}\n"));
        let text = format!(
            "name = \"edge\"\nrole = \"replica\"\ndatabase_id = \"2a\"\n[storage]\nengine = \"memory\"\n\
             [listen]\nreplication = \"127.0.0.1:7001\"\nmemcached = \"127.0.0.1:11001\"\nhttp = \"127.0.0.1:8001\"\n\
             [replication]\nprimaries = [\"127.0.0.1:7000\"]\n{limit}"
        );
        let config = NodeConfig::parse(&text, "edge.toml").unwrap();
        let store = Store::open(&StoreLocation::Memory(MemDisk::default()), &config.store_options()).unwrap();
        let commits = Arc::new(Commits::default());
        let observer: Arc<dyn NodeObserver> = commits.clone();
        (
            NodeState::with_disk(
                config,
                store,
                1,
                None,
                SimHooks { observer: Some(observer), ..SimHooks::default() },
                None,
            ),
            commits,
        )
    }

    /// `count` entries as a source sends them, chained from the start.
    fn frame(count: u64) -> Vec<VerifiedEntry> {
        let mut root = Store::open(&StoreLocation::Memory(MemDisk::default()), &OpenOptions::new(DatabaseId(0x2a)))
            .expect("a root store");
        (1..=count)
            .map(|i| {
                let ops = vec![Op::Set { key: format!("k{i}").into_bytes(), value: b"v".to_vec() }];
                let entry = root.next_entry(i, ops).expect("an entry");
                root.apply(std::slice::from_ref(&entry)).expect("applied at the root");
                VerifiedEntry::decompress(entry.compress()).expect("a sound entry")
            })
            .collect()
    }

    #[test]
    fn a_frame_is_applied_at_most_apply_batch_entries_max_to_a_commit() {
        let (state, commits) = replica(Some(2));
        assert!(apply_frame(&state, &frame(5)).is_ok());
        assert_eq!(*commits.0.lock().unwrap(), vec![(1, 2), (3, 4), (5, 5)], "three commits of at most two");
        assert_eq!(state.read_store(|s| s.applied_index()), 5);
    }

    #[test]
    fn at_the_shipped_default_a_frame_of_a_thousand_is_one_commit() {
        let (state, commits) = replica(None);
        assert_eq!(state.config.replication.apply_batch_entries_max, 1_000, "the documented default");
        assert!(apply_frame(&state, &frame(1_001)).is_ok());
        assert_eq!(*commits.0.lock().unwrap(), vec![(1, 1_000), (1_001, 1_001)]);
    }
}
