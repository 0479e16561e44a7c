//! Transaction log entries: the unit of replication.
//!
//! Guarantees:
//! - An entry's `hash` is BLAKE3 over its canonical bytes, and the canonical bytes include the
//!   previous entry's hash, so the hashes chain: a dropped, repeated, reordered or altered entry
//!   changes every hash after it. [`LogEntry::seal`] is the only way to compute it, and
//!   [`LogEntry::decode`] recomputes it and refuses an entry whose stored hash differs.
//! - Decoding never trusts a length read from the input: every length is checked against
//!   [`crate::limits`] before anything is allocated, and trailing bytes are an error.
//!
//! Why BLAKE3: the chain hash is compared across every replica for every entry, so it must be
//! fast (BLAKE3 runs at several GB/s with SIMD), and a collision must not be something an
//! accident, or a bug that reorders bytes, can produce (it is a cryptographic hash, unlike
//! xxHash or CRC). It is a single well-specified 32-byte digest with a maintained Rust crate.
//!
//! # Encoding, format version 1
//!
//! All integers little-endian. The canonical bytes are everything before `hash`.
//!
//! ```text
//! offset  size  field
//! 0       1     format version (1)
//! 1       8     index (u64; the first entry is 1)
//! 9       16    database id (u128)
//! 25      8     root timestamp, milliseconds since the Unix epoch (u64)
//! 33      32    previous entry's hash (all zeros before entry 1)
//! 65      4     operation count (u32)
//! 69      ...   operations, each:
//!                 1  tag: 1 = set, 2 = delete
//!                 2  key length (u16), then the key
//!                 set only: 4  value length (u32), then the value
//! end-32  32    hash = BLAKE3(canonical bytes)
//! ```
//!
//! Entries are stored and sent Snappy-compressed ([`LogEntry::compress`]), as in the seed: log
//! entries are much larger than the values they carry, and compress well. Reading them back —
//! as an entry, as an entry with its bytes, or as checked bytes alone — is in `decode.rs`.

mod decode;

use std::fmt;
use std::str::FromStr;

pub use decode::{StoredEntry, VerifiedEntry};

use crate::limits::{self, ENTRY_BYTES_MAX, KEY_BYTES_MAX, LimitExceeded, OPS_PER_ENTRY_MAX, VALUE_BYTES_MAX};

thread_local! {
    /// One Snappy encoder per thread, reused: a fresh one allocates (and zeroes) a 32 KiB hash
    /// table for every input over 1 KiB, which was 6 % of a simulator run. The encoder clears
    /// the part of the table it uses before each block, so its output depends on the input
    /// alone, whatever it compressed before.
    static SNAPPY_ENCODER: std::cell::RefCell<snap::raw::Encoder> = std::cell::RefCell::new(snap::raw::Encoder::new());
}

/// Snappy's raw format of `bytes` (the stored and transmitted form of an entry).
fn snappy(bytes: &[u8]) -> Vec<u8> {
    SNAPPY_ENCODER.with_borrow_mut(|encoder| {
        encoder
            .compress_vec(bytes)
            .expect("snappy compresses any input below 4 GiB; entries are bounded by ENTRY_BYTES_MAX")
    })
}

/// The encoding version this build writes and the only one it reads.
pub const FORMAT_VERSION: u8 = 1;

const HEADER_BYTES: usize = 1 + 8 + 16 + 8 + 32 + 4;
const HASH_BYTES: usize = 32;
const TAG_SET: u8 = 1;
const TAG_DELETE: u8 = 2;

/// Identifies one replicated database. Replicas refuse entries, snapshots and stores of another.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct DatabaseId(pub u128);

impl fmt::Display for DatabaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for DatabaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseId({self})")
    }
}

impl FromStr for DatabaseId {
    type Err = String;
    /// Parses up to 32 hex digits; dashes (as in a UUID) are ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex: String = s.chars().filter(|c| *c != '-').collect();
        if hex.is_empty() || hex.len() > 32 {
            return Err(format!("database id {s:?} must be 1 to 32 hex digits (a UUID is fine)"));
        }
        // `from_str_radix` alone would also take a leading `+`.
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("database id {s:?} is not hexadecimal"));
        }
        u128::from_str_radix(&hex, 16).map(DatabaseId).map_err(|_| format!("database id {s:?} is not hexadecimal"))
    }
}

/// A chain hash: BLAKE3 of an entry's canonical bytes, which include the previous chain hash.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainHash(pub [u8; 32]);

impl ChainHash {
    /// The "previous hash" of entry 1: all zeros.
    pub const GENESIS: ChainHash = ChainHash([0; 32]);

    /// Lower-case hex of all 32 bytes.
    pub fn to_hex(&self) -> String {
        self.hex().to_string()
    }

    /// The hex on the stack: a chain hash is a BLAKE3 hash, and blake3 writes its hex from a
    /// table. Every applied batch carries one into the trace; a `format!` per byte (32
    /// allocations a hash) was 2 % of a simulated run.
    fn hex(&self) -> impl std::ops::Deref<Target = str> {
        blake3::Hash::from_bytes(self.0).to_hex()
    }
}

impl FromStr for ChainHash {
    type Err = String;
    /// Parses 64 hex digits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 64 {
            return Err(format!("chain hash {s:?} must be 64 hex digits"));
        }
        // A chain hash is a BLAKE3 hash: blake3 parses its hex (and refuses a `+` that
        // `u8::from_str_radix` would take).
        blake3::Hash::from_hex(s)
            .map(|hash| ChainHash(*hash.as_bytes()))
            .map_err(|_| format!("chain hash {s:?} is not hexadecimal"))
    }
}

/// Serializes as its text form (hex), so manifests and traces stay readable.
macro_rules! serde_as_text {
    ($ty:ty) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_as_text!(DatabaseId);
serde_as_text!(ChainHash);

impl fmt::Display for ChainHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for ChainHash {
    /// The first 8 bytes are enough to tell hashes apart in test output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChainHash({}…)", &self.hex()[..16])
    }
}

/// One change to the key-value state.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Op {
    Set { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
}

impl Op {
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Set { key, .. } | Op::Delete { key } => key,
        }
    }

    /// The value a set leaves under its key; None for a delete.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            Op::Set { value, .. } => Some(value),
            Op::Delete { .. } => None,
        }
    }

    /// Key and value bytes this operation writes (its share of an entry's logical bytes).
    pub fn logical_bytes(&self) -> u64 {
        match self {
            Op::Set { key, value } => (key.len() + value.len()) as u64,
            Op::Delete { key } => key.len() as u64,
        }
    }

    /// Checks the key and value against the limits and the key rules of [`validate_key`].
    pub fn validate(&self) -> Result<(), EntryError> {
        validate_key(self.key())?;
        if let Op::Set { value, .. } = self {
            limits::check("VALUE_BYTES_MAX", VALUE_BYTES_MAX, value.len())?;
        }
        Ok(())
    }
}

/// A key must be 1..=[`KEY_BYTES_MAX`] bytes with no ASCII whitespace or control bytes, so that
/// every stored key can be asked for over the memcached text protocol.
pub fn validate_key(key: &[u8]) -> Result<(), EntryError> {
    limits::check("KEY_BYTES_MAX", KEY_BYTES_MAX, key.len())?;
    if key.is_empty() {
        return Err(EntryError::BadKey { key: escape(key), reason: "is empty" });
    }
    if key.iter().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err(EntryError::BadKey {
            key: escape(key),
            reason: "contains whitespace or a control byte, which the memcached protocol cannot carry",
        });
    }
    Ok(())
}

/// A sealed log entry. Fields are public so tests and the simulator can build damaged entries;
/// every consumer re-verifies with [`LogEntry::verify_hash`] or [`LogEntry::decode`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LogEntry {
    pub index: u64,
    pub db_id: DatabaseId,
    pub timestamp_ms: u64,
    pub prev_hash: ChainHash,
    pub ops: Vec<Op>,
    pub hash: ChainHash,
}

impl LogEntry {
    /// Builds entry `index` after the entry whose hash is `prev_hash`, checking every limit.
    pub fn seal(
        index: u64,
        db_id: DatabaseId,
        timestamp_ms: u64,
        prev_hash: ChainHash,
        ops: Vec<Op>,
    ) -> Result<LogEntry, EntryError> {
        if index == 0 {
            return Err(EntryError::Malformed {
                index: Some(0),
                reason: "index 0 is reserved; the first entry is 1".into(),
            });
        }
        limits::check("OPS_PER_ENTRY_MAX", OPS_PER_ENTRY_MAX, ops.len())?;
        for op in &ops {
            op.validate()?;
        }
        let mut entry = LogEntry { index, db_id, timestamp_ms, prev_hash, ops, hash: ChainHash::GENESIS };
        let canonical = entry.canonical_bytes();
        limits::check("ENTRY_BYTES_MAX", ENTRY_BYTES_MAX, canonical.len() + HASH_BYTES)?;
        entry.hash = ChainHash(*blake3::hash(&canonical).as_bytes());
        Ok(entry)
    }

    /// The bytes the hash covers (everything but the hash itself).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let body: usize = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Set { key, value } => 1 + 2 + key.len() + 4 + value.len(),
                Op::Delete { key } => 1 + 2 + key.len(),
            })
            .sum();
        let mut out = Vec::with_capacity(HEADER_BYTES + body + HASH_BYTES);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.db_id.0.to_le_bytes());
        out.extend_from_slice(&self.timestamp_ms.to_le_bytes());
        out.extend_from_slice(&self.prev_hash.0);
        // Lengths fit: op count, key and value lengths are bounded by the limits, which
        // `seal` and `decode` check before an entry exists.
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for op in &self.ops {
            match op {
                Op::Set { key, value } => {
                    out.push(TAG_SET);
                    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                    out.extend_from_slice(key);
                    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    out.extend_from_slice(value);
                }
                Op::Delete { key } => {
                    out.push(TAG_DELETE);
                    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                    out.extend_from_slice(key);
                }
            }
        }
        out
    }

    /// Recomputes the hash from the canonical bytes.
    pub fn computed_hash(&self) -> ChainHash {
        ChainHash(*blake3::hash(&self.canonical_bytes()).as_bytes())
    }

    /// Checks that `hash` is the hash of this entry's contents.
    pub fn verify_hash(&self) -> Result<(), EntryError> {
        if self.computed_hash() == self.hash { Ok(()) } else { Err(EntryError::HashMismatch { index: self.index }) }
    }

    /// Canonical bytes followed by the hash.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.canonical_bytes();
        out.extend_from_slice(&self.hash.0);
        out
    }

    /// [`compress`](Self::compress), after checking `hash` against the very bytes compressed:
    /// one encoding serves both the check and the stored form.
    pub fn compress_verified(&self) -> Result<Vec<u8>, EntryError> {
        let encoded = self.encode();
        let canonical = &encoded[..encoded.len() - HASH_BYTES];
        if *blake3::hash(canonical).as_bytes() != self.hash.0 {
            return Err(EntryError::HashMismatch { index: self.index });
        }
        Ok(snappy(&encoded))
    }

    /// Snappy-compressed [`encode`](Self::encode): the stored and transmitted form.
    pub fn compress(&self) -> Vec<u8> {
        snappy(&self.encode())
    }

    /// Sum of key and value bytes this entry writes: the "logical bytes" of write amplification.
    pub fn logical_bytes(&self) -> u64 {
        self.ops.iter().map(Op::logical_bytes).sum()
    }
}

/// Why an entry was not built or not decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    #[error("key {key} {reason}")]
    BadKey { key: String, reason: &'static str },
    #[error("log entry format version {found} is not supported (this build reads version {FORMAT_VERSION})")]
    UnknownVersion { found: u8 },
    #[error("malformed log entry{}: {reason}", index.map(|i| format!(" {i}")).unwrap_or_default())]
    Malformed { index: Option<u64>, reason: String },
    #[error("log entry {index}: stored hash does not match its contents")]
    HashMismatch { index: u64 },
}

/// Printable form of a key for error messages: ASCII as is, other bytes as `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes.iter().take(KEY_BYTES_MAX + 16) {
        out.extend(std::ascii::escape_default(b).map(char::from));
    }
    if bytes.len() > KEY_BYTES_MAX + 16 {
        out.push_str("...");
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(index: u64, prev: ChainHash) -> LogEntry {
        LogEntry::seal(
            index,
            DatabaseId(7),
            1_000 + index,
            prev,
            vec![Op::Set { key: b"hello".to_vec(), value: b"world".to_vec() }, Op::Delete { key: b"42".to_vec() }],
        )
        .unwrap()
    }

    #[test]
    fn round_trips_through_encoding_and_compression() {
        let entry = sample(23, ChainHash::GENESIS);
        assert_eq!(LogEntry::decode(&entry.encode()).unwrap(), entry);
        assert_eq!(LogEntry::decompress(&entry.compress()).unwrap(), entry);
    }

    #[test]
    fn chains_each_hash_to_the_previous_one() {
        let first = sample(1, ChainHash::GENESIS);
        let second = sample(2, first.hash);
        let second_on_other_base = sample(2, ChainHash([1; 32]));
        assert_ne!(second.hash, second_on_other_base.hash);
    }

    #[test]
    fn refuses_trailing_bytes_truncation_and_unknown_versions() {
        let mut bytes = sample(1, ChainHash::GENESIS).encode();
        bytes.push(0);
        assert!(matches!(LogEntry::decode(&bytes), Err(EntryError::Malformed { index: Some(1), .. })));
        bytes.truncate(bytes.len() - 10);
        assert!(matches!(LogEntry::decode(&bytes), Err(EntryError::Malformed { .. })));
        bytes[0] = 9;
        assert_eq!(LogEntry::decode(&bytes), Err(EntryError::UnknownVersion { found: 9 }));
    }

    #[test]
    fn refuses_input_over_each_limit_by_name() {
        let too_long_key = Op::Set { key: vec![b'k'; KEY_BYTES_MAX + 1], value: vec![] };
        let err = LogEntry::seal(1, DatabaseId(1), 0, ChainHash::GENESIS, vec![too_long_key]).unwrap_err();
        assert!(matches!(err, EntryError::Limit(LimitExceeded { limit: "KEY_BYTES_MAX", .. })), "{err}");
        let too_big_value = Op::Set { key: b"k".to_vec(), value: vec![0; VALUE_BYTES_MAX + 1] };
        let err = LogEntry::seal(1, DatabaseId(1), 0, ChainHash::GENESIS, vec![too_big_value]).unwrap_err();
        assert!(matches!(err, EntryError::Limit(LimitExceeded { limit: "VALUE_BYTES_MAX", .. })), "{err}");
        let too_many_ops = vec![Op::Delete { key: b"k".to_vec() }; OPS_PER_ENTRY_MAX + 1];
        let err = LogEntry::seal(1, DatabaseId(1), 0, ChainHash::GENESIS, too_many_ops).unwrap_err();
        assert!(matches!(err, EntryError::Limit(LimitExceeded { limit: "OPS_PER_ENTRY_MAX", .. })), "{err}");
        let too_big_entry =
            (0..5).map(|i| Op::Set { key: vec![b'a' + i; 1], value: vec![0; VALUE_BYTES_MAX] }).collect();
        let err = LogEntry::seal(1, DatabaseId(1), 0, ChainHash::GENESIS, too_big_entry).unwrap_err();
        assert!(matches!(err, EntryError::Limit(LimitExceeded { limit: "ENTRY_BYTES_MAX", .. })), "{err}");
        assert!(err.to_string().contains("ENTRY_BYTES_MAX"));
    }

    #[test]
    fn refuses_keys_the_memcached_protocol_cannot_carry() {
        for key in [&b""[..], b"has space", b"new\nline", b"\x00"] {
            assert!(matches!(validate_key(key), Err(EntryError::BadKey { .. })), "{key:?}");
        }
        validate_key(b"zone:1234:dns").unwrap();
    }

    #[test]
    fn refuses_a_snappy_bomb_before_allocating() {
        // A snappy header claiming a 1 GiB output.
        let mut bomb = Vec::new();
        let mut n: u64 = 1 << 30;
        while n >= 0x80 {
            bomb.push((n as u8) | 0x80);
            n >>= 7;
        }
        bomb.push(n as u8);
        let err = LogEntry::decompress(&bomb).unwrap_err();
        assert!(matches!(err, EntryError::Limit(LimitExceeded { limit: "ENTRY_BYTES_MAX", .. })), "{err}");
    }

    #[test]
    fn a_chain_hash_is_written_as_lower_case_hex_and_read_back() {
        for bytes in [[0u8; 32], [0xff; 32], std::array::from_fn(|i| (i * 37 + 5) as u8)] {
            let hash = ChainHash(bytes);
            let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hash.to_hex(), expected);
            assert_eq!(hash.to_string(), expected);
            assert_eq!(expected.parse::<ChainHash>(), Ok(hash));
            assert_eq!(expected.to_uppercase().parse::<ChainHash>(), Ok(hash));
        }
        for bad in ["+f".repeat(32), "0".repeat(63), "0".repeat(65), format!("{}g", "0".repeat(63)), "é".repeat(32)] {
            assert!(bad.parse::<ChainHash>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parses_database_ids_as_hex_or_uuid() {
        assert_eq!("2a".parse::<DatabaseId>().unwrap(), DatabaseId(42));
        assert_eq!("00000000-0000-0000-0000-00000000002a".parse::<DatabaseId>().unwrap(), DatabaseId(42));
        assert!("xyz".parse::<DatabaseId>().is_err());
        assert!("+2a".parse::<DatabaseId>().is_err(), "hex digits only");
        assert!("".parse::<DatabaseId>().is_err());
    }
}
