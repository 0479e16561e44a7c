//! The store: one replicated key-value database on one engine.
//!
//! Guarantees (the same on every engine, because they are implemented here once):
//! - **Atomic apply.** [`Store::apply`] commits the log entries, the KV changes, the applied index
//!   and the chain hash in one engine commit. After a crash the store holds exactly the state
//!   after some prefix of acknowledged `apply` calls: a restart never replays or skips.
//! - **No out-of-order apply.** An entry whose index is not exactly `applied + 1`, whose database
//!   id differs, whose previous hash is not the current chain hash, or whose own hash does not
//!   match its contents, is refused with [`ApplyRefusal`], and the store is unchanged.
//! - **Checked reads.** Each value is stored with a CRC32C over key and value, verified on every
//!   read. A mismatch is [`StoreError::Checksum`], naming the key; the bad bytes are never
//!   returned, and [`StoreStats::checksum_failures`] counts it.
//! - **Explicit retention.** Log entries are collected as a contiguous prefix. Asking for a
//!   collected index answers [`LogRead::Collected`], never the nearest surviving entry.
//!
//! # Record layout
//! - `meta` table: fixed keys, see [`meta`]; integers big-endian.
//! - `kv` table: key → `crc32c(key ‖ value)` (u32, little-endian) ‖ value.
//! - `log` table: index (u64 big-endian, so bytewise order is numeric order) → compressed entry.

mod consensus;
mod engine;
mod error;
pub mod faults;
mod length_cache;
mod lmdb;
mod location;
mod log;
mod mem;
mod mem_table;
mod open;
mod read;
mod record;
#[cfg(feature = "rocksdb")]
mod rocks;
#[cfg(any(madsim, qsim_harness))]
pub mod rot;
mod shared;
pub mod snapshot;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

pub use consensus::{RaftRecords, RaftWrite};
pub use engine::{EngineError, EngineKind, EngineResources, MemoryComponent};
pub use error::{ApplyRefusal, StoreError};
pub use length_cache::{LENGTH_CACHE_ENTRY_OVERHEAD_BYTES, LENGTH_CACHE_KEYS};
pub use location::{OpenOptions, StoreLocation};
pub(crate) use location::{describe_path, detect_engine};
pub use log::{GcOutcome, LogRead, LogReadLimits, RetentionPolicy};
pub use mem::MemDisk;
pub use read::{KeyValue, PrefixUsage, StateDigest};
use record::{Head, log_key, value_len_of_record, value_record};
pub use record::{STORE_FORMAT_VERSION, meta};
pub(crate) use record::{record_value_len, verified_value};
/// Block cache capacity when none is configured: RocksDB's own default (32 MiB), so a node
/// without the setting reads as RocksDB would by default.
pub const ROCKSDB_CACHE_BYTES_DEFAULT: usize = 32 << 20;
/// SST data block size when none is configured: RocksDB's own default (4 KiB).
pub const ROCKSDB_BLOCK_BYTES_DEFAULT: usize = 4 << 10;

use crate::entry::{ChainHash, DatabaseId, EntryError, LogEntry, Op, VerifiedEntry, escape};
use engine::{Engine, Table, Write};

/// Sizes and counters of a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreStats {
    pub engine: EngineKind,
    pub applied_index: u64,
    pub first_retained_index: u64,
    pub key_count: u64,
    /// Sum of key and value lengths of the current KV state.
    pub logical_bytes: u64,
    pub disk_bytes: u64,
    /// Key and value bytes applied since open: the numerator's denominator of write amplification.
    pub logical_bytes_written: u64,
    /// Bytes the engine wrote to disk since open (WAL, pages, flushes, compactions).
    pub disk_bytes_written: u64,
    pub checksum_failures: u64,
}

impl StoreStats {
    /// Disk bytes written per logical byte written, if anything was written.
    pub fn write_amplification(&self) -> Option<f64> {
        (self.logical_bytes_written > 0).then(|| self.disk_bytes_written as f64 / self.logical_bytes_written as f64)
    }
}

/// One replicated database on one engine. Writes take `&mut self`, so a shared store needs a
/// lock around it, and every read through `&self` sees one consistent commit.
pub struct Store {
    engine: Box<dyn Engine>,
    location: String,
    head: Head,
    logical_bytes_written: u64,
    checksum_failures: AtomicU64,
    /// The entries the log's readers checked last (see [`log::CheckedRecently`]).
    checked_recently: log::CheckedRecently,
    /// Where and how this store was opened, to reopen it after a failed commit (None: a
    /// read-only store, which never commits).
    opened_from: Option<(StoreLocation, OpenOptions)>,
    /// A commit failed and the engine may or may not hold it: `head` is not trusted, and no
    /// change runs until [`settle`](Self::settle) reopened the store and read the head back.
    unsettled: Option<String>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("location", &self.location).field("head", &self.head).finish_non_exhaustive()
    }
}

impl Store {
    /// The first index in `first_retained ..= applied` the log does not hold under its own key,
    /// if any (keys only: nothing is decoded).
    pub(crate) fn retained_log_gap(&self) -> Result<Option<u64>, StoreError> {
        let mut expected = self.head.first_retained_index;
        let mut gap = None;
        self.engine.scan(Table::Log, &log_key(expected), &mut |key, _| {
            if expected > self.head.applied_index {
                return false;
            }
            if key != log_key(expected) {
                gap = Some(expected);
                return false;
            }
            expected += 1;
            true
        })?;
        Ok(gap.or((expected <= self.head.applied_index).then_some(expected)))
    }

    /// Every key with its stored record (checksum and value), in key order, unverified, until
    /// `visit` returns false. For read-only tools; see [`verified_value`].
    pub(crate) fn scan_records(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), StoreError> {
        Ok(self.engine.scan(Table::Kv, &[], visit)?)
    }

    /// Log entries as stored (index key, compressed entry) from index `from` on, undecoded,
    /// until `visit` returns false. For read-only tools, which decode with
    /// [`LogEntry::decompress`].
    pub(crate) fn scan_log_records(
        &self,
        from: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        Ok(self.engine.scan(Table::Log, &log_key(from), visit)?)
    }

    /// The head's key count and logical bytes (key and value lengths), as the last commit wrote them.
    pub(crate) fn head_totals(&self) -> (u64, u64) {
        (self.head.key_count, self.head.logical_bytes)
    }

    fn with_engine(mut engine: Box<dyn Engine>, location: String, db_id: DatabaseId) -> Result<Store, StoreError> {
        let head = match Head::load(engine.as_ref(), &location)? {
            Some(head) if head.db_id != db_id => {
                return Err(StoreError::WrongDatabase { location, expected: db_id, found: head.db_id });
            }
            Some(head) => head,
            None => {
                let head = Head::fresh(db_id);
                engine.commit(head.writes())?;
                head
            }
        };
        Ok(Store {
            engine,
            location,
            head,
            logical_bytes_written: 0,
            checksum_failures: AtomicU64::new(0),
            checked_recently: log::CheckedRecently::default(),
            opened_from: None,
            unsettled: None,
        })
    }

    /// An empty memory store of `db_id` that never fails to open (no disk, no faults): what
    /// stands in the store's place while a store is swapped, never served.
    pub fn placeholder(db_id: DatabaseId) -> Store {
        Store::open(&StoreLocation::Memory(MemDisk::default()), &OpenOptions::new(db_id))
            .expect("an empty memory store without faults opens")
    }

    /// Whether a failed commit left the store's head unknown (see [`settle`](Self::settle)).
    pub fn is_unsettled(&self) -> bool {
        self.unsettled.is_some()
    }

    /// Refuses a change while the head is unknown: a change on a stale head would seal or
    /// check entries against a chain the engine may already have moved past.
    fn check_settled(&self) -> Result<(), StoreError> {
        match &self.unsettled {
            Some(why) => Err(StoreError::Unsettled { location: self.location.clone(), why: why.clone() }),
            None => Ok(()),
        }
    }

    /// Records that a commit failed: its outcome is unknown until the store is settled.
    fn commit_failed(&mut self, error: EngineError) -> StoreError {
        self.unsettled = Some(error.to_string());
        error.into()
    }

    /// After a failed commit, reopens the store and reads its head back from the engine, which
    /// may hold the failed commit (an fsync that failed after the write reached the disk) or
    /// not. Returns the entries that turned out to have been committed, for the node to report
    /// as applied; nothing when the store was settled already. On failure (the disk still
    /// refuses the open) the store stays unsettled, and every read fails until a later `settle`
    /// succeeds: the engine was closed first, as an LMDB environment may be open only once in a
    /// process.
    pub fn settle(&mut self) -> Result<Vec<LogEntry>, StoreError> {
        let Some(why) = self.unsettled.clone() else { return Ok(Vec::new()) };
        let Some((location, options)) = self.opened_from.clone() else {
            return Err(StoreError::Unsettled { location: self.location.clone(), why });
        };
        let before = self.head.applied_index;
        self.engine = Box::new(faults::ClosedEngine::new(location.kind(), why.clone()));
        let mut reopened = Store::open(&location, &options)?;
        reopened.logical_bytes_written = self.logical_bytes_written;
        reopened.checksum_failures = AtomicU64::new(self.checksum_failures.load(Ordering::Relaxed));
        assert!(
            reopened.head.applied_index >= before,
            "{}: the store lost applied entries across a failed commit: {} after {before}",
            self.location,
            reopened.head.applied_index
        );
        *self = reopened;
        let landed = self.head.applied_index - before;
        tracing::warn!(location = %self.location, landed, why = %why, "store reopened after a failed commit");
        if landed == 0 {
            return Ok(Vec::new());
        }
        let limits = LogReadLimits { entries_max: landed as usize, bytes_max: usize::MAX };
        match self.read_log_after(before, limits)? {
            LogRead::Entries(entries) => Ok(entries),
            other => unreachable!(
                "entries {}..={} were just committed, yet the log read {other:?}",
                before + 1,
                self.head.applied_index
            ),
        }
    }

    pub fn engine_kind(&self) -> EngineKind {
        self.engine.kind()
    }

    pub fn db_id(&self) -> DatabaseId {
        self.head.db_id
    }

    pub fn applied_index(&self) -> u64 {
        self.head.applied_index
    }

    pub fn chain_hash(&self) -> ChainHash {
        self.head.chain_hash
    }

    /// The oldest log index still held; `applied_index() + 1` when the log is empty.
    pub fn first_retained_index(&self) -> u64 {
        self.head.first_retained_index
    }

    /// Seals the next entry after the current head (the root's write path) without applying it.
    pub fn next_entry(&self, timestamp_ms: u64, ops: Vec<Op>) -> Result<LogEntry, EntryError> {
        LogEntry::seal(self.head.applied_index + 1, self.head.db_id, timestamp_ms, self.head.chain_hash, ops)
    }

    /// Applies `entries` in one commit, or refuses them all and changes nothing.
    pub fn apply(&mut self, entries: &[LogEntry]) -> Result<(), StoreError> {
        let entries: Vec<(&LogEntry, Option<&[u8]>)> = entries.iter().map(|e| (e, None)).collect();
        self.apply_checked(&entries, true, Vec::new())
    }

    /// [`apply`](Self::apply) for entries that arrived in their stored form: the bytes a frame
    /// brought are stored as they are (they decoded to the entry, its hash verified).
    pub fn apply_verified(&mut self, entries: &[VerifiedEntry]) -> Result<(), StoreError> {
        let entries: Vec<(&LogEntry, Option<&[u8]>)> = entries.iter().map(|e| (&**e, Some(e.compressed()))).collect();
        self.apply_checked(&entries, true, Vec::new())
    }

    /// PLANTED BUG (legacy, for the simulator's bug zoo only): [`apply`](Self::apply) without
    /// the gap and chain checks — an entry is applied whatever its index and previous hash. Each
    /// entry's own hash and database id are still checked. Never used unless a node's
    /// configuration asks for `legacy.apply_without_gap_check`.
    #[cfg(any(test, madsim, qsim_harness))]
    pub fn apply_without_gap_check(&mut self, entries: &[VerifiedEntry]) -> Result<(), StoreError> {
        let entries: Vec<(&LogEntry, Option<&[u8]>)> = entries.iter().map(|e| (&**e, Some(e.compressed()))).collect();
        self.apply_checked(&entries, false, Vec::new())
    }

    /// Each entry with, when it arrived compressed, the bytes it was verified from; `also`:
    /// `meta` writes that commit with them (a root member's applied consensus index).
    fn apply_checked(
        &mut self,
        entries: &[(&LogEntry, Option<&[u8]>)],
        gap_check: bool,
        also: Vec<Write>,
    ) -> Result<(), StoreError> {
        if entries.is_empty() && also.is_empty() {
            return Ok(());
        }
        self.check_settled()?;
        // Every entry is checked (order, chain, database, limits, keys) before anything is read
        // for it, so a bad entry is refused as such, never met first as a bad key by the engine.
        let mut checked = self.head;
        for &(entry, _) in entries {
            if gap_check {
                check_next(&checked, entry)?;
            } else {
                let unchained = Head { applied_index: entry.index - 1, chain_hash: entry.prev_hash, ..checked };
                check_next(&unchained, entry)?;
            }
            checked.applied_index = entry.index;
            checked.chain_hash = entry.hash;
        }
        // What the batch leaves under each key it touches: later operations win. The keys in
        // order, each written once.
        let mut after: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        let mut writes = also;
        writes.reserve(entries.len() + 8);
        let mut logical_bytes_written = 0;
        for &(entry, stored) in entries {
            for op in &entry.ops {
                after.insert(op.key(), op.value());
            }
            // The hash check happens on the bytes that are stored: here, or when the entry was
            // decoded from them (a `VerifiedEntry`).
            let compressed = match stored {
                Some(bytes) => bytes.to_vec(),
                None => {
                    entry.compress_verified().map_err(|source| ApplyRefusal::BadEntry { index: entry.index, source })?
                }
            };
            writes.push(Write::Put { table: Table::Log, key: log_key(entry.index).to_vec(), value: compressed });
            logical_bytes_written += entry.logical_bytes();
        }
        let touched: Vec<&[u8]> = after.keys().copied().collect();
        for (key, value) in after {
            writes.push(match value {
                Some(value) => Write::Put { table: Table::Kv, key: key.to_vec(), value: value_record(key, value) },
                None => Write::Delete { table: Table::Kv, key: key.to_vec() },
            });
        }
        // The head follows from what the batch replaces, which the engine finds as it writes.
        let stored_head = self.head;
        let mut moved = None;
        let committed = self.engine.commit_replacing(writes, &mut |stored_records| {
            let head = head_after(stored_head, entries, &touched, stored_records, gap_check);
            let mut head_writes = Vec::new();
            head.changes_from(&stored_head, &mut head_writes);
            moved = Some(head);
            head_writes
        });
        if let Err(e) = committed {
            return Err(self.commit_failed(e));
        }
        self.head = moved.expect("a commit that succeeded asked for the head it wrote");
        self.logical_bytes_written += logical_bytes_written;
        Ok(())
    }

    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        Ok(StoreStats {
            engine: self.engine.kind(),
            applied_index: self.head.applied_index,
            first_retained_index: self.head.first_retained_index,
            key_count: self.head.key_count,
            logical_bytes: self.head.logical_bytes,
            disk_bytes: self.engine.disk_bytes()?,
            logical_bytes_written: self.logical_bytes_written,
            disk_bytes_written: self.engine.disk_bytes_written(),
            checksum_failures: self.checksum_failures.load(Ordering::Relaxed),
        })
    }

    /// What the engine holds in memory and how its cache is doing, as far as it can measure
    /// (see [`EngineResources`]). Cheap enough to call once a second.
    pub fn resources(&self) -> EngineResources {
        self.engine.resources()
    }

    /// Pushes buffered writes to their final on-disk form (RocksDB memtables to SST files).
    /// Durability does not depend on it: every commit is already synced.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.check_settled()?;
        self.engine.flush().map_err(|e| self.commit_failed(e))
    }

    /// Makes every commit durable (see [`OpenOptions::sync_commits`]).
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.check_settled()?;
        self.engine.sync().map_err(|e| self.commit_failed(e))
    }
}

/// The head after `entries` are applied over `stored`: the last entry's index and hash, and
/// the keys and bytes held, counted operation by operation from the records the batch replaces
/// (`stored_records`, one per key of `touched`, which is sorted).
fn head_after(
    stored: Head,
    entries: &[(&LogEntry, Option<&[u8]>)],
    touched: &[&[u8]],
    stored_records: &[Option<usize>],
    gap_check: bool,
) -> Head {
    assert_eq!(stored_records.len(), touched.len(), "one stored record per key the batch touches");
    // The length of the value under each touched key as the batch goes.
    let mut held: Vec<Option<u64>> = stored_records.iter().map(|record| record.map(value_len_of_record)).collect();
    let mut head = stored;
    for &(entry, _) in entries {
        for op in &entry.ops {
            let key = op.key();
            let position = touched.binary_search(&key).expect("every key of the batch was touched");
            if let Some(old_len) = held[position] {
                head.key_count -= 1;
                head.logical_bytes -= key.len() as u64 + old_len;
            }
            held[position] = op.value().map(|value| value.len() as u64);
            if let Some(new_len) = held[position] {
                head.key_count += 1;
                head.logical_bytes += key.len() as u64 + new_len;
            }
        }
        head.applied_index = entry.index;
        head.chain_hash = entry.hash;
    }
    // Invariants of an apply, asserted where they hold so a broken one stops the run at the
    // point of damage (under the simulator: with its seed): the head is the last entry's (or,
    // with none — a root group member's batch of identical rewrites — unmoved).
    match entries.last() {
        Some((last, _)) => assert_eq!(
            (head.applied_index, head.chain_hash),
            (last.index, last.hash),
            "after an apply the head must be the last entry applied"
        ),
        None => assert_eq!(head, stored, "an apply without entries moves nothing"),
    }
    assert!(
        !gap_check || head.applied_index == stored.applied_index + entries.len() as u64,
        "a checked apply advances the index by exactly the entries applied"
    );
    head
}

/// The checks `apply` makes on each entry, against the head as it stands before that entry
/// (all but the entry's own hash, which `apply` checks while encoding it for storage).
fn check_next(head: &Head, entry: &LogEntry) -> Result<(), ApplyRefusal> {
    let expected = head.applied_index + 1;
    if entry.index != expected {
        return Err(ApplyRefusal::IndexOutOfOrder { expected, found: entry.index });
    }
    if entry.db_id != head.db_id {
        return Err(ApplyRefusal::WrongDatabase { index: entry.index, expected: head.db_id, found: entry.db_id });
    }
    if entry.prev_hash != head.chain_hash {
        return Err(ApplyRefusal::ChainMismatch {
            index: entry.index,
            expected: head.chain_hash,
            found: entry.prev_hash,
        });
    }
    let bad = |source| ApplyRefusal::BadEntry { index: entry.index, source };
    crate::limits::check("OPS_PER_ENTRY_MAX", crate::limits::OPS_PER_ENTRY_MAX, entry.ops.len())
        .map_err(|e| bad(e.into()))?;
    for op in &entry.ops {
        op.validate().map_err(bad)?;
    }
    Ok(()) // the entry's own hash is checked on the stored bytes: by `compress_verified`, or when a `VerifiedEntry` was decoded from them
}
