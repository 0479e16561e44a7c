//! Reading entries back from their stored and transmitted form.
//!
//! Guarantees: every function here checks the same things, in the same order, with the same
//! errors — the claimed size before anything is allocated, the format version, every length
//! against [`crate::limits`], every key against [`validate_key`], nothing trailing, index 0
//! refused, and the hash over the canonical bytes. They differ only in what they build:
//! - [`LogEntry::decode`] / [`LogEntry::decompress`]: the entry itself;
//! - [`VerifiedEntry`]: the entry and the bytes it came from (a replica applies the one and
//!   stores the other);
//! - [`StoredEntry`]: the bytes and the entry's index alone (a source forwarding what it stored
//!   checks each entry on the way out without building it: no allocation per operation).

use std::cell::RefCell;

use super::{
    ChainHash, DatabaseId, EntryError, FORMAT_VERSION, HASH_BYTES, LogEntry, Op, TAG_DELETE, TAG_SET, validate_key,
};
use crate::limits::{self, ENTRY_BYTES_MAX, KEY_BYTES_MAX, OPS_PER_ENTRY_MAX, VALUE_BYTES_MAX};
use crate::wire::LeReader;

thread_local! {
    /// Where [`StoredEntry::check`] decompresses, reused: the decompressed bytes are only hashed
    /// and parsed, never kept.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The fields of an entry before its operations.
struct Header {
    index: u64,
    db_id: DatabaseId,
    timestamp_ms: u64,
    prev_hash: ChainHash,
}

/// Parses `bytes` (an [`encode`](LogEntry::encode)d entry), handing each operation's key and,
/// for a set, its value to `on_op` as it is read, and checks the hash over the canonical bytes.
/// Returns the header and the hash.
fn parse<'a>(
    bytes: &'a [u8],
    mut on_op: impl FnMut(&'a [u8], Option<&'a [u8]>),
) -> Result<(Header, ChainHash), EntryError> {
    limits::check("ENTRY_BYTES_MAX", ENTRY_BYTES_MAX, bytes.len())?;
    let mut r = Reader { bytes: LeReader::new(bytes), index: None };
    let version = r.u8("format version")?;
    if version != FORMAT_VERSION {
        return Err(EntryError::UnknownVersion { found: version });
    }
    let index = r.u64("index")?;
    r.index = Some(index);
    let db_id = DatabaseId(u128::from_le_bytes(r.array::<16>("database id")?));
    let timestamp_ms = r.u64("timestamp")?;
    let prev_hash = ChainHash(r.array::<32>("previous hash")?);
    let op_count = r.u32("operation count")? as usize;
    limits::check("OPS_PER_ENTRY_MAX", OPS_PER_ENTRY_MAX, op_count)?;
    for _ in 0..op_count {
        let tag = r.u8("operation tag")?;
        let key_len = u16::from_le_bytes(r.array::<2>("key length")?) as usize;
        limits::check("KEY_BYTES_MAX", KEY_BYTES_MAX, key_len)?;
        let key = r.take(key_len, "key")?;
        let value = match tag {
            TAG_SET => {
                let value_len = r.u32("value length")? as usize;
                limits::check("VALUE_BYTES_MAX", VALUE_BYTES_MAX, value_len)?;
                Some(r.take(value_len, "value")?)
            }
            TAG_DELETE => None,
            other => return Err(r.malformed(format!("unknown operation tag {other}"))),
        };
        // Op::validate's checks, on the borrowed bytes.
        validate_key(key)?;
        on_op(key, value);
    }
    let hash = ChainHash(r.array::<32>("hash")?);
    if r.position() != bytes.len() {
        return Err(r.malformed(format!("{} trailing bytes after the hash", bytes.len() - r.position())));
    }
    if index == 0 {
        return Err(r.malformed("index 0 is reserved; the first entry is 1".into()));
    }
    // The encoding is canonical (fixed field order, exact lengths, two tags, nothing trailing),
    // so the bytes before the hash are the entry's canonical bytes: hashing them here checks the
    // entry without encoding it again.
    let canonical = &bytes[..bytes.len() - HASH_BYTES];
    if *blake3::hash(canonical).as_bytes() != hash.0 {
        return Err(EntryError::HashMismatch { index });
    }
    Ok((Header { index, db_id, timestamp_ms, prev_hash }, hash))
}

/// The decompressed size `compressed` claims, within [`ENTRY_BYTES_MAX`]: checked before any
/// output is allocated, so a Snappy bomb costs nothing.
fn claimed_len(compressed: &[u8]) -> Result<usize, EntryError> {
    let claimed = snap::raw::decompress_len(compressed)
        .map_err(|e| EntryError::Malformed { index: None, reason: format!("snappy header: {e}") })?;
    limits::check("ENTRY_BYTES_MAX", ENTRY_BYTES_MAX, claimed)?;
    Ok(claimed)
}

fn snappy_error(e: snap::Error) -> EntryError {
    EntryError::Malformed { index: None, reason: format!("snappy: {e}") }
}

impl LogEntry {
    /// Inverse of [`compress`](Self::compress): checks the claimed size before allocating.
    pub fn decompress(compressed: &[u8]) -> Result<LogEntry, EntryError> {
        claimed_len(compressed)?;
        let bytes = snap::raw::Decoder::new().decompress_vec(compressed).map_err(snappy_error)?;
        LogEntry::decode(&bytes)
    }

    /// Parses [`encode`](Self::encode)'s output, verifying every length and the hash.
    pub fn decode(bytes: &[u8]) -> Result<LogEntry, EntryError> {
        let mut ops = Vec::new();
        let (Header { index, db_id, timestamp_ms, prev_hash }, hash) = parse(bytes, |key, value| {
            ops.push(match value {
                Some(value) => Op::Set { key: key.to_vec(), value: value.to_vec() },
                None => Op::Delete { key: key.to_vec() },
            });
        })?;
        let entry = LogEntry { index, db_id, timestamp_ms, prev_hash, ops, hash };
        // Debug builds only: re-encoding would double the cost of every decode (every replicated
        // entry, every read of the log), and the hash already binds the bytes; the codec's
        // round trip is the property tests' to prove.
        debug_assert_eq!(
            &bytes[..bytes.len() - HASH_BYTES],
            entry.canonical_bytes(),
            "a decoded entry re-encodes to its bytes"
        );
        Ok(entry)
    }
}

/// A log entry together with its stored and transmitted form — the Snappy-compressed
/// [`LogEntry::encode`] bytes it was decoded from, its hash verified on the way. The only way
/// to build one is [`VerifiedEntry::decompress`], so holding one means the bytes and the entry
/// agree: a replica stores the bytes a frame brought, without encoding and compressing the
/// entry again at every hop of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedEntry {
    entry: LogEntry,
    compressed: Vec<u8>,
}

impl VerifiedEntry {
    /// [`LogEntry::decompress`], keeping the bytes.
    pub fn decompress(compressed: Vec<u8>) -> Result<VerifiedEntry, EntryError> {
        let entry = LogEntry::decompress(&compressed)?;
        Ok(VerifiedEntry { entry, compressed })
    }

    /// The stored form: what [`decompress`](Self::decompress) was given.
    pub fn compressed(&self) -> &[u8] {
        &self.compressed
    }

    pub fn into_compressed(self) -> Vec<u8> {
        self.compressed
    }
}

impl std::borrow::Borrow<LogEntry> for VerifiedEntry {
    fn borrow(&self) -> &LogEntry {
        &self.entry
    }
}

impl std::ops::Deref for VerifiedEntry {
    type Target = LogEntry;

    fn deref(&self) -> &LogEntry {
        &self.entry
    }
}

/// An entry's stored form, checked exactly as [`LogEntry::decompress`] checks it, without the
/// entry being built: what a source forwards. The only way to build one is
/// [`StoredEntry::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEntry {
    index: u64,
    compressed: Vec<u8>,
}

impl StoredEntry {
    /// Decompresses `compressed` into a per-thread buffer, parses it and verifies its hash.
    pub fn check(compressed: Vec<u8>) -> Result<StoredEntry, EntryError> {
        let claimed = claimed_len(&compressed)?;
        let index = SCRATCH.with_borrow_mut(|bytes| {
            bytes.resize(claimed, 0);
            let len = snap::raw::Decoder::new().decompress(&compressed, bytes).map_err(snappy_error)?;
            bytes.truncate(len);
            parse(bytes, |_, _| {}).map(|(header, _)| header.index)
        })?;
        Ok(StoredEntry { index, compressed })
    }

    pub fn index(&self) -> u64 {
        self.index
    }

    /// The stored form: what [`check`](Self::check) was given.
    pub fn compressed(&self) -> &[u8] {
        &self.compressed
    }

    /// The stored form: what [`check`](Self::check) was given.
    pub fn into_compressed(self) -> Vec<u8> {
        self.compressed
    }
}

/// The entry's fields in order; a short entry is malformed, its index named once known.
struct Reader<'a> {
    bytes: LeReader<'a>,
    index: Option<u64>,
}

impl<'a> Reader<'a> {
    fn malformed(&self, reason: String) -> EntryError {
        EntryError::Malformed { index: self.index, reason }
    }

    fn position(&self) -> usize {
        self.bytes.position()
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], EntryError> {
        self.bytes.take(n, field).map_err(|short| self.malformed(short.to_string()))
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], EntryError> {
        self.bytes.array(field).map_err(|short| self.malformed(short.to_string()))
    }

    fn u8(&mut self, field: &str) -> Result<u8, EntryError> {
        self.bytes.u8(field).map_err(|short| self.malformed(short.to_string()))
    }

    fn u32(&mut self, field: &str) -> Result<u32, EntryError> {
        self.bytes.u32(field).map_err(|short| self.malformed(short.to_string()))
    }

    fn u64(&mut self, field: &str) -> Result<u64, EntryError> {
        self.bytes.u64(field).map_err(|short| self.malformed(short.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(index: u64) -> LogEntry {
        let ops = vec![
            Op::Set { key: b"dns:a".to_vec(), value: b"192.0.2.1".to_vec() },
            Op::Delete { key: b"waf:b".to_vec() },
            Op::Set { key: b"zone".to_vec(), value: vec![b'x'; 300] },
        ];
        LogEntry::seal(index, DatabaseId(7), 1_000, ChainHash([3; 32]), ops).unwrap()
    }

    /// What each reader makes of `compressed`: the index, or the error.
    fn outcomes(compressed: &[u8]) -> [Result<u64, EntryError>; 3] {
        [
            LogEntry::decompress(compressed).map(|e| e.index),
            VerifiedEntry::decompress(compressed.to_vec()).map(|e| e.index),
            StoredEntry::check(compressed.to_vec()).map(|e| e.index()),
        ]
    }

    #[test]
    fn every_reader_accepts_and_refuses_the_same_bytes_with_the_same_error() {
        let entry = sample(41);
        let good = entry.compress();
        assert_eq!(outcomes(&good), [Ok(41), Ok(41), Ok(41)]);
        assert_eq!(StoredEntry::check(good.clone()).unwrap().into_compressed(), good, "the bytes are kept as given");
        // Damage every byte of the stored form in turn, and of the encoding under it (version,
        // index, lengths, tags, keys, values, hash): each reader says the same.
        let mut refused = 0;
        for position in 0..good.len() {
            let mut bad = good.clone();
            bad[position] ^= 0x41;
            let [full, verified, stored] = outcomes(&bad);
            assert_eq!((&full, &verified), (&stored, &stored), "stored form, byte {position}");
            refused += usize::from(stored.is_err());
        }
        let encoded = entry.encode();
        for position in 0..encoded.len() {
            let mut bad = encoded.clone();
            bad[position] ^= 0x41;
            let [full, verified, stored] = outcomes(&super::super::snappy(&bad));
            assert_eq!((&full, &verified), (&stored, &stored), "encoding, byte {position}");
            assert!(stored.is_err(), "a damaged byte {position} of the encoding is refused");
        }
        assert!(refused > 0, "some damage to the stored form is refused");
    }

    #[test]
    fn a_bad_key_or_a_snappy_bomb_is_refused_by_the_check_as_by_decode() {
        // A key with a space, sealed by hand (seal refuses it): the hash is right, the key not.
        let mut entry = sample(1);
        entry.ops[0] = Op::Set { key: b"has space".to_vec(), value: vec![] };
        entry.hash = entry.computed_hash();
        let [full, _, stored] = outcomes(&entry.compress());
        assert!(matches!(stored, Err(EntryError::BadKey { .. })), "{stored:?}");
        assert_eq!(full, stored);
        // A Snappy header claiming 1 GiB.
        let bomb = [0x80, 0x80, 0x80, 0x80, 0x04];
        let [full, _, stored] = outcomes(&bomb);
        assert!(matches!(stored, Err(EntryError::Limit(_))), "{stored:?}");
        assert_eq!(full, stored);
    }
}
