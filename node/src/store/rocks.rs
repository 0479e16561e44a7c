//! The RocksDB engine, the engine Quicksilver later moved to for its lower space use.
//!
//! Three column families; one `WriteBatch` per commit written with `sync = true`, so a commit is
//! atomic across column families and durable when it returns. The `log` column family is not
//! compressed by RocksDB (its values are Snappy-compressed entries already); `kv` uses Snappy.
//!
//! `disk_bytes_written` is RocksDB's own accounting: WAL bytes + flush bytes + compaction bytes
//! written, from its statistics tickers. Block checksums are verified on every read; a failed
//! one surfaces as [`EngineError::Corruption`].
//!
//! Reads go through one LRU block cache of `cache_bytes` shared by the three column families,
//! which also holds their index and filter blocks (`cache_index_and_filter_blocks`), so the
//! cache's capacity bounds the memory reads use beyond the memtables and table readers.
//! `resources` reports its hits and misses (statistics tickers), usage and capacity, and the
//! memtables' and table readers' memory (properties, summed over the column families).
//!
//! An apply needs the length of every value it replaces; [`LengthCache`] remembers it for the
//! most recently used `kv` keys, so the apply reads the tree only for the others: a read before
//! every write, through the memtables and each level-0 file, was a quarter of a RocksDB run in
//! the simulator, for keys the engine had itself just written.
//!
//! Inside the simulator (`--cfg madsim`) RocksDB's flushes and compactions still run on its own
//! OS threads, outside the simulator's scheduler, and RocksDB decides when to flush from its
//! memtables' memory use, which varies from process to process (skiplist node heights come from
//! a per-thread random generator seeded from the thread id). What a node reads never depends on
//! either, but the shape of the LSM tree and the bytes it writes would. So under madsim the
//! engine ([`SimFlushing`]) flushes a column family itself once `memtable_bytes` of keys and
//! values were written to it, and before anything else touches the database (a read, a commit,
//! a statistic, closing it) it waits, in wall time while simulated time stands still, for all
//! background work to finish: every operation sees the tree that follows from the sequence of
//! commits alone, and a seed replays to the same trace. The flush and the compactions it sets
//! off run meanwhile on RocksDB's threads, beside the simulator's, while other nodes work.
//! Column families due together are flushed one after another, each after the last one's work
//! settled: two jobs at once would draw their SST files' numbers in whichever order their
//! threads reach RocksDB's counter, and a store copied to a replica (file by file, through a
//! TCP window that makes its bytes take time) would differ from one process to the next. The SST
//! files' host property (the machine's hostname by default) is left out for the same reason, and
//! the info LOG keeps only errors (its lines carry wall-clock timings, and RocksDB counts the LOG
//! bytes a flush's thread wrote as flush bytes).
//!
//! [`RocksEngine::open_read_only`] (for `qs-node inspect`) opens an existing database as a
//! read-only instance beside the node that writes it: RocksDB takes no `LOCK` and writes no file
//! (no info LOG, no OPTIONS, no MANIFEST) in that mode, and the instance answers every read from
//! the state it recovered at open (the SST files then live, plus the WAL replayed), which never
//! changes afterwards. Every table file is opened at open (`max_open_files = -1`), so the
//! writer's compactions deleting files later cannot take one from under the reads.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use rocksdb::checkpoint::Checkpoint;
use rocksdb::statistics::{StatsLevel, Ticker};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, DBCompressionType, Direction, ErrorKind, FlushOptions,
    IteratorMode, LogLevel, Options, ReadOptions, WaitForCompactOptions, WriteBatch, WriteOptions, properties,
};

use super::OpenOptions;
use super::engine::{Engine, EngineError, EngineKind, EngineResources, Found, Table, Visit, Write, dir_bytes};
use super::length_cache::{LENGTH_CACHE_KEYS, LengthCache};

use super::{ROCKSDB_BLOCK_BYTES_DEFAULT, ROCKSDB_CACHE_BYTES_DEFAULT};

/// The `[storage]` settings a RocksDB store opens with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RocksSettings {
    /// Per-column-family write buffer size; `None` keeps RocksDB's default.
    pub memtable_bytes: Option<usize>,
    /// Capacity of the block cache the column families share.
    pub cache_bytes: usize,
    /// Target size of an SST data block.
    pub block_bytes: usize,
    /// `use_direct_reads`: SST reads bypass the OS page cache.
    pub direct_reads: bool,
    /// Every commit is synced before it returns (`WriteOptions::sync`); off only for the
    /// planted `legacy.acknowledge_before_sync`, whose commits become durable at
    /// [`Engine::sync`] (the WAL synced).
    pub sync_commits: bool,
    /// Under the simulator, on a disk whose power may fail: a flush is waited for as soon as it
    /// is started (see `IoFaults::power_can_fail`).
    pub settle_at_once: bool,
}

impl From<&OpenOptions> for RocksSettings {
    fn from(options: &OpenOptions) -> Self {
        RocksSettings {
            memtable_bytes: options.rocksdb_memtable_bytes,
            cache_bytes: options.rocksdb_cache_bytes.unwrap_or(ROCKSDB_CACHE_BYTES_DEFAULT),
            block_bytes: options.rocksdb_block_bytes.unwrap_or(ROCKSDB_BLOCK_BYTES_DEFAULT),
            direct_reads: options.rocksdb_direct_reads,
            sync_commits: options.sync_commits,
            settle_at_once: options.io_faults.as_ref().is_some_and(|faults| faults.power_can_fail()),
        }
    }
}

pub(crate) struct RocksEngine {
    db: DB,
    options: Options,
    /// The block cache every column family reads through (kept with the database it serves).
    _cache: Cache,
    sync: WriteOptions,
    /// Under the simulator only (see the module doc).
    sim: Option<SimFlushing>,
    /// Opened by [`RocksEngine::open_read_only`]: commits and flushes refuse.
    read_only: bool,
    /// The `kv` table's recently written keys' record lengths, so an apply reads the tree only
    /// for the keys it does not know (see [`LengthCache`]).
    lengths: Mutex<LengthCache>,
}

/// Block cache of a read-only instance: a one-pass scan gains nothing from a larger one.
const READ_ONLY_CACHE_BYTES: usize = 8 << 20;

/// How the engine flushes under the simulator: by bytes written, not by memory used, and with
/// all background work finished before the database is touched again.
struct SimFlushing {
    /// Keys and values written to a column family before the engine flushes it.
    memtable_bytes: u64,
    /// Per column family (in [`Table::ALL`] order), bytes written since its last flush.
    unflushed: [u64; 3],
    /// Wait for a flush as soon as it is started (a disk whose power may fail).
    settle_at_once: bool,
    /// A flush was asked for and its background work not yet waited for. Only a flush sets
    /// background work off here (file-age compactions are off, recovery's work is waited for
    /// at open), so while this is false there is none.
    unsettled: AtomicBool,
    /// The level-0 files already seen, and the bytes of those that flushes wrote since open.
    flushed: Mutex<FlushedFiles>,
}

#[derive(Default)]
struct FlushedFiles {
    seen: BTreeSet<String>,
    bytes: u64,
    /// RocksDB's flush-bytes ticker when the level-0 files were last listed: while it stands
    /// still no flush has finished, so no level-0 file can have appeared.
    flush_ticker: u64,
}

/// Under the simulator RocksDB's own memory-use trigger sits this many times above
/// `memtable_bytes`, so the engine's byte count always flushes first.
const SIM_WRITE_BUFFER_HEADROOM: usize = 8;
/// RocksDB's default memtable size, the simulator's flush point when none is configured.
const DEFAULT_MEMTABLE_BYTES: usize = 64 << 20;

fn new_lengths() -> Mutex<LengthCache> {
    Mutex::new(LengthCache::new(NonZeroUsize::new(LENGTH_CACHE_KEYS).expect("a capacity above zero")))
}

fn rocks_error(e: rocksdb::Error) -> EngineError {
    match e.kind() {
        ErrorKind::Corruption => EngineError::Corruption { engine: EngineKind::Rocksdb, detail: e.into_string() },
        _ => EngineError::failed(EngineKind::Rocksdb, e),
    }
}

impl RocksEngine {
    /// Opens (or creates) the database at `path` with `settings`.
    pub(crate) fn open(path: &Path, settings: &RocksSettings) -> Result<RocksEngine, EngineError> {
        let memtable_bytes = settings.memtable_bytes;
        let cache = Cache::new_lru_cache(settings.cache_bytes);
        let mut table_options = BlockBasedOptions::default();
        table_options.set_block_cache(&cache);
        table_options.set_block_size(settings.block_bytes);
        // Index and filter blocks live in the cache too, so its capacity bounds them: otherwise
        // every open table keeps its index on the heap, outside any limit.
        table_options.set_cache_index_and_filter_blocks(true);
        let mut options = Options::default();
        // The default column family (unused) reads through the same cache.
        options.set_block_based_table_factory(&table_options);
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.enable_statistics();
        // Only tickers are read (cache hits and misses, bytes written); the histograms and the
        // clock reads that time every get and write would be paid for on every operation.
        options.set_statistics_level(StatsLevel::ExceptHistogramOrTimers);
        options.set_max_background_jobs(2);
        // Misses then read the device, so the block cache's tickers count what the disk does
        // (the calibration benchmark needs that; an operator sizing the cache may too).
        options.set_use_direct_reads(settings.direct_reads);
        options.set_keep_log_file_num(2);
        if cfg!(madsim) {
            // The info LOG's lines carry wall-clock timings, and a flush counts the LOG bytes its
            // thread wrote as flush bytes: only errors are logged, so the counts follow from the
            // commits alone.
            options.set_log_level(LogLevel::Error);
            // No hostname written into SST files, so their sizes do not vary with the machine;
            // and no WAL space reserved ahead (`fallocate`): the scratch directory is in memory,
            // where reserving means zeroing pages, 5 % of a reference run, for nothing.
            options = options.get_options_from_string("db_host_id=;allow_fallocate=false").map_err(|e| {
                EngineError::failed(EngineKind::Rocksdb, format!("setting RocksDB's simulator options: {e}"))
            })?;
        }
        let sim_memtable_bytes = memtable_bytes.unwrap_or(DEFAULT_MEMTABLE_BYTES);
        let families = Table::ALL.map(|table| {
            let mut cf = Options::default();
            cf.set_block_based_table_factory(&table_options);
            if cfg!(madsim) {
                cf.set_write_buffer_size(sim_memtable_bytes * SIM_WRITE_BUFFER_HEADROOM);
                // Compactions by file age compare times from both clocks; none is due in a run.
                cf.set_ttl(0);
                cf.set_periodic_compaction_seconds(0);
            } else if let Some(bytes) = memtable_bytes {
                cf.set_write_buffer_size(bytes);
            }
            cf.set_compression_type(match table {
                Table::Log => DBCompressionType::None,
                Table::Meta | Table::Kv => DBCompressionType::Snappy,
            });
            ColumnFamilyDescriptor::new(table.name(), cf)
        });
        let db = DB::open_cf_descriptors(&options, path, families).map_err(|e| {
            EngineError::failed(EngineKind::Rocksdb, format!("opening RocksDB at {}: {e}", path.display()))
        })?;
        let mut sync = WriteOptions::default();
        sync.set_sync(settings.sync_commits);
        let mut engine =
            RocksEngine { db, options, _cache: cache, sync, sim: None, read_only: false, lengths: new_lengths() };
        if cfg!(madsim) {
            // Recovery may have scheduled flushes and compactions; the files they and earlier
            // processes wrote are not this engine's flushes.
            engine.db.wait_for_compact(&WaitForCompactOptions::default()).map_err(rocks_error)?;
            let seen = engine.level0_files()?.into_iter().map(|(name, _)| name).collect();
            engine.sim = Some(SimFlushing {
                memtable_bytes: sim_memtable_bytes as u64,
                unflushed: [0; 3],
                settle_at_once: settings.settle_at_once,
                unsettled: AtomicBool::new(false),
                flushed: Mutex::new(FlushedFiles {
                    seen,
                    bytes: 0,
                    flush_ticker: engine.options.get_ticker_count(Ticker::FlushWriteBytes),
                }),
            });
        }
        Ok(engine)
    }

    /// Opens the existing database at `path` as a read-only instance (see the module doc).
    /// A database without the store's three column families is [`EngineError::NotAStore`].
    pub(crate) fn open_read_only(path: &Path) -> Result<RocksEngine, EngineError> {
        let not_a_store = |found: String| EngineError::NotAStore { engine: EngineKind::Rocksdb, found };
        let cache = Cache::new_lru_cache(READ_ONLY_CACHE_BYTES);
        let mut table_options = BlockBasedOptions::default();
        table_options.set_block_cache(&cache);
        let mut options = Options::default();
        options.set_block_based_table_factory(&table_options);
        options.set_max_open_files(-1);
        // A failure here may be the writer replacing its MANIFEST: an error the caller retries.
        let families = DB::list_cf(&options, path).map_err(|e| {
            EngineError::failed(EngineKind::Rocksdb, format!("listing column families at {}: {e}", path.display()))
        })?;
        let missing: Vec<&str> =
            Table::ALL.iter().map(|t| t.name()).filter(|name| !families.iter().any(|f| f == name)).collect();
        if !missing.is_empty() {
            return Err(not_a_store(format!(
                "a RocksDB database with column families [{}], without the store's {}",
                families.join(", "),
                missing.join(", ")
            )));
        }
        let descriptors = Table::ALL.map(|table| {
            let mut cf = Options::default();
            cf.set_block_based_table_factory(&table_options);
            ColumnFamilyDescriptor::new(table.name(), cf)
        });
        let db = DB::open_cf_descriptors_read_only(&options, path, descriptors, false).map_err(|e| {
            EngineError::failed(EngineKind::Rocksdb, format!("opening RocksDB at {} read-only: {e}", path.display()))
        })?;
        let sync = WriteOptions::default();
        Ok(RocksEngine { db, options, _cache: cache, sync, sim: None, read_only: true, lengths: new_lengths() })
    }

    fn refuse_if_read_only(&self) -> Result<(), EngineError> {
        if self.read_only {
            return Err(EngineError::failed(EngineKind::Rocksdb, "the store was opened read-only"));
        }
        Ok(())
    }

    /// Under the simulator, called before every use of the database: waits until RocksDB has
    /// no flush or compaction queued or running (see the module doc), then adds the level-0
    /// files that appeared to the flushed bytes. In a real node background work overlaps with
    /// everything, as it should.
    fn settle(&self) -> Result<(), EngineError> {
        let Some(sim) = &self.sim else { return Ok(()) };
        if !sim.unsettled.load(Ordering::Acquire) {
            return Ok(());
        }
        self.db.wait_for_compact(&WaitForCompactOptions::default()).map_err(rocks_error)?;
        sim.unsettled.store(false, Ordering::Release);
        let mut flushed = sim.flushed.lock().unwrap_or_else(|p| p.into_inner());
        // Listing the live files walks every level under the DB mutex: most commits flush
        // nothing, and then the ticker says so for the price of a counter read.
        let flush_ticker = self.options.get_ticker_count(Ticker::FlushWriteBytes);
        if flush_ticker == flushed.flush_ticker {
            return Ok(());
        }
        flushed.flush_ticker = flush_ticker;
        for (name, size) in self.level0_files()? {
            if flushed.seen.insert(name) {
                flushed.bytes += size;
            }
        }
        Ok(())
    }

    /// Under the simulator: the call just made may have set background work off, so the next
    /// [`settle`](Self::settle) waits for it.
    fn background_may_run(&self) {
        if let Some(sim) = &self.sim {
            sim.unsettled.store(true, Ordering::Release);
        }
    }

    /// [`settle`](Self::settle) where no error can be returned: a background error shows again
    /// at the next read or commit.
    fn settle_or_warn(&self) {
        if let Err(e) = self.settle() {
            tracing::warn!(error = %e, "waiting for RocksDB's background work failed");
        }
    }

    /// Under the simulator: counts a commit's bytes per column family and starts a flush of
    /// those that reached `memtable_bytes`, without waiting for it (see [`settle`](Self::settle)).
    fn flush_full_memtables(&mut self, written: [u64; 3]) -> Result<(), EngineError> {
        let Some(sim) = &mut self.sim else { return Ok(()) };
        let mut full = Vec::new();
        for (position, table) in Table::ALL.into_iter().enumerate() {
            sim.unflushed[position] += written[position];
            if sim.unflushed[position] >= sim.memtable_bytes {
                sim.unflushed[position] = 0;
                full.push(table);
            }
        }
        if full.is_empty() {
            return Ok(());
        }
        // The memtable is switched now, in this call; the flush and any compaction it sets off
        // run on RocksDB's threads until the next settle.
        sim.unsettled.store(true, Ordering::Release);
        let settle_at_once = sim.settle_at_once;
        let mut background = FlushOptions::default();
        background.set_wait(false);
        for (position, table) in full.into_iter().enumerate() {
            if position > 0 {
                // One background job at a time: a flush beside the compaction the last one set
                // off would draw its SST file's number in whichever order the two threads reach
                // RocksDB's counter, and a store copied to a replica would differ in which file
                // holds what from one process to the next (its transfer too, byte for byte).
                self.settle()?;
                self.background_may_run();
            }
            self.db.flush_cf_opt(self.cf(table), &background).map_err(rocks_error)?;
        }
        if settle_at_once { self.settle() } else { Ok(()) }
    }

    /// Flushes every column family's memtable (and, under the simulator, settles).
    fn flush_all(&self) -> Result<(), EngineError> {
        for table in Table::ALL {
            // Settled before each flush, as in `flush_full_memtables`: one background job at a
            // time, so the files' numbers follow from the commits.
            self.settle()?;
            self.background_may_run();
            self.db.flush_cf(self.cf(table)).map_err(rocks_error)?;
        }
        self.settle()
    }

    /// The live level-0 SST files (name, bytes): where every flush writes.
    fn level0_files(&self) -> Result<Vec<(String, u64)>, EngineError> {
        let files = self.db.live_files().map_err(rocks_error)?;
        Ok(files.into_iter().filter(|f| f.level == 0).map(|f| (f.name, f.size as u64)).collect())
    }

    /// An integer property summed over the three column families; `None` if RocksDB does not
    /// report it for one of them.
    fn property_sum(&self, name: &properties::PropName) -> Option<u64> {
        Table::ALL.into_iter().map(|table| self.db.property_int_value_cf(self.cf(table), name).ok().flatten()).sum()
    }

    /// The length cache. A panic while it was held may have left it half updated: it then
    /// starts again empty.
    fn lengths(&self) -> MutexGuard<'_, LengthCache> {
        self.lengths.lock().unwrap_or_else(|poisoned| {
            let mut lengths = poisoned.into_inner();
            lengths.clear();
            self.lengths.clear_poison();
            lengths
        })
    }

    fn cf(&self, table: Table) -> &rocksdb::ColumnFamily {
        self.db.cf_handle(table.name()).expect("column families are created at open")
    }
}

impl Drop for RocksEngine {
    /// Under the simulator a flush may still be under way: closing would cancel whatever of it
    /// has not started, and what reached the files would depend on thread timing.
    fn drop(&mut self) {
        self.settle_or_warn();
    }
}

impl Engine for RocksEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Rocksdb
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.settle()?;
        self.db.get_cf(self.cf(table), key).map_err(rocks_error)
    }

    fn get_each(&self, table: Table, keys: &[&[u8]], found: Found<'_>) -> Result<(), EngineError> {
        self.settle()?;
        // MultiGet reads every key at one sequence number, as LMDB's one read transaction does,
        // and pinned values lend the block cache's bytes instead of copying them.
        let values =
            self.db.batched_multi_get_cf_opt(self.cf(table), keys.iter().copied(), false, &ReadOptions::default());
        for (position, value) in values.into_iter().enumerate() {
            if !found(position, value.map_err(rocks_error)?.as_deref()) {
                break;
            }
        }
        Ok(())
    }

    fn value_lens(&self, table: Table, keys: &[&[u8]]) -> Result<Vec<Option<usize>>, EngineError> {
        assert!(keys.is_sorted(), "value_lens takes its keys sorted");
        self.settle()?;
        let cached = table == Table::Kv;
        let mut lengths = self.lengths();
        let mut known: Vec<Option<Option<usize>>> =
            keys.iter().map(|key| if cached { lengths.get(key) } else { None }).collect();
        let unknown: Vec<&[u8]> =
            keys.iter().zip(&known).filter(|(_, known)| known.is_none()).map(|(key, _)| *key).collect();
        if !unknown.is_empty() {
            // One MultiGet for the keys left: one pass down the memtables and the tree, the keys
            // in order, where a Get per key walked it again each time.
            let values = self.db.batched_multi_get_cf_opt(
                self.cf(table),
                unknown.iter().copied(),
                true,
                &ReadOptions::default(),
            );
            let mut read = values.into_iter();
            for (key, slot) in keys.iter().zip(known.iter_mut()).filter(|(_, slot)| slot.is_none()) {
                let len = read.next().expect("one value per key asked for").map_err(rocks_error)?.map(|v| v.len());
                if cached {
                    lengths.record(Box::from(*key), len);
                }
                *slot = Some(len);
            }
        }
        Ok(known.into_iter().map(|slot| slot.expect("every key was known or read")).collect())
    }

    fn scan(&self, table: Table, start: &[u8], visit: Visit<'_>) -> Result<(), EngineError> {
        self.settle()?;
        for item in self.db.iterator_cf(self.cf(table), IteratorMode::From(start, Direction::Forward)) {
            let (key, value) = item.map_err(rocks_error)?;
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }

    fn commit(&mut self, writes: Vec<Write>) -> Result<(), EngineError> {
        self.refuse_if_read_only()?;
        self.settle()?;
        let mut batch = WriteBatch::default();
        let mut written = [0u64; 3];
        // What the `kv` table will hold under the keys written, for the length cache once the
        // batch is in; `None` when a range deletion leaves it unable to follow.
        let mut kv_lengths = Some(Vec::new());
        let position = |table: Table| Table::ALL.iter().position(|t| *t == table).expect("every table is in ALL");
        for write in writes {
            let (table, bytes) = match write {
                Write::Put { table, key, value } => {
                    batch.put_cf(self.cf(table), &key, &value);
                    let bytes = key.len() + value.len();
                    if let (Table::Kv, Some(kv)) = (table, &mut kv_lengths) {
                        kv.push((key.into_boxed_slice(), Some(value.len())));
                    }
                    (table, bytes)
                }
                Write::Delete { table, key } => {
                    batch.delete_cf(self.cf(table), &key);
                    let bytes = key.len();
                    if let (Table::Kv, Some(kv)) = (table, &mut kv_lengths) {
                        kv.push((key.into_boxed_slice(), None));
                    }
                    (table, bytes)
                }
                Write::DeleteRange { table, start, end } => {
                    batch.delete_range_cf(self.cf(table), &start, &end);
                    if table == Table::Kv {
                        kv_lengths = None;
                    }
                    (table, start.len() + end.len())
                }
            };
            written[position(table)] += bytes as u64;
        }
        let outcome = self.db.write_opt(batch, &self.sync);
        let mut lengths = self.lengths();
        match (&outcome, kv_lengths) {
            (Ok(()), Some(kv)) => kv.into_iter().for_each(|(key, len)| lengths.record(key, len)),
            // A failed write may have reached the memtable before it failed: forget it all.
            _ => lengths.clear(),
        }
        drop(lengths);
        outcome.map_err(rocks_error)?;
        self.flush_full_memtables(written)
    }

    fn flush(&mut self) -> Result<(), EngineError> {
        self.refuse_if_read_only()?;
        self.flush_all()
    }

    /// Syncs the WAL: every commit so far is durable (commits are already, unless
    /// `sync_commits` is off).
    fn sync(&mut self) -> Result<(), EngineError> {
        self.refuse_if_read_only()?;
        self.db.flush_wal(true).map_err(rocks_error)
    }

    fn disk_bytes(&self) -> Result<u64, EngineError> {
        self.settle()?;
        dir_bytes(self.db.path()).map_err(|e| EngineError::failed(EngineKind::Rocksdb, e))
    }

    fn disk_bytes_written(&self) -> u64 {
        self.settle_or_warn();
        let flushed = match &self.sim {
            // RocksDB's flush ticker counts whatever its thread wrote during the flush, MANIFEST
            // records batched with other flushes' included: it varies with thread scheduling.
            Some(sim) => sim.flushed.lock().unwrap_or_else(|p| p.into_inner()).bytes,
            None => self.options.get_ticker_count(Ticker::FlushWriteBytes),
        };
        let logged_and_compacted: u64 = [Ticker::WalFileBytes, Ticker::CompactWriteBytes]
            .into_iter()
            .map(|ticker| self.options.get_ticker_count(ticker))
            .sum();
        logged_and_compacted + flushed
    }

    fn export_native(&self, dir: &Path) -> Result<(), EngineError> {
        // A checkpoint flushes the memtables and hard-links (or copies) the live SST files: a
        // consistent view of all column families that opens without the WAL. Flushing first
        // leaves the checkpoint's own flush nothing to do, so (under the simulator, once
        // `flush` has settled) no compaction it would trigger can race its listing of files.
        self.flush_all()?;
        Checkpoint::new(&self.db).and_then(|c| c.create_checkpoint(dir)).map_err(rocks_error)?;
        self.background_may_run();
        self.settle()
    }

    fn resources(&self) -> EngineResources {
        self.settle_or_warn();
        // The column families share one cache: its usage and capacity read from any of them.
        let cache = |name| self.db.property_int_value_cf(self.cf(Table::Kv), name).ok().flatten();
        EngineResources {
            block_cache_hits: Some(self.options.get_ticker_count(Ticker::BlockCacheHit)),
            block_cache_misses: Some(self.options.get_ticker_count(Ticker::BlockCacheMiss)),
            block_cache_usage_bytes: cache(properties::BLOCK_CACHE_USAGE),
            block_cache_capacity_bytes: cache(properties::BLOCK_CACHE_CAPACITY),
            table_readers_bytes: self.property_sum(properties::ESTIMATE_TABLE_READERS_MEM),
            memtables_bytes: self.property_sum(properties::CUR_SIZE_ALL_MEM_TABLES),
            length_cache_bytes: Some(self.lengths().bytes()),
            ..EngineResources::default()
        }
    }
}
