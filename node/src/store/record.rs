//! The record layout (see the store's module doc): the `meta` table's fixed keys and the
//! [`Head`] mirrored from it, log keys, and value records with their CRC32C.

use super::StoreError;
use super::engine::{Engine, Table, Write};
use crate::entry::{ChainHash, DatabaseId};

/// Version of the on-disk layout described in the module doc.
pub const STORE_FORMAT_VERSION: u64 = 1;

/// Fixed keys of the `meta` table.
pub mod meta {
    pub const FORMAT: &[u8] = b"format";
    pub const DB_ID: &[u8] = b"db_id";
    pub const APPLIED_INDEX: &[u8] = b"applied_index";
    pub const CHAIN_HASH: &[u8] = b"chain_hash";
    pub const FIRST_RETAINED_INDEX: &[u8] = b"first_retained_index";
    pub const KEY_COUNT: &[u8] = b"key_count";
    pub const LOGICAL_BYTES: &[u8] = b"logical_bytes";
}

/// Store-wide state, mirrored from the `meta` table and rewritten by every commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) db_id: DatabaseId,
    pub(crate) applied_index: u64,
    pub(crate) chain_hash: ChainHash,
    pub(crate) first_retained_index: u64,
    pub(crate) key_count: u64,
    pub(crate) logical_bytes: u64,
}

fn meta_put(key: &[u8], value: Vec<u8>) -> Write {
    Write::Put { table: Table::Meta, key: key.to_vec(), value }
}

impl Head {
    pub(crate) fn fresh(db_id: DatabaseId) -> Head {
        Head {
            db_id,
            applied_index: 0,
            chain_hash: ChainHash::GENESIS,
            first_retained_index: 1,
            key_count: 0,
            logical_bytes: 0,
        }
    }

    /// Every field of the head, as a new store's first commit writes them.
    pub(crate) fn writes(&self) -> Vec<Write> {
        let mut writes = vec![
            meta_put(meta::FORMAT, STORE_FORMAT_VERSION.to_be_bytes().to_vec()),
            meta_put(meta::DB_ID, self.db_id.0.to_be_bytes().to_vec()),
        ];
        self.push_fields(None, &mut writes);
        writes
    }

    /// The fields that differ from `stored`, the head the `meta` table holds now: what a commit
    /// that moves the head from `stored` to `self` writes. An apply moves four fields and a
    /// garbage collection one, and every write a commit spares is a B-tree descent (LMDB) or
    /// a memtable insert and WAL record (RocksDB) spared, on every replica.
    pub(crate) fn changes_from(&self, stored: &Head, writes: &mut Vec<Write>) {
        assert_eq!(self.db_id, stored.db_id, "a store's database id never changes");
        self.push_fields(Some(stored), writes);
    }

    /// The fields a commit rewrites, those equal in `stored` (when given) left out.
    fn push_fields(&self, stored: Option<&Head>, writes: &mut Vec<Write>) {
        let changed = |field: fn(&Head) -> u64| stored.is_none_or(|stored| field(stored) != field(self));
        let mut u64_field = |key: &[u8], field: fn(&Head) -> u64| {
            if changed(field) {
                writes.push(meta_put(key, field(self).to_be_bytes().to_vec()));
            }
        };
        u64_field(meta::APPLIED_INDEX, |head| head.applied_index);
        u64_field(meta::FIRST_RETAINED_INDEX, |head| head.first_retained_index);
        u64_field(meta::KEY_COUNT, |head| head.key_count);
        u64_field(meta::LOGICAL_BYTES, |head| head.logical_bytes);
        if stored.is_none_or(|stored| stored.chain_hash != self.chain_hash) {
            writes.push(meta_put(meta::CHAIN_HASH, self.chain_hash.0.to_vec()));
        }
    }

    /// Reads the head from `meta`; `None` for an empty (never initialised) store.
    pub(crate) fn load(engine: &dyn Engine, location: &str) -> Result<Option<Head>, StoreError> {
        let Some(format) = engine.get(Table::Meta, meta::FORMAT)? else {
            return Ok(None);
        };
        let format = u64::from_be_bytes(fixed(&format, "format")?);
        if format != STORE_FORMAT_VERSION {
            return Err(StoreError::UnknownFormat { location: location.to_string(), found: format });
        }
        let field = |key: &'static [u8]| -> Result<Vec<u8>, StoreError> {
            engine
                .get(Table::Meta, key)?
                .ok_or_else(|| StoreError::CorruptMeta(format!("field {} is missing", String::from_utf8_lossy(key))))
        };
        let u64_field = |key: &'static [u8]| -> Result<u64, StoreError> {
            Ok(u64::from_be_bytes(fixed(&field(key)?, std::str::from_utf8(key).unwrap_or("?"))?))
        };
        Ok(Some(Head {
            db_id: DatabaseId(u128::from_be_bytes(fixed(&field(meta::DB_ID)?, "db_id")?)),
            applied_index: u64_field(meta::APPLIED_INDEX)?,
            chain_hash: ChainHash(fixed(&field(meta::CHAIN_HASH)?, "chain_hash")?),
            first_retained_index: u64_field(meta::FIRST_RETAINED_INDEX)?,
            key_count: u64_field(meta::KEY_COUNT)?,
            logical_bytes: u64_field(meta::LOGICAL_BYTES)?,
        }))
    }
}

pub(crate) fn fixed<const N: usize>(bytes: &[u8], field: &str) -> Result<[u8; N], StoreError> {
    bytes
        .try_into()
        .map_err(|_| StoreError::CorruptMeta(format!("field {field} has {} bytes, expected {N}", bytes.len())))
}

pub(crate) fn log_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// A value as stored: CRC32C over key and value, then the value. Covering the key catches a
/// value that ends up under the wrong key, not only flipped bits.
pub(crate) fn value_record(key: &[u8], value: &[u8]) -> Vec<u8> {
    let crc = crc32c::crc32c_append(crc32c::crc32c(key), value);
    let mut record = Vec::with_capacity(4 + value.len());
    record.extend_from_slice(&crc.to_le_bytes());
    record.extend_from_slice(value);
    record
}

/// The value inside a record, if its checksum verifies.
pub(crate) fn open_record<'r>(key: &[u8], record: &'r [u8]) -> Option<&'r [u8]> {
    let (crc, value) = record.split_first_chunk::<4>()?;
    (u32::from_le_bytes(*crc) == crc32c::crc32c_append(crc32c::crc32c(key), value)).then_some(value)
}

/// The value inside a record, if its checksum verifies (for read-only tools).
pub(crate) fn verified_value<'r>(key: &[u8], record: &'r [u8]) -> Option<&'r [u8]> {
    open_record(key, record)
}

/// Length of the value inside a record, without verifying it (for size accounting only).
pub(crate) fn record_value_len(record: &[u8]) -> u64 {
    value_len_of_record(record.len())
}

/// Length of the value inside a record of `record_len` bytes.
pub(crate) fn value_len_of_record(record_len: usize) -> u64 {
    record_len.saturating_sub(4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mem::{MemDisk, MemEngine};

    fn put_keys(writes: &[Write]) -> Vec<&[u8]> {
        writes
            .iter()
            .map(|write| match write {
                Write::Put { table: Table::Meta, key, .. } => key.as_slice(),
                other => panic!("a head writes only meta puts, not {other:?}"),
            })
            .collect()
    }

    /// A commit writes the head fields that moved, and no others; what it leaves alone is
    /// still there, so the store reads back exactly the new head.
    #[test]
    fn a_commit_writes_the_fields_that_moved_and_reads_back_whole() {
        let mut engine = MemEngine::open(MemDisk::default(), true);
        let stored = Head::fresh(DatabaseId(7));
        engine.commit(stored.writes()).unwrap();
        assert_eq!(Head::load(&engine, "test").unwrap(), Some(stored));
        type Move = (&'static [u8], fn(&mut Head));
        let moves: [Move; 5] = [
            (meta::APPLIED_INDEX, |head| head.applied_index += 1),
            (meta::CHAIN_HASH, |head| head.chain_hash = ChainHash([9; 32])),
            (meta::FIRST_RETAINED_INDEX, |head| head.first_retained_index += 3),
            (meta::KEY_COUNT, |head| head.key_count += 2),
            (meta::LOGICAL_BYTES, |head| head.logical_bytes += 100),
        ];
        let mut stored = stored;
        for (key, change) in moves {
            let mut head = stored;
            change(&mut head);
            let mut writes = Vec::new();
            head.changes_from(&stored, &mut writes);
            assert_eq!(put_keys(&writes), vec![key], "only {} moved", String::from_utf8_lossy(key));
            engine.commit(writes).unwrap();
            assert_eq!(Head::load(&engine, "test").unwrap(), Some(head));
            stored = head;
        }
        let mut unchanged = Vec::new();
        stored.changes_from(&stored, &mut unchanged);
        assert!(unchanged.is_empty(), "an unmoved head writes nothing: {unchanged:?}");
    }

    #[test]
    #[should_panic(expected = "database id never changes")]
    fn a_head_of_another_database_is_not_a_change() {
        let mut writes = Vec::new();
        Head::fresh(DatabaseId(1)).changes_from(&Head::fresh(DatabaseId(2)), &mut writes);
    }
}
