//! Where a store lives ([`StoreLocation`]), how it opens ([`OpenOptions`]), and what a path
//! holds, for errors that name it.

use std::path::{Path, PathBuf};

use super::{EngineKind, MemDisk};
use crate::entry::DatabaseId;

/// Where a store lives and on which engine.
#[derive(Clone, Debug)]
pub enum StoreLocation {
    /// An LMDB environment directory.
    Lmdb(PathBuf),
    /// A RocksDB database directory.
    Rocksdb(PathBuf),
    /// A simulated disk in memory; it outlives the `Store`, as a real disk outlives a process.
    Memory(MemDisk),
}

impl StoreLocation {
    pub fn kind(&self) -> EngineKind {
        match self {
            StoreLocation::Lmdb(_) => EngineKind::Lmdb,
            StoreLocation::Rocksdb(_) => EngineKind::Rocksdb,
            StoreLocation::Memory(_) => EngineKind::Memory,
        }
    }

    /// A location of `kind` at `path` (ignored for memory, which gets a fresh disk).
    pub fn new(kind: EngineKind, path: &Path) -> StoreLocation {
        match kind {
            EngineKind::Lmdb => StoreLocation::Lmdb(path.to_path_buf()),
            EngineKind::Rocksdb => StoreLocation::Rocksdb(path.to_path_buf()),
            EngineKind::Memory => StoreLocation::Memory(MemDisk::default()),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            StoreLocation::Lmdb(p) | StoreLocation::Rocksdb(p) => format!("{} store at {}", self.kind(), p.display()),
            StoreLocation::Memory(_) => "memory store".to_string(),
        }
    }
}

/// Options for [`Store::open`](super::Store::open).
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// The database this store holds. A new store takes it; an existing store must match it.
    pub db_id: DatabaseId,
    /// LMDB map size: the most the environment can grow to. Virtual address space only.
    pub lmdb_map_bytes: usize,
    /// RocksDB memtable size per column family; `None` keeps RocksDB's default (64 MiB).
    pub rocksdb_memtable_bytes: Option<usize>,
    /// RocksDB block cache capacity; `None`: [`ROCKSDB_CACHE_BYTES_DEFAULT`](super::ROCKSDB_CACHE_BYTES_DEFAULT).
    pub rocksdb_cache_bytes: Option<usize>,
    /// RocksDB SST data block size; `None`: [`ROCKSDB_BLOCK_BYTES_DEFAULT`](super::ROCKSDB_BLOCK_BYTES_DEFAULT).
    pub rocksdb_block_bytes: Option<usize>,
    /// RocksDB reads SST files with `O_DIRECT` (`use_direct_reads`): a block-cache miss is a
    /// read from the device, not from the OS page cache.
    pub rocksdb_direct_reads: bool,
    /// LMDB lets the OS read ahead around a faulted page; `false` opens the environment with
    /// `MDB_NORDAHEAD`, so a fault reads just its page.
    pub lmdb_read_ahead: bool,
    /// LMDB writes its pages through a writable map (`MDB_WRITEMAP`) rather than `pwrite`;
    /// the engine then cannot count the bytes it wrote.
    pub lmdb_write_map: bool,
    /// Every commit is durable when it returns. Off only for the planted
    /// `legacy.acknowledge_before_sync` (LMDB's `MDB_NOSYNC`, RocksDB's unsynced WAL, the memory
    /// engine's undo list for the simulator's power loss): commits then become durable at the
    /// next [`Store::sync`](super::Store::sync).
    pub sync_commits: bool,
    /// A new store's directory, and the directories made for it, are synced as they are made,
    /// so their names are durable before the first commit is acknowledged. Off only for the
    /// planted `legacy.store_directory_unsynced`.
    pub sync_directories: bool,
    /// The simulator's failing disk ([`IoFaults`](super::faults::IoFaults)): I/O errors on
    /// opens and commits. None on a real node.
    pub io_faults: Option<std::sync::Arc<dyn super::faults::IoFaults>>,
}

impl OpenOptions {
    pub fn new(db_id: DatabaseId) -> OpenOptions {
        OpenOptions {
            db_id,
            lmdb_map_bytes: 16 << 30,
            rocksdb_memtable_bytes: None,
            rocksdb_cache_bytes: None,
            rocksdb_block_bytes: None,
            rocksdb_direct_reads: false,
            lmdb_read_ahead: true,
            lmdb_write_map: false,
            sync_commits: true,
            sync_directories: true,
            io_faults: None,
        }
    }
}

/// What is at `path`, in words, for errors naming what a read-only open found there.
pub(crate) fn describe_path(path: &Path) -> String {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return "nothing (no such file or directory)".into(),
        Err(e) => return format!("something unreadable ({e})"),
    };
    if !meta.is_dir() {
        return "a file, not a store directory".into();
    }
    let mut names: Vec<String> = match std::fs::read_dir(path) {
        Ok(entries) => entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(e) => return format!("a directory that cannot be listed ({e})"),
    };
    names.sort();
    let has = |name: &str| names.iter().any(|n| n == name);
    if has("data.mdb") {
        "an LMDB environment (data.mdb)".into()
    } else if has("CURRENT") {
        "a RocksDB database (CURRENT)".into()
    } else if names.is_empty() {
        "an empty directory".into()
    } else {
        let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
        let more = if names.len() > shown.len() { ", ..." } else { "" };
        format!("a directory of {} entries, none of them a store's ({}{more})", names.len(), shown.join(", "))
    }
}

/// The engine whose files are in `path`: `data.mdb` is LMDB, `CURRENT` is RocksDB.
pub(crate) fn detect_engine(path: &Path) -> Option<EngineKind> {
    if path.join("data.mdb").is_file() {
        Some(EngineKind::Lmdb)
    } else if path.join("CURRENT").is_file() {
        Some(EngineKind::Rocksdb)
    } else {
        None
    }
}
