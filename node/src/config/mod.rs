//! The node's configuration file (TOML).
//!
//! Guarantees: a configuration that [`NodeConfig::parse`] accepts is complete and consistent —
//! every field the node's role needs is present, every duration and bound is in range, and a
//! replica has at least one source. A bad file is refused at start with an error that names the
//! file, the field and what is allowed (TOML syntax and type errors carry the line and column).
//!
//! ```toml
//! name = "edge-1"
//! role = "replica"                    # root | replica
//! database_id = "5157534d-0000-0000-0000-000000000001"
//!
//! [storage]
//! engine = "lmdb"                     # lmdb | rocksdb | memory
//! path = "/var/lib/qs-node/edge-1"
//! # memtable_bytes = 67108864         # rocksdb only: memtable size before a flush
//! # cache_bytes = "32 MiB"            # rocksdb only: LRU block cache (data, index, filter blocks)
//! # block_bytes = "4 KiB"             # rocksdb only: SST data block size
//! # direct_reads = false              # rocksdb only: read SST files with O_DIRECT
//! # read_ahead = true                 # lmdb only: false sets MDB_NORDAHEAD
//! # write_map = false                 # lmdb only: true sets MDB_WRITEMAP
//! # scrub_interval = "1h"             # read back every value against its checksum; "0s" off
//!
//! [memory]
//! # limit_bytes = "4 GiB"             # resident memory past which the node exits (code 20)
//!
//! [listen]
//! replication = "127.0.0.1:7001"      # downstream nodes replicate from here
//! memcached = "127.0.0.1:11211"       # reads (memcached text protocol)
//! http = "127.0.0.1:8001"             # metrics; on the root also the write API
//!
//! [replication]
//! primaries = ["127.0.0.1:7000"]      # tried first, in order
//! secondaries = ["127.0.0.1:7100"]    # longer history; tried after the primaries
//! staleness_failover = "30s"          # newest entry older than this: move to the next source
//! # snapshot_chunk_bytes = "1 MiB"    # the chunks this node serves snapshots in (4 KiB..16 MiB)
//! # snapshot_timeout = "30s"          # a bootstrap's longest wait for any one step (its connect: staleness_failover, if shorter)
//! # apply_batch_entries_max = 1000    # most entries a replica applies in one commit
//! # dial_from = "127.0.0.2"          # local address outgoing replication and Raft connections use
//!
//! [retention]
//! keep_entries_min = 1000
//! keep_age = "7d"
//!
//! [connections]                       # optional; defaults and bounds in connections::settings
//! drain_timeout = "10s"               # at shutdown: time for in-flight work, then it is cut
//! [connections.http]
//! max = 1024                          # open connections; past it a new one is closed at once
//! header_read_timeout = "30s"         # request headers; also how long keep-alive idles
//! body_read_timeout = "30s"           # a request's whole body
//! write_timeout = "30s"               # a response write the client does not read
//! [connections.memcached]
//! max = 1024
//! idle_timeout = "5m"                 # the next request line; writing a reply
//! [connections.replication]
//! max = 256
//! idle_timeout = "30s"                # the client's hello; writing a frame
//!
//! [tls]                               # optional: mutual TLS on replication (see crate::tls)
//! certificate = "/etc/qs-node/tls/edge-1.pem"
//! key = "/etc/qs-node/tls/edge-1.key"
//! ca = "/etc/qs-node/tls/ca.pem"
//! # reload_interval = "10s"
//! # https = false                     # true: the HTTP port serves HTTPS only
//!
//! [root]                              # role = "root" only
//! batch_window = "500ms"
//! heartbeat_interval = "1s"
//! [[root.producers]]
//! name = "dns"
//! token = "change-me"
//! prefixes = ["dns:"]
//! writes_per_s = 100
//! burst = 200
//! ```
//!
//! Sizes (`cache_bytes`, `block_bytes`, `limit_bytes`) are an integer number of bytes or a
//! string with a unit: `"64 MiB"`, `"512 KiB"`, `"4 GiB"` (binary), `"64 MB"` (decimal).
//!
//! `[storage]` cache settings apply to RocksDB only and are refused on the other engines: LMDB
//! reads through the OS page cache (its size is the machine's free memory, not a setting), and
//! the memory engine holds everything in memory. Defaults: `cache_bytes` 32 MiB and
//! `block_bytes` 4 KiB, RocksDB's own defaults; index and filter blocks are charged to the cache.
//! Two read-path switches, each refused on the engines it does not apply to: `direct_reads`
//! (RocksDB's `use_direct_reads`; default off) makes a block-cache miss a device read instead of
//! a page-cache read, so the cache's hit ratio is what the disk sees; `read_ahead = false`
//! (LMDB's `MDB_NORDAHEAD`; default on) makes a page fault read its page alone, which keeps a
//! store larger than memory from evicting hot pages with read-ahead around cold ones. One
//! write-path switch, LMDB only: `write_map = true` (`MDB_WRITEMAP`; default off) writes each
//! commit's pages into LMDB's map instead of through `pwrite`, saving a copy of every page a
//! commit touches; the data file is then extended to the map size (sparse). LMDB counts the
//! bytes it writes the same way with or without it. It pays off where syncs are cheap (the
//! simulator's in-memory scratch files, where the simulator turns it on); on a disk with every
//! commit synced it measured slower (`./ci/bench-write-amp.sh`), so it is no node default.
//!
//! `[memory] limit_bytes` works like fdbserver's `--memory`: the node samples its resident set
//! size once a second and, past the limit, logs why (resident size, limit, and the memory the
//! engine accounts for: block cache, memtables, table readers, mapped LMDB pages) and exits with
//! code 20 (`qs_node::resources::EXIT_MEMORY_LIMIT`, fdbserver's `FDB_EXIT_NO_MEM`) so that its
//! supervisor restarts it. Unset: no limit. The simulator never samples (it is one process for
//! every node, and must stay deterministic).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytesize::ByteSize;
use serde::Deserialize;

use crate::entry::DatabaseId;
use crate::store::{
    EngineKind, OpenOptions, ROCKSDB_BLOCK_BYTES_DEFAULT, ROCKSDB_CACHE_BYTES_DEFAULT, RetentionPolicy,
};

/// Most sources (primaries + secondaries) one node may list: each is tried in turn, so the list
/// bounds one failover cycle.
pub const SOURCES_MAX: usize = 16;
/// Most producers one root may configure.
pub const PRODUCERS_MAX: usize = 1_000;
/// Bounds of `storage.memtable_bytes`: below 64 KiB RocksDB flushes nearly every commit;
/// above 1 GiB one column family's memtable could outgrow the node's memory budget.
pub const MEMTABLE_BYTES_MIN: usize = 64 << 10;
pub const MEMTABLE_BYTES_MAX: usize = 1 << 30;
/// Bounds of `storage.cache_bytes`: below 64 KiB the cache holds fewer than sixteen default
/// blocks, so the index blocks of a few tables evict each other and every read misses; above
/// 1 TiB the figure is a unit mistake, not a cache this node could fill.
pub const CACHE_BYTES_MIN: u64 = 64 << 10;
pub const CACHE_BYTES_MAX: u64 = 1 << 40;
/// Bounds of `storage.block_bytes`: below 512 B a table's index is as large as its data; above
/// 1 MiB every point read reads and decompresses a megabyte.
pub const BLOCK_BYTES_MIN: u64 = 512;
pub const BLOCK_BYTES_MAX: u64 = 1 << 20;
/// Bounds of `memory.limit_bytes`: 1 MiB is already below any real node's resident size (tests
/// use it to see the exit); above 64 TiB the figure is a unit mistake.
pub const MEMORY_LIMIT_BYTES_MIN: u64 = 1 << 20;
/// Smallest `replication.snapshot_chunk_bytes`: a page, so a transfer is not all headers.
pub const SNAPSHOT_CHUNK_BYTES_MIN: u64 = 4 << 10;
pub const MEMORY_LIMIT_BYTES_MAX: u64 = 1 << 46;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Takes writes from producers, numbers them, writes heartbeats.
    Root,
    /// Follows sources and serves reads and downstream replicas.
    Replica,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub name: String,
    pub role: Role,
    #[serde(deserialize_with = "database_id", serialize_with = "display")]
    pub database_id: DatabaseId,
    pub storage: StorageConfig,
    pub listen: ListenConfig,
    #[serde(default)]
    pub replication: ReplicationConfig,
    #[serde(default)]
    pub retention: RetentionConfig,
    pub root: Option<RootConfig>,
    /// The process's memory budget.
    #[serde(default)]
    pub memory: MemoryConfig,
    /// Per listener: the cap on open connections and the clients' deadlines.
    #[serde(default)]
    pub connections: crate::connections::ConnectionsConfig,
    /// Mutual TLS on replication (and HTTPS as an option); unset, both are plaintext.
    #[serde(default)]
    pub tls: Option<crate::tls::TlsConfig>,
    /// Legacy behaviours from the seeds, off by default, switched on only to show that the
    /// simulator's checkers catch them (the "bug zoo").
    #[serde(default)]
    pub legacy: LegacyConfig,
}

/// Planted bugs. Each reproduces a failure the seeds describe; none is ever on by default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LegacyConfig {
    /// Serving: when a client asks for collected history, stream from the oldest entry still
    /// held instead of answering OutOfRetention — Kyoto Tycoon's "nearest entries to this
    /// timestamp", which silently skipped garbage-collected logs.
    pub serve_nearest_when_collected: bool,
    /// Following: apply entries whose index is not exactly applied + 1 (no gap check).
    pub apply_without_gap_check: bool,
    /// Following: keep the replication position in a side file (`<storage path>.rts`) written
    /// only when a replication connection ends, and resume from it after a restart — Kyoto
    /// Tycoon's `rts` file, which made a crashed node replay days of already-applied log.
    pub cursor_written_at_disconnect: bool,
    /// Following: write that side-file cursor when a batch is received, before applying it —
    /// a crash in between resumes past entries never applied (the cursor runs ahead).
    pub cursor_written_before_apply: bool,
    /// Serving and following: a replica that loses its upstream drops its downstream clients
    /// and refuses new ones until it has an upstream again, and reconnects with uncapped,
    /// unjittered exponential backoff — the seed's cascading disconnect across six layers.
    pub stop_serving_when_upstream_lost: bool,
    /// Serving: the same dropping of downstream clients while the upstream is lost, but with
    /// the fixed, capped and jittered reconnect backoff — the cascade is fast enough to slip
    /// under every lag bound, and only the containment check sees a fault move nodes far
    /// below it.
    pub drop_downstream_while_reconnecting: bool,
    /// Following: no staleness timeout — a source that stops sending (paused, cut off one way,
    /// its disk stalled) is followed for as long as its connection stays open, however stale
    /// the replica gets, instead of failing over after `staleness_failover`.
    pub never_leave_stale_source: bool,
    /// Storage: commits are not synced before they are acknowledged; the dirty pages reach the
    /// disk only at the next writeback (every `LEGACY_WRITEBACK`, 5 s) — the Kyoto Tycoon
    /// deployment ran without syncing. A power loss loses acknowledged writes. On every engine
    /// (LMDB with `storage.write_map` off: the simulator's page cache sees `pwrite`, not stores
    /// to a writable map).
    pub acknowledge_before_sync: bool,
    /// Root: a key whose current value cannot be read (an I/O error, a failed checksum) counts
    /// as absent when the root drops identical rewrites, so a delete of it is dropped,
    /// acknowledged and never logged — the replicas keep the key for ever.
    pub unreadable_key_counts_as_absent: bool,
    /// Root group: the leader acknowledges a write as soon as it proposed it, before a majority
    /// committed it — a write the leader then loses with its leadership (partitioned, killed)
    /// was acknowledged and is gone.
    pub raft_acknowledge_before_commit: bool,
    /// Root group: a member applies each entry as soon as it has it in its Raft log, before it
    /// knows the entry committed — an entry a new leader overwrites stays applied, and the
    /// member's data forks from the group's.
    pub raft_apply_before_commit: bool,
    /// Root group: a member keeps its Raft log but not its hard state (term and vote) — after
    /// a restart it may vote a second time in a term it voted in, and two members can lead one
    /// term. The restart trusts such a log too (the shipped node refuses it as damaged).
    pub raft_forget_vote: bool,
    /// Root group: a member sent a snapshot records it as applied without bringing its store
    /// to the snapshot's point (the seed's hard case, skipped) — its store misses the entries
    /// the snapshot stood for, and what it applies next forks from the group's log.
    pub raft_snapshot_without_catch_up: bool,
    /// A root (of one, or a group's members) keeps producers' buckets in memory only: a
    /// restart or a failover starts them full, and a producer gets a second burst.
    pub quotas_forgotten: bool,
    /// Root group: a member takes a Raft link from whoever the hello says it is — any peer
    /// whose certificate chains to the CA (every replica's) can speak Raft as a member, forge
    /// entries, depose the leader.
    pub raft_trust_claimed_member: bool,
    /// Root group: pre-vote and check-quorum off (raft-rs's defaults). Under a partial
    /// partition — A↔B and B↔C up, A↔C down — the member cut off from the leader starts a new
    /// term at every election timeout, the member between them follows it, and the leader is
    /// deposed though it reaches a majority: leadership flaps for as long as the link is down.
    pub raft_without_pre_vote: bool,
    /// Root group: a member whose disk fails a persist or an apply, or whose store forks from
    /// the group's log, stops its consensus for good — and keeps claiming the role it last had
    /// ("leader, serving"), answering every write 503 for ever, its replicas still following it.
    pub raft_stop_consensus_on_failure: bool,
    /// Root group: a snapshot records the group's first voters (`[[root.members]]` but the
    /// standby ones) whatever membership changes the group made since, so a member sent it —
    /// or restarting from it — takes a configuration the group has left.
    pub raft_snapshot_first_configuration: bool,
    /// Root group: a member catching its store up to a snapshot follows a peer for as long as
    /// the peer keeps its pull open — keepalives and no entries, because the peer is itself
    /// behind the snapshot's point (cut off from the leader) — and stays out of the group for as
    /// long as that peer stays behind, instead of leaving it for the next after `PROGRESS_MAX`.
    pub raft_catch_up_without_progress_deadline: bool,
    /// Root group: a member that pauses — to restart its consensus after a disk failure, to
    /// heal a damaged store, to catch up to a snapshot — keeps saying the role it had ("leader,
    /// serving") and holds the writes that reach it until it is back, instead of refusing them
    /// at once ("paused, not applied"): a producer's write waits on a recovery that may take
    /// as long as the disk stays broken.
    pub raft_serve_while_paused: bool,
    /// Root group: a member that brings its store to a snapshot's point (catch-up) or replaces
    /// it with a peer's copy (heal) keeps the producers' buckets it held before — the
    /// snapshot's and the copy's quota ledger are not adopted — so, coming to lead before the
    /// producer writes again, it grants a burst the group already spent.
    pub raft_catch_up_skips_quota_ledger: bool,
    /// Root group: a member's messages to a peer wait in its queue and on its connection for as
    /// long as it takes — no send deadline, no age limit — so a peer that was paused, or that
    /// reads slower than its leader writes, is handed seconds-old appends and snapshots before
    /// the fresh ones, each answer to them asking for more of the same: it stays behind its
    /// group long after its fault.
    pub raft_send_stale_backlog: bool,
    /// Storage: a new LMDB or RocksDB store's directory is not synced when it is made, nor
    /// after the engine created its files in it — every commit is synced, but the names
    /// `data.mdb` (or RocksDB's) and the store's folder itself may be lost at a power loss,
    /// and the node comes back empty after acknowledging writes.
    pub store_directory_unsynced: bool,
    /// Memcached: an empty value's `VALUE` line is not followed by its (empty) data block's
    /// line end — `VALUE k 0 0\r\n` then straight to the next line — so a client reading by
    /// the protocol takes the next line as the data block's end and is out of step for good.
    pub memcached_empty_value_misframed: bool,
    /// Memcached: a refused `cas` is answered as a command without a data block, so its data
    /// block is read as the next request line — one more reply than requests, the stream out of
    /// step.
    pub memcached_cas_without_data_block: bool,
    /// Memcached: `get_hits` counts every key asked for, misses too — the operator's hit
    /// ratio reads 100 % while most lookups miss.
    pub memcached_hits_count_misses: bool,
    /// HTTP: `qs_writes_refused_total` counts every client error on the key paths, reads too —
    /// each `GET` of a key nobody wrote (404) shows on the operator's dashboard as a refused
    /// write.
    pub http_reads_count_as_refused_writes: bool,
    /// Metrics: `qs_writes_accepted_total` counts every operation of a committed batch — the
    /// identical rewrites it dropped too, which `qs_writes_identical_dropped_total` counts as
    /// well — so the dashboard shows more writes committed than the clients were ever answered.
    pub writes_accepted_counts_identical_rewrites: bool,
    /// Connections: a newcomer admitted in the place of a connection shed for it is not counted
    /// in `qs_connections_accepted_total` — the dashboard shows fewer connections taken than the
    /// listener served, and more sheds than admissions at a full listener.
    pub connections_heir_uncounted: bool,
    /// Connections: a full replication listener sheds the stream answered longest ago for each
    /// newcomer, as it sheds an idle HTTP client — a replica being served as readily as a
    /// connection still in its hello. A tier dialling a member at its cap cuts one stream to
    /// start another, and the streams churn between the members.
    pub replication_shed_served: bool,
    /// HTTP: a key in the path is percent-decoded into a UTF-8 string, lossily — bytes that are
    /// not UTF-8 become U+FFFD, so distinct binary keys collide on one stored key.
    pub http_key_decoded_lossily: bool,
    /// Retention: with `keep_age` set, an entry is collected once it is older than that, even
    /// among the newest `keep_entries_min` — the log keeps entries by age *or* count, not both,
    /// and a replica behind by less than the count finds its next entry gone.
    pub retention_either_rule: bool,
    /// Validation accepts `root.raft_log_keep_entries = 0`, which raft-rs cannot run: the first
    /// compaction takes the entry its snapshot is at, and appending the next panics.
    pub raft_log_keep_zero_accepted: bool,
    /// Clocks: a node ages root stamps by its own wall clock instead of the root's clock as it
    /// reckons it (`crate::clock`) — an edge whose clock runs 40 s ahead of its root's finds
    /// every entry 40 s old, takes its healthy source for a stale one and leaves it, again and
    /// again.
    pub trust_own_wall_clock: bool,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    #[serde(deserialize_with = "engine", serialize_with = "display")]
    pub engine: EngineKind,
    /// Store directory (ignored by the memory engine).
    #[serde(default)]
    pub path: PathBuf,
    /// RocksDB only: bytes a column family's memtable holds before it is flushed to an SST
    /// file. Unset: RocksDB's default (64 MiB). Small values make flushes and compactions
    /// frequent, which is how the simulator exercises them within minutes.
    #[serde(default)]
    pub memtable_bytes: Option<usize>,
    /// RocksDB only: capacity of the LRU block cache the three column families share, which
    /// also holds their index and filter blocks. Unset: [`ROCKSDB_CACHE_BYTES_DEFAULT`].
    #[serde(default, serialize_with = "exact_bytes_opt", skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<ByteSize>,
    /// RocksDB only: target size of an SST data block, the unit the cache holds and a miss
    /// reads. Unset: [`ROCKSDB_BLOCK_BYTES_DEFAULT`].
    #[serde(default, serialize_with = "exact_bytes_opt", skip_serializing_if = "Option::is_none")]
    pub block_bytes: Option<ByteSize>,
    /// RocksDB only: `use_direct_reads` (see the module doc). Unset: off.
    #[serde(default)]
    pub direct_reads: Option<bool>,
    /// LMDB only: `false` opens the environment with `MDB_NORDAHEAD`. Unset: on.
    #[serde(default)]
    pub read_ahead: Option<bool>,
    /// LMDB only: `true` opens the environment with `MDB_WRITEMAP` (see the module doc).
    /// Unset: off.
    #[serde(default)]
    pub write_map: Option<bool>,
    /// How often every stored value is read back and checked against its CRC32C (a scrub); a
    /// replica that finds damage re-bootstraps from a source. Default 1 h; 0 turns it off.
    #[serde(default = "default_scrub_interval", with = "humantime_serde")]
    pub scrub_interval: Duration,
}

fn default_scrub_interval() -> Duration {
    Duration::from_secs(3600)
}

impl StorageConfig {
    /// `[storage]` with the engine and path given and every other setting at its default, as a
    /// file with only those two lines would parse.
    pub fn new(engine: EngineKind, path: PathBuf) -> StorageConfig {
        StorageConfig {
            engine,
            path,
            memtable_bytes: None,
            cache_bytes: None,
            block_bytes: None,
            direct_reads: None,
            read_ahead: None,
            write_map: None,
            scrub_interval: default_scrub_interval(),
        }
    }

    /// The block cache capacity RocksDB runs with (configured or default).
    pub fn rocksdb_cache_bytes(&self) -> u64 {
        self.cache_bytes.map_or(ROCKSDB_CACHE_BYTES_DEFAULT as u64, |b| b.as_u64())
    }
}

/// `[memory]`: the process's memory budget (see the module doc).
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Resident set size past which the node exits with code 20. Unset: no limit.
    #[serde(serialize_with = "exact_bytes_opt", skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<ByteSize>,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    pub replication: SocketAddr,
    pub memcached: SocketAddr,
    pub http: SocketAddr,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplicationConfig {
    pub primaries: Vec<SocketAddr>,
    pub secondaries: Vec<SocketAddr>,
    /// A replica leaves a source whose newest entry is older than this. A root group member
    /// tells its replicas it is recovering once its own newest entry is older than this, so
    /// the tier below waits for them instead of moving too: set it on the members to what the
    /// tree's replicas use.
    #[serde(with = "humantime_serde")]
    pub staleness_failover: Duration,
    #[serde(with = "humantime_serde")]
    pub reconnect_backoff_min: Duration,
    #[serde(with = "humantime_serde")]
    pub reconnect_backoff_max: Duration,
    /// Most snapshot bootstraps this node serves at once.
    pub bootstraps_served_max: usize,
    /// Most entries applied in one commit on a replica.
    pub apply_batch_entries_max: usize,
    /// How long a snapshot bootstrap waits for any one step (connecting, the manifest, the
    /// next chunk) before it gives the source up and tries the next.
    #[serde(with = "humantime_serde")]
    pub snapshot_timeout: Duration,
    /// The size of the chunks this node serves snapshots in (each checksummed and made durable
    /// by the client before the next; a broken transfer resumes at the first missing chunk).
    #[serde(serialize_with = "exact_bytes")]
    pub snapshot_chunk_bytes: ByteSize,
    /// The local address this node's outgoing replication and Raft connections leave from.
    /// Unset: the system picks it by route. On a host with several addresses it fixes which one
    /// upstream nodes and firewalls see (`qsim real` gives each node its own loopback address,
    /// and its partitions filter by it). Ignored under the simulator, where a node has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dial_from: Option<std::net::IpAddr>,
}

/// How long a bootstrap waits for any one step by default (`replication.snapshot_timeout`):
/// as long as a source may stay silent on the log stream.
pub const SNAPSHOT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            primaries: Vec::new(),
            secondaries: Vec::new(),
            staleness_failover: Duration::from_secs(30),
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(5),
            bootstraps_served_max: 2,
            snapshot_chunk_bytes: ByteSize(crate::store::snapshot::CHUNK_BYTES_DEFAULT),
            apply_batch_entries_max: 1_000,
            snapshot_timeout: SNAPSHOT_TIMEOUT_DEFAULT,
            dial_from: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    pub keep_entries_min: Option<u64>,
    #[serde(with = "humantime_serde")]
    pub keep_age: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub gc_interval: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig { keep_entries_min: Some(100_000), keep_age: None, gc_interval: Duration::from_secs(10) }
    }
}

impl RetentionConfig {
    pub fn policy(&self) -> RetentionPolicy {
        RetentionPolicy {
            planted_either_rule: false,
            keep_entries_min: self.keep_entries_min,
            keep_age_ms: self.keep_age.map(|d| d.as_millis().min(u64::MAX as u128) as u64),
        }
    }
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RootConfig {
    #[serde(with = "humantime_serde", default = "default_batch_window")]
    pub batch_window: Duration,
    #[serde(with = "humantime_serde", default = "default_heartbeat")]
    pub heartbeat_interval: Duration,
    #[serde(default)]
    pub producers: Vec<ProducerConfig>,
    /// This node's id in its root group (`[[root.members]]`); unset for a root of one.
    #[serde(default)]
    pub member_id: Option<u64>,
    /// The root group's roster: each member with the addresses the others reach it at, this
    /// node among them. Those not marked `standby` (3 or 5) are the group's first voters; a
    /// standby one votes once an operator adds it (`qs-node members`). Empty (the default):
    /// the root is this one process.
    #[serde(default)]
    pub members: Vec<MemberConfig>,
    /// The bearer token `POST /v1/root/members` (a membership change) must carry. Unset (the
    /// default): membership changes are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_token: Option<String>,
    /// A group member snapshots its state and compacts its Raft log once it applied this many
    /// entries since its last snapshot (a member further behind than the log reaches catches
    /// up from the snapshot). 1 to 1 000 000; unused by a root of one.
    #[serde(default = "default_raft_snapshot_entries")]
    pub raft_snapshot_entries: u64,
    /// Entries a compaction keeps, the one its snapshot is at and those before it, so a member
    /// a little behind catches up from the log rather than from a snapshot. 1 to 1 000 000: at
    /// least the snapshot's own entry, whose term raft-rs reads to append the next ones (0
    /// would panic it). At or above `raft_snapshot_entries` is allowed: the log holds more.
    #[serde(default = "default_raft_log_keep_entries")]
    pub raft_log_keep_entries: u64,
}

impl RootConfig {
    /// Whether this root is a member of a group (else the root of one, as without `members`).
    pub fn is_group(&self) -> bool {
        !self.members.is_empty()
    }

    /// The member with this id, if it is in the group.
    pub fn member(&self, id: u64) -> Option<&MemberConfig> {
        self.members.iter().find(|m| m.id == id)
    }

    /// The group's first voters: its members but the standby ones. Membership changes the
    /// group committed (in its Raft log and snapshots) take over from there.
    pub fn first_voters(&self) -> Vec<u64> {
        self.members.iter().filter(|m| !m.standby).map(|m| m.id).collect()
    }
}

impl Default for RootConfig {
    /// `[root]` with no producers and the default batch window and heartbeat.
    fn default() -> Self {
        RootConfig {
            batch_window: default_batch_window(),
            heartbeat_interval: default_heartbeat(),
            producers: Vec::new(),
            member_id: None,
            members: Vec::new(),
            operator_token: None,
            raft_snapshot_entries: default_raft_snapshot_entries(),
            raft_log_keep_entries: default_raft_log_keep_entries(),
        }
    }
}

/// One member of a root group, as every member's configuration lists it.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MemberConfig {
    /// Its id in the group: 1 or more, distinct, and the same in every member's list.
    pub id: u64,
    /// Where the other members send it Raft messages (its `[listen] replication`).
    pub replication: SocketAddr,
    /// Where a member that does not lead redirects a producer's write (its `[listen] http`).
    pub http: SocketAddr,
    /// Known by its addresses, but not one of the group's first voters: it takes part once an
    /// operator adds it (a member replacing one whose disk failed, say, under a new id).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standby: bool,
}

fn default_batch_window() -> Duration {
    Duration::from_millis(500)
}

fn default_heartbeat() -> Duration {
    Duration::from_secs(1)
}

/// About 2 h of a busy root's batches (one per 500 ms window) between snapshots.
fn default_raft_snapshot_entries() -> u64 {
    10_000
}

fn default_raft_log_keep_entries() -> u64 {
    1_000
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProducerConfig {
    pub name: String,
    /// Bearer token the producer sends in `Authorization: Bearer <token>`.
    pub token: String,
    /// Key prefixes this producer may write; a key must start with one of them.
    pub prefixes: Vec<String>,
    /// Sustained write quota (keys written per second).
    pub writes_per_s: u32,
    /// Writes allowed in a burst above the sustained rate.
    pub burst: u32,
}

fn database_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<DatabaseId, D::Error> {
    String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
}

fn engine<'de, D: serde::Deserializer<'de>>(d: D) -> Result<EngineKind, D::Error> {
    String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
}

/// Written as its text, which the field's parser reads back.
fn display<S: serde::Serializer>(value: &impl std::fmt::Display, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// A size written as its exact count of bytes: `ByteSize`'s own text rounds ("976.6 KiB").
fn exact_bytes<S: serde::Serializer>(bytes: &ByteSize, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(bytes.as_u64())
}

fn exact_bytes_opt<S: serde::Serializer>(bytes: &Option<ByteSize>, s: S) -> Result<S::Ok, S::Error> {
    match bytes {
        Some(bytes) => exact_bytes(bytes, s),
        None => s.serialize_none(),
    }
}

/// A configuration that was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    #[error("{path}: field `{field}`: {problem}")]
    Invalid { path: String, field: &'static str, problem: String },
}

/// Every planted bug off: what every node but the harness builds' (see [`NodeConfig::planted`]) runs with.
static NO_PLANTED_BUGS: LegacyConfig = LegacyConfig {
    serve_nearest_when_collected: false,
    apply_without_gap_check: false,
    cursor_written_at_disconnect: false,
    cursor_written_before_apply: false,
    stop_serving_when_upstream_lost: false,
    drop_downstream_while_reconnecting: false,
    never_leave_stale_source: false,
    acknowledge_before_sync: false,
    unreadable_key_counts_as_absent: false,
    raft_acknowledge_before_commit: false,
    raft_apply_before_commit: false,
    raft_forget_vote: false,
    raft_snapshot_without_catch_up: false,
    quotas_forgotten: false,
    raft_trust_claimed_member: false,
    raft_without_pre_vote: false,
    raft_stop_consensus_on_failure: false,
    raft_snapshot_first_configuration: false,
    raft_catch_up_without_progress_deadline: false,
    raft_serve_while_paused: false,
    raft_catch_up_skips_quota_ledger: false,
    raft_send_stale_backlog: false,
    store_directory_unsynced: false,
    memcached_empty_value_misframed: false,
    memcached_cas_without_data_block: false,
    memcached_hits_count_misses: false,
    http_reads_count_as_refused_writes: false,
    writes_accepted_counts_identical_rewrites: false,
    connections_heir_uncounted: false,
    replication_shed_served: false,
    http_key_decoded_lossily: false,
    retention_either_rule: false,
    raft_log_keep_zero_accepted: false,
    trust_own_wall_clock: false,
};

impl NodeConfig {
    /// The planted bugs this node runs with: `[legacy]` in the harness builds — the simulator's
    /// (`--cfg madsim`) and the `qs-node` that `./qsim real` builds with `--cfg qsim_harness` —
    /// none otherwise. The branches they guard are constant-false in every build a user makes
    /// (`cargo build`, `cargo install`, `cargo test` at the workspace root: a compiler flag, not a
    /// cargo feature, so no dependency can turn it on), which refuses a `[legacy]` that turns one
    /// on ([`NodeConfig::parse`]).
    pub fn planted(&self) -> &LegacyConfig {
        if cfg!(any(madsim, qsim_harness)) { &self.legacy } else { &NO_PLANTED_BUGS }
    }

    /// Where this node keeps snapshot exports and imports (and its catching-up and damage
    /// markers): beside its store.
    pub fn snapshot_dir(&self) -> std::path::PathBuf {
        let path = &self.storage.path;
        if path.as_os_str().is_empty() {
            std::env::temp_dir().join(format!("qs-node-{}-snapshots", self.name))
        } else {
            let mut name = path.file_name().unwrap_or_default().to_os_string();
            name.push(".snapshots");
            path.with_file_name(name)
        }
    }

    /// How this node opens its store: its database and the engine settings from `[storage]`.
    pub fn store_options(&self) -> OpenOptions {
        // Validated: both fit in usize (at most CACHE_BYTES_MAX and BLOCK_BYTES_MAX).
        let size = |bytes: Option<ByteSize>| bytes.map(|b| usize::try_from(b.as_u64()).unwrap_or(usize::MAX));
        OpenOptions {
            rocksdb_memtable_bytes: self.storage.memtable_bytes,
            rocksdb_cache_bytes: size(self.storage.cache_bytes),
            rocksdb_block_bytes: size(self.storage.block_bytes),
            rocksdb_direct_reads: self.storage.direct_reads.unwrap_or(false),
            lmdb_read_ahead: self.storage.read_ahead.unwrap_or(true),
            lmdb_write_map: self.storage.write_map.unwrap_or(false),
            sync_commits: !self.planted().acknowledge_before_sync,
            sync_directories: !self.planted().store_directory_unsynced,
            ..OpenOptions::new(self.database_id)
        }
    }

    /// The configuration as a TOML file that [`NodeConfig::parse`] reads back to the same
    /// values: how a harness hands a configuration it built in code to a real `qs-node`.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a node configuration has only TOML-representable fields")
    }

    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        NodeConfig::parse(&text, &path.display().to_string())
    }

    /// Parses and validates `text`; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<NodeConfig, ConfigError> {
        let config: NodeConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        config.validated(origin)
    }

    /// A configuration built in code (the simulator's), judged by the same rules as
    /// [`NodeConfig::parse`]; `origin` names it in errors.
    pub fn validated(self, origin: &str) -> Result<NodeConfig, ConfigError> {
        self.validate().map_err(|(field, problem)| ConfigError::Invalid {
            path: origin.to_string(),
            field,
            problem,
        })?;
        Ok(self)
    }

    /// Primaries then secondaries: the order sources are tried in.
    pub fn sources(&self) -> Vec<SocketAddr> {
        self.replication.primaries.iter().chain(&self.replication.secondaries).copied().collect()
    }
}

mod validate;

#[cfg(test)]
mod tests;
