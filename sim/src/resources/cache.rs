//! The page-cache model: which pages a node's reads and applies touch, and whether each was
//! already in its cache.
//!
//! Pages come from the node's real keys and value sizes. [`PageLayout`] lays the key space out
//! the way a B+tree does (Redwood, LMDB): leaf pages of `page_bytes` holding contiguous key
//! ranges, split in half when an insert overflows one (so leaves run half to fully filled, about
//! 70 % on average), and inner pages above them — each inner page covering `fanout` children —
//! up to a single root.
//!
//! What a lookup reads, and what each page costs the cache, depends on the engine's [`Shape`]:
//! - [`Shape::BTree`] (Redwood, LMDB): every page on the path from the root to the key's leaf,
//!   each taking a whole page of cache.
//! - [`Shape::Lsm`] (RocksDB's block-based tables): the index block of the key's SST file, then
//!   one data block. The leaves stand for data blocks and take the cache bytes they hold
//!   (RocksDB caches blocks uncompressed, charged by their contents); a file's index block takes
//!   one entry per full data block of the file's bytes. An index block larger than the whole
//!   cache empties it and is not kept, as RocksDB's LRU does: it evicts everything trying to make
//!   room, inserts the block over capacity while the read holds it, and drops it on release.
//!   Below the index's share of the cache, then, every get misses twice.
//!
//! [`PageCache`] is an LRU of pages with a capacity in bytes, counted the way Redwood counts
//! (`PagerCacheHit`: the page was cached; `PagerCacheMiss`: a physical read was issued). An
//! apply is a read-modify-write of the key's leaf: a miss if the leaf was not cached; a page a
//! split creates is written, so it enters the cache without a miss.
//!
//! Guarantees: deterministic — the layout is a `BTreeMap` and the LRU's hash map is only looked
//! up, never iterated, with a fixed hasher; the cache never holds more bytes than its capacity;
//! hits plus misses equal the pages touched.

use std::collections::BTreeMap;
use std::hash::BuildHasherDefault;

/// Bytes a key-value pair takes in a leaf beyond its key and value: a slot, a length, a
/// checksum (LMDB's node header is 8 bytes; Redwood's delta-tree entry about as much).
pub const ENTRY_OVERHEAD_BYTES: u64 = 16;
/// Bytes one child reference takes in an inner page beyond its separator key (page number,
/// offsets).
pub const CHILD_OVERHEAD_BYTES: u64 = 16;
/// Bytes one RocksDB index entry takes beyond its separator key: the internal key's 8-byte
/// sequence number and type, three varint lengths, a delta-encoded block handle (~2 bytes; 
/// `format_version` 4 and later) and a 4-byte restart point (index blocks restart every entry).
/// `./ci/bench-cache.sh` prints the real figure: 22 B per entry for 11-byte keys.
pub const INDEX_ENTRY_OVERHEAD_BYTES: u64 = 12;
/// Data blocks per SST file at full scale: RocksDB's `target_file_size_base` (64 MiB) of
/// Snappy-compressed blocks, which hold 2.3 times their size uncompressed on configuration text
/// (`./ci/bench-cache.sh`), in 4 KiB blocks.
pub const BLOCKS_PER_SST_FILE: f64 = (64 << 20) as f64 * 2.3 / 4096.0;

/// How an engine's lookups read pages and what each page costs the cache (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// Redwood, LMDB: root to leaf, a whole page each.
    BTree,
    /// RocksDB: the file's index block, then one data block charged by its contents.
    Lsm {
        /// Data blocks (leaves) one SST file's index block covers in the model: the full-scale
        /// file's blocks over the scale, at least one.
        blocks_per_file: u64,
    },
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::BTree => f.write_str("B+tree pages, root to leaf"),
            Shape::Lsm { blocks_per_file } => {
                write!(f, "RocksDB blocks: an index block per {blocks_per_file} data blocks, then the data block")
            }
        }
    }
}

impl Shape {
    /// RocksDB's shape at `scale` stated bytes per byte of the run: as many files as the stated
    /// data would have, so index blocks take the same share of the cache at any scale.
    pub fn lsm(scale: f64) -> Shape {
        Shape::Lsm { blocks_per_file: ((BLOCKS_PER_SST_FILE / scale.max(1.0)).round() as u64).max(1) }
    }
}

/// A page: a leaf (a B+tree leaf, or an LSM data block) by its id, an inner page by its level
/// (1 = just above the leaves) and number within the level, or an SST file's index block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Page {
    Leaf(u64),
    Inner { level: u8, n: u64 },
    Index { file: u64 },
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
    /// Every leaf's bytes by its id (ids run from 0 with no gaps).
    leaf_bytes: Vec<u64>,
    key_bytes: u64,
    data_bytes: u64,
}

impl PageLayout {
    pub fn new(page_bytes: u64) -> PageLayout {
        assert!(page_bytes >= 256, "a page of {page_bytes} bytes cannot hold a key");
        let mut leaves = BTreeMap::new();
        leaves.insert(Vec::new(), Leaf { id: 0, bytes: 0 });
        PageLayout {
            page_bytes,
            leaves,
            entries: BTreeMap::new(),
            next_leaf: 1,
            leaf_bytes: vec![0],
            key_bytes: 0,
            data_bytes: 0,
        }
    }

    pub fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    /// The id of the leaf that holds (or would hold) `key`.
    pub fn leaf_id(&self, key: &[u8]) -> u64 {
        self.leaf_of(key).1.id
    }

    /// The bytes leaf `id` holds (keys, values and their overhead).
    pub fn leaf_bytes(&self, id: u64) -> u64 {
        self.leaf_bytes[id as usize]
    }

    /// Mean key length, 16 bytes while there are no keys.
    pub fn mean_key_bytes(&self) -> u64 {
        if self.entries.is_empty() { 16 } else { self.key_bytes / self.entries.len() as u64 }
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
        (self.page_bytes / (self.mean_key_bytes() + CHILD_OVERHEAD_BYTES)).max(2)
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
        self.leaf_bytes[leaf.id as usize] = leaf.bytes;
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
        let lower_leaf = self.leaves.get_mut(&first).expect("the leaf being split");
        lower_leaf.bytes = lower;
        self.leaf_bytes[lower_leaf.id as usize] = lower;
        self.leaves.insert(at, Leaf { id, bytes: total - lower });
        self.leaf_bytes.push(total - lower);
        debug_assert_eq!(self.leaf_bytes.len() as u64, self.next_leaf, "leaf ids run from 0 with no gaps");
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
        debug_assert!(self.used_bytes <= self.capacity_bytes, "the cache holds more than its capacity");
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

/// One key category's share of a node's store and cache (see [`CacheModel::categories`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Category {
    pub prefix: String,
    pub keys: u64,
    /// Key and value bytes.
    pub data_bytes: u64,
    /// Bytes of the store's leaves the category takes.
    pub stored_bytes: u64,
    /// Of those, the bytes in the cache.
    pub cached_bytes: u64,
}

/// One node's cache model: its page layout, its engine's shape and its cache.
#[derive(Debug)]
pub struct CacheModel {
    pub layout: PageLayout,
    pub shape: Shape,
    pub cache: PageCache,
    /// [`Shape::Lsm`]: the bytes of each file's leaves (leaf id / blocks per file), kept as the
    /// leaves change, for the size of its index block.
    file_bytes: Vec<u64>,
}

impl CacheModel {
    pub fn new(shape: Shape, page_bytes: u64, capacity_bytes: u64) -> CacheModel {
        CacheModel { layout: PageLayout::new(page_bytes), shape, cache: PageCache::new(capacity_bytes), file_bytes: Vec::new() }
    }

    /// The pages a lookup of `key` reads, in order, with the cache bytes each takes.
    pub fn path(&self, key: &[u8]) -> Vec<(Page, u64)> {
        let page_bytes = self.layout.page_bytes;
        match self.shape {
            Shape::BTree => self.layout.path(key).into_iter().map(|page| (page, page_bytes)).collect(),
            Shape::Lsm { blocks_per_file } => {
                let leaf = self.layout.leaf_id(key);
                let file = leaf / blocks_per_file;
                let file_bytes = self.file_bytes.get(file as usize).copied().unwrap_or(0);
                // One entry per full data block of the file's bytes, at least one.
                let entries = file_bytes.div_ceil(page_bytes).max(1);
                let index_bytes = entries * (self.layout.mean_key_bytes() + INDEX_ENTRY_OVERHEAD_BYTES);
                vec![(Page::Index { file }, index_bytes), (Page::Leaf(leaf), self.layout.leaf_bytes(leaf).max(1))]
            }
        }
    }

    /// A lookup of `key`: every page it reads.
    pub fn get(&mut self, key: &[u8]) -> Touches {
        let mut touches = Touches::default();
        for (page, bytes) in self.path(key) {
            touches += self.cache.read(page, bytes);
        }
        touches
    }

    /// An apply of `key` (None: a delete): the lookup, then the write, which may split the leaf;
    /// a page the split creates is written, so it enters the cache without a read.
    pub fn apply(&mut self, key: &[u8], value_bytes: Option<u64>) -> Touches {
        let touches = self.get(key);
        if let Some(new) = self.load(key, value_bytes) {
            let bytes = match self.shape {
                Shape::BTree => self.layout.page_bytes,
                Shape::Lsm { .. } => self.layout.leaf_bytes(new),
            };
            self.cache.write(Page::Leaf(new), bytes);
        }
        touches
    }

    /// Records `key`'s value size (None: deleted) in the layout without touching the cache (data
    /// that arrived whole: a bulk load, a snapshot). Returns the leaf a split created, if any.
    pub fn load(&mut self, key: &[u8], value_bytes: Option<u64>) -> Option<u64> {
        let leaf = self.layout.leaf_id(key);
        let before = self.layout.leaf_bytes(leaf);
        let split = self.layout.write(key, value_bytes);
        self.file_changed(leaf, before);
        match split {
            Some(Page::Leaf(new)) if new != leaf => {
                self.file_changed(new, 0);
                Some(new)
            }
            _ => None,
        }
    }

    /// The store's size as the cache formula takes its share of it (FoundationDB's
    /// `kvstore_used_bytes`): a B+tree's pages, whole; an LSM's data blocks by their contents
    /// (uncompressed, as the block cache holds them) and its index blocks.
    pub fn used_bytes(&self) -> u64 {
        let page_bytes = self.layout.page_bytes;
        match self.shape {
            Shape::BTree => self.layout.page_count() * page_bytes,
            Shape::Lsm { .. } => {
                let entry = self.layout.mean_key_bytes() + INDEX_ENTRY_OVERHEAD_BYTES;
                let index: u64 = self.file_bytes.iter().map(|bytes| bytes.div_ceil(page_bytes).max(1) * entry).sum();
                self.file_bytes.iter().sum::<u64>() + index
            }
        }
    }

    /// Keys and bytes by key category (the key up to its first `:`, the whole key without one),
    /// as memcached's MCInspector reports a cache by key category: the keys, their key and
    /// value bytes, the bytes of the store's leaves they take (their entries, plus their share of
    /// the leaf's free space where a B+tree page takes a whole page), and of those the bytes the
    /// cache holds. Inner pages and index blocks serve every category and are not split among
    /// them. In category order.
    pub fn categories(&self) -> Vec<Category> {
        let mut by_prefix: BTreeMap<Vec<u8>, Category> = BTreeMap::new();
        let leaves: Vec<(&Vec<u8>, &Leaf)> = self.layout.leaves.iter().collect();
        for (i, (first, leaf)) in leaves.iter().enumerate() {
            if leaf.bytes == 0 {
                continue;
            }
            let footprint = match self.shape {
                Shape::BTree => leaf.bytes.max(self.layout.page_bytes),
                Shape::Lsm { .. } => leaf.bytes,
            };
            let cached = self.cache.contains(Page::Leaf(leaf.id));
            let upper = leaves.get(i + 1).map_or(std::ops::Bound::Unbounded, |(next, _)| std::ops::Bound::Excluded(*next));
            for (key, entry) in self.layout.entries.range::<Vec<u8>, _>((std::ops::Bound::Included(*first), upper)) {
                let prefix = key.iter().position(|&b| b == b':').map_or(&key[..], |at| &key[..at]);
                let category = by_prefix.entry(prefix.to_vec()).or_insert_with(|| Category {
                    prefix: String::from_utf8_lossy(prefix).into_owned(),
                    ..Category::default()
                });
                let stored = footprint * entry / leaf.bytes;
                category.keys += 1;
                category.data_bytes += entry - ENTRY_OVERHEAD_BYTES;
                category.stored_bytes += stored;
                if cached {
                    category.cached_bytes += stored;
                }
            }
        }
        by_prefix.into_values().collect()
    }

    /// Keeps a file's bytes in step with leaf `id`, which held `before` bytes.
    fn file_changed(&mut self, id: u64, before: u64) {
        let Shape::Lsm { blocks_per_file } = self.shape else { return };
        let file = (id / blocks_per_file) as usize;
        if self.file_bytes.len() <= file {
            self.file_bytes.resize(file + 1, 0);
        }
        self.file_bytes[file] = self.file_bytes[file] + self.layout.leaf_bytes(id) - before;
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
        let mut small = CacheModel::new(Shape::BTree, 1024, 2 * 1024);
        let mut large = CacheModel::new(Shape::BTree, 1024, 10_000 * 1024);
        for model in [&mut small, &mut large] {
            for n in 0..2000u32 {
                model.apply(format!("key{n:05}").as_bytes(), Some(100));
            }
        }
        let path = large.layout.path(b"key01000");
        assert_eq!(large.path(b"key01000").iter().map(|(p, _)| *p).collect::<Vec<_>>(), path);
        assert!(large.path(b"key01000").iter().all(|(_, bytes)| *bytes == 1024));
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

    /// 2 000 keys of 8 + 100 + 16 = 124 bytes in 4 KiB blocks, one file.
    fn lsm_with_keys(capacity_bytes: u64) -> CacheModel {
        let mut model = CacheModel::new(Shape::Lsm { blocks_per_file: 1_000_000 }, 4096, capacity_bytes);
        for n in 0..2000u32 {
            model.load(format!("key{n:05}").as_bytes(), Some(100));
        }
        model
    }

    #[test]
    fn an_lsm_get_reads_its_files_index_block_then_one_data_block_charged_by_contents() {
        let model = lsm_with_keys(1 << 20);
        let path = model.path(b"key01000");
        assert_eq!(path.len(), 2);
        // The index: one entry per full 4 KiB of the file's 248 000 bytes (61 blocks), each the
        // mean key (8) plus the entry overhead.
        assert_eq!(path[0], (Page::Index { file: 0 }, 248_000u64.div_ceil(4096) * (8 + INDEX_ENTRY_OVERHEAD_BYTES)));
        let (Page::Leaf(leaf), bytes) = path[1] else { panic!("{path:?}") };
        assert_eq!(bytes, model.layout.leaf_bytes(leaf));
        assert!(bytes <= 4096 && bytes > 2048 - 124, "{bytes}");
        // The store's size for the cache formula: the blocks' contents and the index block.
        assert_eq!(model.used_bytes(), 248_000 + 61 * (8 + INDEX_ENTRY_OVERHEAD_BYTES));
    }

    #[test]
    fn below_the_index_blocks_size_every_lsm_get_misses_twice() {
        // The index block is 61 × 20 = 1 220 bytes. A 1 KiB cache cannot keep it: every get
        // misses its index and its data block. A 16 KiB cache keeps the index and a few blocks.
        let mut tiny = lsm_with_keys(1 << 10);
        let mut small = lsm_with_keys(16 << 10);
        let (mut t, mut s) = (Touches::default(), Touches::default());
        for round in 0..3 {
            for n in 0..20u32 {
                let key = format!("key{n:05}");
                let (a, b) = (tiny.get(key.as_bytes()), small.get(key.as_bytes()));
                if round > 0 {
                    t += a;
                    s += b;
                }
            }
        }
        // 20 keys share one block or two: the 1 KiB cache fits no block either (each holds
        // ~2–4 KiB), so 2 misses a get; the 16 KiB one hits everything after the first round.
        assert_eq!(t, Touches { hits: 0, misses: 2 * 40 });
        assert_eq!(s, Touches { hits: 2 * 40, misses: 0 });
    }

    #[test]
    fn lsm_files_keep_their_bytes_as_leaves_split() {
        let mut model = CacheModel::new(Shape::Lsm { blocks_per_file: 4 }, 1024, 1 << 20);
        for n in (0..500u32).rev() {
            model.apply(format!("k{n:04}").as_bytes(), Some(50));
        }
        let leaves = model.layout.leaf_count();
        assert!(leaves > 8, "{leaves} leaves");
        let total: u64 = (0..leaves).map(|id| model.layout.leaf_bytes(id)).sum();
        assert_eq!(total, 500 * (5 + 50 + ENTRY_OVERHEAD_BYTES));
        assert_eq!(model.file_bytes.iter().sum::<u64>(), total);
        for (file, bytes) in model.file_bytes.iter().enumerate() {
            let ids = (file as u64 * 4)..((file as u64 + 1) * 4).min(leaves);
            assert_eq!(*bytes, ids.map(|id| model.layout.leaf_bytes(id)).sum::<u64>(), "file {file}");
        }
        assert_eq!(Shape::lsm(1.0), Shape::Lsm { blocks_per_file: BLOCKS_PER_SST_FILE.round() as u64 });
        assert_eq!(Shape::lsm(1e9), Shape::Lsm { blocks_per_file: 1 });
    }

    #[test]
    fn categories_split_keys_stored_and_cached_bytes_by_prefix() {
        let mut model = CacheModel::new(Shape::BTree, 1024, 2 * 1024);
        // dns: 20 keys of 8 + 100 bytes; cfg: 10 keys of 8 + 300 bytes; "plain" has no colon.
        for n in 0..20u32 {
            model.load(format!("dns:{n:04}").as_bytes(), Some(100));
        }
        for n in 0..10u32 {
            model.load(format!("cfg:{n:04}").as_bytes(), Some(300));
        }
        model.load(b"plain", Some(10));
        let categories = model.categories();
        let names: Vec<&str> = categories.iter().map(|c| c.prefix.as_str()).collect();
        assert_eq!(names, ["cfg", "dns", "plain"]);
        let (cfg, dns) = (&categories[0], &categories[1]);
        assert_eq!((cfg.keys, cfg.data_bytes), (10, 10 * 308));
        assert_eq!((dns.keys, dns.data_bytes), (20, 20 * 108));
        // Every leaf takes a whole page: the categories' stored bytes add up to the leaves' pages
        // (less the rounding of each entry's share), and each is at least its entries' bytes.
        let stored: u64 = categories.iter().map(|c| c.stored_bytes).sum();
        let pages = model.layout.leaf_count() * 1024;
        assert!(stored <= pages && stored + 31 >= pages, "{stored} of {pages}");
        assert!(cfg.stored_bytes >= 10 * (308 + ENTRY_OVERHEAD_BYTES));
        assert!(categories.iter().all(|c| c.cached_bytes == 0), "nothing read yet");
        // Reading the cfg keys caches their leaves (two pages fit): cached bytes follow.
        for n in 0..10u32 {
            model.get(format!("cfg:{n:04}").as_bytes());
        }
        let categories = model.categories();
        assert!(categories[0].cached_bytes > 0 && categories[0].cached_bytes <= categories[0].stored_bytes);
        let cached: u64 = categories.iter().map(|c| c.cached_bytes).sum();
        assert!(cached <= 2 * 1024, "{cached}");
    }
}
