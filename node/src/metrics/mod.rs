//! Prometheus metrics of one node, in the text exposition format.
//!
//! Every counter a test or an operator needs to see a failure is here: applied index and lag,
//! entries and bytes applied, failovers, reconnects, refused handshakes by reason, chain
//! violations, bogus read requests, cache hits and misses, writes accepted, dropped as identical
//! and throttled.
//!
//! Connections, per listener (`listener` = `http`, `memcached`, `replication`): open now, the
//! cap, accepted, refused at the cap, and closed because a deadline passed; and the bytes queued
//! for the root's next commit.
//!
//! A root group member: its Raft term, role, known leader, commit and applied index, and the
//! Raft messages it dropped.
//!
//! TLS (`[tls]`): handshakes completed and failed, by listener, side and reason, and reloads of
//! the certificate files by outcome.
//!
//! Memory and cache (refreshed once a second by the node's memory sampler, which only the
//! real `qs-node` process runs; they stay 0 in the simulator and in in-process test nodes):
//! resident set size, the memory limit, the memory accounted for by `component` (the engine's
//! `block_cache`, `memtables`, `table_readers`, `lmdb_mapped`, `memory_store`, and the node's
//! connection and write-batch `buffers`), RocksDB's block
//! cache hits, misses and capacity, and the process's major page faults and disk read bytes
//! (LMDB's cache is the OS page cache: a major fault is its miss).
//!
//! [`page`] reads such a page back: the one reader every client of `/metrics` in this project
//! uses (the simulator's census and contract checker, `qsim real`, the node's tests and
//! benchmarks).

pub mod page;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::store::{EngineResources, MemoryComponent};

type Labels = Vec<(String, String)>;

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub applied_index: Gauge,
    pub lag_seconds: Gauge<f64, AtomicU64>,
    pub entries_applied: Counter,
    pub bytes_applied: Counter,
    pub failovers: Counter,
    pub reconnects: Counter,
    pub refused_handshakes: Family<Labels, Counter>,
    pub refusals_received: Family<Labels, Counter>,
    pub chain_violations: Counter,
    pub out_of_retention: Counter,
    pub bootstraps: Counter,
    pub writes_accepted: Counter,
    pub writes_identical_dropped: Counter,
    pub writes_throttled: Counter,
    pub writes_refused: Counter,
    pub checksum_failures: Gauge,
    pub read_hits: Gauge,
    pub read_misses: Gauge,
    pub bogus_requests: Gauge,
    pub connections_open: Family<Labels, Gauge>,
    pub connections_max: Family<Labels, Gauge>,
    pub connections_accepted: Family<Labels, Counter>,
    pub connections_refused: Family<Labels, Counter>,
    pub connections_refused_per_peer: Family<Labels, Counter>,
    pub connections_shed: Family<Labels, Counter>,
    pub connections_max_per_peer: Family<Labels, Gauge>,
    pub connections_timed_out: Family<Labels, Counter>,
    pub tls_handshakes: Family<Labels, Counter>,
    pub tls_handshake_failures: Family<Labels, Counter>,
    pub tls_reloads: Family<Labels, Counter>,
    pub write_queue_bytes: Gauge,
    pub resident_bytes: Gauge,
    pub memory_limit_bytes: Gauge,
    pub memory_accounted_bytes: Family<Labels, Gauge>,
    pub block_cache_hits: Gauge,
    pub block_cache_misses: Gauge,
    pub block_cache_capacity_bytes: Gauge,
    pub major_faults: Gauge,
    pub disk_read_bytes: Gauge,
    pub raft_term: Gauge,
    pub raft_role: Family<Labels, Gauge>,
    pub raft_leader: Gauge,
    pub raft_commit_index: Gauge,
    pub raft_applied_index: Gauge,
    pub raft_messages_dropped: Counter,
}

impl Default for Metrics {
    #[expect(
        clippy::too_many_lines,
        reason = "187 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    fn default() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("qs"),
            applied_index: Gauge::default(),
            lag_seconds: Gauge::default(),
            entries_applied: Counter::default(),
            bytes_applied: Counter::default(),
            failovers: Counter::default(),
            reconnects: Counter::default(),
            refused_handshakes: Family::default(),
            refusals_received: Family::default(),
            chain_violations: Counter::default(),
            out_of_retention: Counter::default(),
            bootstraps: Counter::default(),
            writes_accepted: Counter::default(),
            writes_identical_dropped: Counter::default(),
            writes_throttled: Counter::default(),
            writes_refused: Counter::default(),
            checksum_failures: Gauge::default(),
            read_hits: Gauge::default(),
            read_misses: Gauge::default(),
            bogus_requests: Gauge::default(),
            connections_open: Family::default(),
            connections_max: Family::default(),
            connections_accepted: Family::default(),
            connections_refused: Family::default(),
            connections_refused_per_peer: Family::default(),
            connections_shed: Family::default(),
            connections_max_per_peer: Family::default(),
            connections_timed_out: Family::default(),
            tls_handshakes: Family::default(),
            tls_handshake_failures: Family::default(),
            tls_reloads: Family::default(),
            write_queue_bytes: Gauge::default(),
            resident_bytes: Gauge::default(),
            memory_limit_bytes: Gauge::default(),
            memory_accounted_bytes: Family::default(),
            block_cache_hits: Gauge::default(),
            block_cache_misses: Gauge::default(),
            block_cache_capacity_bytes: Gauge::default(),
            major_faults: Gauge::default(),
            disk_read_bytes: Gauge::default(),
            raft_term: Gauge::default(),
            raft_role: Family::default(),
            raft_leader: Gauge::default(),
            raft_commit_index: Gauge::default(),
            raft_applied_index: Gauge::default(),
            raft_messages_dropped: Counter::default(),
        };
        let r = &mut m.registry;
        r.register("applied_index", "Index of the newest applied log entry", m.applied_index.clone());
        r.register(
            "replication_lag_seconds",
            "Age of the newest applied entry (root heartbeat)",
            m.lag_seconds.clone(),
        );
        r.register("entries_applied", "Log entries applied", m.entries_applied.clone());
        r.register("bytes_applied", "Key and value bytes applied", m.bytes_applied.clone());
        r.register("failovers", "Moves to another replication source", m.failovers.clone());
        r.register("reconnects", "Replication connection attempts after the first", m.reconnects.clone());
        r.register("refused_handshakes", "Replication clients this node refused", m.refused_handshakes.clone());
        r.register("refusals_received", "Refusals this node got from its sources", m.refusals_received.clone());
        r.register("chain_violations", "Entries from a source that broke the chain", m.chain_violations.clone());
        r.register("out_of_retention", "Sources that no longer had the history asked for", m.out_of_retention.clone());
        r.register("bootstraps", "Snapshot bootstraps completed", m.bootstraps.clone());
        r.register("writes_accepted", "Key writes committed by the root", m.writes_accepted.clone());
        r.register(
            "writes_identical_dropped",
            "Writes dropped: key already held the value",
            m.writes_identical_dropped.clone(),
        );
        r.register("writes_throttled", "Write requests told to retry later (quota)", m.writes_throttled.clone());
        r.register("writes_refused", "Write requests refused (auth, ACL, bad input)", m.writes_refused.clone());
        r.register("checksum_failures", "Values that failed their checksum on read", m.checksum_failures.clone());
        r.register("read_hits", "memcached get hits", m.read_hits.clone());
        r.register("read_misses", "memcached get misses", m.read_misses.clone());
        r.register("bogus_requests", "Malformed or refused memcached requests", m.bogus_requests.clone());
        r.register("connections_open", "Open connections, by listener", m.connections_open.clone());
        r.register(
            "connections_max",
            "connections.<listener>.max: the cap on open connections",
            m.connections_max.clone(),
        );
        r.register(
            "connections_accepted",
            "Connections admitted under the cap, by listener",
            m.connections_accepted.clone(),
        );
        r.register(
            "connections_refused",
            "Connections closed at once: the client address held its share, or the listener was at its cap with every connection already being shed",
            m.connections_refused.clone(),
        );
        r.register(
            "connections_refused_per_peer",
            "Of the refused connections, those whose client address already held its share (connections.<listener>.max_per_peer)",
            m.connections_refused_per_peer.clone(),
        );
        r.register(
            "connections_shed",
            "Connections closed to admit a newcomer at the cap: each time, the one that had gone longest without an answer",
            m.connections_shed.clone(),
        );
        r.register(
            "connections_max_per_peer",
            "Most open connections one client address may hold, by listener",
            m.connections_max_per_peer.clone(),
        );
        r.register(
            "connections_timed_out",
            "Connections closed because a client kept a read or write waiting past its timeout",
            m.connections_timed_out.clone(),
        );
        r.register(
            "tls_handshakes",
            "TLS handshakes completed, by listener and side (server: accepted, client: dialled)",
            m.tls_handshakes.clone(),
        );
        r.register(
            "tls_handshake_failures",
            "TLS handshakes that failed, by listener, side and reason (no_certificate, unknown_issuer, expired, not_tls, ...)",
            m.tls_handshake_failures.clone(),
        );
        r.register("raft_term", "Root group member: its Raft term", m.raft_term.clone());
        r.register(
            "raft_role",
            "Root group member: 1 for its role now (follower, pre_candidate, candidate, leader), 0 for the others",
            m.raft_role.clone(),
        );
        r.register("raft_leader", "Root group member: the member it knows to lead (0: none)", m.raft_leader.clone());
        r.register(
            "raft_commit_index",
            "Root group member: the highest Raft index it knows committed",
            m.raft_commit_index.clone(),
        );
        r.register(
            "raft_applied_index",
            "Root group member: the last Raft index whose batch its store applied",
            m.raft_applied_index.clone(),
        );
        r.register(
            "raft_messages_dropped",
            "Root group member: Raft messages dropped unsent: its inbox or a peer's outbox was full, the link to the peer broke with them queued, or they waited in the queue longer than an election timeout for a slow peer (Raft resends what matters)",
            m.raft_messages_dropped.clone(),
        );
        r.register(
            "tls_reloads",
            "Changed TLS files read: loaded (in use from the next connection) or refused (the previous ones kept)",
            m.tls_reloads.clone(),
        );
        r.register(
            "write_queue_bytes",
            "Key and value bytes of the writes waiting for the root's next commit",
            m.write_queue_bytes.clone(),
        );
        r.register("resident_bytes", "Resident set size of the node's process", m.resident_bytes.clone());
        r.register(
            "memory_limit_bytes",
            "memory.limit_bytes: resident size past which the node exits (0: no limit)",
            m.memory_limit_bytes.clone(),
        );
        r.register(
            "memory_accounted_bytes",
            "Resident memory the storage engine accounts for, by component",
            m.memory_accounted_bytes.clone(),
        );
        r.register(
            "block_cache_hits",
            "RocksDB block cache hits since the store was opened",
            m.block_cache_hits.clone(),
        );
        r.register(
            "block_cache_misses",
            "RocksDB block cache misses since the store was opened",
            m.block_cache_misses.clone(),
        );
        r.register(
            "block_cache_capacity_bytes",
            "RocksDB block cache capacity (storage.cache_bytes)",
            m.block_cache_capacity_bytes.clone(),
        );
        r.register(
            "major_faults",
            "Major page faults of the process (LMDB: page cache misses)",
            m.major_faults.clone(),
        );
        r.register("disk_read_bytes", "Bytes the process caused to be read from disk", m.disk_read_bytes.clone());
        m
    }
}

impl Metrics {
    pub fn label(name: &str, value: &str) -> Labels {
        vec![(name.to_string(), value.to_string())]
    }

    /// Records one sample of the process's memory: its resident size (if readable), its limit,
    /// the accounted components (the engine's and the node's buffers), and the engine's cache
    /// figures. Figures the engine did not measure keep their last value.
    pub fn record_memory(
        &self,
        resident_bytes: Option<u64>,
        limit_bytes: Option<u64>,
        accounted: &[(MemoryComponent, u64)],
        engine: &EngineResources,
    ) {
        let gauge = |gauge: &Gauge, value: Option<u64>| {
            if let Some(value) = value {
                gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
            }
        };
        gauge(&self.resident_bytes, resident_bytes);
        gauge(&self.memory_limit_bytes, Some(limit_bytes.unwrap_or(0)));
        for &(component, bytes) in accounted {
            gauge(
                &self.memory_accounted_bytes.get_or_create(&Metrics::label("component", component.name())),
                Some(bytes),
            );
        }
        gauge(&self.block_cache_hits, engine.block_cache_hits);
        gauge(&self.block_cache_misses, engine.block_cache_misses);
        gauge(&self.block_cache_capacity_bytes, engine.block_cache_capacity_bytes);
        gauge(&self.major_faults, engine.major_faults);
        gauge(&self.disk_read_bytes, engine.disk_read_bytes);
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
