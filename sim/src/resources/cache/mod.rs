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
//!
//! Files: `layout.rs` (the pages), `page_cache.rs` (the LRU and its counts), this one (what a
//! lookup and an apply read for each [`Shape`], key categories).

mod layout;
mod page_cache;

use std::collections::BTreeMap;

pub use layout::{CHILD_OVERHEAD_BYTES, ENTRY_OVERHEAD_BYTES, Page, PageLayout};
pub use page_cache::{PageCache, Touches};

use layout::Leaf;

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
        CacheModel {
            layout: PageLayout::new(page_bytes),
            shape,
            cache: PageCache::new(capacity_bytes),
            file_bytes: Vec::new(),
        }
    }

    /// The pages a lookup of `key` reads, in order, with the cache bytes each takes.
    pub fn path(&self, key: &[u8]) -> Vec<(Page, u64)> {
        let page_bytes = self.layout.page_bytes();
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
                Shape::BTree => self.layout.page_bytes(),
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
        let page_bytes = self.layout.page_bytes();
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
                Shape::BTree => leaf.bytes.max(self.layout.page_bytes()),
                Shape::Lsm { .. } => leaf.bytes,
            };
            let cached = self.cache.contains(Page::Leaf(leaf.id));
            let upper =
                leaves.get(i + 1).map_or(std::ops::Bound::Unbounded, |(next, _)| std::ops::Bound::Excluded(*next));
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
