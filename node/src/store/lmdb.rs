//! The LMDB engine, through heed: the engine Quicksilver runs on.
//!
//! Three named LMDB databases in one environment; one write transaction per commit, synced on
//! commit (LMDB's default), so a commit is atomic and durable and a crash needs no recovery.
//!
//! `disk_bytes_written` counts the bytes the committing thread passed to `write`/`pwrite`
//! during each commit, read from `/proc/thread-self/io` (`wchar`). LMDB writes dirty pages and
//! the meta page from the committing thread, so this is exactly LMDB's write volume (and 0 on
//! systems without `/proc`).
//!
//! LMDB has no cache of its own: it reads through its memory map, so its cache is the OS page
//! cache and a miss is a major page fault. `resources` measures that from the process, safely
//! (no `mincore`): the process's major faults, the resident bytes of the `data.mdb` mapping
//! (`/proc/self/smaps`) and the bytes the process read from the disk (`/proc/self/io`). These
//! are process-wide figures; under the simulator the process is not the node, so there are none.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use heed::types::Bytes;
use heed::{CommitOrAbort, CompactionOption, Database, Env, EnvOpenOptions, WithoutTls};

use super::engine::{Engine, EngineError, EngineKind, EngineResources, Table, Visit, Write, dir_bytes};

type Db = Database<'static, Bytes, Bytes>;

pub(crate) struct LmdbEngine {
    env: Env<WithoutTls>,
    tables: [Db; 3],
    bytes_written: u64,
    /// The data file as the kernel names its mapping in `/proc/self/smaps` (symlinks resolved).
    data_file: PathBuf,
}

fn failed(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> EngineError {
    EngineError::failed(EngineKind::Lmdb, e)
}

fn lmdb_error(e: heed::Error) -> EngineError {
    match e {
        heed::Error::Mdb(heed::MdbError::Corrupted | heed::MdbError::PageNotFound) => {
            EngineError::Corruption { engine: EngineKind::Lmdb, detail: e.to_string() }
        }
        other => failed(other),
    }
}

impl LmdbEngine {
    pub(crate) fn open(path: &Path, map_bytes: usize) -> Result<LmdbEngine, EngineError> {
        std::fs::create_dir_all(path).map_err(|e| failed(format!("creating {}: {e}", path.display())))?;
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options.map_size(map_bytes).max_dbs(Table::ALL.len() as u32);
        // SAFETY: heed requires that the environment not be opened twice in one process (it
        // checks and refuses) and that the file not be truncated or replaced underneath it while
        // open; a store directory belongs to exactly one Store.
        #[allow(unsafe_code)]
        let env = unsafe { options.open(path) }
            .map_err(|e| failed(format!("opening LMDB environment {}: {e}", path.display())))?;
        let txn = env.write_txn().map_err(lmdb_error)?;
        let tables = env
            .create_databases_and_commit(txn, |opener, txn| -> Result<_, heed::Error> {
                let mut open = |table: Table| opener.create_database::<Bytes, Bytes>(txn, Some(table.name()));
                Ok(CommitOrAbort::<_, ()>::Commit([open(Table::Meta)?, open(Table::Kv)?, open(Table::Log)?]))
            })
            .map_err(lmdb_error)?
            .unwrap_commit();
        let data_file = path.join("data.mdb");
        let data_file = std::fs::canonicalize(&data_file).unwrap_or(data_file);
        Ok(LmdbEngine { env, tables, bytes_written: 0, data_file })
    }

    fn db(&self, table: Table) -> Db {
        self.tables[table as usize]
    }
}

/// The OS page cache as this process sees it (see the module doc); `None` where unmeasurable.
#[cfg(all(target_os = "linux", not(madsim)))]
fn page_cache_figures(data_file: &Path) -> EngineResources {
    let Ok(me) = procfs::process::Process::myself() else { return EngineResources::default() };
    let mapped_resident_bytes = me.smaps().ok().map(|maps| {
        maps.into_iter()
            .filter(|map| matches!(&map.pathname, procfs::process::MMapPath::Path(p) if p == data_file))
            .filter_map(|map| map.extension.map.get("Rss").copied())
            .sum()
    });
    EngineResources {
        major_faults: me.stat().ok().map(|stat| stat.majflt),
        mapped_resident_bytes,
        disk_read_bytes: me.io().ok().map(|io| io.read_bytes),
        ..EngineResources::default()
    }
}

#[cfg(not(all(target_os = "linux", not(madsim))))]
fn page_cache_figures(_data_file: &Path) -> EngineResources {
    EngineResources::default()
}

/// Bytes this thread has passed to write-family syscalls, if the kernel reports it.
fn thread_bytes_written() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    io.lines().find_map(|line| line.strip_prefix("wchar:")).and_then(|v| v.trim().parse().ok())
}

impl Engine for LmdbEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Lmdb
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        let txn = self.env.read_txn().map_err(lmdb_error)?;
        Ok(self.db(table).get(&txn, key).map_err(lmdb_error)?.map(<[u8]>::to_vec))
    }

    fn scan(&self, table: Table, start: &[u8], visit: Visit<'_>) -> Result<(), EngineError> {
        let txn = self.env.read_txn().map_err(lmdb_error)?;
        // LMDB refuses a zero-length seek key (MDB_BAD_VALSIZE); an empty start means "all".
        let lower = if start.is_empty() { Bound::Unbounded } else { Bound::Included(start) };
        let range = (lower, Bound::Unbounded);
        for item in self.db(table).range(&txn, &range).map_err(lmdb_error)? {
            let (key, value) = item.map_err(lmdb_error)?;
            if !visit(key, value) {
                break;
            }
        }
        Ok(())
    }

    fn commit(&mut self, writes: Vec<Write>) -> Result<(), EngineError> {
        let before = thread_bytes_written();
        let mut txn = self.env.write_txn().map_err(lmdb_error)?;
        for write in &writes {
            match write {
                Write::Put { table, key, value } => self.db(*table).put(&mut txn, key, value),
                Write::Delete { table, key } => self.db(*table).delete(&mut txn, key).map(drop),
                Write::DeleteRange { table, start, end } => {
                    let range = (Bound::Included(start.as_slice()), Bound::Excluded(end.as_slice()));
                    self.db(*table).delete_range(&mut txn, &range).map(drop)
                }
            }
            .map_err(lmdb_error)?;
        }
        txn.commit().map_err(lmdb_error)?;
        if let (Some(before), Some(after)) = (before, thread_bytes_written()) {
            self.bytes_written += after.saturating_sub(before);
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), EngineError> {
        Ok(())
    }

    fn disk_bytes(&self) -> Result<u64, EngineError> {
        dir_bytes(self.env.path()).map_err(failed)
    }

    fn disk_bytes_written(&self) -> u64 {
        self.bytes_written
    }

    fn export_native(&self, dir: &Path) -> Result<(), EngineError> {
        std::fs::create_dir(dir).map_err(|e| failed(format!("creating {}: {e}", dir.display())))?;
        // A compacting copy from one read transaction: consistent, and without free pages.
        let file = self.env.copy_to_path(dir.join("data.mdb"), CompactionOption::Enabled).map_err(lmdb_error)?;
        file.sync_all().map_err(failed)
    }

    fn resources(&self) -> EngineResources {
        page_cache_figures(&self.data_file)
    }
}
