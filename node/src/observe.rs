//! The typed seam through which a node tells whoever watches it what it did: every apply, a
//! snapshot bootstrap, a change of source and a persisted resume position, as [`NodeEvent`]s,
//! and each time it passes a [`Probe`] — a named point a test run wants to know it reached.
//!
//! Under the simulator the watcher is the trace recorder, whose checkers judge these events; in
//! the real binary there is none (the same facts also go to the log). Typed, so a renamed field
//! is a compile error in the simulator, not a checker gone silently blind.

use std::net::SocketAddr;

pub use qs_vocab::{BootstrapStage, Probe, SourceChange};

/// What a node did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// Entries `first..=last` were applied in one commit; `hash` is the chain hash after `last`.
    Applied { first: u64, last: u64, hash: String },
    /// A snapshot at `index` (chain hash `hash`) was installed.
    Bootstrapped { index: u64, hash: String },
    /// A snapshot bootstrap from `source` failed at `stage`, after storing `chunks_stored`
    /// chunks (a transfer that broke off after storing some resumes from the same source).
    BootstrapFailed { source: SocketAddr, stage: BootstrapStage, chunks_stored: u64 },
    /// The node now follows `source`; `reason` says why it left the one before.
    SourceChanged { source: SocketAddr, reason: SourceChange },
    /// The node persisted its resume position `index` (the store's applied index, or a legacy
    /// side-file cursor).
    CursorPersisted { index: u64 },
    /// The node reached a probe.
    Reached(Probe),
    /// A fault point began misbehaving (`active`), or stopped: the watcher treats it as a fault
    /// on this node. A momentary one (a dropped connection) starts and stops at once.
    FaultPoint { point: FaultPoint, active: bool },
    /// A root group member's Raft term, role or known leader changed (`leader` 0: none known).
    RaftRole { term: u64, role: crate::consensus::Role, leader: u64 },
}

/// Whoever watches a node: told each [`NodeEvent`] as it happens, on the node's own task.
pub trait NodeObserver: Send + Sync + std::fmt::Debug {
    fn observe(&self, node: &str, event: NodeEvent);

    /// Over TLS: bytes a replication connection's reader just took, decrypted, with the
    /// connection's local and peer addresses — what a network tap would see of a plaintext
    /// connection, which a tap on the wire cannot see of an encrypted one (the simulator's
    /// `fetch` checker frames them). Not called for plaintext connections.
    fn plaintext_read(&self, _local: SocketAddr, _peer: SocketAddr, _bytes: &[u8]) {}
}

/// A fault point (see `crate::fault_points`, which makes them fire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum FaultPoint {
    /// A commit takes seconds (a disk stalled under a burst of other work).
    SlowCommit,
    /// A replication server closes the connection right after its welcome.
    DropAfterHandshake,
    /// A replication server closes a snapshot transfer after a chunk: the client resumes.
    DropMidSnapshot,
    /// A replication server sends a keepalive at once instead of after the interval.
    EarlyKeepalive,
}

impl FaultPoint {
    /// The probe a firing reports.
    pub fn probe(self) -> Probe {
        match self {
            FaultPoint::SlowCommit => Probe::FaultPointSlowCommit,
            FaultPoint::DropAfterHandshake => Probe::FaultPointDropAfterHandshake,
            FaultPoint::DropMidSnapshot => Probe::FaultPointDropMidSnapshot,
            FaultPoint::EarlyKeepalive => Probe::FaultPointEarlyKeepalive,
        }
    }
}
