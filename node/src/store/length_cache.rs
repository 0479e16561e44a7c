//! The RocksDB engine's cache of the stored lengths of recently written keys.
//!
//! Every apply reads the length of the value each key replaces (the store's key count and
//! logical bytes follow from it), and in an LSM tree that read walks the memtables and every
//! level-0 file and level down to the key: a read before every write, which RocksDB is built to
//! avoid. A configuration store writes the same keys again and again, so the engine remembers
//! what it last wrote or read under each of the [`LENGTH_CACHE_KEYS`] most recently used keys —
//! the record's length, or that the key is absent — and reads the tree only for the others.
//!
//! Guarantees: an entry is what the database holds under its key. The engine records a write
//! only after RocksDB accepted the batch it was in, records a read only from a settled view,
//! and forgets everything when a write fails or a range is deleted. Its memory is bounded by
//! the capacity and reported ([`LengthCache::bytes`]) beside the engine's other memory.
//!
//! Deterministic: eviction follows the order of use alone; nothing visits the hash map in its
//! own order, and FxHash has no per-process seed. Keys reach a replica only through the
//! authenticated producer's log, so hash flooding is not a concern here.

use std::num::NonZeroUsize;

use lru::LruCache;
use rustc_hash::FxBuildHasher;

/// How many keys the cache remembers: enough for a configuration store's hot set (the
/// simulator's workloads write a few thousand keys), a couple of MiB at most.
pub const LENGTH_CACHE_KEYS: usize = 16 * 1024;

/// Heap bytes per entry beyond the key's own: the LRU's node (boxed key pointer and length,
/// value, two links: 48 B), its hash-table slot at 7/8 load (18 B), and the allocator's
/// rounding and headers for the node and the key (about 30 B).
pub const LENGTH_CACHE_ENTRY_OVERHEAD_BYTES: u64 = 96;

#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))] // RocksDB's engine is its one user
pub(crate) struct LengthCache {
    /// Unbounded in the `lru` crate's terms, and held to `capacity` here: a bounded one
    /// allocates its hash table for the full capacity at once, and probing a table sized for
    /// 16 Ki keys that holds a few thousand misses the CPU cache far more often.
    entries: LruCache<Box<[u8]>, Option<usize>, FxBuildHasher>,
    capacity: usize,
    key_bytes: u64,
}

#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
impl LengthCache {
    pub(crate) fn new(capacity: NonZeroUsize) -> LengthCache {
        LengthCache { entries: LruCache::unbounded_with_hasher(FxBuildHasher), capacity: capacity.get(), key_bytes: 0 }
    }

    /// What the database holds under `key`, if known: `Some(None)` for a key known absent.
    /// Only [`record`](Self::record) counts as a use: an apply records every key it looked up.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<usize>> {
        self.entries.peek(key).copied()
    }

    /// Remembers that the database now holds a record of `len` bytes under `key` (`None`:
    /// nothing), evicting the least recently used key when full.
    pub(crate) fn record(&mut self, key: Box<[u8]>, len: Option<usize>) {
        if let Some(known) = self.entries.get_mut(&*key) {
            *known = len;
            return;
        }
        self.key_bytes += key.len() as u64;
        self.entries.push(key, len);
        if self.entries.len() > self.capacity
            && let Some((evicted, _)) = self.entries.pop_lru()
        {
            self.key_bytes -= evicted.len() as u64;
        }
        assert!(self.entries.len() <= self.capacity, "the cache stays within its capacity");
    }

    /// Forgets every key: after a write whose outcome is unknown, or one the cache cannot follow.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.key_bytes = 0;
    }

    /// Estimated heap bytes held: the keys plus [`LENGTH_CACHE_ENTRY_OVERHEAD_BYTES`] each.
    pub(crate) fn bytes(&self) -> u64 {
        self.key_bytes + self.entries.len() as u64 * LENGTH_CACHE_ENTRY_OVERHEAD_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: usize) -> LengthCache {
        LengthCache::new(NonZeroUsize::new(capacity).unwrap())
    }

    #[test]
    fn remembers_lengths_and_absence_and_the_latest_write_wins() {
        let mut c = cache(4);
        assert_eq!(c.get(b"a"), None, "nothing is known at first");
        c.record(b"a".as_slice().into(), Some(10));
        c.record(b"b".as_slice().into(), None);
        assert_eq!(c.get(b"a"), Some(Some(10)));
        assert_eq!(c.get(b"b"), Some(None), "a key known absent is not an unknown key");
        c.record(b"a".as_slice().into(), None);
        c.record(b"b".as_slice().into(), Some(3));
        assert_eq!((c.get(b"a"), c.get(b"b")), (Some(None), Some(Some(3))));
        assert_eq!(c.bytes(), 2 + 2 * LENGTH_CACHE_ENTRY_OVERHEAD_BYTES, "a rewrite adds no key bytes");
    }

    #[test]
    fn evicts_the_least_recently_used_key_and_its_bytes() {
        let mut c = cache(2);
        c.record(b"old".as_slice().into(), Some(1));
        c.record(b"used".as_slice().into(), Some(2));
        assert_eq!(c.get(b"old"), Some(Some(1)), "a lookup is not a use");
        c.record(b"old".as_slice().into(), Some(1));
        // Recorded again: `used` is now the oldest.
        c.record(b"new".as_slice().into(), Some(3));
        assert_eq!(c.get(b"used"), None, "evicted");
        assert_eq!((c.get(b"old"), c.get(b"new")), (Some(Some(1)), Some(Some(3))));
        assert_eq!(c.bytes(), 6 + 2 * LENGTH_CACHE_ENTRY_OVERHEAD_BYTES);
        c.clear();
        assert_eq!((c.get(b"old"), c.bytes()), (None, 0));
    }
}
