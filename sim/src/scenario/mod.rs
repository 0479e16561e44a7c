//! Scenario files: one story each, in TOML.
//!
//! Guarantees: a scenario that [`Scenario::load`] accepts can run — every duration is positive
//! and bounded, every fault names a node that exists and a kind this build can inject, and the
//! topology is a tree of at most [`TIERS_MAX`] tiers below the root. A bad file is refused with
//! the file, the line and the field, and what is allowed.
//!
//! ```toml
//! [scenario]
//! name = "quickstart"
//! description = "What it reproduces and what must hold."
//! duration = "2m"                  # the safety phase, in simulated time
//! engine = "memory"                # memory | lmdb | rocksdb (each node's files under the run's
//!                                  # folder; `qsim run --engine` overrides it)
//! expect = "pass"                  # pass | violation | liveness (canaries expect a failure)
//! # seed = 17                       # the seed `qsim run` uses without --seed (default 1)
//!
//! [topology]                       # below the root, tier by tier
//! tiers = [
//!   { name = "mid", count = 2 },
//!   { name = "edge", count = 4, primaries = 1, secondaries = 1 },
//! ]
//! datacenters = 1                  # root in dc 0, node k of each tier in dc k mod datacenters
//! cross_dc_latency = "0ms"         # added one way on replication links between data centers
//! # tcp_window = "144 KiB"          # bytes a TCP connection carries one way before its writer
//!                                  # waits (Linux's default send + receive buffers)
//!
//! [node]
//! batch_window = "500ms"
//! heartbeat_interval = "1s"
//! staleness_failover = "30s"
//! retention_entries = 100000       # log entries each node keeps
//! gc_interval = "1s"
//! # lmdb_write_map = true           # LMDB runs: MDB_WRITEMAP (default); false writes with pwrite
//! # producer_quota = true           # the producer's generous default quota; false: none
//! # tls = true                     # replication over mutual TLS (default); false: plaintext
//! # replication_connections_max = 8 # every node's replication listener cap (default: the node's)
//! # memcached_connections_max = 4  # every node's memcached listener cap (default: the node's)
//! # rocksdb_memtable_bytes = "1 MiB" # RocksDB runs: each column family's memtable (default 128 KiB)
//! # rocksdb_cache_bytes = "1 MiB"  # RocksDB runs: the block cache (default: the node's, 32 MiB)
//! # rocksdb_block_bytes = "16 KiB" # RocksDB runs: an SST data block (default: the node's, 4 KiB)
//!
//! [[workload]]
//! kind = "writer"                  # producers writing through the root's HTTP API
//! rate_per_s = 5
//! keys = 50
//! value_bytes = { min = 10, max = 200 }
//! # value_bytes = { min = 10, max = 65536, distribution = "log_uniform" }   # or "uniform"
//! # burst = { every = "60s", length = "5s", rate_per_s = 200 }   # optional; each starts on time, every `every`
//! # preload_rate_per_s = 2000      # optional: write every key once first, in order (bulk load)
//!
//! [[workload]]
//! kind = "reader"                  # memcached gets on every node of the last tier
//! rate_per_s = 10
//! skew = 1.0                       # Zipf exponent of key popularity
//! # hot_keys = 50                  # optional: only each writer's first 50 keys are ever read
//!
//! [[fault]]
//! at = "30s"
//! kind = "kill"                    # kill | pause | partition | partition_in | partition_out |
//!                                  # split | clog_link | latency | loss | slow_disk | sigbus
//! target = "mid-1"                 # a node; "network" for latency and loss
//! duration = "20s"                 # then restart | resume | heal | replace the disk
//! # peer = "edge-2"                # clog_link: the other end
//! # group = ["edge-1"]             # split: the nodes on the target's side
//! # model = "saturated"            # slow_disk: aging | saturated
//! # latency = "150ms"              # latency: added per message
//! # rate = 0.1                     # loss: share of messages lost
//!
//! [checks]
//! lag_max = "35s"
//! converge_within = "60s"
//! sample_interval = "1s"           # lag and memory samples (longer for runs of days)
//! trace_nodes_per_tier = 32        # per-node series kept for this many nodes of each tier;
//!                                  # a larger tier is summarized per sample (tier_sample)
//!
//! [swarm]                          # optional: faults drawn from the seed
//! kinds = ["kill", "pause", "partition"]   # the seed turns a non-empty subset on
//! count_min = 1
//! count_max = 6
//! duration_min = "2s"
//! duration_max = "40s"
//! # interrupt_bootstraps = true    # and kill, pause or cut off nodes those faults send to a snapshot
//! # related = true                 # and related outages: a node with its sources, past retention, a tier
//!
//! [resources]                      # optional: cache and memory models (crate::resources)
//! stands_for = "1 TiB"             # the data the full key space stands for (scale; default 1)
//! page_bytes = "8 KiB"             # the cache model's page
//! cache_bytes = "2 GiB"            # each node's page cache, at the stated scale
//! memory_limit = "8 GiB"           # each node's limit: past it, OOM kill, restart
//! base_bytes = "1 GiB"             # process memory before data
//! buffer_bytes = "64 MiB"          # connection and batch buffers
//! allocator = "glibc"              # glibc | jemalloc | tcmalloc
//! byte_sample = false              # a FoundationDB-style byte sample (4–6 GB per TB)
//! oom_restart = "5s"               # the supervisor's restart delay after an OOM kill
//! miss_ratio_max = 0.05            # the `cache` check: miss ratio per 5 s window, settled
//! cache_warmup = "30s"             # a started process's cache counts as cold this long
//!
//! [legacy]                         # planted bugs, off unless a bug-zoo scenario asks
//! serve_nearest_when_collected = false
//! apply_without_gap_check = false
//! ```

pub mod fault;
pub mod nodes;
pub mod resize;
pub mod swarm;
mod validate;
mod workload;

pub use fault::{Credentials, DiskError, DiskModelKind, During, Fault, FaultKind, IoOp, LEADER, Swarm};
pub use swarm::{RelatedDraw, RelatedGroup};
pub use workload::{Burst, SizeDistribution, ValueBytes, Workload, WriterModes};

use std::path::{Path, PathBuf};
use std::time::Duration;

use qs_node::EngineKind;
use serde::Deserialize;
use toml::Spanned;

/// Most tiers below the root: the seed's deepest tree has six layers.
pub const TIERS_MAX: usize = 6;
/// Most data centers a topology spreads over.
pub const DATACENTERS_MAX: usize = 16;
/// The most latency a cross-DC link may add one way (a long-haul link around the world is
/// ~150 ms; beyond a second it is an outage, which partitions model).
pub const CROSS_DC_LATENCY_MAX: Duration = Duration::from_secs(1);
/// Most nodes in one scenario: what this machine (24 GiB) holds in one process. The `scale`
/// scenario's ten thousand nodes peaked at 4.9 GB over 90 simulated seconds at 20 writes/s (0.5 MB
/// a node, values and log entries held once per process); twice that, about 10 GB, leaves room for
/// a workload with more data per node, the report and a busy machine. Every structure of a run
/// holds this many: the address plan ([`nodes::ADDRESSES_PER_TIER`] per tier) and the relay ports
/// ([`nodes::RELAY_PORT_BASE`] + one per node).
pub const NODES_MAX: usize = 20_000;
const _: () = assert!(NODES_MAX <= nodes::ADDRESSES_PER_TIER);
const _: () = assert!(nodes::RELAY_PORT_BASE as usize + NODES_MAX <= u16::MAX as usize);
/// Longest safety phase, in simulated time.
pub const DURATION_MAX: Duration = Duration::from_secs(7 * 24 * 3600);
/// Most faults in one scenario file.
pub const FAULTS_MAX: usize = 1_000;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub scenario: About,
    pub topology: Topology,
    #[serde(default)]
    pub node: NodeSettings,
    #[serde(default)]
    pub workload: Vec<Workload>,
    #[serde(default)]
    pub fault: Vec<Spanned<Fault>>,
    pub checks: Checks,
    /// Faults drawn from the seed, in addition to `fault`.
    pub swarm: Option<Swarm>,
    /// Cache and memory models for every node (see `crate::resources`).
    pub resources: Option<crate::resources::ResourceSpec>,
    /// The census client (`crate::workload::census`): on unless the scenario turns it off.
    #[serde(default)]
    pub census: Census,
    /// Node settings drawn from the seed (`crate::knobs`): on unless the scenario turns them off.
    #[serde(default)]
    pub knobs: crate::knobs::KnobSettings,
    /// Each host's wall clock (`crate::clocks`): drawn unless the scenario turns them off.
    #[serde(default)]
    pub clocks: crate::clocks::ClockSettings,
    /// Planted bugs switched on in every node (see `qs_node::config::LegacyConfig`).
    #[serde(default)]
    pub legacy: qs_node::config::LegacyConfig,
    /// The `[node]` keys the file sets: settings no knob draw may change.
    #[serde(skip)]
    pub node_pinned: std::collections::BTreeSet<String>,
    /// The knobs this run drew, applied to `node` ([`Scenario::for_seed`]); empty until then.
    #[serde(skip)]
    pub knobs_drawn: Vec<crate::knobs::Drawn>,
    /// Each host's clock this run keeps ([`Scenario::for_seed`]); empty until then.
    #[serde(skip)]
    pub clocks_drawn: Vec<crate::clocks::NodeClock>,
    /// The file this came from (set by `load`).
    #[serde(skip)]
    pub path: PathBuf,
    /// Whether the command line (`--engine`) replaced the file's engine.
    #[serde(skip)]
    pub engine_overridden: bool,
}

/// The engines a scenario may run its nodes on, in the order messages list them.
pub const ENGINES: [EngineKind; 3] = [EngineKind::Memory, EngineKind::Lmdb, EngineKind::Rocksdb];

/// The engine a scenario, `--engine` or a sweep names `name` (exactly: the names
/// [`EngineKind`]'s `Display` writes, which are also what a scenario file's `engine` takes).
pub fn engine_named(name: &str) -> Option<EngineKind> {
    ENGINES.into_iter().find(|engine| engine.to_string() == name)
}

/// The engines' names, comma-separated, for messages that list them.
pub fn engine_names() -> String {
    ENGINES.map(|engine| engine.to_string()).join(", ")
}

/// [`engine_named`] for a command line or a definition file: the name, or why it is none.
/// `--engine`'s value parser, so clap refuses a bad name before anything loads.
pub fn parse_engine(name: &str) -> Result<EngineKind, String> {
    engine_named(name).ok_or_else(|| format!("{name:?} is not an engine; use {}", engine_names()))
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct About {
    pub name: String,
    pub description: String,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// A bad name is refused by serde, with the line and the names it takes.
    #[serde(default = "default_engine")]
    pub engine: EngineKind,
    /// What a run of this scenario must end in; a sweep counts a run that ends so as passing.
    /// Canaries and planted-bug scenarios expect a failure.
    #[serde(default)]
    pub expect: Expect,
    /// The seed `qsim run` uses when none is given: a pinned regression's, the one it was
    /// shrunk under. Sweeps use their own seeds.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Turn the node's fault points on (`qs_node::fault_points`: slow commits, connections
    /// dropped after the handshake or mid-snapshot, early keepalives): each switched on for a
    /// process with probability 1/4, firing on 1/4 of its passes. Swarm mode may draw it.
    #[serde(default)]
    pub buggify: bool,
}

/// The outcome a scenario is written to produce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    #[default]
    Pass,
    /// An invariant violation (exit 1).
    Violation,
    /// No convergence within the bound (exit 3).
    Liveness,
}

impl Expect {
    /// The `qsim run` exit code this expectation corresponds to.
    pub fn exit_code(self) -> u8 {
        match self {
            Expect::Pass => crate::exit::PASS,
            Expect::Violation => crate::exit::VIOLATION,
            Expect::Liveness => crate::exit::LIVENESS,
        }
    }
}

fn default_engine() -> EngineKind {
    EngineKind::Memory
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub tiers: Vec<Spanned<Tier>>,
    /// Data centers the nodes are spread over (see `crate::links`).
    #[serde(default = "one")]
    pub datacenters: usize,
    /// Added one way to every chunk on a replication link between two data centers.
    #[serde(default, with = "humantime_serde")]
    pub cross_dc_latency: Duration,
    /// The root's members: 1 (the default), a root of one process; 3 or 5, a root group that
    /// commits each batch through Raft. The first is `root`, the others `root-2`, `root-3`, ...
    #[serde(default = "one")]
    pub root_members: usize,
    /// Root group members on standby (`standby = true` in every roster): running, known to
    /// every member by their addresses, voting once a `membership` fault adds them. Named after
    /// the first voters (`root-4` after three). 0 (the default) to 2.
    #[serde(default)]
    pub root_standby: usize,
    /// The bytes every TCP connection carries one way before its writer waits: written and not
    /// yet read by the other end's application (the carried madsim patch's `TcpWindow`). The
    /// default is Linux's default send and receive buffers together (`net.ipv4.tcp_wmem` and
    /// `tcp_rmem`'s middle values, 16 KiB + 128 KiB), before autotuning grows them.
    #[serde(default = "default_tcp_window")]
    pub tcp_window: bytesize::ByteSize,
}

/// [`Topology::tcp_window`]'s default: Linux's default socket buffers, send and receive.
pub const TCP_WINDOW_DEFAULT: bytesize::ByteSize = bytesize::ByteSize(16 * 1024 + 128 * 1024);
/// The smallest TCP window a scenario may set: a frame's header and then some.
pub const TCP_WINDOW_MIN: bytesize::ByteSize = bytesize::ByteSize(1024);
/// The largest: Linux's `tcp_wmem` and `tcp_rmem` maxima together (4 MiB + 6 MiB).
pub const TCP_WINDOW_MAX: bytesize::ByteSize = bytesize::ByteSize(10 * 1024 * 1024);

fn default_tcp_window() -> bytesize::ByteSize {
    TCP_WINDOW_DEFAULT
}

impl Topology {
    /// The root's first voters' names, the first `root`.
    pub fn root_names(&self) -> Vec<String> {
        (1..=self.root_members.max(1)).map(root_member_name).collect()
    }

    /// Every member a root group's roster names: the first voters, then those on standby.
    pub fn roster_names(&self) -> Vec<String> {
        (1..=self.root_members.max(1) + self.root_standby).map(root_member_name).collect()
    }

    /// [`Topology::tcp_window`] in bytes, as madsim's connections and the relays count them.
    pub fn tcp_window_bytes(&self) -> usize {
        usize::try_from(self.tcp_window.as_u64()).expect("validated: at most TCP_WINDOW_MAX, 10 MiB")
    }

    /// The data center of node `n` (0-based) of a tier; the root (`n = 0`) is in data center 0.
    pub fn datacenter(&self, n: usize) -> usize {
        n % self.datacenters.max(1)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    pub name: String,
    pub count: usize,
    #[serde(default = "one")]
    pub primaries: usize,
    #[serde(default)]
    pub secondaries: usize,
}

fn one() -> usize {
    1
}

/// The name of root member `id` (from 1): `root`, then `root-<id>`.
pub fn root_member_name(id: usize) -> String {
    if id <= 1 { crate::trace::ROOT.to_string() } else { format!("{}-{id}", crate::trace::ROOT) }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSettings {
    #[serde(with = "humantime_serde")]
    pub batch_window: Duration,
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub staleness_failover: Duration,
    /// Log entries every node keeps (its retention floor); older ones are collected.
    pub retention_entries: u64,
    /// How often every node collects its log.
    #[serde(with = "humantime_serde")]
    pub gc_interval: Duration,
    /// The chunk size every node serves snapshots in (default: the node's, 1 MiB); small
    /// chunks make a transfer long enough to be interrupted.
    pub snapshot_chunk_bytes: Option<bytesize::ByteSize>,
    /// How often every node reads back all its values against their checksums (default: the
    /// node's, 1 h).
    #[serde(default, with = "humantime_serde")]
    pub scrub_interval: Option<Duration>,
    /// LMDB runs only: every node opens its environment with `MDB_WRITEMAP` (the node's
    /// `storage.write_map`). On by default here, though a real node's default is off: a
    /// commit stores its pages in LMDB's map rather than copying each through `pwrite`, which
    /// was a quarter of an LMDB run's wall time, and nothing the simulator observes differs —
    /// the trace is the same event for event, bytes written included (LMDB counts them either
    /// way). `false` runs the `pwrite` path. Other engines ignore it, so `--engine` can still
    /// move the scenario between engines.
    pub lmdb_write_map: bool,
    /// The writers' producer runs under a generous quota (`nodes::producer_quota`), as a
    /// production root's producers do; `false` turns it off.
    pub producer_quota: bool,
    /// Every node replicates over mutual TLS (the node's `[tls]`), as a production deployment
    /// should, with certificates the run issues from its seed (`world::certificates`); `false`
    /// runs replication in plaintext.
    pub tls: bool,
    /// A root group's members snapshot and compact their Raft logs every this many applied
    /// entries (the node's `root.raft_snapshot_entries`, default 10 000); small values make a
    /// member that was away catch up from a snapshot.
    pub raft_snapshot_entries: u64,
    /// Entries a compaction keeps before its snapshot (the node's `root.raft_log_keep_entries`).
    pub raft_log_keep_entries: u64,
    /// Every node's replication listener holds at most this many connections (the node's
    /// `connections.replication.max`; default: the node's, 1024); small values make it shed.
    pub replication_connections_max: Option<usize>,
    /// Every node's memcached listener holds at most this many connections (the node's
    /// `connections.memcached.max`; default: the node's); small values make an edge shed its
    /// readers' and the census's connections for each other.
    pub memcached_connections_max: Option<usize>,
    /// Every node keeps log entries younger than this too (the node's `retention.keep_age`;
    /// default: no age rule): an entry is collected only when both rules allow it.
    #[serde(default, with = "humantime_serde")]
    pub retention_age: Option<Duration>,
    /// Entries a replica applies to one commit (the node's
    /// `replication.apply_batch_entries_max`; default: the node's, 1 000).
    pub apply_batch_entries_max: Option<usize>,
    /// The replicas' reconnect backoff floor and ceiling (default: the node's, 100 ms and 5 s).
    #[serde(default, with = "humantime_serde")]
    pub reconnect_backoff_min: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub reconnect_backoff_max: Option<Duration>,
    /// Bootstraps a node serves at once (default: the node's, 2).
    pub bootstraps_served_max: Option<usize>,
    /// RocksDB runs: each column family's memtable (the node's `storage.memtable_bytes`;
    /// default [`SIM_ROCKSDB_MEMTABLE_BYTES`](nodes::SIM_ROCKSDB_MEMTABLE_BYTES), small enough
    /// that flushes and compactions run within a simulated minute). Other engines ignore it and
    /// the two below, so `--engine` can still move the scenario between engines.
    pub rocksdb_memtable_bytes: Option<bytesize::ByteSize>,
    /// RocksDB runs: the block cache the column families share (the node's
    /// `storage.cache_bytes`; default: the node's, 32 MiB); a small one makes reads miss.
    pub rocksdb_cache_bytes: Option<bytesize::ByteSize>,
    /// RocksDB runs: an SST data block, the unit the cache holds (the node's
    /// `storage.block_bytes`; default: the node's, 4 KiB).
    pub rocksdb_block_bytes: Option<bytesize::ByteSize>,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            batch_window: Duration::from_millis(500),
            heartbeat_interval: Duration::from_secs(1),
            staleness_failover: Duration::from_secs(30),
            retention_entries: 100_000,
            gc_interval: Duration::from_secs(1),
            snapshot_chunk_bytes: None,
            scrub_interval: None,
            lmdb_write_map: true,
            producer_quota: true,
            tls: true,
            raft_snapshot_entries: qs_node::config::RootConfig::default().raft_snapshot_entries,
            raft_log_keep_entries: qs_node::config::RootConfig::default().raft_log_keep_entries,
            replication_connections_max: None,
            memcached_connections_max: None,
            retention_age: None,
            apply_batch_entries_max: None,
            reconnect_backoff_min: None,
            reconnect_backoff_max: None,
            bootstraps_served_max: None,
            rocksdb_memtable_bytes: None,
            rocksdb_cache_bytes: None,
            rocksdb_block_bytes: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Largest replication lag a node with a healthy path to the root may show.
    #[serde(with = "humantime_serde")]
    pub lag_max: Duration,
    /// How long, after every fault heals, every live node has to converge.
    #[serde(with = "humantime_serde")]
    pub converge_within: Duration,
    /// How often every node's lag (and memory, with `[resources]`) is sampled: once a simulated
    /// second by default, as fdbserver checks its RSS; a scenario that runs for days samples
    /// less often to keep its trace small.
    #[serde(default = "default_sample_interval", with = "humantime_serde")]
    pub sample_interval: Duration,
    /// Per-node series (applies, samples, cursors) are kept in the trace for at most this many
    /// nodes of each tier, the first by number, and for every node a fault names; a larger
    /// tier is summarized each sample over all its nodes (`crate::trace::Detail`). The
    /// checkers see every node's events either way.
    #[serde(default = "default_trace_nodes_per_tier")]
    pub trace_nodes_per_tier: usize,
    /// The probes this scenario exists to reach (`qs_reports::schema::Probe` names): the
    /// `coverage` check fails a run that reaches none of them.
    #[serde(default)]
    pub probes: Vec<qs_reports::schema::Probe>,
}

/// `[census]`: the client that sends every request the node answers, with edge values, and
/// judges each reply (`contract`). On by default; a scenario may turn it off or slow it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Census {
    /// Unset: on, except in a scenario with `[resources]` — the cache and memory models scale
    /// the writers' keys to the story's data set, and a census key there would stand for
    /// hundreds of thousands of keys nobody declared.
    pub enabled: Option<bool>,
    /// Requests a second, per session (each edge session, and the root session). Unset: 2, or
    /// [`Census::REQUESTS_PER_RUN`] over the whole run if that is fewer (a run of simulated
    /// days still sends each session's requests by the thousand, not by the million).
    pub rate_per_s: Option<f64>,
    /// Edges with a session of their own, spread over the last tier (at most its size).
    pub sessions: usize,
    /// Largest value the census writes (default and most: `VALUE_BYTES_MAX`). A tree of
    /// thousands replicates each value to every node: a mebibyte there costs the run minutes.
    pub value_bytes_max: bytesize::ByteSize,
}

impl Census {
    /// Most requests a second one census session sends.
    pub const RATE_MAX: f64 = 100.0;
    /// Requests a second per session unless the scenario says.
    pub const RATE_DEFAULT: f64 = 2.0;
    /// Requests per session over a run, at most, unless the scenario sets a rate.
    pub const REQUESTS_PER_RUN: f64 = 1_000.0;

    /// Whether the census runs in `scenario`.
    pub fn runs_in(scenario: &Scenario) -> bool {
        scenario.census.enabled.unwrap_or(scenario.resources.is_none())
    }

    /// Requests a second per session in a run of `duration`.
    pub fn rate_in(&self, duration: Duration) -> f64 {
        self.rate_per_s
            .unwrap_or_else(|| Self::RATE_DEFAULT.min(Self::REQUESTS_PER_RUN / duration.as_secs_f64().max(1.0)))
    }
    /// Most edge sessions.
    pub const SESSIONS_MAX: usize = 16;
}

impl Default for Census {
    fn default() -> Census {
        Census {
            enabled: None,
            rate_per_s: None,
            sessions: 2,
            value_bytes_max: bytesize::ByteSize(qs_node::limits::VALUE_BYTES_MAX as u64),
        }
    }
}

fn default_sample_interval() -> Duration {
    Duration::from_secs(1)
}

/// Enough nodes of a tier to see its spread in a chart, few enough that a tier of thousands
/// keeps its trace (and its report) to tens of megabytes.
pub const TRACE_NODES_PER_TIER_DEFAULT: usize = 32;

fn default_trace_nodes_per_tier() -> usize {
    TRACE_NODES_PER_TIER_DEFAULT
}

/// The sampling interval's bounds.
pub const SAMPLE_INTERVAL_MIN: Duration = Duration::from_millis(100);
pub const SAMPLE_INTERVAL_MAX: Duration = Duration::from_secs(600);

/// A scenario that was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    #[error("{path}:{line}: field `{field}`: {problem}")]
    Invalid { path: String, line: usize, field: String, problem: String },
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        Scenario::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        let shown = path.display().to_string();
        let mut scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Syntax {
            path: shown.clone(),
            message: e.to_string().trim_end().to_string(),
        })?;
        scenario.path = path.to_path_buf();
        // Which `[node]` keys the file sets (it parsed above, so it parses here).
        if let Ok(table) = text.parse::<toml::Table>()
            && let Some(toml::Value::Table(node)) = table.get("node")
        {
            scenario.node_pinned = node.keys().cloned().collect();
        }
        let line_of = |span: std::ops::Range<usize>| text[..span.start.min(text.len())].matches('\n').count() + 1;
        // A field without a span (a plain value): the line that sets its last key, else 1.
        let line_of_key = |field: &str| {
            let key = field.rsplit('.').next().unwrap_or(field);
            text.lines()
                .position(|l| l.trim_start().strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('=')))
                .map_or(1, |i| i + 1)
        };
        scenario.validate().map_err(|(span, field, problem)| ScenarioError::Invalid {
            path: shown,
            line: span.map_or_else(|| line_of_key(&field), line_of),
            field,
            problem,
        })?;
        Ok(scenario)
    }

    /// The scenario as a run under `seed` runs it: its knob draws applied to `[node]` and
    /// recorded in `knobs_drawn`, its hosts' clocks in `clocks_drawn`. Everything that runs or
    /// judges a run reads this, never the file's scenario, so the nodes and the checkers'
    /// bounds agree.
    pub fn for_seed(&self, seed: u64) -> Scenario {
        let mut scenario = self.clone();
        scenario.clocks_drawn = crate::clocks::draw(self, seed);
        scenario.knobs_drawn = crate::knobs::draw(self, seed);
        for drawn in &scenario.knobs_drawn {
            drawn.knob.set(drawn.value, &mut scenario.node);
        }
        scenario
    }

    /// The engine every node runs on: the file's, or `--engine`'s.
    pub fn engine(&self) -> EngineKind {
        self.scenario.engine
    }

    /// Runs every node on `engine` instead of the file's (`qsim run --engine`).
    pub fn override_engine(&mut self, engine: EngineKind) {
        self.scenario.engine = engine;
        self.engine_overridden = true;
    }

    /// The arguments after `qsim run` that repeat this run: the file, the seed and any override.
    pub fn run_args(&self, seed: u64) -> Vec<String> {
        let mut args = vec![self.path.display().to_string(), "--seed".into(), seed.to_string()];
        if self.engine_overridden {
            args.extend(["--engine".to_string(), self.scenario.engine.to_string()]);
        }
        args
    }

    /// The one command that reproduces this run under `seed`.
    pub fn reproduce(&self, seed: u64) -> String {
        format!("./qsim run {}", self.run_args(seed).join(" "))
    }

    /// The name runs of this scenario go by in folders and sweep results: the scenario's name,
    /// suffixed with the engine when `--engine` overrode the file's.
    pub fn run_name(&self) -> String {
        if self.engine_overridden {
            format!("{}-{}", self.scenario.name, self.scenario.engine)
        } else {
            self.scenario.name.clone()
        }
    }

    /// The folder a run's outputs go to under `root`: `<root>/<run name>/seed-<seed>`.
    pub fn out_dir(&self, root: &Path, seed: u64) -> PathBuf {
        root.join(self.run_name()).join(format!("seed-{seed}"))
    }

    /// The run's full key space at its mean value size: every writer's keys, each holding a
    /// value of the mean size its distribution draws (with the version the writer puts in
    /// front). The resource models scale from it.
    pub fn nominal_bytes(&self) -> u64 {
        let version_bytes = crate::checkers::reads::versioned_value(0, b"").len() as f64;
        let mut writer = 0;
        let mut total = 0.0;
        for workload in &self.workload {
            if let Workload::Writer { keys, value_bytes, .. } = workload {
                total += *keys as f64
                    * (crate::resources::mean_key_bytes(writer, *keys) + version_bytes + value_bytes.mean());
                writer += 1;
            }
        }
        total as u64
    }

    /// The resource models of a run of this scenario, if it has `[resources]`.
    pub fn models(&self) -> Option<crate::resources::Models> {
        let spec = self.resources.as_ref()?;
        Some(crate::resources::Models::new(spec, self.nominal_bytes(), self.engine()))
    }

    /// Node names: `root`, then `<tier>-<n>` counting from 1, tier by tier.
    pub fn node_names(&self) -> Vec<String> {
        self.node_infos().into_iter().map(|n| n.name).collect()
    }

    /// The tiers' names below the root, top down.
    pub fn tier_order(&self) -> Vec<String> {
        self.topology.tiers.iter().map(|t| t.get_ref().name.clone()).collect()
    }

    /// Every node with its tier (and data center, if there are several), in topology order
    /// (root first).
    pub fn node_infos(&self) -> Vec<qs_reports::schema::NodeInfo> {
        let topology = &self.topology;
        let datacenter = |n: usize| (topology.datacenters > 1).then(|| topology.datacenter(n) as u32);
        let mut nodes: Vec<qs_reports::schema::NodeInfo> = topology
            .roster_names()
            .into_iter()
            .map(|name| qs_reports::schema::NodeInfo { name, tier: "root".into(), depth: 0, datacenter: datacenter(0) })
            .collect();
        for (depth, tier) in topology.tiers.iter().enumerate() {
            let tier = tier.get_ref();
            nodes.extend((0..tier.count).map(|n| qs_reports::schema::NodeInfo {
                name: format!("{}-{}", tier.name, n + 1),
                tier: tier.name.clone(),
                depth: depth as u32 + 1,
                datacenter: datacenter(n),
            }));
        }
        nodes
    }
}

#[cfg(test)]
mod tests;
