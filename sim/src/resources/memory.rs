//! The memory model: what a node's process holds, component by component, and what its
//! allocator makes of it.
//!
//! `heap = base + cache + byte sample + engine structures + memtables + buffers`, every term at
//! the scenario's stated scale, and `rss = heap × allocator factor`. Each coefficient's source is
//! written next to it. Past the node's limit the simulator kills the process (fdbserver checks
//! its RSS once a second and exits; fdbmonitor restarts it) — see `world`.
//!
//! Guarantees: pure arithmetic on the inputs (no clock, no randomness); every component is
//! reported separately, so a report can show which one grew.

use qs_node::store::{LENGTH_CACHE_ENTRY_OVERHEAD_BYTES, LENGTH_CACHE_KEYS};
use serde::{Deserialize, Serialize};

/// FoundationDB's byte sample keeps a pair with probability `(k + v) / ((k + 100) × 250)`
/// (fdbserver/core/StorageMetrics.cpp), storing `k + 100` bytes for it: on average one byte per
/// 250 bytes of data — 4 GB per TB.
pub const BYTE_SAMPLE_FACTOR: u64 = 250;
/// Bytes the byte sample charges per sampled key beyond the key itself (the same source).
pub const BYTE_SAMPLE_KEY_OVERHEAD: u64 = 100;
/// The sample's index structure on top of its bytes. The seed reports 4–6 GB per TB against the
/// formula's 4: an overhead of about 25 % (an inference: the indexed set's nodes and pointers).
pub const BYTE_SAMPLE_INDEX_OVERHEAD: f64 = 1.25;

/// RocksDB's index blocks: one entry per data block (separator key + 16-byte handle); blocks of
/// 4 KiB, RocksDB's default `block_size`.
pub const ROCKSDB_BLOCK_BYTES: u64 = 4096;
pub const ROCKSDB_INDEX_ENTRY_OVERHEAD: u64 = 16;
/// RocksDB's memtables: three column families × the default 64 MiB write buffer, up to two per
/// family while one flushes (`max_write_buffer_number = 2`).
pub const ROCKSDB_MEMTABLE_BYTES: u64 = 3 * 2 * (64 << 20);

/// glibc malloc's growth: Cloudflare's RocksDB nodes went from 15 GB to 30 GB RSS over days
/// with the live heap near RSS/3, 60–80 arenas from ~25 threads (seed 000). So RSS tends to
/// `GLIBC_FACTOR_MAX` × heap, approached with time constant `GLIBC_GROWTH_SECONDS` of process
/// uptime (fragmentation accumulates with churn; a restart starts clean).
pub const GLIBC_FACTOR_MAX: f64 = 3.0;
pub const GLIBC_GROWTH_SECONDS: f64 = 2.0 * 24.0 * 3600.0;
/// jemalloc: facebook/rocksdb#5222 measured 13 GB RSS with an 8.5 GB block cache, against 25 GB
/// on glibc; its size classes and decay purging keep overhead small and flat.
pub const JEMALLOC_FACTOR: f64 = 1.15;
/// TCMalloc: Cloudflare's switch cut memory 2.5× from glibc's 3× heap: about 1.2× heap.
pub const TCMALLOC_FACTOR: f64 = 1.2;

/// The allocator a node's process runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    /// glibc malloc: per-thread arenas, fragmentation that grows over days.
    #[default]
    Glibc,
    /// jemalloc (rust-rocksdb's `jemalloc` feature replaces malloc for C++ and Rust alike).
    Jemalloc,
    /// TCMalloc.
    Tcmalloc,
}

impl Allocator {
    /// RSS per byte of live heap after `uptime_s` seconds of process life.
    pub fn factor(self, uptime_s: f64) -> f64 {
        match self {
            Allocator::Glibc => 1.0 + (GLIBC_FACTOR_MAX - 1.0) * (1.0 - (-uptime_s / GLIBC_GROWTH_SECONDS).exp()),
            Allocator::Jemalloc => JEMALLOC_FACTOR,
            Allocator::Tcmalloc => TCMALLOC_FACTOR,
        }
    }
}

/// How a node's engine uses memory as its data grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineShape {
    /// A B-tree with its own page cache, as Redwood: pages are read through the process's cache
    /// (the cache term), which a restart empties. The simulator's memory engine is modelled so:
    /// its data lives on a simulated disk (`MemDisk`) that stands for the node's SSD, not in
    /// the node's heap.
    Redwood,
    /// LMDB: data and branch pages live in the OS page cache (the cache term), which outlives a
    /// process restart; nothing else grows with data in the process.
    Lmdb,
    /// RocksDB: index blocks (table readers) grow with the data; memtables; the engine's
    /// value-length cache, up to its capacity. No filter blocks: qs-node sets no filter policy
    /// (`store/rocks.rs`), so none are counted.
    Rocksdb,
}

/// One node's data, at the scenario's stated scale.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Data {
    pub keys: f64,
    /// Key and value bytes.
    pub bytes: f64,
    /// Key bytes alone.
    pub key_bytes: f64,
}

/// What the model is configured with (from the scenario's `[resources]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemorySpec {
    pub base_bytes: u64,
    pub cache_bytes: u64,
    pub buffer_bytes: u64,
    pub byte_sample: bool,
    pub engine: EngineShape,
    pub allocator: Allocator,
}

/// Modelled memory of one node, by component, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    pub base: u64,
    /// The page cache as filled so far (it grows to its capacity as pages are read).
    pub cache: u64,
    pub byte_sample: u64,
    /// RocksDB's index blocks and value-length cache.
    pub engine: u64,
    pub memtables: u64,
    pub buffers: u64,
    /// RSS beyond the heap: the allocator's overhead.
    pub allocator_overhead: u64,
}

impl Breakdown {
    pub fn heap(&self) -> u64 {
        self.base + self.cache + self.byte_sample + self.engine + self.memtables + self.buffers
    }

    pub fn rss(&self) -> u64 {
        self.heap() + self.allocator_overhead
    }
}

/// The byte sample's expected size for `data`: what FoundationDB's sampling keeps on average
/// (`Σ p × (k + 100) = Σ (k + v) / 250`), with the index overhead. At a terabyte's millions of
/// pairs the realised sample is within a fraction of a percent of its expectation.
pub fn byte_sample_bytes(data: &Data) -> u64 {
    (data.bytes / BYTE_SAMPLE_FACTOR as f64 * BYTE_SAMPLE_INDEX_OVERHEAD) as u64
}

/// Whether FoundationDB's byte sample keeps a pair of `key_bytes` and `value_bytes`, given a
/// uniform 64-bit hash of its key (the sampling is by key hash, so a key stays in or out).
pub fn byte_sampled(key_bytes: u64, value_bytes: u64, key_hash: u64) -> bool {
    let p = (key_bytes + value_bytes) as f64 / ((key_bytes + BYTE_SAMPLE_KEY_OVERHEAD) * BYTE_SAMPLE_FACTOR) as f64;
    (key_hash as f64 / u64::MAX as f64) < p
}

/// Index blocks and the value-length cache (RocksDB); B-trees keep no per-key structure
/// outside their pages.
pub fn engine_bytes(engine: EngineShape, data: &Data) -> u64 {
    match engine {
        EngineShape::Redwood | EngineShape::Lmdb => 0,
        EngineShape::Rocksdb => {
            let blocks = data.bytes / ROCKSDB_BLOCK_BYTES as f64;
            let mean_key = if data.keys > 0.0 { data.key_bytes / data.keys } else { 0.0 };
            let index = blocks * (mean_key + ROCKSDB_INDEX_ENTRY_OVERHEAD as f64);
            // qs-node's RocksDB engine remembers the lengths of its most recently used keys
            // (`store/length_cache.rs`), full once it has met that many.
            let cached_keys = data.keys.min(LENGTH_CACHE_KEYS as f64);
            let length_cache = cached_keys * (mean_key + LENGTH_CACHE_ENTRY_OVERHEAD_BYTES as f64);
            (index + length_cache) as u64
        }
    }
}

/// The node's memory after `uptime_s` seconds of process life, holding `data`, with
/// `cache_filled` bytes of its cache in use.
pub fn breakdown(spec: &MemorySpec, data: &Data, cache_filled: u64, uptime_s: f64) -> Breakdown {
    let mut out = Breakdown {
        base: spec.base_bytes,
        cache: cache_filled.min(spec.cache_bytes),
        byte_sample: if spec.byte_sample { byte_sample_bytes(data) } else { 0 },
        engine: engine_bytes(spec.engine, data),
        memtables: if spec.engine == EngineShape::Rocksdb { ROCKSDB_MEMTABLE_BYTES } else { 0 },
        buffers: spec.buffer_bytes,
        allocator_overhead: 0,
    };
    let heap = out.heap() as f64;
    out.allocator_overhead = (heap * (spec.allocator.factor(uptime_s) - 1.0)).max(0.0) as u64;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const TB: f64 = 1e12;

    #[test]
    fn the_byte_sample_holds_about_four_gb_per_tb_plus_its_index() {
        let data = Data { keys: 1e10, bytes: TB, key_bytes: 1e10 * 20.0 };
        // 1 TB / 250 = 4 GB, × 1.25 = 5 GB: the middle of the seed's 4–6 GB per TB.
        assert_eq!(byte_sample_bytes(&data), 5_000_000_000);
    }

    #[test]
    fn the_sampling_probability_keeps_one_byte_in_250_on_average() {
        // 100 000 pairs of a 20-byte key and a 480-byte value, hashes spread uniformly:
        // expected sampled pairs = n × 500 / (120 × 250), sampled bytes = that × 120 = n × 2.
        let n = 100_000u64;
        let mut kept = 0u64;
        for i in 0..n {
            // A uniform spread of hashes (golden-ratio stride), deterministic.
            let hash = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            kept += u64::from(byte_sampled(20, 480, hash));
        }
        let sampled_bytes = kept * (20 + BYTE_SAMPLE_KEY_OVERHEAD);
        let data_bytes = n * 500;
        let expected = data_bytes / BYTE_SAMPLE_FACTOR;
        assert!(sampled_bytes.abs_diff(expected) * 100 < expected, "{sampled_bytes} vs {expected}");
    }

    #[test]
    fn glibc_grows_toward_three_times_the_heap_and_jemalloc_stays_flat() {
        assert!((Allocator::Glibc.factor(0.0) - 1.0).abs() < 1e-9);
        let days = |d: f64| d * 24.0 * 3600.0;
        let after_a_week = Allocator::Glibc.factor(days(7.0));
        assert!(after_a_week > 2.8 && after_a_week < 3.0, "{after_a_week}");
        // The seed's 15 GB → 30 GB over days: 2× within the first couple of days.
        assert!(Allocator::Glibc.factor(days(1.5)) > 1.9);
        assert_eq!(Allocator::Jemalloc.factor(days(7.0)), JEMALLOC_FACTOR);
        assert_eq!(Allocator::Tcmalloc.factor(0.0), TCMALLOC_FACTOR);
    }

    #[test]
    fn a_hand_computed_breakdown() {
        let spec = MemorySpec {
            base_bytes: GIB,
            cache_bytes: 2 * GIB,
            buffer_bytes: 64 << 20,
            byte_sample: true,
            engine: EngineShape::Lmdb,
            allocator: Allocator::Jemalloc,
        };
        let data = Data { keys: 1e9, bytes: 2.0 * TB, key_bytes: 1e9 * 30.0 };
        let b = breakdown(&spec, &data, 3 * GIB, 0.0);
        assert_eq!(b.cache, 2 * GIB, "the cache never holds more than its capacity");
        assert_eq!(b.byte_sample, 10_000_000_000);
        assert_eq!(b.engine, 0);
        let heap = GIB + 2 * GIB + 10_000_000_000 + (64 << 20);
        assert_eq!(b.heap(), heap);
        assert_eq!(b.allocator_overhead, (heap as f64 * 0.15) as u64);
        // RocksDB: no filters; 2 TB / 4 KiB blocks × (30 + 16) B of index, and a full length
        // cache: 16 Ki keys × (30 + 96) B.
        let rocks = engine_bytes(EngineShape::Rocksdb, &data);
        let expected = 2.0 * TB / 4096.0 * 46.0 + 16384.0 * 126.0;
        assert!((rocks as f64 - expected).abs() < 1.0, "{rocks}");
    }
}
