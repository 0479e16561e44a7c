//! The in-memory engine, for fast seed sweeps.
//!
//! The data lives in a [`MemDisk`], a handle that outlives any one `Store`, the way a disk
//! outlives a process: the simulator "kills" a node by dropping its store and "restarts" it by
//! opening the same `MemDisk` again, and "replaces the disk" with a fresh one. A commit is
//! atomic because it is applied under one lock; it is "durable" because the `MemDisk` survives.
//! `disk_bytes_written` counts the bytes each commit stores, a model with no amplification
//! beyond the commit itself.
//!
//! Power loss: a commit is synced when it returns, unless the store was opened with
//! `sync_commits` off (the planted `legacy.acknowledge_before_sync`). Then each commit also
//! records what it replaced, until [`MemDisk::sync`] — the OS writing the dirty pages back —
//! drops the record; `MemDisk::power_loss` undoes every commit not yet synced, newest first,
//! as a machine losing power loses its page cache. A commit is lost whole or kept whole: a torn
//! last write is what a write-ahead log's per-record checksum turns into a lost one.
//!
//! The fault injectors (`MemDisk::power_loss`, `MemDisk::corrupt_value`, `MemDisk::kv_keys`)
//! exist only in the harness builds (`--cfg madsim` or `--cfg qsim_harness`) and in unit tests:
//! the real binary has no way to damage its own disk.
//!
//! `resources` reports the key and value bytes held: the memory the engine's data takes, before
//! the maps' own overhead, as if each store held its own. Log entries and values are in fact
//! held once per process however many stores hold them ([`shared`]): under the simulator forty
//! stores, or ten thousand, hold the same entries and values.

use std::io::{Read, Write as _};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::engine::{Engine, EngineError, EngineKind, EngineResources, Found, Table, Visit, Write};
use super::mem_table::{MemTable, Value};
use super::shared::{self, SharedTable};

type Tables = [MemTable; 3];

/// What one unsynced commit replaced: (table slot, key, the value before), in commit order.
type Undo = Vec<(usize, Vec<u8>, Option<Value>)>;

/// A simulated disk holding one memory store. Cloning shares the same disk.
#[derive(Clone, Default)]
pub struct MemDisk {
    tables: Arc<Mutex<Tables>>,
    /// Commits written but not synced, oldest first.
    unsynced: Arc<Mutex<Vec<Undo>>>,
}

impl std::fmt::Debug for MemDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemDisk").finish_non_exhaustive()
    }
}

const DUMP_FILE: &str = "memory.dump";
const DUMP_MAGIC: &[u8; 8] = b"QSMEMDMP";

impl MemDisk {
    fn lock(&self) -> MutexGuard<'_, Tables> {
        // A panic while holding the lock cannot leave a half-applied commit (commits are built
        // first and applied with infallible map operations), so the data is still consistent.
        self.tables.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The keys of the KV table, in order (for choosing values to damage).
    #[cfg(any(test, madsim, qsim_harness))]
    pub fn kv_keys(&self) -> Vec<Vec<u8>> {
        self.lock()[slot(Table::Kv)].keys().map(<[u8]>::to_vec).collect()
    }

    /// Fault injection: flips the lowest bit of the last byte stored under `key` in the KV
    /// table, as a bad sector would. Returns false if the key is absent.
    #[cfg(any(test, madsim, qsim_harness))]
    pub fn corrupt_value(&self, key: &[u8]) -> bool {
        let mut tables = self.lock();
        match tables[slot(Table::Kv)].get_mut(key).and_then(|record| record.last_mut()) {
            Some(byte) => {
                *byte ^= 1;
                true
            }
            None => false,
        }
    }

    /// Flips the last bit of the log entry stored under `index`; false if there is none.
    #[cfg(test)]
    pub(crate) fn corrupt_log_entry(&self, index: u64) -> bool {
        let mut tables = self.lock();
        let key = super::record::log_key(index);
        match tables[slot(Table::Log)].get_mut(&key).and_then(|stored| stored.last_mut()) {
            Some(byte) => {
                *byte ^= 1;
                true
            }
            None => false,
        }
    }

    /// Makes every commit so far durable (the OS wrote its dirty pages back).
    pub fn sync(&self) {
        self.unsynced.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Fault injection: the power goes out. Every commit not yet synced is lost, newest first;
    /// returns how many were.
    #[cfg(any(test, madsim, qsim_harness))]
    pub fn power_loss(&self) -> usize {
        let undos = std::mem::take(&mut *self.unsynced.lock().unwrap_or_else(|p| p.into_inner()));
        let mut tables = self.lock();
        for undo in undos.iter().rev() {
            for (table, key, before) in undo.iter().rev() {
                match before {
                    Some(value) => tables[*table].insert(key.clone(), value.clone()),
                    None => tables[*table].remove(key),
                };
            }
        }
        undos.len()
    }

    /// Moves everything `other` holds onto this disk, leaving `other` empty: installing a
    /// snapshot imported onto a scratch disk, so the data lands on the disk that outlives the
    /// process.
    pub fn take_contents_of(&self, other: &MemDisk) {
        let moved = std::mem::take(&mut *other.lock());
        *self.lock() = moved;
        // Installed means durable: nothing of the old contents is left to undo.
        self.sync();
    }

    /// Key and value bytes on this disk.
    fn held_bytes(&self) -> u64 {
        self.lock().iter().map(MemTable::held_bytes).sum()
    }

    /// True when nothing was ever committed to this disk.
    pub fn is_empty(&self) -> bool {
        self.lock().iter().all(MemTable::is_empty)
    }

    /// Loads a dump written by `export_native` into this (empty) disk.
    pub(crate) fn load_dump(&self, dir: &Path) -> Result<(), EngineError> {
        let failed = |e: String| EngineError::failed(EngineKind::Memory, e);
        let mut bytes = Vec::new();
        std::fs::File::open(dir.join(DUMP_FILE))
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| failed(format!("reading {}: {e}", dir.join(DUMP_FILE).display())))?;
        let mut tables: Tables = Default::default();
        let mut r = crate::wire::LeReader::new(
            bytes
                .strip_prefix(DUMP_MAGIC.as_slice())
                .ok_or_else(|| failed("not a memory store dump (bad magic)".into()))?,
        );
        let short = |short: crate::wire::Truncated| failed(format!("memory store dump is {short}"));
        while !r.is_empty() {
            let table = r.u8("a table").map_err(short)? as usize;
            if table >= 3 {
                return Err(failed(format!("memory store dump names table {table}")));
            }
            let key = r.u32_prefixed("a key").map_err(short)?.to_vec();
            let value = r.u32_prefixed("a value").map_err(short)?.to_vec();
            let value = stored(Table::ALL[table], &key, value);
            tables[table].insert(key, value);
        }
        let mut disk = self.lock();
        if !disk.iter().all(MemTable::is_empty) {
            return Err(failed("refusing to load a snapshot over a non-empty memory disk".into()));
        }
        *disk = tables;
        Ok(())
    }
}

/// A table's place in [`Tables`]: its place in `Table::ALL`.
fn slot(table: Table) -> usize {
    match table {
        Table::Meta => 0,
        Table::Kv => 1,
        Table::Log => 2,
    }
}

/// `value` as `table` stores it: log entries and value records in the allocation other stores
/// of this process share (see [`shared`]).
fn stored(table: Table, key: &[u8], value: Vec<u8>) -> Value {
    match table {
        Table::Log => Value::Shared(shared::share(SharedTable::Log, key, value)),
        Table::Kv => Value::Shared(shared::share(SharedTable::Kv, key, value)),
        Table::Meta => Value::Own(value),
    }
}

pub(crate) struct MemEngine {
    disk: MemDisk,
    bytes_written: u64,
    /// Whether a commit is synced before it returns (see the module doc).
    sync_commits: bool,
}

impl MemEngine {
    pub(crate) fn open(disk: MemDisk, sync_commits: bool) -> MemEngine {
        MemEngine { disk, bytes_written: 0, sync_commits }
    }
}

impl Engine for MemEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Memory
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.disk.lock()[slot(table)].get(key).map(<[u8]>::to_vec))
    }

    fn get_each(&self, table: Table, keys: &[&[u8]], found: Found<'_>) -> Result<(), EngineError> {
        // Values lent under the lock: `found` only verifies and copies them (the store's and
        // the read path's callers), never calls back into the engine.
        let tables = self.disk.lock();
        for (position, key) in keys.iter().enumerate() {
            if !found(position, tables[slot(table)].get(key)) {
                break;
            }
        }
        Ok(())
    }

    fn value_lens(&self, table: Table, keys: &[&[u8]]) -> Result<Vec<Option<usize>>, EngineError> {
        let tables = self.disk.lock();
        Ok(keys.iter().map(|key| tables[slot(table)].get(key).map(<[u8]>::len)).collect())
    }

    fn scan(&self, table: Table, start: &[u8], visit: Visit<'_>) -> Result<(), EngineError> {
        // Copy out under the lock in bounded pages so `visit` never runs with the lock held.
        const PAGE: usize = 256;
        let mut from = start.to_vec();
        let mut inclusive = true;
        loop {
            let page: Vec<(Vec<u8>, Value)> = {
                let mut tables = self.disk.lock();
                let lower = if inclusive {
                    std::ops::Bound::Included(from.as_slice())
                } else {
                    std::ops::Bound::Excluded(from.as_slice())
                };
                tables[slot(table)].range_from(lower).take(PAGE).map(|(k, v)| (k.to_vec(), v.clone())).collect()
            };
            let full = page.len() == PAGE;
            for (key, value) in &page {
                if !visit(key, value) {
                    return Ok(());
                }
            }
            match page.into_iter().last() {
                Some((last, _)) if full => {
                    from = last;
                    inclusive = false;
                }
                _ => return Ok(()),
            }
        }
    }

    fn commit(&mut self, writes: Vec<Write>) -> Result<(), EngineError> {
        let mut tables = self.disk.lock();
        // Unsynced, the commit keeps what it replaced until the next sync (see the module doc).
        let mut undo: Option<Undo> = (!self.sync_commits).then(Vec::new);
        let journaled = undo.is_some();
        let mut replaced = |table: usize, key: &[u8], before: Option<Value>| {
            if let Some(undo) = undo.as_mut() {
                undo.push((table, key.to_vec(), before));
            }
        };
        for write in writes {
            match write {
                Write::Put { table, key, value } => {
                    self.bytes_written += (key.len() + value.len()) as u64;
                    let value = stored(table, &key, value);
                    if journaled {
                        let before = tables[slot(table)].insert(key.clone(), value);
                        replaced(slot(table), &key, before);
                    } else {
                        // Synced: nothing to remember, so the key moves in uncopied.
                        tables[slot(table)].insert(key, value);
                    }
                }
                Write::Delete { table, key } => {
                    let before = tables[slot(table)].remove(&key);
                    replaced(slot(table), &key, before);
                }
                Write::DeleteRange { table, start, end } => {
                    let map = &mut tables[slot(table)];
                    let doomed = map.keys_between(&start, &end);
                    for key in doomed {
                        let before = map.remove(&key);
                        replaced(slot(table), &key, before);
                    }
                }
            }
        }
        drop(tables);
        if let Some(undo) = undo {
            self.disk.unsynced.lock().unwrap_or_else(|p| p.into_inner()).push(undo);
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), EngineError> {
        self.disk.sync();
        Ok(())
    }

    fn flush(&mut self) -> Result<(), EngineError> {
        Ok(())
    }

    fn disk_bytes(&self) -> Result<u64, EngineError> {
        Ok(self.disk.held_bytes())
    }

    fn disk_bytes_written(&self) -> u64 {
        self.bytes_written
    }

    fn export_native(&self, dir: &Path) -> Result<(), EngineError> {
        let failed = |e: std::io::Error| EngineError::failed(EngineKind::Memory, e);
        std::fs::create_dir(dir).map_err(failed)?;
        let mut out = Vec::new();
        out.extend_from_slice(DUMP_MAGIC);
        let mut tables = self.disk.lock();
        for table in Table::ALL {
            for (key, value) in tables[slot(table)].iter() {
                out.push(slot(table) as u8);
                out.extend_from_slice(&(key.len() as u32).to_le_bytes());
                out.extend_from_slice(key);
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
        }
        drop(tables);
        let mut file = std::fs::File::create(dir.join(DUMP_FILE)).map_err(failed)?;
        file.write_all(&out).map_err(failed)?;
        file.sync_all().map_err(failed)
    }

    fn resources(&self) -> EngineResources {
        EngineResources { held_bytes: Some(self.disk.held_bytes()), ..EngineResources::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory engine's checksum, through its injector (which exists only in unit tests and
    /// the harness builds): a damaged value fails its read, naming the key, counted, and a
    /// multi-key read that reaches it fails whole; its neighbour still reads.
    #[test]
    fn a_damaged_value_fails_its_checksum() {
        use crate::entry::{DatabaseId, Op};
        use crate::store::{OpenOptions, Store, StoreError, StoreLocation};
        let disk = MemDisk::default();
        let location = StoreLocation::Memory(disk.clone());
        let options = OpenOptions::new(DatabaseId(0xc0ffee));
        let mut store = Store::open(&location, &options).expect("a memory store");
        let ops = vec![
            Op::Set { key: b"zone:victim".to_vec(), value: vec![0xa5; 64] },
            Op::Set { key: b"zone:bystander".to_vec(), value: b"fine".to_vec() },
        ];
        let entry = store.next_entry(1, ops).expect("an entry");
        store.apply(&[entry]).expect("applied");
        assert!(disk.corrupt_value(b"zone:victim"));
        let err = store.get(b"zone:victim").unwrap_err();
        assert!(matches!(err, StoreError::Checksum { .. }) && err.to_string().contains("zone:victim"), "{err:?}");
        assert_eq!(store.stats().unwrap().checksum_failures, 1);
        let keys: [&[u8]; 3] = [b"zone:bystander", b"zone:victim", b"zone:absent"];
        let err = store.get_each(&keys, &mut |_, _| true).unwrap_err();
        assert!(err.is_damage() && err.to_string().contains("zone:victim"), "{err:?}");
        assert_eq!(store.stats().unwrap().checksum_failures, 2);
        assert_eq!(store.get(b"zone:bystander").unwrap().as_deref(), Some(&b"fine"[..]));
    }

    #[test]
    fn a_tables_slot_is_its_place_in_table_all() {
        for (place, table) in Table::ALL.into_iter().enumerate() {
            assert_eq!(slot(table), place, "{table:?}");
        }
    }
}
