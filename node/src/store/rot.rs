//! Fault injection for the simulator's `bit_rot` on LMDB and RocksDB: damage a store's real
//! files, the way a bad sector does, while the node's process is down. The store must notice
//! when it next reads the damage (a value's CRC32C, a RocksDB block checksum) and the node
//! must heal; nothing here tells the node what was damaged.
//!
//! - **LMDB**: flips the lowest bit of the last byte of chosen values in `data.mdb`. The values
//!   are found in the file by the shape LMDB stores them in — a leaf node is `mn_lo, mn_hi,
//!   mn_flags, mn_ksize` (four little-endian `u16`s), the key, then the data — whose data is a
//!   value record (`crc32c(key ‖ value) ‖ value`) that verifies. A record that verifies by chance
//!   is a 2⁻³² event. Every copy of a chosen key's record is flipped, the live one and any
//!   stale copy on a free page alike. Values too large to sit in their leaf page (LMDB's
//!   overflow pages) are not found, so not damaged. Nothing else in the file is touched:
//!   damaging LMDB's page structure would crash any LMDB reader, not test the store.
//! - **RocksDB**: flips one bit in the first data block of chosen SST files of the `kv` column
//!   family (listed through a read-only instance, which takes no lock). RocksDB checksums
//!   blocks, not values, so the unit damaged is a block: a read of any key in it, a scan, or a
//!   compaction that reads it fails with `Corruption`. Values still in the WAL and memtables are
//!   not damaged (the WAL's own record checksums make a damaged record a lost tail, which is
//!   power loss, not rot).
//!
//! This reads and rewrites the files directly, not through heed or a second LMDB environment:
//! under the simulator the killed process's environment may still be open in this process, and
//! heed refuses to open an environment twice. For the same reason the extent of LMDB's data is
//! read from its two meta pages (the newer one's last used page): an environment opened with
//! `MDB_WRITEMAP` has a file as long as its map, gigabytes of hole past the data.

use std::collections::BTreeMap;
use std::fs::OpenOptions as FileOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

#[cfg(feature = "rocksdb")]
use rocksdb::{DB, Options};

use super::engine::EngineKind;
#[cfg(feature = "rocksdb")]
use super::engine::Table;
use super::record::open_record;
use super::{EngineError, detect_engine};

/// What [`rot_files`] damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rot {
    pub engine: EngineKind,
    /// LMDB: values damaged; RocksDB: data blocks damaged.
    pub damaged: usize,
    /// What there was to damage: LMDB values found, RocksDB `kv` table files.
    pub candidates: usize,
    /// The files written, by name.
    pub files: Vec<String>,
}

impl std::fmt::Display for Rot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.engine {
            EngineKind::Rocksdb => {
                write!(f, "{} of {} kv table files had a data block damaged", self.damaged, self.candidates)?
            }
            _ => write!(f, "{} of {} stored values damaged", self.damaged, self.candidates)?,
        }
        if !self.files.is_empty() {
            write!(f, " ({})", self.files.join(", "))?;
        }
        Ok(())
    }
}

/// Damages a share (`share`, above 0, at most 1; at least one) of the store's values (LMDB) or
/// `kv` table files (RocksDB) in the store directory `path`, choosing with `choose(n)`, which
/// returns an index below `n` (the simulator's seeded random stream). The node's process must
/// be down: a running one would keep serving from its caches.
pub fn rot_files(path: &Path, share: f64, choose: &mut dyn FnMut(usize) -> usize) -> Result<Rot, EngineError> {
    assert!(share > 0.0 && share <= 1.0, "a share of the stored values: above 0, at most 1");
    match detect_engine(path) {
        Some(EngineKind::Lmdb) => rot_lmdb(&path.join("data.mdb"), share, choose),
        #[cfg(feature = "rocksdb")]
        Some(EngineKind::Rocksdb) => rot_rocksdb(path, share, choose),
        #[cfg(not(feature = "rocksdb"))]
        Some(EngineKind::Rocksdb) => Err(EngineError::failed(EngineKind::Rocksdb, "this build has no RocksDB")),
        _ => Err(EngineError::NotAStore {
            engine: EngineKind::Lmdb,
            found: format!("no LMDB or RocksDB store at {}", path.display()),
        }),
    }
}

/// How many of `n` a share damages: at least one when there is any.
fn damaged_count(n: usize, share: f64) -> usize {
    ((n as f64 * share).ceil() as usize).clamp(n.min(1), n)
}

/// Picks `count` distinct indices below `n` with `choose`, in ascending order.
fn pick(n: usize, count: usize, choose: &mut dyn FnMut(usize) -> usize) -> Vec<usize> {
    let mut left: Vec<usize> = (0..n).collect();
    let mut picked: Vec<usize> = (0..count.min(n)).map(|_| left.swap_remove(choose(left.len()))).collect();
    picked.sort_unstable();
    picked
}

/// LMDB's leaf node header: `mn_lo, mn_hi, mn_flags, mn_ksize`.
const LMDB_NODE_HEADER: usize = 8;
/// LMDB's largest key (`MDB_MAXKEYSIZE` by default).
const LMDB_KEY_MAX: usize = 511;

/// Where LMDB's meta fields sit in a meta page on a 64-bit build (`mdb.c`'s `MDB_page` header,
/// 16 bytes, then `MDB_meta`): the magic, the page size (`mm_dbs[FREE_DBI].md_pad`), the last
/// used page and the id of the transaction that wrote the page.
const LMDB_META_MAGIC_AT: usize = 16;
const LMDB_META_PAGE_SIZE_AT: usize = 40;
const LMDB_META_LAST_PAGE_AT: usize = 136;
const LMDB_META_TXNID_AT: usize = 144;
const LMDB_MAGIC: u32 = 0xBEEF_C0DE;

/// The bytes at the start of `data.mdb` that hold LMDB's pages: up to the last used page of the
/// newer of the two meta pages. `None` when the meta pages do not read as LMDB's (then the
/// whole file is scanned).
fn lmdb_data_extent(file: &mut std::fs::File) -> Option<u64> {
    let read_at = |file: &mut std::fs::File, at: u64, len: usize| -> Option<Vec<u8>> {
        let mut bytes = vec![0; len];
        file.seek(SeekFrom::Start(at)).ok()?;
        file.read_exact(&mut bytes).ok()?;
        Some(bytes)
    };
    let u32_at = |page: &[u8], at: usize| u32::from_le_bytes(page[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |page: &[u8], at: usize| u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"));
    let meta_len = LMDB_META_TXNID_AT + 8;
    let first = read_at(file, 0, meta_len)?;
    let page_size = u32_at(&first, LMDB_META_PAGE_SIZE_AT) as u64;
    if u32_at(&first, LMDB_META_MAGIC_AT) != LMDB_MAGIC || !(512..=65_536).contains(&page_size) {
        return None;
    }
    let second = read_at(file, page_size, meta_len)?;
    if u32_at(&second, LMDB_META_MAGIC_AT) != LMDB_MAGIC {
        return None;
    }
    let newer = if u64_at(&second, LMDB_META_TXNID_AT) > u64_at(&first, LMDB_META_TXNID_AT) { &second } else { &first };
    u64_at(newer, LMDB_META_LAST_PAGE_AT).checked_add(1)?.checked_mul(page_size)
}

fn rot_lmdb(file: &Path, share: f64, choose: &mut dyn FnMut(usize) -> usize) -> Result<Rot, EngineError> {
    let failed = |e: std::io::Error| EngineError::failed(EngineKind::Lmdb, format!("{}: {e}", file.display()));
    let mut data = std::fs::File::open(file).map_err(failed)?;
    let extent = lmdb_data_extent(&mut data);
    data.seek(SeekFrom::Start(0)).map_err(failed)?;
    let mut bytes = Vec::new();
    data.take(extent.unwrap_or(u64::MAX)).read_to_end(&mut bytes).map_err(failed)?;
    // Every verifying value record, by key: the offset of its last byte, for each copy.
    let mut records: BTreeMap<&[u8], Vec<usize>> = BTreeMap::new();
    // LMDB keeps nodes 2-byte aligned.
    for at in (0..bytes.len().saturating_sub(LMDB_NODE_HEADER)).step_by(2) {
        let word = |i: usize| u16::from_le_bytes([bytes[at + 2 * i], bytes[at + 2 * i + 1]]) as usize;
        let (data_len, flags, key_len) = (word(0) | word(1) << 16, word(2), word(3));
        // Inline data only (no F_BIGDATA, F_SUBDATA or F_DUPDATA), a key, and room for a CRC.
        if flags != 0 || key_len == 0 || key_len > LMDB_KEY_MAX || data_len < 5 {
            continue;
        }
        let key_at = at + LMDB_NODE_HEADER;
        let Some(end) = key_at.checked_add(key_len + data_len).filter(|end| *end <= bytes.len()) else { continue };
        let (key, record) = bytes[key_at..end].split_at(key_len);
        if open_record(key, record).is_some() {
            records.entry(key).or_default().push(end - 1);
        }
    }
    let keys: Vec<&[u8]> = records.keys().copied().collect();
    let chosen = pick(keys.len(), damaged_count(keys.len(), share), choose);
    let mut writes: Vec<(usize, u8)> =
        chosen.iter().flat_map(|&k| records[keys[k]].iter().map(|&at| (at, bytes[at] ^ 1))).collect();
    writes.sort_unstable();
    let mut out = FileOptions::new().write(true).open(file).map_err(failed)?;
    for &(at, byte) in &writes {
        out.seek(SeekFrom::Start(at as u64)).and_then(|_| out.write_all(&[byte])).map_err(failed)?;
    }
    out.sync_all().map_err(failed)?;
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Rot {
        engine: EngineKind::Lmdb,
        damaged: chosen.len(),
        candidates: keys.len(),
        files: if writes.is_empty() { vec![] } else { vec![name] },
    })
}

/// Bytes at the start of an SST file that are always inside its first data block: a block holds
/// at least one key and value record, and its contents come first in the file.
#[cfg(feature = "rocksdb")]
const SST_FIRST_BLOCK_PREFIX: usize = 16;

#[cfg(feature = "rocksdb")]
fn rot_rocksdb(dir: &Path, share: f64, choose: &mut dyn FnMut(usize) -> usize) -> Result<Rot, EngineError> {
    let failed = |e: String| EngineError::failed(EngineKind::Rocksdb, format!("{}: {e}", dir.display()));
    let mut options = Options::default();
    options.set_max_open_files(-1);
    let families = Table::ALL.iter().map(|t| t.name());
    let listed = DB::open_cf_for_read_only(&options, dir, families, false)
        .and_then(|db| db.live_files())
        .map_err(|e| failed(format!("listing table files: {e}")))?;
    let mut tables: Vec<String> = listed
        .into_iter()
        .filter(|f| f.column_family_name == Table::Kv.name() && f.size > SST_FIRST_BLOCK_PREFIX)
        .map(|f| f.name.trim_start_matches('/').to_string())
        .collect();
    tables.sort();
    let chosen = pick(tables.len(), damaged_count(tables.len(), share), choose);
    let mut files = Vec::new();
    for &t in &chosen {
        let file = dir.join(&tables[t]);
        let at = choose(SST_FIRST_BLOCK_PREFIX) as u64;
        let io = |e: std::io::Error| failed(format!("{}: {e}", file.display()));
        let mut f = FileOptions::new().read(true).write(true).open(&file).map_err(io)?;
        let mut byte = [0u8];
        f.seek(SeekFrom::Start(at)).and_then(|_| f.read_exact(&mut byte)).map_err(io)?;
        f.seek(SeekFrom::Start(at)).and_then(|_| f.write_all(&[byte[0] ^ 1])).map_err(io)?;
        f.sync_all().map_err(io)?;
        files.push(tables[t].clone());
    }
    Ok(Rot { engine: EngineKind::Rocksdb, damaged: chosen.len(), candidates: tables.len(), files })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{DatabaseId, Op};
    use crate::store::{OpenOptions, Store, StoreLocation};

    fn store_with_values(location: &StoreLocation, options: &OpenOptions, n: u64) -> Store {
        let mut store = Store::open(location, options).expect("open");
        for i in 1..=n {
            let ops = vec![Op::Set {
                key: format!("cfg:{i}").into_bytes(),
                value: format!("value {i} of many").into_bytes(),
            }];
            let entry = store.next_entry(i * 1000, ops).expect("entry");
            store.apply(&[entry]).expect("apply");
        }
        store
    }

    fn damaged_keys(store: &Store, n: u64) -> Vec<u64> {
        (1..=n).filter(|i| store.get(format!("cfg:{i}").as_bytes()).is_err_and(|e| e.is_damage())).collect()
    }

    /// Also with `MDB_WRITEMAP`, whose `data.mdb` is as long as the map: the same values are
    /// found, from the pages LMDB used, and the same ones damaged.
    #[test]
    fn lmdb_rot_damages_exactly_the_chosen_values_and_each_read_of_one_fails_its_checksum() {
        let mut damaged = Vec::new();
        for write_map in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let location = StoreLocation::Lmdb(dir.path().join("store"));
            let options = OpenOptions { lmdb_write_map: write_map, ..OpenOptions::new(DatabaseId(7)) };
            drop(store_with_values(&location, &options, 100));
            let data_file = std::fs::metadata(dir.path().join("store/data.mdb")).expect("data.mdb").len();
            assert_eq!(data_file == options.lmdb_map_bytes as u64, write_map, "data.mdb is {data_file} bytes");
            let mut file = std::fs::File::open(dir.path().join("store/data.mdb")).expect("data.mdb");
            let extent = lmdb_data_extent(&mut file).expect("the meta pages read as LMDB's");
            assert!(extent < 1 << 20 && (extent == data_file) != write_map, "{extent} of {data_file} bytes");
            let mut next = 0;
            let rot = rot_files(&dir.path().join("store"), 0.05, &mut |n| {
                next += 7;
                next % n
            })
            .expect("rot");
            assert_eq!((rot.damaged, rot.candidates), (5, 100), "write_map {write_map}: {rot}");
            let store = Store::open(&location, &options).expect("reopen");
            damaged.push(damaged_keys(&store, 100));
            assert_eq!(damaged.last().map(Vec::len), Some(5));
            assert!(store.state_digest().is_err_and(|e| e.is_damage()), "a scrub finds the damage");
        }
        assert_eq!(damaged[0], damaged[1]);
    }

    #[test]
    #[cfg(feature = "rocksdb")]
    fn rocksdb_rot_damages_a_table_file_block_that_reads_and_scans_then_fail_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let location = StoreLocation::Rocksdb(dir.path().join("store"));
        let mut store = store_with_values(&location, &OpenOptions::new(DatabaseId(7)), 200);
        store.flush().expect("flush");
        drop(store);
        let rot = rot_files(&dir.path().join("store"), 1.0, &mut |n| 3 % n).expect("rot");
        assert_eq!(rot.damaged, rot.candidates, "{rot}");
        assert!(rot.damaged >= 1, "a flush wrote a kv table file: {rot}");
        let store = Store::open(&location, &OpenOptions::new(DatabaseId(7))).expect("reopen");
        assert!(!damaged_keys(&store, 200).is_empty(), "some read meets the damaged block");
        assert!(store.state_digest().is_err_and(|e| e.is_damage()), "a scrub finds the damage");
    }

    #[test]
    fn rot_of_a_directory_without_a_store_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = rot_files(dir.path(), 0.5, &mut |_| 0).expect_err("no store");
        assert!(err.to_string().contains(&dir.path().display().to_string()), "{err}");
    }
}
