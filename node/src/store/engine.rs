//! The seam between [`Store`](super::Store) and a storage engine.
//!
//! An engine is three ordered byte tables and one atomic, durable multi-table commit. Everything
//! the store means by "apply", "retention", "checksum" or "snapshot" lives in the store, once,
//! so the three engines cannot drift apart in behaviour: they differ only in how bytes reach
//! disk.
//!
//! Engine contract:
//! - `commit` is all-or-nothing across tables, and durable when it returns Ok (fsync'd), so
//!   a crash at any moment leaves exactly the state after some prefix of successful commits;
//! - `scan` visits keys in ascending bytewise order, the same order on every engine;
//! - `export_native` writes a consistent copy of the whole store into a new directory, using the
//!   engine's own mechanism (LMDB environment copy, RocksDB checkpoint, a dump for memory);
//! - `resources` reports what the engine holds in memory and how its cache is doing, as far as
//!   it can measure ([`EngineResources`]); it never fails and never changes anything.
//!
//! Read-only engines (`open_read_only` on LMDB and RocksDB, for `qs-node inspect`) open an
//! existing store beside the process that writes it, never create or write a store file, and
//! answer every `get` and `scan` from one fixed view: one LMDB read transaction, or the state a
//! read-only RocksDB instance recovered when it opened. Their `commit` and `flush` refuse.

use std::fmt;
use std::path::Path;

/// The three tables every engine keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum Table {
    /// Store-wide fields: database id, applied index, chain hash, first retained log index, ...
    Meta,
    /// Key → checksummed value record.
    Kv,
    /// Big-endian index → Snappy-compressed log entry.
    Log,
}

impl Table {
    pub(crate) const ALL: [Table; 3] = [Table::Meta, Table::Kv, Table::Log];

    pub(crate) fn name(self) -> &'static str {
        self.into()
    }
}

/// One change inside an atomic commit.
#[derive(Debug, Clone)]
pub(crate) enum Write {
    Put {
        table: Table,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: Table,
        key: Vec<u8>,
    },
    /// Deletes keys in `[start, end)`.
    DeleteRange {
        table: Table,
        start: Vec<u8>,
        end: Vec<u8>,
    },
}

impl Write {
    /// A put or delete in the `kv` table as its key and what it leaves there (None: deleted);
    /// None for every other write.
    pub(crate) fn kv_change(&self) -> Option<(&[u8], Option<&[u8]>)> {
        match self {
            Write::Put { table: Table::Kv, key, value } => Some((key, Some(value))),
            Write::Delete { table: Table::Kv, key } => Some((key, None)),
            _ => None,
        }
    }

    /// The key of a put or delete in the `kv` table; None for every other write.
    pub(crate) fn kv_key(&self) -> Option<&[u8]> {
        self.kv_change().map(|(key, _)| key)
    }
}

/// Which engine a store runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Lmdb,
    Rocksdb,
    Memory,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Lmdb => "lmdb",
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Memory => "memory",
        })
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lmdb" => Ok(EngineKind::Lmdb),
            "rocksdb" => Ok(EngineKind::Rocksdb),
            "memory" | "mem" => Ok(EngineKind::Memory),
            other => Err(format!("unknown engine {other:?}; expected one of: lmdb, rocksdb, memory")),
        }
    }
}

/// What an engine reports when it fails.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The engine detected damaged data (e.g. a RocksDB block checksum failed).
    #[error("{engine} reports corruption: {detail}")]
    Corruption { engine: EngineKind, detail: String },
    /// A read-only open found no store of this engine at the location (see
    /// [`Store::open_read_only`](super::Store::open_read_only)); `found` says what is there.
    #[error("{engine}: {found}")]
    NotAStore { engine: EngineKind, found: String },
    #[error("{engine}: {source}")]
    Failed {
        engine: EngineKind,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl EngineError {
    pub(crate) fn failed(engine: EngineKind, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        EngineError::Failed { engine, source: source.into() }
    }
}

/// What an engine holds in memory and how its cache is doing. Every figure is optional: an
/// engine reports what it can measure, and a figure it cannot read is `None`, never a made-up 0.
///
/// - RocksDB: its block cache (statistics tickers and properties), memtables and table readers.
/// - LMDB: its cache is the OS page cache, seen from the process: major page faults, resident
///   pages of the `data.mdb` mapping, bytes read from the disk. These read `/proc` and are `None`
///   off Linux and under the simulator (where the process is not the node).
/// - Memory: the bytes it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineResources {
    /// RocksDB: block reads the block cache answered, since the store was opened.
    pub block_cache_hits: Option<u64>,
    /// RocksDB: block reads that went to the disk (or the OS page cache), since open.
    pub block_cache_misses: Option<u64>,
    /// RocksDB: bytes in the block cache (data, index and filter blocks).
    pub block_cache_usage_bytes: Option<u64>,
    /// RocksDB: the block cache's capacity, as RocksDB reports it.
    pub block_cache_capacity_bytes: Option<u64>,
    /// RocksDB: memory of open table readers outside the block cache
    /// (`rocksdb.estimate-table-readers-mem`, summed over the column families).
    pub table_readers_bytes: Option<u64>,
    /// RocksDB: active and immutable memtables (`rocksdb.cur-size-all-mem-tables`, summed).
    pub memtables_bytes: Option<u64>,
    /// RocksDB: the engine's cache of recently written keys' value lengths (an estimate from
    /// its keys and entries; see `store/length_cache.rs`).
    pub length_cache_bytes: Option<u64>,
    /// LMDB: major page faults of the process (a page read from the disk on access).
    pub major_faults: Option<u64>,
    /// LMDB: resident bytes of the `data.mdb` mapping (pages the OS page cache holds for it).
    pub mapped_resident_bytes: Option<u64>,
    /// LMDB: bytes the process caused to be read from the disk (`/proc/self/io` `read_bytes`).
    pub disk_read_bytes: Option<u64>,
    /// Memory engine: key and value bytes held.
    pub held_bytes: Option<u64>,
}

/// A part of the process's resident memory that is accounted for: the engine's, from
/// [`EngineResources::accounted`], and the node's own [`Buffers`](MemoryComponent::Buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, strum::IntoStaticStr, strum::Display)]
#[strum(serialize_all = "snake_case")]
pub enum MemoryComponent {
    /// RocksDB's block cache.
    BlockCache,
    /// RocksDB's memtables.
    Memtables,
    /// RocksDB's table readers outside the cache.
    TableReaders,
    /// The RocksDB engine's cache of value lengths.
    LengthCache,
    /// Resident pages of LMDB's memory-mapped data file.
    LmdbMapped,
    /// The memory engine's data.
    MemoryStore,
    /// Not an engine's: the node's connection buffers (open connections per listener × what one
    /// holds) and the writes queued for the root's next commit. See
    /// `qs_node::state::NodeState::buffer_bytes`.
    Buffers,
}

impl MemoryComponent {
    /// The name in logs and in the `component` label of `/metrics`.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl EngineResources {
    /// The parts of resident memory this report accounts for, each with its bytes, in a fixed
    /// order; figures the engine could not measure are left out.
    pub fn accounted(&self) -> Vec<(MemoryComponent, u64)> {
        [
            (MemoryComponent::BlockCache, self.block_cache_usage_bytes),
            (MemoryComponent::Memtables, self.memtables_bytes),
            (MemoryComponent::TableReaders, self.table_readers_bytes),
            (MemoryComponent::LengthCache, self.length_cache_bytes),
            (MemoryComponent::LmdbMapped, self.mapped_resident_bytes),
            (MemoryComponent::MemoryStore, self.held_bytes),
        ]
        .into_iter()
        .filter_map(|(component, bytes)| Some((component, bytes?)))
        .collect()
    }
}

pub(crate) type Visit<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> bool;

/// What [`Engine::get_each`] hands each key: its position in the keys asked for, and its value
/// (None: absent). Returns false to stop.
pub(crate) type Found<'a> = &'a mut dyn FnMut(usize, Option<&[u8]>) -> bool;

/// What [`Engine::commit_replacing`] hands the lengths of the records its `kv` writes replace,
/// to get the rest of the commit.
pub(crate) type Complete<'a> = &'a mut dyn FnMut(&[Option<usize>]) -> Vec<Write>;

pub(crate) trait Engine: Send + Sync {
    fn kind(&self) -> EngineKind;
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError>;
    /// The lengths of the values under `keys` (sorted and distinct), read in one view without
    /// copying the values out: what an apply's bookkeeping needs of the values it replaces. One
    /// length per key, in order.
    fn value_lens(&self, table: Table, keys: &[&[u8]]) -> Result<Vec<Option<usize>>, EngineError> {
        let mut lens = Vec::with_capacity(keys.len());
        self.get_each(table, keys, &mut |_, value| {
            lens.push(value.map(<[u8]>::len));
            true
        })?;
        Ok(lens)
    }
    /// Looks up each of `keys` in order, in one view of the table (one read transaction where
    /// the engine has them), handing `found` each key's position in `keys` and its value, borrowed
    /// from the engine for the call where it can lend it; stops at the first `false`. What a
    /// multi-key read needs: one transaction and no copy per key.
    fn get_each(&self, table: Table, keys: &[&[u8]], found: Found<'_>) -> Result<(), EngineError> {
        for (position, key) in keys.iter().enumerate() {
            if !found(position, self.get(table, key)?.as_deref()) {
                break;
            }
        }
        Ok(())
    }
    /// Visits `(key, value)` pairs with key >= `start` in ascending order until `visit` returns
    /// false or the table ends.
    fn scan(&self, table: Table, start: &[u8], visit: Visit<'_>) -> Result<(), EngineError>;
    fn commit(&mut self, writes: Vec<Write>) -> Result<(), EngineError>;
    /// One atomic commit of `writes` and of the writes `complete` makes from what the `kv`
    /// writes among them replace: the length of the record each `kv` put or delete replaces
    /// (None: absent), in their order. The `kv` writes' keys must be sorted and distinct (an
    /// apply writes each key it touches once). What an apply needs: its head counts keys and
    /// bytes, so it cannot be written before the replaced records are known. By default the
    /// lengths are read first ([`value_lens`](Self::value_lens)); an engine that finds each old
    /// record while writing the new one (LMDB) reads nothing twice.
    fn commit_replacing(&mut self, mut writes: Vec<Write>, complete: Complete<'_>) -> Result<(), EngineError> {
        let keys: Vec<&[u8]> = writes.iter().filter_map(Write::kv_key).collect();
        assert!(keys.is_sorted_by(|a, b| a < b), "the kv writes of a commit are sorted and distinct");
        let lens = self.value_lens(Table::Kv, &keys)?;
        assert_eq!(lens.len(), keys.len(), "one stored length per key asked for");
        let completion = complete(&lens);
        writes.extend(completion);
        self.commit(writes)
    }
    /// Makes every commit durable that is not yet: a no-op on engines whose commits are synced
    /// when they return (all of them, unless a memory store was opened with `sync_commits` off).
    fn sync(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
    /// Pushes buffered data to its final on-disk form (a RocksDB memtable flush); no-op elsewhere.
    fn flush(&mut self) -> Result<(), EngineError>;
    /// Bytes the store occupies on its disk now.
    fn disk_bytes(&self) -> Result<u64, EngineError>;
    /// Bytes the engine has written to its disk since it was opened, by its own accounting.
    fn disk_bytes_written(&self) -> u64;
    /// Writes a consistent copy of the store into `dir`, which must not exist yet.
    fn export_native(&self, dir: &Path) -> Result<(), EngineError>;
    /// What the engine holds in memory and how its cache is doing (see [`EngineResources`]).
    fn resources(&self) -> EngineResources {
        EngineResources::default()
    }
}

/// Total size of the regular files under `dir` (not following symlinks). A file that vanishes
/// while we look (RocksDB deletes obsolete WAL and SST files in the background) counts as gone.
pub(crate) fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if meta.is_dir() {
            total += dir_bytes(&entry.path())?;
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}
