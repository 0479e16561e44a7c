//! `trace.jsonl`: one [`Event`] per line, in simulated-time order, and the kinds events name.

use serde::{Deserialize, Serialize};

pub use qs_vocab::{BootstrapStage, Probe, RaftRole, SourceChange};

use super::Checker;

/// One thing that happened, at `at_ms` of simulated time since the run started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// `node` applied entries `first..=last`; `hash` is its chain hash after `last`.
    Applied { at_ms: u64, node: String, first: u64, last: u64, hash: String },
    /// `node` installed a snapshot at `index`.
    Bootstrapped { at_ms: u64, node: String, index: u64, hash: String },
    /// A snapshot bootstrap of `node` from `source` (an address) failed at `stage`, after
    /// storing `chunks_stored` chunks.
    BootstrapFailed { at_ms: u64, node: String, source: String, stage: BootstrapStage, chunks_stored: u64 },
    /// A fault started or ended. `detail` says more where the kind has parameters (a latency
    /// model, a peer group).
    Fault {
        at_ms: u64,
        node: String,
        kind: FaultKind,
        phase: FaultPhase,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// A running node's replication lag (age of its newest applied entry) and applied index,
    /// sampled once a simulated second.
    LagSample { at_ms: u64, node: String, lag_ms: u64, applied: u64 },
    /// The producer's write of `version` of `key` was acknowledged at root index `index`;
    /// `deleted`: the write was a delete.
    WriteAcked {
        at_ms: u64,
        key: String,
        index: u64,
        #[serde(default)]
        version: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deleted: bool,
    },
    /// A checker found a violation: at `node`, at `index`, `message` says what was expected and
    /// what was found.
    Violation { at_ms: u64, checker: Checker, node: String, index: u64, message: String },
    /// `node` connected to the upstream `source` (an address); `reason` says why it left the one
    /// before.
    SourceChanged { at_ms: u64, node: String, source: String, reason: SourceChange },
    /// Root group member `node`'s Raft term, role or known leader (a member id, 0: none)
    /// changed.
    RaftRole { at_ms: u64, node: String, term: u64, role: RaftRole, leader: u64 },
    /// Root group member `node` applied a membership change committed at Raft `index`: the
    /// group's voters (member ids) are now `voters`, and while joint `outgoing` too.
    RaftConfiguration { at_ms: u64, node: String, index: u64, voters: Vec<u64>, outgoing: Vec<u64> },
    /// Root group member `node` took up a configuration without applying a change (restored
    /// at start, or held by a snapshot it was sent): it says the group's voters were `voters`
    /// (and `outgoing`) at Raft `index`.
    RaftConfigurationHeld { at_ms: u64, node: String, index: u64, voters: Vec<u64>, outgoing: Vec<u64> },
    /// `node` persisted its resume position `index` (the store's applied index, or a legacy
    /// cursor file).
    Cursor { at_ms: u64, node: String, index: u64 },
    /// The readers on edge `node` over the last simulated second: reads, misses, latency.
    ReadSample {
        at_ms: u64,
        node: String,
        reads: u64,
        misses: u64,
        p50_us: u64,
        p99_us: u64,
        max_us: u64,
        /// Reads that got no answer: connection failures, timeouts, refusals (not ready).
        #[serde(default)]
        errors: u64,
    },
    /// Store operations on `node` over the last simulated second while its disk is slow.
    DiskSample { at_ms: u64, node: String, ops: u64, p50_us: u64, p99_us: u64, max_us: u64 },
    /// A node's cache model over the last window (5 s, as Redwood reports its pager): page
    /// hits and misses of reads (`get`s) and of applies, pages held and the capacity (in the
    /// model's pages), and whether the cache is past warm-up (filled once, or its process has
    /// run the scenario's warm-up).
    CacheSample {
        at_ms: u64,
        node: String,
        hits: u64,
        misses: u64,
        #[serde(default)]
        apply_hits: u64,
        #[serde(default)]
        apply_misses: u64,
        pages_held: u64,
        capacity_pages: u64,
        warm: bool,
    },
    /// A node's modelled memory by component, in bytes at the scenario's stated scale, sampled
    /// once a simulated second; `rss` is their sum, `limit` the node's limit (0: none).
    MemorySample {
        at_ms: u64,
        node: String,
        rss: u64,
        limit: u64,
        base: u64,
        cache: u64,
        byte_sample: u64,
        engine: u64,
        memtables: u64,
        buffers: u64,
        allocator_overhead: u64,
    },
    /// One tier's running nodes at a sample, every one of them: how many, and the least,
    /// median and greatest lag and applied index among them. Recorded only in a trace that
    /// keeps per-node series for some nodes of a tier alone (`[trace] nodes_per_tier`), so a
    /// tier's charts still show all its nodes.
    TierSample {
        at_ms: u64,
        tier: String,
        nodes: u64,
        lag_min_ms: u64,
        lag_median_ms: u64,
        lag_max_ms: u64,
        applied_min: u64,
        applied_median: u64,
        applied_max: u64,
    },
    /// The run entered a phase.
    Phase { at_ms: u64, phase: RunPhase },
    /// `node`'s process failed to start (`reason`: the node's own error, e.g. a store it could
    /// not open); its supervisor starts it again 1–10 s later.
    StartFailed { at_ms: u64, node: String, reason: String },
    /// An impostor (an `impostor` fault) asked root member `node` to take a Raft link as member
    /// `claimed`, with `credentials`; `admitted`: the node welcomed it; `counted`: a refusal
    /// showed in the node's refusal counters. `detail`: the refusal or the admission in words.
    Admission {
        at_ms: u64,
        node: String,
        claimed: u64,
        credentials: String,
        admitted: bool,
        counted: bool,
        detail: String,
    },
    /// `node` found its store damaged at start, set it aside and started with an empty one: a
    /// root group member without its Raft state, as after its disk was replaced. (Where the
    /// store went, a path on the machine, is in the node's log, not the trace.)
    StoreSetAside { at_ms: u64, node: String },
    /// End of run, per node.
    NodeSummary {
        at_ms: u64,
        node: String,
        tier: String,
        applied: u64,
        failovers: u64,
        bootstraps: u64,
        bogus_requests: u64,
        /// Bytes of keys and values applied (what producers asked to store).
        logical_bytes: u64,
        /// Bytes the engine wrote to its disk for them; absent for a node whose store could
        /// not be read at the end, and in traces of builds before LMDB counted its writes
        /// through its map (`storage.write_map`), which read those as absent too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        engine_bytes_written: Option<u64>,
    },
    /// End of run, per key prefix (the text before the first `:`), on the root.
    KeyUsage { at_ms: u64, prefix: String, keys: u64, bytes: u64, reads: u64, never_read: u64 },
    /// End of run: every probe reached, with how often (probes never reached are left out).
    Probes { at_ms: u64, hits: Vec<ProbeHits> },
}

impl Event {
    /// The canonical trace line (no newline).
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("events always serialize")
    }

    pub fn at_ms(&self) -> u64 {
        match self {
            Event::Applied { at_ms, .. }
            | Event::Bootstrapped { at_ms, .. }
            | Event::Fault { at_ms, .. }
            | Event::LagSample { at_ms, .. }
            | Event::WriteAcked { at_ms, .. }
            | Event::Violation { at_ms, .. }
            | Event::SourceChanged { at_ms, .. }
            | Event::Cursor { at_ms, .. }
            | Event::RaftRole { at_ms, .. }
            | Event::RaftConfiguration { at_ms, .. }
            | Event::RaftConfigurationHeld { at_ms, .. }
            | Event::ReadSample { at_ms, .. }
            | Event::DiskSample { at_ms, .. }
            | Event::CacheSample { at_ms, .. }
            | Event::MemorySample { at_ms, .. }
            | Event::TierSample { at_ms, .. }
            | Event::Phase { at_ms, .. }
            | Event::StartFailed { at_ms, .. }
            | Event::StoreSetAside { at_ms, .. }
            | Event::Admission { at_ms, .. }
            | Event::BootstrapFailed { at_ms, .. }
            | Event::Probes { at_ms, .. }
            | Event::NodeSummary { at_ms, .. }
            | Event::KeyUsage { at_ms, .. } => *at_ms,
        }
    }
}

/// What a fault does: a scenario's `kind` (and swarm's `kinds`), and a `fault` event's. Every
/// kind but `oom` is injected by a scenario; `oom` is recorded by the memory model when a
/// node's modelled memory passes its limit (a scenario that names it is refused at load).
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
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FaultKind {
    /// The node's process dies; after `duration` it restarts on the same disk (a short
    /// duration is a fast restart).
    Kill,
    /// The node's process stops running (SIGSTOP); after `duration` it resumes.
    Pause,
    /// The node is stopped gracefully (SIGTERM): it stops accepting, the root commits and
    /// answers the writes already queued, connections finish within the drain timeout, the
    /// store closes; after `duration` it starts again.
    Stop,
    /// The node can neither send nor receive; after `duration` the network heals.
    Partition,
    /// One-way: the node receives nothing (its sends still arrive).
    PartitionIn,
    /// One-way: nothing the node sends arrives (it still receives).
    PartitionOut,
    /// The target and its `group` are cut off from every other node.
    Split,
    /// The link between the target and `peer` is clogged both ways.
    ClogLink,
    /// Every message in the network takes `latency` more (target `network`).
    Latency,
    /// A share `rate` of every message is lost and retransmitted (target `network`).
    Loss,
    /// The node's disk becomes slow under `model`.
    SlowDisk,
    /// The node's disk fails: reading a poisoned page kills the process, at every restart, until
    /// the disk is replaced (empty) after `duration` and the node re-bootstraps.
    Sigbus,
    /// Latent corruption: a share `rate` of the target's stored values (at least one) each get
    /// a flipped bit, as a bad sector would; the node must notice (checksums, its scrub), never
    /// serve or forward a damaged value, and heal. Memory engine, replicas only.
    BitRot,
    /// The power goes out on the target and its `group` (a rack, a data center): every process
    /// dies and loses what its disk had not synced; after `duration` they start again.
    PowerLoss,
    /// The node's disk answers I/O errors (`error`: EIO or ENOSPC) on the operations `ops`
    /// (open, commit, rename, write; all by default) for `duration`: the node must surface them,
    /// lose nothing acknowledged, and recover (reopen its store) or stop cleanly.
    DiskError,
    /// A peer that is not a root group member dials the target member's replication port and
    /// asks to speak Raft as member `member` (another member's id), with the `credentials`
    /// it has (a replica's stolen certificate, one from another CA, an expired one, none over
    /// plaintext); admitted, it sends a Raft message from a far later term that would depose
    /// a leader. It tries again every second for `duration`. Every attempt must be refused.
    Impostor,
    /// An operator asks the root group for a membership change — `add` these member ids as
    /// voters, `remove` these — through the target member's HTTP API (any member, or
    /// `leader`), following redirects to the leader and asking again for `duration` until it is
    /// made. A removed member is then stopped for good (decommissioned: recorded as a
    /// `membership` fault on it that never ends), as an operator retires a machine.
    Membership,
    /// The node's modelled memory passed its limit: killed, restarted by its supervisor.
    Oom,
    /// One of the node's fault points fired (`detail` names it): a stalled commit, a dropped
    /// connection. Recorded, never injected.
    FaultPoint,
}

impl FaultKind {
    /// The probe of this kind of fault being applied (a fault point's is its own).
    pub fn probe(self) -> Option<Probe> {
        Some(match self {
            FaultKind::Kill => Probe::FaultKill,
            FaultKind::Pause => Probe::FaultPause,
            FaultKind::Stop => Probe::FaultStop,
            FaultKind::Partition => Probe::FaultPartition,
            FaultKind::PartitionIn => Probe::FaultPartitionIn,
            FaultKind::PartitionOut => Probe::FaultPartitionOut,
            FaultKind::Split => Probe::FaultSplit,
            FaultKind::ClogLink => Probe::FaultClogLink,
            FaultKind::Latency => Probe::FaultLatency,
            FaultKind::Loss => Probe::FaultLoss,
            FaultKind::SlowDisk => Probe::FaultSlowDisk,
            FaultKind::Sigbus => Probe::FaultSigbus,
            FaultKind::BitRot => Probe::FaultBitRot,
            FaultKind::PowerLoss => Probe::FaultPowerLoss,
            FaultKind::DiskError => Probe::FaultDiskError,
            FaultKind::Impostor => Probe::FaultImpostor,
            FaultKind::Membership => Probe::FaultMembership,
            FaultKind::Oom => Probe::FaultOom,
            // Each point has its own probe, counted by the node when it fires.
            FaultKind::FaultPoint => return None,
        })
    }

    /// The name scenarios and traces use.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether a scenario may inject it (`oom` and `fault_point` are only recorded).
    pub fn injectable(self) -> bool {
        !matches!(self, FaultKind::Oom | FaultKind::FaultPoint)
    }

    /// Whether the fault acts on the whole network rather than one node.
    pub fn is_network_wide(self) -> bool {
        matches!(self, FaultKind::Latency | FaultKind::Loss)
    }

    /// Whether the fault touches more than its target (a group, a peer, the whole network).
    /// A power loss on a group is recorded as one fault per node, so it is not one of these.
    pub fn touches_several_nodes(self) -> bool {
        matches!(self, FaultKind::Split | FaultKind::ClogLink) || self.is_network_wide()
    }

    /// Whether the node cannot run (its samples would be stale) while the fault is on.
    pub fn stops_the_node(self) -> bool {
        matches!(
            self,
            FaultKind::Kill
                | FaultKind::Pause
                | FaultKind::Stop
                | FaultKind::Sigbus
                | FaultKind::PowerLoss
                | FaultKind::Oom
        )
    }
}

/// Whether a `fault` event starts or ends its fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultPhase {
    Start,
    End,
}

/// The phases of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunPhase {
    /// The workload runs under the scenario's faults.
    Safety,
    /// Faults healed, workload stopped, waiting for convergence.
    Liveness,
}

/// How often a run reached one probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeHits {
    pub probe: Probe,
    pub hits: u64,
}

/// Reads a trace file's lines; a bad line is an error naming its line number.
pub fn parse_trace(text: &str) -> Result<Vec<Event>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| serde_json::from_str(line).map_err(|e| format!("trace line {}: {e}", n + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_trace_lines() {
        let events = vec![
            Event::Applied { at_ms: 1, node: "root".into(), first: 1, last: 3, hash: "ab".into() },
            Event::Fault {
                at_ms: 2,
                node: "mid-1".into(),
                kind: FaultKind::Kill,
                phase: FaultPhase::Start,
                detail: "".into(),
            },
            Event::ReadSample {
                at_ms: 3,
                node: "edge-1".into(),
                reads: 5,
                misses: 1,
                p50_us: 80,
                p99_us: 300,
                errors: 0,
                max_us: 900,
            },
        ];
        let text: String = events.iter().map(|e| e.line() + "\n").collect();
        assert!(!text.contains("detail"), "empty details are not written: {text}");
        assert_eq!(parse_trace(&text).unwrap(), events);
        let err = parse_trace("{\"event\":\"applied\"}\n").unwrap_err();
        assert!(err.starts_with("trace line 1:"), "{err}");
    }
}
