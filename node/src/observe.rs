//! The typed seam through which a node tells whoever watches it what it did: every apply, a
//! snapshot bootstrap, a change of source and a persisted resume position, as [`NodeEvent`]s,
//! and each time it passes a [`Probe`] — a named point a test run wants to know it reached.
//!
//! Under the simulator the watcher is the trace recorder, whose checkers judge these events; in
//! the real binary there is none (the same facts also go to the log). Typed, so a renamed field
//! is a compile error in the simulator, not a checker gone silently blind.

use std::net::SocketAddr;

/// Why a node left the source it followed before (or `Start`: it had none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceChange {
    /// The node's first source since its process started.
    Start,
    /// The connection broke or the source closed it.
    Disconnected,
    /// The source refused the node (not ready, over its connection cap, another database).
    Refused,
    /// Nothing newer arrived within the staleness threshold.
    Stale,
    /// The source broke the chain or the protocol.
    Violation,
    /// The source no longer had the entry the node needed next.
    OutOfRetention,
    /// This node's own store was damaged (a value failed its checksum): it re-bootstrapped.
    Damaged,
    /// This node's own store failed a commit (a disk error): not the source's doing.
    StoreFailed,
}

impl SourceChange {
    /// The reason as the trace writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceChange::Start => "start",
            SourceChange::Disconnected => "disconnected",
            SourceChange::Refused => "refused",
            SourceChange::Stale => "stale",
            SourceChange::Violation => "violation",
            SourceChange::OutOfRetention => "out_of_retention",
            SourceChange::Damaged => "damaged",
            SourceChange::StoreFailed => "store_failed",
        }
    }
}

/// A named point in the node's code: the simulator counts how often a run reached each, so a
/// user knows what a run exercised (and a scenario fails when it reaches none of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Probe {
    /// A replica left a stale source (quiet, or calling itself healthy while we are stale).
    LeftStaleSource,
    /// A replica stayed with a stale source that said it was recovering.
    WaitedForRecoveringSource,
    /// A replica's probe found a healthy source ahead of it, and it moved there.
    MovedToProbedSource,
    /// A replica left a source that broke the connection, refused it or broke the chain.
    LeftBrokenSource,
    /// A server answered `OutOfRetention`: the client's next entry was collected.
    OutOfRetentionAnswered,
    /// A server streamed a snapshot.
    SnapshotServed,
    /// A replica resumed a snapshot transfer from a staged chunk instead of the start.
    SnapshotResumed,
    /// A replica installed a snapshot.
    SnapshotInstalled,
    /// The root refused a producer over its quota (429).
    QuotaRefused,
    /// The root refused a producer writing outside its prefixes (403).
    PrefixRefused,
    /// The root dropped an operation rewriting a key with the value it holds.
    IdenticalRewriteDropped,
    /// The root committed a delete.
    DeleteCommitted,
    /// The root committed a request with several operations on one key (the last wins).
    RepeatedKeyInOneRequest,
    /// A stored value failed its checksum on read.
    ChecksumFailed,
    /// Fault points that fired (see `fault_points`).
    FaultPointSlowCommit,
    FaultPointDropAfterHandshake,
    FaultPointDropMidSnapshot,
    FaultPointEarlyKeepalive,
    /// A store was reopened after a failed commit (a disk error) and its head read back.
    StoreReopened,
}

/// Where a snapshot bootstrap attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BootstrapStage {
    /// Connecting to the source or sending the request.
    Connect,
    /// Waiting for the manifest: refused, timed out, another database, behind this store.
    Manifest,
    /// Turned away by a source already serving the most transfers it serves at once
    /// (`replication.bootstraps_served_max`): shedding by design; the replica tries elsewhere
    /// or later.
    Busy,
    /// Receiving and storing the chunks: the transfer broke off, or a chunk could not be stored.
    Transfer,
    /// Verifying and swapping in the whole snapshot.
    Install,
}

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
}

/// Whoever watches a node: told each [`NodeEvent`] as it happens, on the node's own task.
pub trait NodeObserver: Send + Sync + std::fmt::Debug {
    fn observe(&self, node: &str, event: NodeEvent);
}

/// A fault point (see `crate::fault_points`, which makes them fire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
