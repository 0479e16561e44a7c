//! A run's `summary.json` ([`RunSummary`]): its checkers' verdicts, its topology, and the sizing
//! and key-category tables the report shows.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ProbeHits;

/// The checkers, in the order their verdicts are printed.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumCount,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Checker {
    Sequence,
    Chain,
    Lag,
    Containment,
    Cursor,
    Reads,
    Progress,
    Convergence,
    Cache,
    Memory,
    Coverage,
    Start,
    Installs,
    Fetch,
    Quota,
    /// A root group's consensus: at most one leader per term, terms never go back, leadership
    /// holds under cut links, members rejoin and a clear majority commits.
    Raft,
    /// Who may speak for a root member: no impostor admitted, every refusal counted.
    Admission,
    /// Every reply one a correct node may give to its request, and the operator's counters
    /// true to what the clients saw.
    Contract,
}

impl Checker {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A checker's verdict on a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum VerdictStatus {
    Pass,
    Fail,
}

impl VerdictStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One checker's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub checker: Checker,
    pub status: VerdictStatus,
    pub violations: u64,
    /// The first violation (or, for convergence, what was still pending), in words.
    #[serde(default)]
    pub first: Option<String>,
}

/// A node of the run's topology.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    /// `root`, or the tier's name from the scenario.
    pub tier: String,
    /// 0 for the root, 1 for the first tier below it, ...
    pub depth: u32,
    /// The node's data center, when the topology has more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<u32>,
}

/// `summary.json` of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub scenario: String,
    #[serde(default)]
    pub description: String,
    pub path: PathBuf,
    pub seed: u64,
    #[serde(default)]
    pub engine: String,
    /// The qsim build that ran it (version and commit).
    #[serde(default)]
    pub build: String,
    /// `pass`, `violation`, `liveness`, `crash`.
    #[serde(default)]
    pub outcome: String,
    pub digest: String,
    pub events: u64,
    /// Per-node series events the checkers saw that the trace leaves out (`[checks]
    /// trace_nodes_per_tier`): a large tier keeps some of its nodes' series and a summary.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events_omitted: u64,
    pub simulated_ms: u64,
    /// Messages the simulated network carried (the benchmark's cost per message).
    #[serde(default)]
    pub messages: u64,
    /// When the liveness phase began (faults healed, writes stopped).
    #[serde(default)]
    pub liveness_from_ms: u64,
    /// How long after the liveness phase began the cluster converged; None if it did not.
    #[serde(default)]
    pub converged_after_ms: Option<u64>,
    /// Largest lag any node showed in its samples.
    #[serde(default)]
    pub max_lag_ms: Option<u64>,
    /// The scenario's lag bound.
    #[serde(default)]
    pub lag_max_ms: u64,
    #[serde(default)]
    pub converge_within_ms: u64,
    pub writes_acked: u64,
    /// Why the cluster had not converged, per node; empty when it had.
    pub pending: Vec<String>,
    /// Trace lines of the violations (the first few hundred).
    pub violations: Vec<String>,
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    #[serde(default)]
    pub nodes: Vec<NodeInfo>,
    pub reproduce: String,
    /// The run was on real `qs-node` processes (`qsim real`): its times are the wall clock's,
    /// and it has no digest (it is not deterministic).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub real: bool,
    /// How often nodes were sampled (lag, memory), in ms.
    #[serde(default = "one_second_ms")]
    pub sample_interval_ms: u64,
    /// The `cache` check's bound on a window's miss ratio, if the scenario sets one.
    #[serde(default)]
    pub miss_ratio_max: Option<f64>,
    /// Each node's modelled memory limit, if the scenario sets one.
    #[serde(default)]
    pub memory_limit_bytes: Option<u64>,
    /// Per tier, the sizing formulas against the configuration (scenarios with `[resources]`).
    #[serde(default)]
    pub sizing: Vec<SizingRow>,
    /// The failure's signature (the first failing checker and the shape of its first problem,
    /// without node names, numbers or hashes), so that runs failing the same way group
    /// together; none for a run that passed.
    #[serde(default)]
    pub signature: Option<String>,
    /// The probes the run reached, with how often (see [`Probe`](super::Probe)).
    #[serde(default)]
    pub probes: Vec<ProbeHits>,
    /// Per replica, what it read from its sources (the `fetch` checker's count).
    #[serde(default)]
    pub fetched: Vec<NodeFetched>,
    /// Per tier, how long entries took from the root's commit to their apply there.
    #[serde(default)]
    pub propagation: Vec<PropagationRow>,
    /// The node settings the run drew from its seed (knobs), as `name = value`.
    #[serde(default)]
    pub knobs: Vec<String>,
    /// The hosts' clocks the run kept off the simulated time (drawn from the seed or set by
    /// the scenario), one line each: node, offset, drift, steps.
    #[serde(default)]
    pub clocks: Vec<String>,
}

/// One tier's propagation over a run: entries from the root's commit (its first apply by a
/// root or root group member) to their first apply on each replica of the tier, on the
/// simulator's clock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropagationRow {
    pub tier: String,
    /// Entry applies counted (entries × replicas that applied them one by one).
    pub entries: u64,
    pub p50_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
}

/// What one replica read from its sources over a run, as the simulator measured it on the
/// wire: the work the `fetch` checker bounds (each entry and chunk once per cause).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedRow {
    /// Bytes read on replication streams (frames of every kind).
    pub bytes: u64,
    /// Log entries those frames carried.
    pub entries: u64,
    /// Of those, entries at or below the replica's applied index when they arrived.
    pub entries_again: u64,
    /// Snapshot chunks read.
    pub chunks: u64,
    /// Of those, chunks the replica held already.
    pub chunks_again: u64,
}

/// A replica's [`FetchedRow`], named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFetched {
    pub node: String,
    #[serde(flatten)]
    pub fetched: FetchedRow,
}

fn one_second_ms() -> u64 {
    1000
}

/// One tier's sizing at the end of a run: its largest node's data at the stated scale, the
/// configured cache and memory limit, and what the formulas recommend for that data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizingRow {
    pub tier: String,
    pub data_bytes: u64,
    /// The store's pages at the stated scale (FoundationDB's `kvstore_used_bytes`).
    #[serde(default)]
    pub used_bytes: u64,
    pub cache_bytes: u64,
    /// The cache formula's range: 1–2 % of the used bytes.
    pub cache_low: u64,
    pub cache_high: u64,
    pub memory_limit: Option<u64>,
    /// What the memory formula asks for: base + cache + per-TB term + engine + buffers.
    pub memory_needed: u64,
    /// The largest modelled RSS any node of the tier reached.
    pub rss_max: u64,
    pub cache_undersized: bool,
    pub memory_undersized: bool,
    /// The same node's keys and bytes by key category, at the stated scale.
    #[serde(default)]
    pub categories: Vec<CategoryRow>,
}

/// One key category (the key up to its first `:`) of a node's store, as memcached's
/// MCInspector reports a cache by category.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CategoryRow {
    pub prefix: String,
    pub keys: u64,
    /// Key and value bytes.
    pub data_bytes: u64,
    /// Bytes of the store's leaf pages the category takes (entries plus their share of free
    /// space in whole pages).
    pub stored_bytes: u64,
    /// Of those, the bytes in the node's cache at the end of the run.
    pub cached_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
