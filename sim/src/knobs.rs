//! Knobs: node settings drawn from the seed, as FoundationDB randomizes a quarter of its server
//! knobs under BUGGIFY and CockroachDB runs its metamorphic constants — so the nodes run under
//! the settings operators pick, not only the one configuration each scenario names.
//!
//! Each [`Knob`] is one setting of `[node]` with the values validation accepts, its edges among
//! them. A run draws, from a stream of its own (seeded by the run's seed), whether each knob is
//! drawn (with probability `[knobs] share`) and which value; a knob the scenario's file sets
//! (pins) keeps the file's value, and one that does not apply to the run (a root group's knob
//! in a tree with one root) is left alone. The draws are applied to the scenario itself before
//! anything else reads it ([`Scenario::for_seed`](crate::scenario::Scenario::for_seed)), so the
//! nodes and every checker's bounds see the same settings, and they are printed under the seed,
//! in `summary.json` and in the report.
//!
//! The rule the checkers keep: **a knob may change timing and traces, never a verdict.** A
//! correct node ends every shipped scenario as declared under any draw.
//!
//! Validation is part of the product: every run also offers each knob's refused values (just
//! outside what it accepts) to the node's configuration validation, and a value it accepts is a
//! `contract` violation at the run's start — a setting an operator may write that no node can
//! run ([`refusals`]).

use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::{NodeSettings, Scenario};

/// A node setting a run may draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Knob {
    /// The root's batch window (`root.batch_window`).
    BatchWindow,
    /// Log entries every node keeps (`retention.keep_entries_min`).
    RetentionEntries,
    /// How long every node keeps log entries besides (`retention.keep_age`): an entry is
    /// collected only when both rules allow it.
    RetentionAge,
    /// How often every node collects its log (`retention.gc_interval`).
    GcInterval,
    /// Entries a replica applies to one commit (`replication.apply_batch_entries_max`).
    ApplyBatchEntriesMax,
    /// The reconnect backoff's floor and ceiling (`replication.reconnect_backoff_*`).
    ReconnectBackoff,
    /// Bootstraps a node serves at once (`replication.bootstraps_served_max`).
    BootstrapsServedMax,
    /// The chunk size snapshots are served in (`replication.snapshot_chunk_bytes`).
    SnapshotChunkBytes,
    /// How often every node scrubs its values (`storage.scrub_interval`).
    ScrubInterval,
    /// Applied entries between a root group member's Raft snapshots (`root.raft_snapshot_entries`).
    RaftSnapshotEntries,
    /// Raft entries a compaction keeps (`root.raft_log_keep_entries`).
    RaftLogKeepEntries,
    /// Every node's memcached listener cap (`connections.memcached.max`): down to one, so an
    /// edge's readers and the census shed each other's connections.
    MemcachedConnectionsMax,
    /// Every node's replication listener cap (`connections.replication.max`): down to one
    /// connection per other node of the run — as few as a tree can need — so a replica that
    /// reconnects before its old connection is noticed makes its source shed ([`replication_need`]).
    ReplicationConnectionsMax,
    /// RocksDB runs: each column family's memtable (`storage.memtable_bytes`), from the smallest
    /// the node accepts, which flushes every few writes, to one no simulated run fills.
    RocksdbMemtableBytes,
    /// RocksDB runs: the block cache (`storage.cache_bytes`), down to the smallest the node
    /// accepts, where nearly every read misses.
    RocksdbCacheBytes,
    /// RocksDB runs: an SST data block (`storage.block_bytes`), from the smallest the node
    /// accepts to one as large as the smallest cache it may share.
    RocksdbBlockBytes,
}

/// The fewest replication connections a node of `scenario` may be capped at and still serve
/// every peer: one per other node of the run (a replica streams from one source, a root group
/// member links to each other member once, a bootstrap replaces the stream it starts). Below it
/// a correct node may have to shed a replica it needs, and the knob must not change a verdict.
pub fn replication_need(scenario: &Scenario) -> u64 {
    (scenario.node_names().len() as u64).saturating_sub(1).max(1)
}

/// A knob's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Time(Duration),
    Count(u64),
    Bytes(u64),
    /// A reconnect backoff: floor and ceiling.
    Backoff(Duration, Duration),
    /// The rule is off (no age limit).
    Off,
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Time(d) => write!(f, "{}", humantime::format_duration(*d)),
            Value::Count(n) => write!(f, "{n}"),
            Value::Bytes(b) => write!(f, "{}", bytesize::ByteSize(*b)),
            Value::Backoff(min, max) => {
                write!(f, "{}..{}", humantime::format_duration(*min), humantime::format_duration(*max))
            }
            Value::Off => write!(f, "off"),
        }
    }
}

/// One knob a run drew, and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drawn {
    pub knob: Knob,
    pub value: Value,
}

impl std::fmt::Display for Drawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = {}", self.knob.as_str(), self.value)
    }
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Knob {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The `[node]` keys that pin it: its own, and for the retention age the entry count too —
    /// a file that states its retention states its whole policy.
    pub fn pinned_by(self) -> &'static [&'static str] {
        match self {
            Knob::RetentionAge => &["retention_age", "retention_entries"],
            knob => knob.keys(),
        }
    }

    /// The `[node]` keys it sets.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            Knob::BatchWindow => &["batch_window"],
            Knob::RetentionEntries => &["retention_entries"],
            Knob::RetentionAge => &["retention_age"],
            Knob::GcInterval => &["gc_interval"],
            Knob::ApplyBatchEntriesMax => &["apply_batch_entries_max"],
            Knob::ReconnectBackoff => &["reconnect_backoff_min", "reconnect_backoff_max"],
            Knob::BootstrapsServedMax => &["bootstraps_served_max"],
            Knob::SnapshotChunkBytes => &["snapshot_chunk_bytes"],
            Knob::ScrubInterval => &["scrub_interval"],
            Knob::RaftSnapshotEntries => &["raft_snapshot_entries"],
            Knob::RaftLogKeepEntries => &["raft_log_keep_entries"],
            Knob::MemcachedConnectionsMax => &["memcached_connections_max"],
            Knob::ReplicationConnectionsMax => &["replication_connections_max"],
            Knob::RocksdbMemtableBytes => &["rocksdb_memtable_bytes"],
            Knob::RocksdbCacheBytes => &["rocksdb_cache_bytes"],
            Knob::RocksdbBlockBytes => &["rocksdb_block_bytes"],
        }
    }

    /// The values a run of `scenario` draws from: what validation accepts, its edges among
    /// them (the replication cap's lowest edge follows the run's size).
    pub fn choices(self, scenario: &Scenario) -> Vec<Value> {
        use Value::*;
        match self {
            Knob::BatchWindow => vec![Time(ms(10)), Time(ms(100)), Time(ms(500)), Time(ms(1_000))],
            Knob::RetentionEntries => vec![Count(200), Count(1_000), Count(100_000)],
            Knob::RetentionAge => vec![Off, Time(ms(1_000)), Time(ms(30_000)), Time(ms(600_000))],
            Knob::GcInterval => vec![Time(ms(10)), Time(ms(100)), Time(ms(1_000)), Time(ms(10_000))],
            Knob::ApplyBatchEntriesMax => vec![Count(1), Count(7), Count(1_000), Count(100_000)],
            Knob::ReconnectBackoff => {
                vec![Backoff(ms(10), ms(100)), Backoff(ms(100), ms(5_000)), Backoff(ms(1_000), ms(2_000))]
            }
            Knob::BootstrapsServedMax => vec![Count(1), Count(2), Count(8)],
            Knob::SnapshotChunkBytes => vec![Bytes(4 << 10), Bytes(64 << 10), Bytes(1 << 20), Bytes(16 << 20)],
            Knob::ScrubInterval => vec![Time(ms(10_000)), Time(ms(60_000)), Time(ms(3_600_000))],
            Knob::RaftSnapshotEntries => vec![Count(1), Count(50), Count(1_000), Count(10_000)],
            Knob::RaftLogKeepEntries => vec![Count(1), Count(100), Count(1_000)],
            Knob::MemcachedConnectionsMax => vec![Count(1), Count(2), Count(64), Count(1_024)],
            Knob::ReplicationConnectionsMax => {
                let need = replication_need(scenario);
                vec![Count(need), Count(need + 1), Count(2 * need), Count(256)]
            }
            // 8 MiB, not the node's 1 GiB ceiling: a memtable's arena grows in blocks of an eighth
            // of it, per column family and node, and a sweep runs hundreds of nodes in one process.
            Knob::RocksdbMemtableBytes => vec![Bytes(64 << 10), Bytes(128 << 10), Bytes(1 << 20), Bytes(8 << 20)],
            Knob::RocksdbCacheBytes => vec![Bytes(64 << 10), Bytes(1 << 20), Bytes(32 << 20)],
            // At most the smallest cache drawn: a block larger than its cache is refused.
            Knob::RocksdbBlockBytes => vec![Bytes(512), Bytes(4 << 10), Bytes(64 << 10)],
        }
    }

    /// Values just outside what validation accepts: each must be refused.
    pub fn refused(self) -> Vec<Value> {
        use Value::*;
        match self {
            Knob::BatchWindow => vec![Time(Duration::ZERO), Time(ms(60_001))],
            Knob::GcInterval => vec![Time(ms(9))],
            Knob::ApplyBatchEntriesMax => vec![Count(0), Count(100_001)],
            Knob::ReconnectBackoff => vec![Backoff(Duration::ZERO, ms(100)), Backoff(ms(200), ms(100))],
            Knob::BootstrapsServedMax => vec![Count(0)],
            Knob::SnapshotChunkBytes => vec![Bytes((4 << 10) - 1), Bytes((16 << 20) + 1)],
            Knob::RaftSnapshotEntries => vec![Count(0)],
            Knob::RaftLogKeepEntries => vec![Count(0)],
            Knob::MemcachedConnectionsMax | Knob::ReplicationConnectionsMax => {
                vec![Count(0), Count(qs_node::connections::settings::CONNECTIONS_MAX_MAX as u64 + 1)]
            }
            Knob::RocksdbMemtableBytes => {
                use qs_node::config::{MEMTABLE_BYTES_MAX, MEMTABLE_BYTES_MIN};
                vec![Bytes(MEMTABLE_BYTES_MIN as u64 - 1), Bytes(MEMTABLE_BYTES_MAX as u64 + 1)]
            }
            Knob::RocksdbCacheBytes => {
                use qs_node::config::{CACHE_BYTES_MAX, CACHE_BYTES_MIN};
                vec![Bytes(CACHE_BYTES_MIN - 1), Bytes(CACHE_BYTES_MAX + 1)]
            }
            Knob::RocksdbBlockBytes => {
                use qs_node::config::{BLOCK_BYTES_MAX, BLOCK_BYTES_MIN};
                vec![Bytes(BLOCK_BYTES_MIN - 1), Bytes(BLOCK_BYTES_MAX + 1)]
            }
            Knob::RetentionEntries | Knob::RetentionAge | Knob::ScrubInterval => vec![],
        }
    }

    /// The knob at `value` as `[node]` keys of a scenario file (None: the key removed, the
    /// node's default) — what `qsim shrink` writes to pin a draw.
    pub fn as_toml(self, value: Value) -> Vec<(&'static str, Option<toml::Value>)> {
        let time = |d: Duration| Some(toml::Value::String(humantime::format_duration(d).to_string()));
        let keys = self.keys();
        match value {
            Value::Time(d) => vec![(keys[0], time(d))],
            Value::Count(n) | Value::Bytes(n) => vec![(keys[0], Some(toml::Value::Integer(n as i64)))],
            Value::Backoff(min, max) => vec![(keys[0], time(min)), (keys[1], time(max))],
            Value::Off => vec![(keys[0], None)],
        }
    }

    /// Whether the knob means anything in a run of `scenario`.
    fn applies(self, scenario: &Scenario) -> bool {
        match self {
            Knob::RaftSnapshotEntries | Knob::RaftLogKeepEntries => scenario.topology.root_members > 1,
            Knob::RocksdbMemtableBytes | Knob::RocksdbCacheBytes | Knob::RocksdbBlockBytes => {
                scenario.engine() == qs_node::EngineKind::Rocksdb
            }
            _ => true,
        }
    }

    /// `settings` with the knob at `value`.
    pub fn set(self, value: Value, settings: &mut NodeSettings) {
        match (self, value) {
            (Knob::BatchWindow, Value::Time(d)) => settings.batch_window = d,
            (Knob::RetentionEntries, Value::Count(n)) => settings.retention_entries = n,
            (Knob::RetentionAge, Value::Time(d)) => settings.retention_age = Some(d),
            (Knob::RetentionAge, Value::Off) => settings.retention_age = None,
            (Knob::GcInterval, Value::Time(d)) => settings.gc_interval = d,
            (Knob::ApplyBatchEntriesMax, Value::Count(n)) => settings.apply_batch_entries_max = Some(n as usize),
            (Knob::ReconnectBackoff, Value::Backoff(min, max)) => {
                settings.reconnect_backoff_min = Some(min);
                settings.reconnect_backoff_max = Some(max);
            }
            (Knob::BootstrapsServedMax, Value::Count(n)) => settings.bootstraps_served_max = Some(n as usize),
            (Knob::SnapshotChunkBytes, Value::Bytes(b)) => settings.snapshot_chunk_bytes = Some(bytesize::ByteSize(b)),
            (Knob::ScrubInterval, Value::Time(d)) => settings.scrub_interval = Some(d),
            (Knob::RaftSnapshotEntries, Value::Count(n)) => settings.raft_snapshot_entries = n,
            (Knob::RaftLogKeepEntries, Value::Count(n)) => settings.raft_log_keep_entries = n,
            (Knob::MemcachedConnectionsMax, Value::Count(n)) => settings.memcached_connections_max = Some(n as usize),
            (Knob::ReplicationConnectionsMax, Value::Count(n)) => {
                settings.replication_connections_max = Some(n as usize);
            }
            (Knob::RocksdbMemtableBytes, Value::Bytes(b)) => {
                settings.rocksdb_memtable_bytes = Some(bytesize::ByteSize(b))
            }
            (Knob::RocksdbCacheBytes, Value::Bytes(b)) => settings.rocksdb_cache_bytes = Some(bytesize::ByteSize(b)),
            (Knob::RocksdbBlockBytes, Value::Bytes(b)) => settings.rocksdb_block_bytes = Some(bytesize::ByteSize(b)),
            (knob, value) => unreachable!("{knob:?} takes no {value:?}: its choices are its own"),
        }
    }
}

/// `[knobs]`: whether a run draws knobs, and how many.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KnobSettings {
    /// False: every node runs the scenario's settings as written.
    pub drawn: bool,
    /// The chance each knob is drawn in a run (FoundationDB's: a quarter).
    pub share: f64,
}

impl Default for KnobSettings {
    fn default() -> KnobSettings {
        KnobSettings { drawn: true, share: 0.25 }
    }
}

/// The stream the knob draws come from, apart from every other draw of the run.
const KNOB_STREAM: u64 = 0x6b6e_6f62_7321;

/// The knobs a run of `scenario` under `seed` draws: for each knob in order, whether and which
/// value (both always drawn, so one knob's pinning leaves the others' draws as they were), kept
/// unless the file pins it or it does not apply.
pub fn draw(scenario: &Scenario, seed: u64) -> Vec<Drawn> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ KNOB_STREAM);
    let settings = &scenario.knobs;
    <Knob as strum::IntoEnumIterator>::iter()
        .filter_map(|knob| {
            let on = rng.random_bool(settings.share.clamp(0.0, 1.0));
            let choices = knob.choices(scenario);
            let value = choices[rng.random_range(0..choices.len())];
            let pinned = knob.pinned_by().iter().any(|key| scenario.node_pinned.contains(*key));
            (settings.drawn && on && !pinned && knob.applies(scenario)).then_some(Drawn { knob, value })
        })
        .collect()
}

/// Each refused value the node's configuration validation accepted for `scenario`, in words:
/// a setting an operator may write that no node can run.
pub fn refusals(scenario: &Scenario) -> Vec<String> {
    let mut accepted = Vec::new();
    for knob in <Knob as strum::IntoEnumIterator>::iter().filter(|knob| knob.applies(scenario)) {
        for value in knob.refused() {
            let mut refused = scenario.clone();
            knob.set(value, &mut refused.node);
            if crate::scenario::nodes::generate(&refused, std::path::Path::new("/qsim-scratch-not-created")).is_ok() {
                accepted.push(format!(
                    "the node's configuration validation accepted {} = {value}, a value no node can run \
                     (a knob's refused value)",
                    knob.as_str()
                ));
            }
        }
    }
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        Scenario::parse(text, std::path::Path::new("t.toml")).expect("a valid scenario")
    }

    const GROUP: &str = r#"
[scenario]
name = "t"
description = "knob draws"
duration = "10s"
engine = "rocksdb"
[topology]
root_members = 3
tiers = [{ name = "edge", count = 2 }]
[node]
batch_window = "100ms"
[checks]
lag_max = "10s"
converge_within = "10s"
"#;

    #[test]
    fn every_choice_is_accepted_and_every_refused_value_refused() {
        let base = scenario(GROUP);
        assert_eq!(refusals(&base), Vec::<String>::new());
        for knob in <Knob as strum::IntoEnumIterator>::iter() {
            for value in knob.choices(&base) {
                let mut drawn = base.clone();
                knob.set(value, &mut drawn.node);
                let generated = crate::scenario::nodes::generate(&drawn, std::path::Path::new("/x"));
                assert!(generated.is_ok(), "{knob:?} = {value}: {:?}", generated.err());
            }
        }
    }

    #[test]
    fn a_draw_written_into_the_file_is_the_same_setting() {
        let base = scenario(GROUP);
        for knob in <Knob as strum::IntoEnumIterator>::iter() {
            for value in knob.choices(&base) {
                let mut table: toml::Table = GROUP.parse().expect("toml");
                let node = table.get_mut("node").and_then(toml::Value::as_table_mut).expect("[node]");
                for (key, entry) in knob.as_toml(value) {
                    match entry {
                        Some(entry) => node.insert(key.to_string(), entry),
                        None => node.remove(key),
                    };
                }
                let written = Scenario::parse(&table.to_string(), std::path::Path::new("t.toml")).expect("valid");
                let mut drawn = base.node.clone();
                knob.set(value, &mut drawn);
                assert_eq!(format!("{:?}", written.node), format!("{drawn:?}"), "{knob:?} = {value}");
            }
        }
    }

    #[test]
    fn draws_follow_the_seed_and_keep_what_the_file_pins() {
        let mut base = scenario(GROUP);
        base.knobs.share = 1.0;
        let drawn = draw(&base, 7);
        assert_eq!(drawn, draw(&base, 7));
        assert!(drawn.iter().all(|d| d.knob != Knob::BatchWindow), "pinned: {drawn:?}");
        assert_eq!(drawn.len(), <Knob as strum::IntoEnumIterator>::iter().count() - 1);
        let seeds_differ = (1..20).any(|seed| draw(&base, seed) != drawn);
        assert!(seeds_differ);
        base.knobs.drawn = false;
        assert!(draw(&base, 7).is_empty());
    }

    #[test]
    fn rocksdb_knobs_are_drawn_for_rocksdb_runs_only() {
        let rocksdb = [Knob::RocksdbMemtableBytes, Knob::RocksdbCacheBytes, Knob::RocksdbBlockBytes];
        let mut base = scenario(GROUP);
        base.knobs.share = 1.0;
        assert!(rocksdb.iter().all(|knob| draw(&base, 3).iter().any(|d| d.knob == *knob)));
        let on_rocksdb = draw(&base, 3);
        base.override_engine(qs_node::EngineKind::Lmdb);
        let on_lmdb = draw(&base, 3);
        assert!(on_lmdb.iter().all(|d| !rocksdb.contains(&d.knob)), "{on_lmdb:?}");
        // The other knobs' draws do not move with the engine.
        let others: Vec<Drawn> = on_rocksdb.into_iter().filter(|d| !rocksdb.contains(&d.knob)).collect();
        assert_eq!(others, on_lmdb);
        // A drawn cache reaches the node's configuration; on LMDB it is left out, not refused.
        let mut drawn = scenario(GROUP);
        Knob::RocksdbCacheBytes.set(Value::Bytes(64 << 10), &mut drawn.node);
        let configs = crate::scenario::nodes::generate(&drawn, std::path::Path::new("/x")).expect("valid");
        assert!(configs.iter().all(|c| c.config.storage.cache_bytes == Some(bytesize::ByteSize(64 << 10))));
        drawn.override_engine(qs_node::EngineKind::Lmdb);
        let configs = crate::scenario::nodes::generate(&drawn, std::path::Path::new("/x")).expect("valid");
        assert!(configs.iter().all(|c| c.config.storage.cache_bytes.is_none()));
    }
}
