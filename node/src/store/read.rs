//! Reads of the key-value state: a key, several keys, and the whole state in key order (its
//! digest, a dump, usage by prefix).
//!
//! Guarantees: every value read is checked against its CRC32C first; a damaged one fails the
//! read with [`StoreError::Checksum`] naming its key, is counted, and its bytes are never
//! returned. A multi-key read or a scan that reaches a damaged value fails whole.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use super::engine::{EngineError, Table};
use super::record::{open_record, record_value_len};
use super::{Store, StoreError};
use crate::entry::{ChainHash, escape};

/// Keys and bytes under one key prefix (the part before the first `:`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixUsage {
    pub keys: u64,
    pub bytes: u64,
}

/// BLAKE3 over the whole KV state in key order. Equal on two stores iff their states are equal.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateDigest(pub [u8; 32]);

impl std::fmt::Debug for StateDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateDigest({})", ChainHash(self.0).to_hex().get(..16).unwrap_or_default())
    }
}

impl std::fmt::Display for StateDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&ChainHash(self.0).to_hex())
    }
}

impl std::str::FromStr for StateDigest {
    type Err = String;
    /// Parses 64 hex digits, as [`Display`](std::fmt::Display) writes them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<ChainHash>().map(|hash| StateDigest(hash.0)).map_err(|e| e.replace("chain hash", "state digest"))
    }
}

/// Written as its hex, as `/v1/status` shows it.
impl serde::Serialize for StateDigest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for StateDigest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

impl Store {
    /// The value under `key`, verified against its checksum.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let mut held = None;
        self.get_each(&[key], &mut |_, value| {
            held = value.map(<[u8]>::to_vec);
            false
        })?;
        Ok(held)
    }

    /// Looks up each of `keys` in order, in one view of the store, handing `found` each key's
    /// position in `keys` and its verified value (None: absent), borrowed from the engine for the
    /// call; stops at the first `false`. A value whose checksum fails ends the reads with
    /// [`StoreError::Checksum`], as [`get`](Self::get) does.
    pub fn get_each(
        &self,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, Option<&[u8]>) -> bool,
    ) -> Result<(), StoreError> {
        let mut damaged = None;
        let read = self.engine.get_each(Table::Kv, keys, &mut |position, record| match record {
            None => found(position, None),
            Some(record) => match open_record(keys[position], record) {
                Some(value) => found(position, Some(value)),
                None => {
                    damaged = Some(position);
                    false
                }
            },
        });
        match read {
            Err(source @ EngineError::Corruption { .. }) => {
                self.checksum_failures.fetch_add(1, Ordering::Relaxed);
                // The engine does not say which key it was reading.
                let key = match keys {
                    [key] => escape(key),
                    keys => format!("one of {}", keys.iter().map(|key| escape(key)).collect::<Vec<_>>().join(", ")),
                };
                return Err(StoreError::CorruptRead { key, source });
            }
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
        if let Some(position) = damaged {
            let key = escape(keys[position]);
            self.checksum_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(key = %key, location = %self.location, "value checksum mismatch");
            return Err(StoreError::Checksum { key });
        }
        Ok(())
    }

    /// Digest of the whole KV state, verifying every value's checksum on the way.
    pub fn state_digest(&self) -> Result<StateDigest, StoreError> {
        // Fed to the hasher in pieces of at least 64 KiB, not a field at a time: BLAKE3 hashes
        // a long input's 1 KiB chunks side by side (SIMD), short ones a block after another —
        // a whole-store digest of every node at a run's end was a twentieth of a large run.
        // The digest is the same however the bytes are split.
        const PIECE_BYTES: usize = 64 << 10;
        let mut hasher = blake3::Hasher::new();
        let mut piece = Vec::with_capacity(2 * PIECE_BYTES);
        self.scan_values(&mut |key, value| {
            piece.extend_from_slice(&(key.len() as u64).to_le_bytes());
            piece.extend_from_slice(key);
            piece.extend_from_slice(&(value.len() as u64).to_le_bytes());
            piece.extend_from_slice(value);
            if piece.len() >= PIECE_BYTES {
                hasher.update(&piece);
                piece.clear();
            }
        })?;
        hasher.update(&piece);
        Ok(StateDigest(*hasher.finalize().as_bytes()))
    }

    /// Every key and value, in key order, checksum-verified. For tests and small stores.
    pub fn dump(&self) -> Result<Vec<KeyValue>, StoreError> {
        let mut out = Vec::new();
        self.scan_values(&mut |key, value| out.push((key.to_vec(), value.to_vec())))?;
        Ok(out)
    }

    /// Visits every key and verified value in key order; stops at the first damaged value and
    /// reports it (counted) as [`StoreError::Checksum`].
    fn scan_values(&self, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), StoreError> {
        let mut damaged = None;
        self.engine.scan(Table::Kv, &[], &mut |key, record| match open_record(key, record) {
            Some(value) => {
                visit(key, value);
                true
            }
            None => {
                damaged = Some(escape(key));
                false
            }
        })?;
        match damaged {
            Some(key) => {
                self.checksum_failures.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::Checksum { key })
            }
            None => Ok(()),
        }
    }

    /// Keys and bytes grouped by prefix (the part of the key before the first `:`; a key with
    /// no `:` is its own group), as QSusage and MCInspector report usage.
    pub fn usage_by_prefix(&self) -> Result<BTreeMap<String, PrefixUsage>, StoreError> {
        let mut usage: BTreeMap<String, PrefixUsage> = BTreeMap::new();
        self.engine.scan(Table::Kv, &[], &mut |key, record| {
            let prefix = key.split(|b| *b == b':').next().unwrap_or(key);
            let entry = usage.entry(String::from_utf8_lossy(prefix).into_owned()).or_default();
            entry.keys += 1;
            entry.bytes += key.len() as u64 + record_value_len(record);
            true
        })?;
        Ok(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{DatabaseId, Op};

    #[test]
    fn the_state_digest_is_blake3_over_each_key_and_value_with_their_lengths_in_key_order() {
        let mut store = Store::placeholder(DatabaseId(7));
        // Past the digest's 64 KiB pieces, values of every length a piece boundary could cut.
        let ops: Vec<Op> = (0..400u32)
            .map(|n| Op::Set { key: format!("key:{n:04}").into_bytes(), value: vec![n as u8; (n as usize * 7) % 900] })
            .collect();
        for (index, ops) in ops.chunks(50).enumerate() {
            let entry = store.next_entry(index as u64 + 1, ops.to_vec()).unwrap();
            store.apply(&[entry]).unwrap();
        }
        let mut expected = blake3::Hasher::new();
        for (key, value) in store.dump().unwrap() {
            expected.update(&(key.len() as u64).to_le_bytes());
            expected.update(&key);
            expected.update(&(value.len() as u64).to_le_bytes());
            expected.update(&value);
        }
        let bytes: usize = store.dump().unwrap().iter().map(|(k, v)| 16 + k.len() + v.len()).sum();
        assert!(bytes > 2 * (64 << 10), "the store spans several pieces: {bytes} bytes");
        assert_eq!(store.state_digest().unwrap(), StateDigest(*expected.finalize().as_bytes()));
    }
}
