//! The LMDB engine, through heed: the engine Quicksilver runs on.
//!
//! Three named LMDB databases in one environment; one write transaction per commit, synced on
//! commit (LMDB's default), so a commit is atomic and durable and a crash needs no recovery.
//!
//! `disk_bytes_written` is LMDB's own count of what each commit wrote: every dirty page
//! (overflow pages in full) and the meta page's changed fields, read from
//! `mdb_thread_bytes_written` before and after the commit. That function is the one patch qsim
//! carries on heed's LMDB (`vendor/README.md`); the counter belongs to the committing thread,
//! and a commit runs on one thread from start to end, so the difference is that commit's alone.
//! It is the same figure with or without `MDB_WRITEMAP`, and equal to the bytes the thread
//! passes to `pwrite` without it (a test holds it to the kernel's `wchar`).
//!
//! `storage.write_map` opens the environment with `MDB_WRITEMAP`: a commit writes its pages
//! straight into the writable map instead of copying each through `pwrite` (the kernel's copy
//! was a quarter of an LMDB run in the simulator). LMDB's own trade-offs come with it: the data
//! file is extended to the map size at open (a sparse file), and a stray write through the map
//! would land in the database. `disk_bytes` counts `data.mdb` up to LMDB's last used page
//! (never past the file's end), which is the whole file without the flag.
//!
//! LMDB has no cache of its own: it reads through its memory map, so its cache is the OS page
//! cache and a miss is a major page fault. `resources` measures that from the process, safely
//! (no `mincore`): the process's major faults, the resident bytes of the `data.mdb` mapping
//! (`/proc/self/smaps`) and the bytes the process read from the disk (`/proc/self/io`). These
//! are process-wide figures; under the simulator the process is not the node, so there are none.
//!
//! [`LmdbEngine::open_read_only`] (for `qs-node inspect`) opens an existing environment with
//! `MDB_RDONLY` beside the node that writes it: `data.mdb` is mapped and opened read-only, the
//! tables are opened, never created, and one read transaction taken at open answers every read,
//! so the whole view is one commit. LMDB readers take no lock the writer waits for; the reader
//! registers its transaction in the shared `lock.mdb` reader table, as every LMDB reader does,
//! which is what keeps the writer from reusing the pages it reads.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use heed::types::Bytes;
use heed::{CommitOrAbort, CompactionOption, Database, Env, EnvFlags, EnvOpenOptions, RoTxn, RwTxn, WithoutTls};

use super::OpenOptions;
use super::engine::{
    Complete, Engine, EngineError, EngineKind, EngineResources, Found, Table, Visit, Write, dir_bytes,
};

type Db = Database<'static, Bytes, Bytes>;

/// Read transactions a writable engine keeps for reuse: one per thread that reads at once (a
/// node's runtime workers), well within LMDB's default 126 reader slots.
const READERS_REUSED: usize = 4;

/// How a writable environment is opened (from the store's `OpenOptions`).
pub(crate) struct LmdbSettings {
    /// The map size: the most the environment can grow to.
    pub map_bytes: usize,
    /// `false` sets `MDB_NORDAHEAD`.
    pub read_ahead: bool,
    /// `true` sets `MDB_WRITEMAP` (see the module doc).
    pub write_map: bool,
    /// `false` sets `MDB_NOSYNC`: only for the planted `legacy.acknowledge_before_sync`, whose
    /// commits become durable at [`Engine::sync`].
    pub sync_commits: bool,
}

impl From<&OpenOptions> for LmdbSettings {
    fn from(options: &OpenOptions) -> Self {
        LmdbSettings {
            map_bytes: options.lmdb_map_bytes,
            read_ahead: options.lmdb_read_ahead,
            write_map: options.lmdb_write_map,
            sync_commits: options.sync_commits,
        }
    }
}

pub(crate) struct LmdbEngine {
    env: Env<WithoutTls>,
    tables: [Db; 3],
    /// Bytes LMDB's commits on this engine wrote (see the module doc).
    bytes_written: u64,
    /// The data file as the kernel names its mapping in `/proc/self/smaps` (symlinks resolved).
    data_file: PathBuf,
    /// Read-only engines only: the one read transaction every read goes through.
    snapshot: Option<Mutex<RoTxn<'static, WithoutTls>>>,
    /// Writable engines: read transactions of earlier reads, reused by later ones until a commit
    /// drops them (so none holds an older snapshot than the last commit's, and the writer reuses
    /// pages as it would without them). Each fresh transaction costs an allocation and the
    /// reader-table lock in `lock.mdb`. Several, so threads reading at once each find one.
    readers: [Mutex<Option<RoTxn<'static, WithoutTls>>>; READERS_REUSED],
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
    /// Opens (or creates) the environment at `path` with `settings`.
    pub(crate) fn open(path: &Path, settings: &LmdbSettings) -> Result<LmdbEngine, EngineError> {
        std::fs::create_dir_all(path).map_err(|e| failed(format!("creating {}: {e}", path.display())))?;
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options.map_size(settings.map_bytes).max_dbs(Table::ALL.len() as u32);
        // SAFETY: heed requires that the environment not be opened twice in one process (it
        // checks and refuses) and that the file not be truncated or replaced underneath it while
        // open; a store directory belongs to exactly one Store. `flags` is unsafe only for the
        // flags that turn off syncing or locking; NO_READ_AHEAD is neither (it is an
        // `madvise(MADV_RANDOM)` on the map), nor is WRITE_MAP: commits still sync (`msync`), and
        // this engine writes the map only through LMDB's calls — it never holds a value read
        // from a page across a write (heed's lifetimes tie every value to its transaction).
        // NO_SYNC (the planted bug only) gives up durability at a power loss, not memory safety.
        #[allow(unsafe_code)]
        let env = unsafe {
            if !settings.read_ahead {
                options.flags(EnvFlags::NO_READ_AHEAD);
            }
            if settings.write_map {
                options.flags(EnvFlags::WRITE_MAP);
            }
            // PLANTED BUG support (legacy `acknowledge_before_sync`): a commit returns before its
            // pages are synced; the node's writeback task syncs every few seconds.
            if !settings.sync_commits {
                options.flags(EnvFlags::NO_SYNC);
            }
            options.open(path)
        }
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
        Ok(LmdbEngine { env, tables, bytes_written: 0, data_file, snapshot: None, readers: Default::default() })
    }

    /// Opens the existing environment at `path` read-only, with one read transaction for every
    /// read (see the module doc). Nothing is created: a directory without `data.mdb`, a file
    /// that is not LMDB, another LMDB lock format, or an environment without the store's three
    /// tables is [`EngineError::NotAStore`].
    pub(crate) fn open_read_only(path: &Path, map_bytes: usize) -> Result<LmdbEngine, EngineError> {
        let not_a_store = |found: String| EngineError::NotAStore { engine: EngineKind::Lmdb, found };
        if !path.join("data.mdb").is_file() {
            return Err(not_a_store(format!("no LMDB data file {}", path.join("data.mdb").display())));
        }
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options.map_size(map_bytes).max_dbs(Table::ALL.len() as u32);
        // SAFETY: `flags` is unsafe only for the flags that turn off syncing or locking;
        // READ_ONLY is neither. `open` is unsafe because the mapped file must not be truncated or
        // rewritten outside LMDB's rules while mapped. Here the only other user is the node,
        // writing through LMDB in the same build (this binary's heed and LMDB), so both sides
        // share the lock file's format and protocol: this reader registers its transaction in
        // the reader table and the writer never reuses a page a registered reader can reach.
        // LMDB never shrinks `data.mdb`, and a snapshot install swaps directories by rename and
        // unlinks the old one, which leaves an existing mapping intact. The environment is
        // mapped read-only (no MDB_WRITEMAP), so this process cannot write the data either.
        #[allow(unsafe_code)]
        let env = unsafe {
            options.flags(EnvFlags::READ_ONLY);
            options.open(path)
        }
        .map_err(|e| match e {
            heed::Error::Mdb(heed::MdbError::Invalid | heed::MdbError::VersionMismatch) => {
                not_a_store(format!("{} is not an LMDB environment this build reads: {e}", path.display()))
            }
            e => failed(format!("opening LMDB environment {} read-only: {e}", path.display())),
        })?;
        let txn = env.read_txn().map_err(lmdb_error)?;
        let tables = env
            .open_databases_and_commit(txn, |opener, txn| -> Result<_, heed::Error> {
                let open = |table: Table| opener.open_database::<Bytes, Bytes>(txn, Some(table.name()));
                Ok(CommitOrAbort::<_, ()>::Commit([open(Table::Meta)?, open(Table::Kv)?, open(Table::Log)?]))
            })
            .map_err(|e| match e {
                heed::Error::Mdb(heed::MdbError::Incompatible) => {
                    not_a_store(format!("an LMDB environment whose databases are not the store's: {e}"))
                }
                e => lmdb_error(e),
            })?
            .unwrap_commit();
        let [Some(meta), Some(kv), Some(log)] = tables else {
            let names: Vec<&str> =
                Table::ALL.iter().zip(&tables).filter(|(_, db)| db.is_none()).map(|(t, _)| t.name()).collect();
            return Err(not_a_store(format!("an LMDB environment without the store's tables {}", names.join(", "))));
        };
        let snapshot = env.clone().static_read_txn().map_err(lmdb_error)?;
        let data_file = path.join("data.mdb");
        Ok(LmdbEngine {
            env,
            tables: [meta, kv, log],
            bytes_written: 0,
            data_file,
            snapshot: Some(Mutex::new(snapshot)),
            readers: Default::default(),
        })
    }

    /// Runs `read` in the engine's read transaction: the fixed one of a read-only engine;
    /// otherwise one of those reused since the last commit, or a fresh one while other threads
    /// read in all of them.
    fn read<R>(&self, read: impl FnOnce(&RoTxn<'_, WithoutTls>) -> Result<R, EngineError>) -> Result<R, EngineError> {
        if let Some(txn) = &self.snapshot {
            return read(&txn.lock().unwrap_or_else(|p| p.into_inner()));
        }
        // The first reusable transaction no other thread is reading in; a fresh one if none is.
        let Some(mut reused) = self.readers.iter().find_map(|slot| match slot.try_lock() {
            Ok(reused) => Some(reused),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }) else {
            return read(&self.env.read_txn().map_err(lmdb_error)?);
        };
        let txn = match reused.take() {
            Some(txn) => txn,
            None => self.env.clone().static_read_txn().map_err(lmdb_error)?,
        };
        let result = read(&txn);
        *reused = Some(txn);
        result
    }

    fn db(&self, table: Table) -> Db {
        self.tables[table as usize]
    }

    /// One write transaction: `writes` in order, then, when given, the writes `complete` makes
    /// of the records the `kv` writes replaced, each found by the write that replaced it.
    fn write_transaction(&mut self, writes: Vec<Write>, mut complete: Option<Complete<'_>>) -> Result<(), EngineError> {
        if self.snapshot.is_some() {
            return Err(failed("the store was opened read-only"));
        }
        // The reused read transactions end here: after the commit, reads see it.
        for slot in &mut self.readers {
            *slot.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let before = thread_bytes_written();
        let mut txn = self.env.write_txn().map_err(lmdb_error)?;
        let mut replaced = Vec::new();
        for write in &writes {
            match write.kv_change() {
                Some((key, value)) if complete.is_some() => {
                    replaced.push(replace(self.db(Table::Kv), &mut txn, key, value).map_err(lmdb_error)?);
                }
                _ => self.write(&mut txn, write)?,
            }
        }
        if let Some(complete) = &mut complete {
            for write in &complete(&replaced) {
                self.write(&mut txn, write)?;
            }
        }
        txn.commit().map_err(lmdb_error)?;
        let written = thread_bytes_written() - before;
        self.bytes_written += written;
        Ok(())
    }

    fn write(&self, txn: &mut RwTxn<'_>, write: &Write) -> Result<(), EngineError> {
        match write {
            Write::Put { table, key, value } => self.db(*table).put(txn, key, value),
            Write::Delete { table, key } => self.db(*table).delete(txn, key).map(drop),
            Write::DeleteRange { table, start, end } => {
                let range = (Bound::Included(start.as_slice()), Bound::Excluded(end.as_slice()));
                self.db(*table).delete_range(txn, &range).map(drop)
            }
        }
        .map_err(lmdb_error)
    }
}

/// Puts `value` under `key` in `kv`, or deletes `key` (None), and returns the length of the
/// record it replaced (None: there was none), searching the tree once: the cursor that finds
/// the old record writes the new one in its place. A separate read before the write was a tenth
/// of an LMDB run in the simulator, every search done twice.
fn replace(kv: Db, txn: &mut RwTxn<'_>, key: &[u8], value: Option<&[u8]>) -> Result<Option<usize>, heed::Error> {
    let mut at_key = kv.range_mut(txn, &(Bound::Included(key), Bound::Included(key)))?;
    // Only the length is kept: the borrowed record is gone before anything is written.
    let replaced = at_key.next().transpose()?.map(|(_, record)| record.len());
    match (value, replaced) {
        // SAFETY: `put_current` and `del_current` are unsafe because a value read through this
        // database must not be held while the page under it changes; nothing read is held
        // (only its length), and the cursor is on `key`, as MDB_CURRENT requires.
        #[allow(unsafe_code)]
        (Some(value), Some(_)) => unsafe { at_key.put_current(key, value) }.map(drop)?,
        #[allow(unsafe_code)]
        (None, Some(_)) => unsafe { at_key.del_current() }.map(drop)?,
        (Some(value), None) => {
            drop(at_key);
            kv.put(txn, key, value)?;
        }
        (None, None) => {}
    }
    Ok(replaced)
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

/// The bytes LMDB's write transactions on this thread have written so far (see the module doc).
/// It replaces reading `wchar` from `/proc/thread-self/io` twice per commit, which cost 2 % of an
/// LMDB run in the simulator and measured nothing with `MDB_WRITEMAP`.
fn thread_bytes_written() -> u64 {
    // SAFETY: the function takes nothing and reads a thread-local integer of LMDB's (the carried
    // patch, vendor/lmdb-master-sys); it has no preconditions.
    #[allow(unsafe_code)]
    unsafe {
        lmdb_master_sys::mdb_thread_bytes_written() as u64
    }
}

impl Engine for LmdbEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Lmdb
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.read(|txn| Ok(self.db(table).get(txn, key).map_err(lmdb_error)?.map(<[u8]>::to_vec)))
    }

    fn get_each(&self, table: Table, keys: &[&[u8]], found: Found<'_>) -> Result<(), EngineError> {
        self.read(|txn| {
            for (position, key) in keys.iter().enumerate() {
                if !found(position, self.db(table).get(txn, key).map_err(lmdb_error)?) {
                    break;
                }
            }
            Ok(())
        })
    }

    fn scan(&self, table: Table, start: &[u8], visit: Visit<'_>) -> Result<(), EngineError> {
        self.read(|txn| {
            // LMDB refuses a zero-length seek key (MDB_BAD_VALSIZE); an empty start means "all".
            let lower = if start.is_empty() { Bound::Unbounded } else { Bound::Included(start) };
            let range = (lower, Bound::Unbounded);
            for item in self.db(table).range(txn, &range).map_err(lmdb_error)? {
                let (key, value) = item.map_err(lmdb_error)?;
                if !visit(key, value) {
                    break;
                }
            }
            Ok(())
        })
    }

    fn commit(&mut self, writes: Vec<Write>) -> Result<(), EngineError> {
        self.write_transaction(writes, None)
    }

    fn commit_replacing(&mut self, writes: Vec<Write>, complete: Complete<'_>) -> Result<(), EngineError> {
        self.write_transaction(writes, Some(complete))
    }

    fn flush(&mut self) -> Result<(), EngineError> {
        Ok(())
    }

    /// Syncs the environment (`mdb_env_sync` forced): every commit so far is durable (commits
    /// are already, unless `sync_commits` is off).
    fn sync(&mut self) -> Result<(), EngineError> {
        self.env.force_sync().map_err(lmdb_error)
    }

    fn disk_bytes(&self) -> Result<u64, EngineError> {
        let files = dir_bytes(self.env.path()).map_err(failed)?;
        // With MDB_WRITEMAP the writer extended `data.mdb` to the map size at open (also when
        // this is a read-only engine beside it): count it up to the last page a commit used,
        // as long as the file is without the flag.
        let data_file = std::fs::metadata(self.env.path().join("data.mdb")).map_err(failed)?.len();
        let used = (self.env.info().last_page_number as u64 + 1) * self.env.unnamed_database_stat().page_size as u64;
        // Saturating: beside a live writer the file may have grown between the two looks.
        Ok(files.saturating_sub(data_file) + used.min(data_file))
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn settings(write_map: bool) -> LmdbSettings {
        LmdbSettings { map_bytes: 64 << 20, read_ahead: true, write_map, sync_commits: true }
    }

    /// A replacing commit hands over the length of each record its `kv` writes replace, in
    /// their order (None where there was none), and commits what it is handed back with them:
    /// the same lengths a read before the write finds, whether the new record is longer,
    /// shorter, new, or a delete.
    #[test]
    fn a_replacing_commit_finds_what_each_write_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let mut engine = LmdbEngine::open(dir.path(), &settings(false)).unwrap();
        let put = |key: &str, value: &[u8]| Write::Put { table: Table::Kv, key: key.into(), value: value.to_vec() };
        let delete = |key: &str| Write::Delete { table: Table::Kv, key: key.into() };
        engine.commit(vec![put("b", &[1; 10]), put("c", &[2; 300]), put("d", &[3; 5])]).unwrap();
        let writes = vec![
            Write::Put { table: Table::Log, key: b"1".to_vec(), value: b"entry".to_vec() },
            put("a", &[4; 7]),
            put("b", &[5; 5000]),
            put("c", &[6; 1]),
            delete("d"),
            delete("e"),
        ];
        let mut seen = Vec::new();
        engine
            .commit_replacing(writes, &mut |replaced| {
                seen = replaced.to_vec();
                vec![Write::Put { table: Table::Meta, key: b"count".to_vec(), value: vec![replaced.len() as u8] }]
            })
            .unwrap();
        assert_eq!(seen, vec![None, Some(10), Some(300), Some(5), None]);
        let lens = engine.value_lens(Table::Kv, &[b"a", b"b", b"c", b"d", b"e"]).unwrap();
        assert_eq!(lens, vec![Some(7), Some(5000), Some(1), None, None]);
        assert_eq!(engine.get(Table::Meta, b"count").unwrap(), Some(vec![5]));
        assert_eq!(engine.get(Table::Log, b"1").unwrap(), Some(b"entry".to_vec()));
    }

    /// With `MDB_WRITEMAP` the same commits read back the same, survive a reopen, occupy the
    /// same bytes on disk as without it — although the data file itself is the whole map — and
    /// count the same bytes written, commit by commit.
    #[test]
    fn write_map_stores_the_same_and_counts_the_same_bytes_written() {
        let commits: Vec<Vec<Write>> = (0..40u32)
            .map(|round| {
                (0..25u32)
                    .map(|i| Write::Put {
                        table: Table::Kv,
                        key: format!("k{:05}", (round * 7919 + i * 104_729) % 5000).into_bytes(),
                        value: vec![round as u8; 10 + (i as usize * 37) % 400],
                    })
                    .chain([Write::Put { table: Table::Log, key: round.to_be_bytes().to_vec(), value: vec![1; 900] }])
                    .collect()
            })
            .collect();
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let (mut disk, mut written) = (Vec::new(), Vec::new());
        for (dir, write_map) in dirs.iter().zip([false, true]) {
            let mut engine = LmdbEngine::open(dir.path(), &settings(write_map)).unwrap();
            let mut per_commit = Vec::new();
            for writes in &commits {
                let before = engine.disk_bytes_written();
                engine.commit(writes.clone()).unwrap();
                per_commit.push(engine.disk_bytes_written() - before);
            }
            written.push(per_commit);
            disk.push(engine.disk_bytes().unwrap());
            drop(engine);
            // `qs-node inspect` counts the same bytes.
            let read_only = LmdbEngine::open_read_only(dir.path(), 64 << 20).unwrap();
            assert_eq!(read_only.disk_bytes().unwrap(), disk[disk.len() - 1], "write_map {write_map}");
            drop(read_only);
            let data_file = std::fs::metadata(dir.path().join("data.mdb")).unwrap().len();
            assert_eq!(data_file == 64 << 20, write_map, "data.mdb is {data_file} bytes");
        }
        assert_eq!(disk[0], disk[1], "the same commits occupy the same bytes with and without MDB_WRITEMAP");
        assert_eq!(written[0], written[1], "the same commits write the same bytes with and without MDB_WRITEMAP");
        // Every commit writes pages (the tree's root at least) and the meta fields beside them.
        assert!(written[0].iter().all(|&w| w > 4096 && w % 4096 != 0), "{:?}", written[0]);
        let reopened: Vec<LmdbEngine> =
            dirs.iter().map(|dir| LmdbEngine::open(dir.path(), &settings(true)).unwrap()).collect();
        let mut pairs = [Vec::new(), Vec::new()];
        for (engine, pairs) in reopened.iter().zip(&mut pairs) {
            for table in [Table::Kv, Table::Log] {
                engine
                    .scan(table, b"", &mut |key, value| {
                        pairs.push((table, key.to_vec(), value.to_vec()));
                        true
                    })
                    .unwrap();
            }
        }
        assert_eq!(pairs[0], pairs[1]);
        assert_eq!(
            pairs[1].len(),
            40 + commits
                .iter()
                .flatten()
                .filter_map(|w| w.kv_change())
                .map(|(k, _)| k)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        );
    }

    /// Each commit counts what LMDB wrote for it: the value's pages at least, every time.
    #[test]
    fn every_commit_counts_the_bytes_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let mut engine = LmdbEngine::open(dir.path(), &settings(false)).unwrap();
        for round in 0..3u8 {
            let before = engine.disk_bytes_written();
            let value = vec![round; 20_000];
            engine.commit(vec![Write::Put { table: Table::Kv, key: vec![b'k', round], value }]).unwrap();
            let written = engine.disk_bytes_written() - before;
            assert!(written >= 20_000, "round {round}: a 20 000-byte value counted as {written} bytes written");
        }
    }

    /// Without `MDB_WRITEMAP`, LMDB's count is what the kernel saw the committing thread pass to
    /// its write calls (`wchar`), byte for byte: the patched counter measures the writes, not a
    /// model of them.
    #[cfg(target_os = "linux")]
    #[test]
    fn without_write_map_the_count_is_what_the_kernel_saw_written() {
        let wchar = || {
            let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
            io.lines().find_map(|line| line.strip_prefix("wchar:")).unwrap().trim().parse::<u64>().unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let mut engine = LmdbEngine::open(dir.path(), &settings(false)).unwrap();
        for round in 0..30u32 {
            let writes = (0..20u32)
                .map(|i| Write::Put {
                    table: Table::Kv,
                    key: format!("k{:05}", (round * 7919 + i * 104_729) % 3000).into_bytes(),
                    // Some values past a page, which LMDB keeps on overflow pages.
                    value: vec![round as u8; 10 + (i as usize * 613) % 9000],
                })
                .collect();
            let (counted_before, kernel_before) = (engine.disk_bytes_written(), wchar());
            engine.commit(writes).unwrap();
            let kernel = wchar() - kernel_before;
            // Reading /proc/thread-self/io writes nothing, so the kernel's figure is LMDB's alone.
            assert_eq!(engine.disk_bytes_written() - counted_before, kernel, "round {round}");
        }
    }
}
