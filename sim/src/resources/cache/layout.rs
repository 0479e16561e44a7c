//! The node's keys laid out in pages, B+tree style: leaves of `page_bytes` holding contiguous
//! key ranges, split in half when an insert overflows one, and inner pages above them — each
//! covering `fanout` children — up to a single root.
//!
//! Guarantees: every key has exactly one leaf; leaf ids run from 0 with no gaps; a leaf's bytes
//! are the sum of its entries'; deterministic (`BTreeMap`s only).

use std::collections::BTreeMap;

/// Bytes a key-value pair takes in a leaf beyond its key and value: a slot, a length, a
/// checksum (LMDB's node header is 8 bytes; Redwood's delta-tree entry about as much).
pub const ENTRY_OVERHEAD_BYTES: u64 = 16;
/// Bytes one child reference takes in an inner page beyond its separator key (page number,
/// offsets).
pub const CHILD_OVERHEAD_BYTES: u64 = 16;

/// A page: a leaf (a B+tree leaf, or an LSM data block) by its id, an inner page by its level
/// (1 = just above the leaves) and number within the level, or an SST file's index block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Page {
    Leaf(u64),
    Inner { level: u8, n: u64 },
    Index { file: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Leaf {
    pub(super) id: u64,
    pub(super) bytes: u64,
}

/// Leaf pages over the node's keys, B+tree style (see the module doc).
#[derive(Clone, Debug)]
pub struct PageLayout {
    page_bytes: u64,
    /// Each leaf by the first key it may hold; the first leaf starts at the empty key, so every
    /// key has exactly one leaf.
    pub(super) leaves: BTreeMap<Vec<u8>, Leaf>,
    /// Every key's bytes in its leaf (key + value + overhead), to split leaves where they are.
    pub(super) entries: BTreeMap<Vec<u8>, u64>,
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
            .next_back()
            .expect("the first leaf starts at the empty key")
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
        // The leaf's entries end where the next leaf begins: a split point past it would take
        // another leaf's entries (and its place) — a value near the page size as a leaf's last
        // entry did that.
        let end = self
            .leaves
            .range::<[u8], _>((std::ops::Bound::Excluded(first.as_slice()), std::ops::Bound::Unbounded))
            .next()
            .map(|(next, _)| next.clone());
        let within = match &end {
            Some(end) => self.entries.range::<[u8], _>((
                std::ops::Bound::Included(first.as_slice()),
                std::ops::Bound::Excluded(end.as_slice()),
            )),
            None => {
                self.entries.range::<[u8], _>((std::ops::Bound::Included(first.as_slice()), std::ops::Bound::Unbounded))
            }
        };
        let mut lower = 0;
        let mut at = None;
        for (key, bytes) in within {
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
        assert_eq!(self.leaf_bytes.len() as u64, self.next_leaf, "leaf ids run from 0 with no gaps");
        Page::Leaf(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_over_the_page_alone_in_its_leaf_keeps_the_next_leaf_whole() {
        let mut layout = PageLayout::new(1024);
        layout.write(b"a", Some(2000));
        layout.write(b"b", Some(96));
        assert_eq!(layout.leaf_count(), 2, "a alone, then b");
        // Over the page again, with nothing of its own leaf to split off: b's leaf stays b's.
        layout.write(b"a", Some(3000));
        layout.write(b"b", Some(50));
        let total: u64 = layout.leaves.values().map(|l| l.bytes).sum();
        assert_eq!(total, (1 + 3000 + ENTRY_OVERHEAD_BYTES) + (1 + 50 + ENTRY_OVERHEAD_BYTES));
        assert_ne!(layout.leaf_id(b"a"), layout.leaf_id(b"b"));
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
}
