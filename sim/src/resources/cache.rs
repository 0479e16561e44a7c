//! The page-cache model: which pages a node's reads and applies touch, and whether each was
//! already in its cache.
//!
//! Pages come from the node's real keys and value sizes. [`PageLayout`] lays the key space out
//! the way a B+tree does (Redwood, LMDB): leaf pages of `page_bytes` holding contiguous key
//! ranges, split in half when an insert overflows one (so leaves run half to fully filled, about
//! 70 % on average), and inner pages above them — each inner page covering `fanout` children —
//! up to a single root. A lookup touches every page on the path from the root to the key's leaf.
//!
//! [`PageCache`] is an LRU of page ids with a capacity in pages, counted the way Redwood counts
//! (`PagerCacheHit`: the page was cached; `PagerCacheMiss`: a physical read was issued). An
//! apply is a read-modify-write of the key's leaf: a miss if the leaf was not cached; a page a
//! split creates is written, so it enters the cache without a miss.
//!
//! Guarantees: deterministic — the layout is a `BTreeMap` and the LRU's hash map is only looked
//! up, never iterated, with a fixed hasher; the cache never holds more than its capacity; hits
//! plus misses equal the pages touched.

use std::collections::BTreeMap;
use std::hash::BuildHasherDefault;
use std::num::NonZeroUsize;

/// Bytes a key-value pair takes in a leaf beyond its key and value: a slot, a length, a
/// checksum (LMDB's node header is 8 bytes; Redwood's delta-tree entry about as much).
pub const ENTRY_OVERHEAD_BYTES: u64 = 16;
/// Bytes one child reference takes in an inner page beyond its separator key (page number,
/// offsets).
pub const CHILD_OVERHEAD_BYTES: u64 = 16;

/// A page: a leaf by its id, or an inner page by its level (1 = just above the leaves) and
/// number within the level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Page {
    Leaf(u64),
    Inner { level: u8, n: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Leaf {
    id: u64,
    bytes: u64,
}

/// Leaf pages over the node's keys, B+tree style (see the module doc).
#[derive(Clone, Debug)]
pub struct PageLayout {
    page_bytes: u64,
    /// Each leaf by the first key it may hold; the first leaf starts at the empty key, so every
    /// key has exactly one leaf.
    leaves: BTreeMap<Vec<u8>, Leaf>,
    /// Every key's bytes in its leaf (key + value + overhead), to split leaves where they are.
    entries: BTreeMap<Vec<u8>, u64>,
    next_leaf: u64,
    key_bytes: u64,
    data_bytes: u64,
}

impl PageLayout {
    pub fn new(page_bytes: u64) -> PageLayout {
        assert!(page_bytes >= 256, "a page of {page_bytes} bytes cannot hold a key");
        let mut leaves = BTreeMap::new();
        leaves.insert(Vec::new(), Leaf { id: 0, bytes: 0 });
        PageLayout { page_bytes, leaves, entries: BTreeMap::new(), next_leaf: 1, key_bytes: 0, data_bytes: 0 }
    }

    /// Keys held.
    pub fn keys(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Key and value bytes held (without per-entry overhead): the store's logical size.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Key bytes held.
    pub fn key_bytes(&self) -> u64 {
        self.key_bytes
    }

    pub fn leaf_count(&self) -> u64 {
        self.leaves.len() as u64
    }

    /// Children per inner page: what fits of separator keys of the mean key length.
    pub fn fanout(&self) -> u64 {
        let mean_key = if self.entries.is_empty() { 16 } else { self.key_bytes / self.entries.len() as u64 };
        (self.page_bytes / (mean_key + CHILD_OVERHEAD_BYTES)).max(2)
    }

    /// Inner levels above the leaves (0 while one leaf is the whole tree).
    pub fn inner_levels(&self) -> u8 {
        let fanout = self.fanout();
        let mut pages = self.leaf_count();
        let mut levels = 0;
        while pages > 1 {
            pages = pages.div_ceil(fanout);
            levels += 1;
        }
        levels
    }

    /// Every page: leaves plus inner pages.
    pub fn page_count(&self) -> u64 {
        let fanout = self.fanout();
        let mut pages = self.leaf_count();
        let mut total = pages;
        while pages > 1 {
            pages = pages.div_ceil(fanout);
            total += pages;
        }
        total
    }

    fn leaf_of(&self, key: &[u8]) -> (&Vec<u8>, &Leaf) {
        self.leaves
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(key)))
            .next_back().expect("the first leaf starts at the empty key")
    }

    /// The pages a lookup of `key` reads, root first, leaf last. Inner pages group leaves by id
    /// (`fanout` consecutive ids under one parent): leaves made by one burst of splits share a
    /// parent, as leaves split from one another do in a B+tree.
    pub fn path(&self, key: &[u8]) -> Vec<Page> {
        let leaf = self.leaf_of(key).1.id;
        let fanout = self.fanout();
        let levels = self.inner_levels();
        let mut path = Vec::with_capacity(levels as usize + 1);
        for level in (1..=levels).rev() {
            path.push(Page::Inner { level, n: leaf / fanout.saturating_pow(u32::from(level)) });
        }
        path.push(Page::Leaf(leaf));
        path
    }

    /// Records that `key` now holds a value of `value_bytes` (None: deleted). Returns the leaf a
    /// split created, if the write overflowed the key's leaf.
    pub fn write(&mut self, key: &[u8], value_bytes: Option<u64>) -> Option<Page> {
        let new = value_bytes.map(|v| key.len() as u64 + v + ENTRY_OVERHEAD_BYTES);
        let old = match new {
            Some(bytes) => self.entries.insert(key.to_vec(), bytes),
            None => self.entries.remove(key),
        };
        if old.is_none() && new.is_some() {
            self.key_bytes += key.len() as u64;
        } else if old.is_some() && new.is_none() {
            self.key_bytes -= key.len() as u64;
        }
        let logical = |entry: Option<u64>| entry.map_or(0, |b| b - ENTRY_OVERHEAD_BYTES);
        self.data_bytes = self.data_bytes + logical(new) - logical(old);
        let first = self.leaf_of(key).0.clone();
        let leaf = self.leaves.get_mut(&first).expect("just found");
        leaf.bytes = leaf.bytes + new.unwrap_or(0) - old.unwrap_or(0);
        (leaf.bytes > self.page_bytes).then(|| self.split(first))
    }

    /// Splits the leaf starting at `first` in half by bytes; the upper half is a new leaf.
    fn split(&mut self, first: Vec<u8>) -> Page {
        let total = self.leaves[&first].bytes;
        let mut lower = 0;
        let mut at = None;
        for (key, bytes) in self.entries.range(first.clone()..) {
            if lower > 0 && lower + bytes > total / 2 {
                at = Some(key.clone());
                break;
            }
            lower += bytes;
        }
        // A leaf whose first entry alone is over half stays whole (a value near the page size).
        let Some(at) = at else { return Page::Leaf(self.leaves[&first].id) };
        let id = self.next_leaf;
        self.next_leaf += 1;
        self.leaves.get_mut(&first).expect("the leaf being split").bytes = lower;
        self.leaves.insert(at, Leaf { id, bytes: total - lower });
        Page::Leaf(id)
    }
}

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

/// An LRU of pages with a capacity in pages (the `lru` crate; a capacity of 0 caches nothing).
#[derive(Debug)]
pub struct PageCache {
    lru: Option<lru::LruCache<Page, (), FixedHasher>>,
}

impl PageCache {
    pub fn new(capacity_pages: usize) -> PageCache {
        PageCache { lru: NonZeroUsize::new(capacity_pages).map(|c| lru::LruCache::with_hasher(c, FixedHasher::default())) }
    }

    pub fn capacity(&self) -> usize {
        self.lru.as_ref().map_or(0, |l| l.cap().get())
    }

    pub fn len(&self) -> usize {
        self.lru.as_ref().map_or(0, |l| l.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the cache has filled up once: from then on every miss evicts.
    pub fn is_full(&self) -> bool {
        self.len() >= self.capacity()
    }

    /// Reads `page`: a hit if cached (it becomes the most recent), else a miss that loads it.
    pub fn read(&mut self, page: Page) -> Touches {
        let Some(lru) = &mut self.lru else { return Touches { hits: 0, misses: 1 } };
        if lru.get(&page).is_some() {
            Touches { hits: 1, misses: 0 }
        } else {
            lru.put(page, ());
            Touches { hits: 0, misses: 1 }
        }
    }

    /// Writes `page` (a new page from a split): cached, no read.
    pub fn write(&mut self, page: Page) {
        if let Some(lru) = &mut self.lru {
            lru.put(page, ());
        }
    }

    /// Drops every page: the process that held the cache died.
    pub fn clear(&mut self) {
        if let Some(lru) = &mut self.lru {
            lru.clear();
        }
    }
}

/// One node's cache model: its page layout and its cache.
#[derive(Debug)]
pub struct CacheModel {
    pub layout: PageLayout,
    pub cache: PageCache,
}

impl CacheModel {
    pub fn new(page_bytes: u64, capacity_pages: usize) -> CacheModel {
        CacheModel { layout: PageLayout::new(page_bytes), cache: PageCache::new(capacity_pages) }
    }

    /// A lookup of `key`: every page from the root to its leaf.
    pub fn get(&mut self, key: &[u8]) -> Touches {
        let mut touches = Touches::default();
        for page in self.layout.path(key) {
            touches += self.cache.read(page);
        }
        touches
    }

    /// An apply of `key` (None: a delete): the lookup, then the write, which may split the leaf.
    pub fn apply(&mut self, key: &[u8], value_bytes: Option<u64>) -> Touches {
        let touches = self.get(key);
        if let Some(split) = self.layout.write(key, value_bytes) {
            self.cache.write(split);
        }
        touches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_on_a_known_trace() {
        // Capacity 2: a b a c b — a miss, b miss, a hit, c miss (evicts b), b miss (evicts a).
        let mut cache = PageCache::new(2);
        let (a, b, c) = (Page::Leaf(1), Page::Leaf(2), Page::Leaf(3));
        let trace: Vec<Touches> = [a, b, a, c, b].into_iter().map(|p| cache.read(p)).collect();
        let hits: Vec<u64> = trace.iter().map(|t| t.hits).collect();
        assert_eq!(hits, [0, 0, 1, 0, 0]);
        assert_eq!(cache.len(), 2);
        // Now b (newest) and c are cached; a is not.
        assert_eq!(cache.read(c), Touches { hits: 1, misses: 0 });
        assert_eq!(cache.read(a), Touches { hits: 0, misses: 1 });
    }

    #[test]
    fn a_zero_capacity_cache_misses_everything() {
        let mut cache = PageCache::new(0);
        for _ in 0..3 {
            assert_eq!(cache.read(Page::Leaf(7)), Touches { hits: 0, misses: 1 });
        }
        assert!(cache.is_full());
    }

    #[test]
    fn leaves_split_in_half_and_every_key_has_one_leaf() {
        let mut layout = PageLayout::new(1024);
        // 100 keys of 4 + 96 + 16 = 116 bytes: 11 600 bytes over 1 KiB leaves.
        for n in 0..100u32 {
            layout.write(format!("k{n:03}").as_bytes(), Some(96));
        }
        assert_eq!(layout.keys(), 100);
        assert_eq!(layout.data_bytes(), 100 * (4 + 96));
        let leaves = layout.leaf_count();
        // Between fully packed (12 leaves) and every leaf under half by one entry — sequential
        // inserts leave each split's lower half behind — 11 600 / (512 − 116) = 30.
        assert!((12..=30).contains(&leaves), "{leaves} leaves");
        let total: u64 = layout.leaves.values().map(|l| l.bytes).sum();
        assert_eq!(total, 100 * 116);
        assert!(layout.leaves.values().all(|l| l.bytes <= 1024));
        // Deletes give bytes back.
        layout.write(b"k000", None);
        assert_eq!(layout.keys(), 99);
        assert_eq!(layout.data_bytes(), 99 * 100);
    }

    #[test]
    fn a_lookup_walks_root_to_leaf_and_a_small_cache_misses_what_a_large_one_hits() {
        let mut small = CacheModel::new(1024, 2);
        let mut large = CacheModel::new(1024, 10_000);
        for model in [&mut small, &mut large] {
            for n in 0..2000u32 {
                model.apply(format!("key{n:05}").as_bytes(), Some(100));
            }
        }
        let path = large.layout.path(b"key01000");
        assert_eq!(path.len(), large.layout.inner_levels() as usize + 1);
        assert!(matches!(path.last(), Some(Page::Leaf(_))));
        let (mut s, mut l) = (Touches::default(), Touches::default());
        for round in 0..3 {
            for n in (0..2000u32).step_by(7) {
                let key = format!("key{n:05}");
                let (a, b) = (small.get(key.as_bytes()), large.get(key.as_bytes()));
                if round > 0 {
                    s += a;
                    l += b;
                }
            }
        }
        // The large cache holds every page after the first round; the small one thrashes.
        assert_eq!(l.misses, 0);
        assert!(s.misses > s.hits / 2, "{s:?}");
        assert_eq!(small.cache.len(), 2);
    }
}
