//! Caches and memory: per-node models of the page cache and of process memory, scaled to the
//! data size a scenario stands for, and the sizing formulas they are checked against.
//!
//! - [`cache`]: the node's real keys and value sizes laid out in B+tree pages, an LRU of the
//!   configured capacity; every memcached `get` and every apply charged as hits and misses, a
//!   miss costing a read on the node's simulated disk.
//! - [`memory`]: base + cache + byte sample + engine structures + memtables + buffers, times an
//!   allocator profile; past the limit the node is OOM-killed and restarted (`world`).
//! - [`formulas`]: cache 1–2 % of data; memory = base + cache + per-TB term + buffers.
//!
//! ## Scale
//!
//! A run holds a few MB; `stands_for` says what that data represents (`"1 TiB"`). The scale
//! `S = stands_for / nominal`, where `nominal` is the scenario's full key space at its mean value
//! size. Every modelled size is the run's size × S (data, keys, byte sample, engine
//! structures), and the cache's capacity in the model's pages is `cache_bytes / (page_bytes × S)`,
//! so the cache keeps its share of the data. The miss ratio of an LRU under a given popularity
//! depends on that share and on how popularity spreads over pages, which the scaling keeps.
//! Where it does not: (1) granularity — a capacity of a handful of model pages cannot show
//! what a million pages do, so the settings line reports the model's page counts and warns
//! below [`CACHE_PAGES_FEW`]; (2) the head of a Zipf popularity over the run's thousands of keys
//! is heavier than over a terabyte's billions (the top k keys of N draw `H(k)/H(N)` of reads),
//! so a skewed run flatters a small cache somewhat; (3) a terabyte's tree is deeper, and its
//! extra inner levels, nearly always cached, dilute the miss ratio a little.

pub mod cache;
pub mod formulas;
pub mod memory;

use std::time::Duration;

use bytesize::ByteSize;
use serde::Deserialize;

use cache::{CacheModel, Shape, Touches};
use memory::{Allocator, Breakdown, Data, EngineShape, MemorySpec};

/// Below this many pages of model cache the miss ratio is too coarse to read much into.
pub const CACHE_PAGES_FEW: u64 = 8;
/// How often Redwood reports its pager counters (`REDWOOD_METRICS_INTERVAL`), and the window of
/// the `cache` check.
pub const CACHE_WINDOW: Duration = Duration::from_secs(5);
/// Fewest page touches in a window for the `cache` check to judge it: a ratio of a handful of
/// touches is noise.
pub const CACHE_WINDOW_TOUCHES_MIN: u64 = 50;

/// The scenario's `[resources]` section (documented in `scenario`'s module doc).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// The data size the run's full key space stands for; default: itself (no scaling).
    #[serde(default)]
    pub stands_for: Option<ByteSize>,
    /// The cache model's page size (Redwood's default page is 8 KiB).
    #[serde(default = "default_page_bytes")]
    pub page_bytes: ByteSize,
    /// Each node's page cache (Redwood's `cache_memory`, RocksDB's block cache, the OS page
    /// cache LMDB reads through), at the stated scale.
    pub cache_bytes: ByteSize,
    /// Each node's memory limit (fdbserver's `--memory`); none: no OOM kills.
    #[serde(default)]
    pub memory_limit: Option<ByteSize>,
    /// The process's memory before data: code, runtime, tables, thread stacks.
    #[serde(default = "default_base_bytes")]
    pub base_bytes: ByteSize,
    /// Connection and batch buffers.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: ByteSize,
    #[serde(default)]
    pub allocator: Allocator,
    /// Keep a FoundationDB-style byte sample (4–6 GB per TB) in memory.
    #[serde(default)]
    pub byte_sample: bool,
    /// How long after an OOM kill the supervisor restarts the node (fdbmonitor's restart delay).
    #[serde(default = "default_oom_restart", with = "humantime_serde")]
    pub oom_restart: Duration,
    /// The `cache` check's bound on a node's miss ratio over any 5 s window while settled; none:
    /// the ratio is reported, not checked.
    #[serde(default)]
    pub miss_ratio_max: Option<f64>,
    /// How long after a process start its cache counts as cold (compulsory misses, the data
    /// still loading).
    #[serde(default = "default_cache_warmup", with = "humantime_serde")]
    pub cache_warmup: Duration,
}

fn default_page_bytes() -> ByteSize {
    ByteSize::kib(8)
}
fn default_base_bytes() -> ByteSize {
    ByteSize::gib(1)
}
fn default_buffer_bytes() -> ByteSize {
    ByteSize::mib(64)
}
fn default_oom_restart() -> Duration {
    Duration::from_secs(5)
}
fn default_cache_warmup() -> Duration {
    Duration::from_secs(30)
}

/// Largest page the model takes (LMDB and Redwood go to 64 KiB) and the smallest.
pub const PAGE_BYTES_MAX: u64 = 64 << 10;
pub const PAGE_BYTES_MIN: u64 = 512;

impl ResourceSpec {
    /// What is wrong with the section, as (field, problem), if anything.
    pub fn problem(&self, nominal_bytes: u64) -> Option<(&'static str, String)> {
        let page = self.page_bytes.as_u64();
        if !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&page) {
            return Some((
                "resources.page_bytes",
                format!("{page} bytes; must be {PAGE_BYTES_MIN} to {PAGE_BYTES_MAX}"),
            ));
        }
        if self.cache_bytes.as_u64() == 0 {
            return Some(("resources.cache_bytes", "must be above zero".into()));
        }
        if let Some(stands_for) = self.stands_for
            && stands_for.as_u64() < nominal_bytes
        {
            return Some((
                "resources.stands_for",
                format!(
                    "{stands_for} is less than the run's own key space ({}); the scale must be 1 or more",
                    ByteSize(nominal_bytes)
                ),
            ));
        }
        if let Some(limit) = self.memory_limit
            && limit <= self.base_bytes
        {
            return Some(("resources.memory_limit", format!("{limit} is not above base_bytes ({})", self.base_bytes)));
        }
        if self.miss_ratio_max.is_some_and(|r| !(r > 0.0 && r <= 1.0)) {
            return Some(("resources.miss_ratio_max", "must be above 0 and at most 1".into()));
        }
        if self.oom_restart.is_zero() {
            return Some(("resources.oom_restart", "must be above zero".into()));
        }
        None
    }
}

/// The numbers every node's model shares, derived once per run.
#[derive(Clone, Debug, PartialEq)]
pub struct Models {
    pub spec: ResourceSpec,
    /// Stated bytes per byte of the run.
    pub scale: f64,
    /// Each node's cache at the run's scale: `cache_bytes / scale`, the same share of the run's
    /// data as the stated cache is of the stated data.
    pub capacity_bytes: u64,
    /// What a lookup reads and what a page costs the cache: RocksDB's block-based tables, or a
    /// B+tree (Redwood, LMDB).
    pub shape: Shape,
    pub memory: MemorySpec,
}

impl Models {
    /// `nominal_bytes`: the run's full key space at its mean value size; `engine`: the
    /// scenario's engine (`memory`, `lmdb`, `rocksdb`).
    pub fn new(spec: &ResourceSpec, nominal_bytes: u64, engine: qs_node::EngineKind) -> Models {
        let scale = spec.stands_for.map_or(1.0, |s| s.as_u64() as f64 / nominal_bytes.max(1) as f64).max(1.0);
        let capacity_bytes = (spec.cache_bytes.as_u64() as f64 / scale) as u64;
        let engine = match engine {
            qs_node::EngineKind::Lmdb => EngineShape::Lmdb,
            qs_node::EngineKind::Rocksdb => EngineShape::Rocksdb,
            qs_node::EngineKind::Memory => EngineShape::Redwood,
        };
        let memory = MemorySpec {
            base_bytes: spec.base_bytes.as_u64(),
            cache_bytes: spec.cache_bytes.as_u64(),
            buffer_bytes: spec.buffer_bytes.as_u64(),
            byte_sample: spec.byte_sample,
            engine,
            allocator: spec.allocator,
        };
        let shape = if engine == EngineShape::Rocksdb { Shape::lsm(scale) } else { Shape::BTree };
        Models { spec: spec.clone(), scale, capacity_bytes, shape, memory }
    }

    /// The cache's capacity in the model's pages (`page_bytes` each).
    pub fn capacity_pages(&self) -> u64 {
        self.capacity_bytes / self.spec.page_bytes.as_u64()
    }

    pub fn memory_limit(&self) -> Option<u64> {
        self.spec.memory_limit.map(|l| l.as_u64())
    }
}

/// One node's models. Lives with the node's disk, outside its process: the layout follows the
/// data across restarts; the cache empties when the process dies, except on LMDB, whose cache
/// is the OS page cache.
#[derive(Debug)]
pub struct NodeModel {
    pub models: std::sync::Arc<Models>,
    pub cache: CacheModel,
    /// Page touches of reads and of applies since the last window.
    reads: Touches,
    applies: Touches,
    /// When the current process started (simulated ms), for allocator age and cache warm-up.
    started_ms: u64,
    /// Pages read into the cache since the process started: the cache's memory grows with
    /// them up to its capacity (tracked apart from the LRU, whose few model pages may be too
    /// coarse to say how full a cache of millions of pages is).
    loaded_pages: u64,
}

/// One cache window's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheWindow {
    /// Page touches of `get`s: what the cache formula is about.
    pub reads: Touches,
    /// Page touches of applies (a leaf read before its write; writes to random keys miss at
    /// any cache share short of the whole data).
    pub applies: Touches,
    pub pages_held: u64,
    pub capacity_pages: u64,
    /// Past warm-up: the process has run `cache_warmup` (a cache fills in moments; the hot set
    /// it settles on takes longer, and a preload rewrites every page first).
    pub warm: bool,
}

impl NodeModel {
    pub fn new(models: std::sync::Arc<Models>) -> NodeModel {
        let cache = CacheModel::new(models.shape, models.spec.page_bytes.as_u64(), models.capacity_bytes);
        NodeModel {
            models,
            cache,
            reads: Touches::default(),
            applies: Touches::default(),
            started_ms: 0,
            loaded_pages: 0,
        }
    }

    /// A process of this node started at `now_ms`.
    pub fn process_started(&mut self, now_ms: u64) {
        self.started_ms = now_ms;
        if self.models.memory.engine != EngineShape::Lmdb {
            self.cache.cache.clear();
            self.loaded_pages = 0;
        }
    }

    /// One `get` of `keys`: the misses, each a disk read.
    pub fn get(&mut self, keys: &[&[u8]]) -> u64 {
        let mut touches = Touches::default();
        for key in keys {
            touches += self.cache.get(key);
        }
        self.reads += touches;
        self.loaded_pages += touches.misses;
        touches.misses
    }

    /// One apply of `ops`: the misses, each a disk read.
    pub fn apply(&mut self, ops: &[&qs_node::entry::Op]) -> u64 {
        let mut touches = Touches::default();
        for op in ops {
            touches += match op {
                qs_node::entry::Op::Set { key, value } => self.cache.apply(key, Some(value.len() as u64)),
                qs_node::entry::Op::Delete { key } => self.cache.apply(key, None),
            };
        }
        self.applies += touches;
        self.loaded_pages += touches.misses;
        touches.misses
    }

    /// Whether the layout holds `keys` keys of `bytes` key and value bytes, as the store does.
    pub fn layout_matches(&self, keys: u64, bytes: u64) -> bool {
        self.cache.layout.keys() == keys && self.cache.layout.data_bytes() == bytes
    }

    /// Lays the pages out again from the store's pairs (after a snapshot bootstrap or a
    /// replaced disk: data that arrived without applies). The cache empties.
    pub fn rebuild(&mut self, pairs: impl Iterator<Item = (Vec<u8>, usize)>) {
        self.cache =
            CacheModel::new(self.models.shape, self.models.spec.page_bytes.as_u64(), self.models.capacity_bytes);
        self.loaded_pages = 0;
        for (key, value_bytes) in pairs {
            self.cache.load(&key, Some(value_bytes as u64));
        }
    }

    /// The counts since the last window, at `now_ms`.
    pub fn take_window(&mut self, now_ms: u64) -> CacheWindow {
        let (reads, applies) = (std::mem::take(&mut self.reads), std::mem::take(&mut self.applies));
        let warm = now_ms.saturating_sub(self.started_ms) >= self.models.spec.cache_warmup.as_millis() as u64;
        let page_bytes = self.models.spec.page_bytes.as_u64();
        CacheWindow {
            reads,
            applies,
            pages_held: self.cache.cache.used_bytes() / page_bytes,
            capacity_pages: self.cache.cache.capacity_bytes() / page_bytes,
            warm,
        }
    }

    /// The node's data at the stated scale.
    pub fn data(&self) -> Data {
        let layout = &self.cache.layout;
        let scale = self.models.scale;
        Data {
            keys: layout.keys() as f64 * scale,
            bytes: layout.data_bytes() as f64 * scale,
            key_bytes: layout.key_bytes() as f64 * scale,
        }
    }

    /// Modelled memory at `now_ms`.
    pub fn memory(&self, now_ms: u64) -> Breakdown {
        let page_bytes = self.models.spec.page_bytes.as_u64() as f64;
        let cache_filled = (self.loaded_pages as f64 * page_bytes * self.models.scale) as u64;
        let uptime_s = now_ms.saturating_sub(self.started_ms) as f64 / 1000.0;
        memory::breakdown(&self.models.memory, &self.data(), cache_filled, uptime_s)
    }

    /// Keys, data, stored and cached bytes by key category, at the stated scale.
    pub fn categories(&self) -> Vec<cache::Category> {
        let scale = self.models.scale;
        let up = |n: u64| (n as f64 * scale) as u64;
        self.cache
            .categories()
            .into_iter()
            .map(|c| cache::Category {
                keys: up(c.keys),
                data_bytes: up(c.data_bytes),
                stored_bytes: up(c.stored_bytes),
                cached_bytes: up(c.cached_bytes),
                ..c
            })
            .collect()
    }

    /// The formulas' sizing for this node's data now.
    pub fn sizing(&self) -> formulas::Sizing {
        let used = self.cache.used_bytes() as f64 * self.models.scale;
        formulas::Sizing::new(&self.models.memory, &self.data(), used as u64, self.models.memory_limit())
    }
}

/// The mean length of the keys `cfg<writer>:<n>` for `n` in `0..keys` (the simulated writers'
/// key names).
pub fn mean_key_bytes(writer: usize, keys: u64) -> f64 {
    let prefix = format!("cfg{writer}:").len() as u64;
    let mut total = 0u64;
    let mut low = 0u64;
    let mut digits = 1u64;
    let mut high = 10u64;
    while low < keys {
        let count = high.min(keys) - low;
        total += count * (prefix + digits);
        low = high;
        high = high.saturating_mul(10);
        digits += 1;
    }
    total as f64 / keys.max(1) as f64
}
