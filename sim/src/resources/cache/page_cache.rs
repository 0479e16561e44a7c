//! The cache in front of the pages: an LRU with a capacity in bytes, counted the way Redwood's
//! pager counts (`PagerCacheHit`: the page was cached; `PagerCacheMiss`: a physical read).
//!
//! Guarantees: never holds more bytes than its capacity; hits plus misses equal the pages read;
//! deterministic — the LRU's hash map is only looked up, never iterated, with a fixed hasher.

use std::hash::BuildHasherDefault;

use super::layout::Page;

/// Hits and misses, as Redwood's pager counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touches {
    pub hits: u64,
    pub misses: u64,
}

impl std::ops::AddAssign for Touches {
    fn add_assign(&mut self, other: Touches) {
        self.hits += other.hits;
        self.misses += other.misses;
    }
}

/// A fixed hasher: the map is never iterated, and a per-process random one would make the
/// simulator draw randomness it does not need.
type FixedHasher = BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// An LRU of pages with a capacity in bytes (the `lru` crate, unbounded, evicting the least
/// recently used pages until the bytes fit; a capacity of 0 caches nothing).
#[derive(Debug)]
pub struct PageCache {
    lru: lru::LruCache<Page, u64, FixedHasher>,
    capacity_bytes: u64,
    used_bytes: u64,
}

impl PageCache {
    pub fn new(capacity_bytes: u64) -> PageCache {
        PageCache { lru: lru::LruCache::unbounded_with_hasher(FixedHasher::default()), capacity_bytes, used_bytes: 0 }
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Bytes of the pages held.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Pages held.
    pub fn len(&self) -> usize {
        self.lru.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lru.is_empty()
    }

    /// Reads `page` of `bytes`: a hit if cached (it becomes the most recent), else a miss that
    /// loads it — unless it is larger than the whole cache, which it then empties without being
    /// kept (RocksDB's `LRUCacheShard::Insert` evicts all it can before inserting over capacity,
    /// and `Release` erases an entry while the shard is over capacity).
    pub fn read(&mut self, page: Page, bytes: u64) -> Touches {
        if self.lru.get(&page).is_some() {
            return Touches { hits: 1, misses: 0 };
        }
        self.insert(page, bytes);
        Touches { hits: 0, misses: 1 }
    }

    /// Writes `page` of `bytes` (a new page from a split): cached, no read.
    pub fn write(&mut self, page: Page, bytes: u64) {
        if let Some(old) = self.lru.pop(&page) {
            self.used_bytes -= old;
        }
        self.insert(page, bytes);
    }

    fn insert(&mut self, page: Page, bytes: u64) {
        if bytes > self.capacity_bytes {
            self.clear();
            return;
        }
        while self.used_bytes + bytes > self.capacity_bytes {
            let (_, evicted) = self.lru.pop_lru().expect("pages are held while bytes are used");
            self.used_bytes -= evicted;
        }
        self.lru.put(page, bytes);
        self.used_bytes += bytes;
        assert!(self.used_bytes <= self.capacity_bytes, "the cache holds more than its capacity");
    }

    /// Whether `page` is cached (without making it the most recent).
    pub fn contains(&self, page: Page) -> bool {
        self.lru.contains(&page)
    }

    /// Drops every page: the process that held the cache died.
    pub fn clear(&mut self) {
        self.lru.clear();
        self.used_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_on_a_known_trace() {
        // Capacity 2: a b a c b — a miss, b miss, a hit, c miss (evicts b), b miss (evicts a).
        let mut cache = PageCache::new(2 * 8192);
        let (a, b, c) = (Page::Leaf(1), Page::Leaf(2), Page::Leaf(3));
        let trace: Vec<Touches> = [a, b, a, c, b].into_iter().map(|p| cache.read(p, 8192)).collect();
        let hits: Vec<u64> = trace.iter().map(|t| t.hits).collect();
        assert_eq!(hits, [0, 0, 1, 0, 0]);
        assert_eq!(cache.len(), 2);
        // Now b (newest) and c are cached; a is not.
        assert_eq!(cache.read(c, 8192), Touches { hits: 1, misses: 0 });
        assert_eq!(cache.read(a, 8192), Touches { hits: 0, misses: 1 });
        assert_eq!(cache.used_bytes(), 2 * 8192);
    }

    #[test]
    fn a_zero_capacity_cache_misses_everything() {
        let mut cache = PageCache::new(0);
        for _ in 0..3 {
            assert_eq!(cache.read(Page::Leaf(7), 8192), Touches { hits: 0, misses: 1 });
        }
        assert!(cache.is_empty());
    }

    #[test]
    fn pages_of_different_sizes_evict_by_bytes() {
        // 10 KiB: a 6 KiB page and two 2 KiB pages fit; a third 2 KiB page evicts the 6 KiB one
        // (least recent), and the 2 KiB ones stay.
        let mut cache = PageCache::new(10 << 10);
        cache.read(Page::Leaf(1), 6 << 10);
        cache.read(Page::Leaf(2), 2 << 10);
        cache.read(Page::Leaf(3), 2 << 10);
        assert_eq!((cache.len(), cache.used_bytes()), (3, 10 << 10));
        cache.read(Page::Leaf(4), 2 << 10);
        assert_eq!((cache.len(), cache.used_bytes()), (3, 6 << 10));
        assert_eq!(cache.read(Page::Leaf(2), 2 << 10), Touches { hits: 1, misses: 0 });
        assert_eq!(cache.read(Page::Leaf(1), 6 << 10), Touches { hits: 0, misses: 1 });
        // A page larger than the whole cache is read and never kept, and it empties the cache.
        for _ in 0..2 {
            assert_eq!(cache.read(Page::Index { file: 0 }, 11 << 10), Touches { hits: 0, misses: 1 });
        }
        assert!(cache.is_empty() && cache.used_bytes() == 0);
    }
}
