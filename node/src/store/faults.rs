//! The simulator's seam for a failing disk: I/O errors (EIO, ENOSPC) on the operations a node
//! makes durable — an engine commit, opening a store, a rename, a file it writes itself.
//!
//! A real node has no [`IoFaults`]: its disk gives the errors. Under the simulator the node's
//! disk model answers [`IoFaults::io_error`] before each such operation, and the store's engine
//! is wrapped in a `FaultyEngine` that fails it the way the engines fail:
//!
//! - **ENOSPC** on a commit: nothing was written. The outcome is known.
//! - **EIO** on a commit: the write may have reached the disk before the error (a failed fsync
//!   says nothing of what the device kept; PostgreSQL's "fsyncgate"), so the disk model decides
//!   whether it landed: a landed commit is durable and visible, and still reported failed. After
//!   an EIO the engine refuses every later commit until it is reopened, as LMDB does after a
//!   failed meta-page write (`MDB_PANIC`) and RocksDB does with a background error. A node must
//!   therefore treat a failed commit's outcome as unknown and reopen its store before it writes
//!   again ([`Store::apply`](super::Store::apply) does).
//! - **open**: the store cannot be opened or created while the fault lasts.
//! - **read** (EIO only: a full disk reads fine): every read of the store fails while the fault
//!   lasts — a `get`, a scan of the log, the lookups a write makes first. A node must answer
//!   such a read as an error, never as "absent": a key it cannot read is not a key it does not
//!   hold (the root once dropped a delete of an unreadable key as an identical rewrite).
//!
//! What is not modelled: torn writes inside an engine's files (a commit here is all or
//! nothing, as the engine contract says), and reads returning wrong bytes (that is `bit_rot`'s;
//! a mapped page that cannot be read is `sigbus`'s).

use std::path::Path;
use std::sync::Arc;

use super::engine::{Complete, Engine, EngineError, EngineKind, EngineResources, Found, Table, Visit, Write};

/// An operation a failing disk may refuse.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum IoOp {
    /// Opening (or creating) a store.
    Open,
    /// An engine commit: the write and its fsync.
    Commit,
    /// A rename of a store directory or a staged file (installing a snapshot, setting damage aside).
    Rename,
    /// A file the node writes itself: a snapshot chunk or export, the damage marker.
    Write,
    /// A read of the store: a lookup or a scan. Fails with EIO only.
    Read,
}

impl IoOp {
    pub const ALL: &'static [IoOp] = <IoOp as strum::VariantArray>::VARIANTS;

    /// Whether `error` can fail this operation: a full disk (ENOSPC) refuses what would write,
    /// never a read.
    pub fn fails_with(self, error: DiskError) -> bool {
        !(self == IoOp::Read && error == DiskError::Enospc)
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The error a failing disk gives.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "snake_case")]
pub enum DiskError {
    /// An I/O error: the device failed the operation; a write's outcome is unknown.
    Eio,
    /// The device is full: nothing was written.
    Enospc,
}

impl DiskError {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The error as the OS reports it (`EIO`, `ENOSPC`).
    pub fn to_io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(match self {
            DiskError::Eio => libc::EIO,
            DiskError::Enospc => libc::ENOSPC,
        })
    }
}

/// What the disk did to one operation it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoFailure {
    pub error: DiskError,
    /// A commit failed with EIO whose write nevertheless reached the disk.
    pub landed: bool,
}

/// Whether the disk fails an operation now. The simulator's disk model implements it; a real
/// node has none.
pub trait IoFaults: Send + Sync + std::fmt::Debug {
    /// The failure the disk gives `op` now, if any. Called once per operation, before it runs.
    fn io_error(&self, _op: IoOp) -> Option<IoFailure> {
        None
    }

    /// Whether this disk's power may go out in the run. The simulator then drops whatever the
    /// engine's files hold unsynced at that instant, so an engine must leave no background
    /// writes running between two of its calls: RocksDB settles a flush as soon as it starts it
    /// rather than at its next call, and what the disk holds at a power loss follows from the
    /// commits alone (the run stays deterministic). Nothing else changes.
    fn power_can_fail(&self) -> bool {
        false
    }
}

/// Fails with the disk's error if `faults` fail `op` now: the node's own renames and writes
/// call it before they run, so they fail as the syscall would.
pub(crate) fn check_io(faults: Option<&Arc<dyn IoFaults>>, op: IoOp) -> std::io::Result<()> {
    match faults.and_then(|faults| faults.io_error(op)) {
        Some(failure) => Err(failure.error.to_io()),
        None => Ok(()),
    }
}

/// An engine whose commits and reads a failing disk can refuse (see the module doc).
pub(crate) struct FaultyEngine {
    inner: Box<dyn Engine>,
    faults: Arc<dyn IoFaults>,
    /// An EIO was reported: every later commit fails until the store is reopened.
    fenced: bool,
}

impl FaultyEngine {
    pub(crate) fn new(inner: Box<dyn Engine>, faults: Arc<dyn IoFaults>) -> FaultyEngine {
        FaultyEngine { inner, faults, fenced: false }
    }

    fn failed(&self, why: impl Into<String>) -> EngineError {
        EngineError::failed(self.inner.kind(), why.into())
    }

    /// Fails a read the way the syscall would if the disk fails reads now.
    fn readable(&self, what: &str) -> Result<(), EngineError> {
        match self.faults.io_error(IoOp::Read) {
            Some(failure) => Err(self.failed(format!("{what}: {}", failure.error.to_io()))),
            None => Ok(()),
        }
    }

    /// Runs one durable change through the disk's faults: `change` runs unless the disk refuses
    /// the write outright.
    fn durable<R>(
        &mut self,
        what: &str,
        change: impl FnOnce(&mut dyn Engine) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        if self.fenced {
            return Err(self.failed(format!(
                "{what} refused: an earlier commit failed with an I/O error; the store must be reopened"
            )));
        }
        match self.faults.io_error(IoOp::Commit) {
            None => change(self.inner.as_mut()),
            Some(IoFailure { error: DiskError::Enospc, .. }) => {
                Err(self.failed(format!("{what}: {}", DiskError::Enospc.to_io())))
            }
            Some(IoFailure { error: DiskError::Eio, landed }) => {
                self.fenced = true;
                if landed {
                    change(self.inner.as_mut())?;
                }
                Err(self.failed(format!("{what}: fsync: {}", DiskError::Eio.to_io())))
            }
        }
    }
}

impl Engine for FaultyEngine {
    fn kind(&self) -> EngineKind {
        self.inner.kind()
    }
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.readable("read")?;
        self.inner.get(table, key)
    }
    fn value_lens(&self, table: Table, keys: &[&[u8]]) -> Result<Vec<Option<usize>>, EngineError> {
        self.readable("read")?;
        self.inner.value_lens(table, keys)
    }
    fn get_each(&self, table: Table, keys: &[&[u8]], found: Found<'_>) -> Result<(), EngineError> {
        self.readable("read")?;
        self.inner.get_each(table, keys, found)
    }
    fn scan(&self, table: Table, start: &[u8], visit: Visit<'_>) -> Result<(), EngineError> {
        self.readable("scan")?;
        self.inner.scan(table, start, visit)
    }
    fn commit(&mut self, writes: Vec<Write>) -> Result<(), EngineError> {
        self.durable("commit", |engine| engine.commit(writes))
    }
    fn commit_replacing(&mut self, writes: Vec<Write>, complete: Complete<'_>) -> Result<(), EngineError> {
        self.durable("commit", |engine| engine.commit_replacing(writes, complete))
    }
    fn sync(&mut self) -> Result<(), EngineError> {
        self.durable("sync", |engine| engine.sync())
    }
    fn flush(&mut self) -> Result<(), EngineError> {
        self.durable("flush", |engine| engine.flush())
    }
    fn disk_bytes(&self) -> Result<u64, EngineError> {
        self.inner.disk_bytes()
    }
    fn disk_bytes_written(&self) -> u64 {
        self.inner.disk_bytes_written()
    }
    fn export_native(&self, dir: &Path) -> Result<(), EngineError> {
        check_io(Some(&self.faults), IoOp::Write)
            .map_err(|e| self.failed(format!("exporting into {}: {e}", dir.display())))?;
        self.inner.export_native(dir)
    }
    fn resources(&self) -> EngineResources {
        self.inner.resources()
    }
}

/// The engine of a store closed to be reopened after a failed commit, while the reopen has not
/// succeeded: every operation fails, naming why.
pub(crate) struct ClosedEngine {
    kind: EngineKind,
    why: String,
}

impl ClosedEngine {
    pub(crate) fn new(kind: EngineKind, why: String) -> ClosedEngine {
        ClosedEngine { kind, why }
    }

    fn closed(&self) -> EngineError {
        EngineError::failed(
            self.kind,
            format!("the store is closed to be reopened after a failed commit ({})", self.why),
        )
    }
}

impl Engine for ClosedEngine {
    fn kind(&self) -> EngineKind {
        self.kind
    }
    fn get(&self, _: Table, _: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Err(self.closed())
    }
    fn scan(&self, _: Table, _: &[u8], _: Visit<'_>) -> Result<(), EngineError> {
        Err(self.closed())
    }
    fn commit(&mut self, _: Vec<Write>) -> Result<(), EngineError> {
        Err(self.closed())
    }
    fn flush(&mut self) -> Result<(), EngineError> {
        Err(self.closed())
    }
    fn disk_bytes(&self) -> Result<u64, EngineError> {
        Err(self.closed())
    }
    fn disk_bytes_written(&self) -> u64 {
        0
    }
    fn export_native(&self, _: &Path) -> Result<(), EngineError> {
        Err(self.closed())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::entry::{DatabaseId, Op};
    use crate::store::{MemDisk, OpenOptions, Store, StoreError, StoreLocation};

    /// A disk that fails the next operations of one kind with a given failure.
    #[derive(Debug, Default)]
    struct Scripted(Mutex<Vec<(IoOp, IoFailure)>>);

    impl Scripted {
        fn fail_next(&self, op: IoOp, error: DiskError, landed: bool) {
            self.0.lock().unwrap().push((op, IoFailure { error, landed }));
        }
    }

    impl IoFaults for Scripted {
        fn io_error(&self, op: IoOp) -> Option<IoFailure> {
            let mut script = self.0.lock().unwrap();
            let position = script.iter().position(|(o, _)| *o == op)?;
            Some(script.remove(position).1)
        }
    }

    fn set(store: &Store, i: u64) -> crate::entry::LogEntry {
        let ops = vec![Op::Set { key: format!("cfg:{i}").into_bytes(), value: format!("v{i}").into_bytes() }];
        store.next_entry(i, ops).expect("entry")
    }

    fn stores(disk: &Arc<Scripted>) -> Vec<(tempfile::TempDir, StoreLocation, OpenOptions)> {
        let options = OpenOptions { io_faults: Some(disk.clone()), ..OpenOptions::new(DatabaseId(3)) };
        [crate::store::EngineKind::Memory, crate::store::EngineKind::Lmdb, crate::store::EngineKind::Rocksdb]
            .into_iter()
            .map(|kind| {
                let dir = tempfile::tempdir().expect("tempdir");
                let location = match kind {
                    crate::store::EngineKind::Memory => StoreLocation::Memory(MemDisk::default()),
                    kind => StoreLocation::new(kind, &dir.path().join("store")),
                };
                (dir, location, options.clone())
            })
            .collect()
    }

    #[test]
    fn a_commit_that_failed_but_landed_is_found_by_settle_and_nothing_changes_before() {
        let disk = Arc::new(Scripted::default());
        for (_dir, location, options) in stores(&disk) {
            let mut store = Store::open(&location, &options).expect("open");
            store.apply(&[set(&store, 1)]).expect("a healthy commit");
            disk.fail_next(IoOp::Commit, DiskError::Eio, true);
            let landed = set(&store, 2);
            assert!(store.apply(std::slice::from_ref(&landed)).is_err(), "{location:?}: the fsync failed");
            assert!(store.is_unsettled());
            // Sealed on the stale head, entry 2 again would fork the chain: refused.
            let forked = set(&store, 2);
            assert!(matches!(store.apply(&[forked]), Err(StoreError::Unsettled { .. })), "{location:?}");
            let found = store.settle().expect("settle");
            assert_eq!(found, vec![landed], "{location:?}: the landed entry is reported");
            assert_eq!(store.applied_index(), 2);
            assert_eq!(store.get(b"cfg:2").unwrap().as_deref(), Some(&b"v2"[..]));
            store.apply(&[set(&store, 3)]).expect("writes go on after the settle");
            assert!(store.settle().expect("settled").is_empty(), "a settled store has nothing to report");
        }
    }

    #[test]
    fn a_full_disk_writes_nothing_and_an_unopenable_one_keeps_the_store_unsettled_until_it_opens() {
        let disk = Arc::new(Scripted::default());
        for (_dir, location, options) in stores(&disk) {
            let mut store = Store::open(&location, &options).expect("open");
            disk.fail_next(IoOp::Commit, DiskError::Enospc, false);
            assert!(store.apply(&[set(&store, 1)]).is_err());
            disk.fail_next(IoOp::Open, DiskError::Eio, false);
            assert!(store.settle().is_err(), "{location:?}: the disk refuses the reopen");
            assert!(store.is_unsettled());
            assert!(store.get(b"cfg:1").is_err(), "{location:?}: a closed store reads nothing");
            assert!(store.settle().expect("the disk answers again").is_empty(), "nothing landed");
            assert_eq!(store.applied_index(), 0);
            store.apply(&[set(&store, 1)]).expect("a commit after the settle");
            assert_eq!(store.applied_index(), 1);
        }
    }

    #[test]
    fn a_disk_that_fails_reads_fails_every_lookup_and_scan_and_none_is_taken_for_absent() {
        let disk = Arc::new(Scripted::default());
        for (_dir, location, options) in stores(&disk) {
            let mut store = Store::open(&location, &options).expect("open");
            store.apply(&[set(&store, 1)]).expect("a healthy commit");
            disk.fail_next(IoOp::Read, DiskError::Eio, false);
            assert!(store.get(b"cfg:1").is_err(), "{location:?}: a failed read is an error, not a miss");
            disk.fail_next(IoOp::Read, DiskError::Eio, false);
            let limits = crate::store::LogReadLimits { entries_max: 10, bytes_max: 1 << 20 };
            assert!(store.read_log_after(0, limits).is_err(), "{location:?}: the log cannot be read");
            assert_eq!(store.get(b"cfg:1").unwrap().as_deref(), Some(&b"v1"[..]), "{location:?}: reads again");
        }
    }

    #[test]
    fn after_an_eio_the_engine_refuses_commits_until_reopened() {
        let disk = Arc::new(Scripted::default());
        let engine = crate::store::mem::MemEngine::open(MemDisk::default(), true);
        let mut engine = FaultyEngine::new(Box::new(engine), disk.clone());
        disk.fail_next(IoOp::Commit, DiskError::Eio, false);
        assert!(engine.commit(Vec::new()).is_err());
        let refused = engine.commit(Vec::new()).expect_err("fenced");
        assert!(refused.to_string().contains("must be reopened"), "{refused}");
    }
}
