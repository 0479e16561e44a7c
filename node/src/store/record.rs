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

    pub(crate) fn writes(&self) -> Vec<Write> {
        let put = |key: &[u8], value: Vec<u8>| Write::Put { table: Table::Meta, key: key.to_vec(), value };
        vec![
            put(meta::FORMAT, STORE_FORMAT_VERSION.to_be_bytes().to_vec()),
            put(meta::DB_ID, self.db_id.0.to_be_bytes().to_vec()),
            put(meta::APPLIED_INDEX, self.applied_index.to_be_bytes().to_vec()),
            put(meta::CHAIN_HASH, self.chain_hash.0.to_vec()),
            put(meta::FIRST_RETAINED_INDEX, self.first_retained_index.to_be_bytes().to_vec()),
            put(meta::KEY_COUNT, self.key_count.to_be_bytes().to_vec()),
            put(meta::LOGICAL_BYTES, self.logical_bytes.to_be_bytes().to_vec()),
        ]
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
