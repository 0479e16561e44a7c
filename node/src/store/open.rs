//! Opening a store: read-write on any engine (creating it when new, refusing another database,
//! wrapping the simulator's I/O faults), and read-only on LMDB and RocksDB for `qs-node
//! inspect`, retried while a RocksDB view comes out inconsistent.

use super::*;
use std::path::Path;

/// How many times [`Store::open_read_only`] opens a RocksDB store whose view came out
/// inconsistent (see there) before it gives up and returns the last view.
const READ_ONLY_OPEN_ATTEMPTS: u32 = 5;

/// What opening a RocksDB store says in a build without the engine (qs-node's `rocksdb`
/// feature, on by default).
#[cfg(not(feature = "rocksdb"))]
fn without_rocksdb() -> EngineError {
    EngineError::failed(
        EngineKind::Rocksdb,
        "this build has no RocksDB (built without the `rocksdb` feature); `./qsim` builds it in when a run needs it",
    )
}

impl Store {
    /// Opens the store at `location`, creating it (empty, for `options.db_id`) if it is new.
    /// An existing store that holds another database is refused.
    pub fn open(location: &StoreLocation, options: &OpenOptions) -> Result<Store, StoreError> {
        faults::check_io(options.io_faults.as_ref(), faults::IoOp::Open)
            .map_err(|e| EngineError::failed(location.kind(), format!("opening {}: {e}", location.describe())))?;
        // PLANTED BUG (legacy `store_directory_unsynced`) without `sync_directories`: the
        // engine makes the store's folder, and neither it nor its files' names are synced.
        let synced_folder = match location {
            StoreLocation::Lmdb(path) | StoreLocation::Rocksdb(path) => Some(path.as_path()),
            StoreLocation::Memory(_) => None,
        }
        .filter(|_| options.sync_directories);
        let synced = |path: &Path, e: std::io::Error| {
            EngineError::failed(location.kind(), format!("syncing the directory {}: {e}", path.display()))
        };
        if let Some(path) = synced_folder {
            snapshot::create_dir_all_synced(path).map_err(|e| synced(path, e))?;
        }
        let mut engine: Box<dyn Engine> = match location {
            StoreLocation::Lmdb(path) => Box::new(lmdb::LmdbEngine::open(path, &options.into())?),
            #[cfg(feature = "rocksdb")]
            StoreLocation::Rocksdb(path) => Box::new(rocks::RocksEngine::open(path, &options.into())?),
            #[cfg(not(feature = "rocksdb"))]
            StoreLocation::Rocksdb(_) => return Err(without_rocksdb().into()),
            StoreLocation::Memory(disk) => Box::new(mem::MemEngine::open(disk.clone(), options.sync_commits)),
        };
        // The files the engine made (LMDB's `data.mdb` and `lock.mdb`, RocksDB's first
        // MANIFEST and CURRENT) are named durably before anything is acknowledged.
        if let Some(path) = synced_folder {
            snapshot::sync_dir_io(path).map_err(|e| synced(path, e))?;
        }
        if let Some(io_faults) = &options.io_faults {
            engine = Box::new(faults::FaultyEngine::new(engine, io_faults.clone()));
        }
        let mut store = Store::with_engine(engine, location.describe(), options.db_id)?;
        store.opened_from = Some((location.clone(), options.clone()));
        Ok(store)
    }

    /// Opens the existing store at `location` read-only, beside a node that may be writing it,
    /// for `qs-node inspect`. Nothing is ever created or written: the engines open read-only
    /// (see their module docs), and every read of the returned store comes from one fixed view
    /// (one LMDB read transaction; the state a read-only RocksDB instance recovered at open).
    /// `apply`, `collect_garbage` and `flush` on it fail.
    ///
    /// Refused, as [`StoreError::NotAStore`] naming the location and what is there: a memory
    /// store (nothing on disk), a missing path, a directory holding no store of `location`'s
    /// engine, a store without its head; as [`StoreError::WrongDatabase`]: another database
    /// than `db_id`, when one is given.
    ///
    /// RocksDB recovers its read-only view by reading the MANIFEST and then the WAL files it
    /// finds; a flush by the writer in between can leave a view that lacks the commits of the
    /// WAL it deleted. Such a view has a gap in its retained log (every commit writes its log
    /// entries), so a RocksDB view whose retained log is not contiguous from the first retained
    /// index to the applied index is opened again, up to `READ_ONLY_OPEN_ATTEMPTS` times.
    pub fn open_read_only(location: &StoreLocation, db_id: Option<DatabaseId>) -> Result<Store, StoreError> {
        const LMDB_MAP_BYTES: usize = 16 << 30; // as `OpenOptions::new`: virtual address space only
        let described = location.describe();
        let not_a_store = |found: String| StoreError::NotAStore { location: described.clone(), found };
        let path = match location {
            StoreLocation::Memory(_) => {
                return Err(not_a_store(
                    "a memory store, which lives inside its node's process: there is nothing on disk to open".into(),
                ));
            }
            StoreLocation::Lmdb(path) | StoreLocation::Rocksdb(path) => path,
        };
        if detect_engine(path) != Some(location.kind()) {
            return Err(not_a_store(describe_path(path)));
        }
        let mut attempt = 1;
        loop {
            let engine: Result<Box<dyn Engine>, EngineError> = match location {
                StoreLocation::Lmdb(path) => {
                    lmdb::LmdbEngine::open_read_only(path, LMDB_MAP_BYTES).map(|e| Box::new(e) as Box<dyn Engine>)
                }
                #[cfg(feature = "rocksdb")]
                StoreLocation::Rocksdb(path) => {
                    rocks::RocksEngine::open_read_only(path).map(|e| Box::new(e) as Box<dyn Engine>)
                }
                #[cfg(not(feature = "rocksdb"))]
                StoreLocation::Rocksdb(_) => Err(without_rocksdb()),
                StoreLocation::Memory(_) => unreachable!("refused above"),
            };
            let engine = match engine {
                Ok(engine) => engine,
                Err(EngineError::NotAStore { found, .. }) => return Err(not_a_store(found)),
                // A file the writer deleted while RocksDB was recovering: try again.
                Err(EngineError::Failed { .. })
                    if location.kind() == EngineKind::Rocksdb && attempt < READ_ONLY_OPEN_ATTEMPTS =>
                {
                    attempt += 1;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let Some(head) = Head::load(engine.as_ref(), &described)? else {
                return Err(not_a_store(format!("{}, holding no store head (never initialised)", describe_path(path))));
            };
            if let Some(expected) = db_id
                && head.db_id != expected
            {
                return Err(StoreError::WrongDatabase { location: described, expected, found: head.db_id });
            }
            let store = Store {
                engine,
                location: described.clone(),
                head,
                logical_bytes_written: 0,
                checksum_failures: AtomicU64::new(0),
                checked_recently: Default::default(),
                opened_from: None,
                unsettled: None,
            };
            if location.kind() == EngineKind::Rocksdb
                && attempt < READ_ONLY_OPEN_ATTEMPTS
                && store.retained_log_gap()?.is_some()
            {
                attempt += 1;
                continue;
            }
            return Ok(store);
        }
    }
}
