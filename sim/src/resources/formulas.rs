//! The sizing formulas operators size nodes by, computed for a node's data and set beside what
//! it was given:
//!
//! - cache: 1–2 % of the store's used bytes — its pages, as FoundationDB's
//!   `kvstore_used_bytes` counts them, not the logical key and value bytes (the seed's Redwood
//!   fix: `cache_memory` at 1–2 % of `kvstore_used_bytes` took the pager from 40 % misses to
//!   under 1 %);
//! - memory: `base + cache + per-TB term + engine structures + memtables + buffers`, the
//!   per-TB term being the byte sample's 4–6 GB per TB where the node keeps one (the seed's
//!   `memory = 8 GiB + cache_memory + 4–6 GB per TB`), sized at the top of that range.
//!
//! The memory formula counts live heap only, as the seed's does: it leaves out the allocator.
//! A scenario that runs glibc for days shows what that omission costs.

use super::memory::{self, Breakdown, Data, MemorySpec};

/// The cache formula's range, as shares of the data.
pub const CACHE_SHARE_LOW: f64 = 0.01;
pub const CACHE_SHARE_HIGH: f64 = 0.02;
/// The byte sample's per-TB term, at the top of the seed's 4–6 GB per TB.
pub const BYTE_SAMPLE_BYTES_PER_TB: f64 = 6e9;

/// One node's sizing: the formulas' recommendations against its configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sizing {
    pub data_bytes: u64,
    /// The store's pages: what the cache formula takes its share of.
    pub used_bytes: u64,
    pub cache_bytes: u64,
    pub cache_low: u64,
    pub cache_high: u64,
    pub memory_limit: Option<u64>,
    /// What the memory formula asks for.
    pub memory_needed: u64,
}

impl Sizing {
    pub fn new(spec: &MemorySpec, data: &Data, used_bytes: u64, memory_limit: Option<u64>) -> Sizing {
        let per_tb = if spec.byte_sample { data.bytes / 1e12 * BYTE_SAMPLE_BYTES_PER_TB } else { 0.0 };
        // The formula's heap: every modelled component at full size (the cache full), no
        // allocator overhead.
        let full = memory::breakdown(&MemorySpec { byte_sample: false, ..*spec }, data, spec.cache_bytes, 0.0);
        let heap_without_overhead = Breakdown { allocator_overhead: 0, ..full }.heap();
        Sizing {
            data_bytes: data.bytes as u64,
            used_bytes,
            cache_bytes: spec.cache_bytes,
            cache_low: (used_bytes as f64 * CACHE_SHARE_LOW) as u64,
            cache_high: (used_bytes as f64 * CACHE_SHARE_HIGH) as u64,
            memory_limit,
            memory_needed: heap_without_overhead + per_tb as u64,
        }
    }

    /// The cache is below 1 % of the used bytes.
    pub fn cache_undersized(&self) -> bool {
        self.cache_bytes < self.cache_low
    }

    /// The memory limit is below what the formula asks for.
    pub fn memory_undersized(&self) -> bool {
        self.memory_limit.is_some_and(|limit| limit < self.memory_needed)
    }

    /// The cache as a share of the used bytes.
    pub fn cache_share(&self) -> f64 {
        if self.used_bytes == 0 { 0.0 } else { self.cache_bytes as f64 / self.used_bytes as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::memory::{Allocator, EngineShape};

    const GIB: u64 = 1 << 30;

    #[test]
    fn the_seeds_redwood_node_sized_by_the_formulas() {
        // 1 TB on Redwood-like storage (no engine term, as LMDB), FDB's 8 GiB base, the default
        // 2 GiB cache, a byte sample.
        let spec = MemorySpec {
            base_bytes: 8 * GIB,
            cache_bytes: 2 * GIB,
            buffer_bytes: 0,
            byte_sample: true,
            engine: EngineShape::Lmdb,
            allocator: Allocator::Glibc,
        };
        let data = Data { keys: 1e10, bytes: 1e12, key_bytes: 2e11 };
        // Pages hold the terabyte at ~70 % fill: 1.43 TB used.
        let used = 1_430_000_000_000;
        let sizing = Sizing::new(&spec, &data, used, Some(8 * GIB));
        assert_eq!(sizing.cache_low, 14_300_000_000);
        assert!(sizing.cache_undersized(), "2 GiB is 0.15 % of the pages");
        // 8 GiB + 2 GiB + 6 GB.
        assert_eq!(sizing.memory_needed, 10 * GIB + 6_000_000_000);
        assert!(sizing.memory_undersized());
        let fixed = Sizing::new(&MemorySpec { cache_bytes: 21_450_000_000, ..spec }, &data, used, Some(40 * GIB));
        assert!(!fixed.cache_undersized() && !fixed.memory_undersized());
        assert!((fixed.cache_share() - 0.015).abs() < 1e-9);
    }
}
