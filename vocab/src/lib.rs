//! The words the node and the simulator's trace share, each declared once: the node reports
//! with these types through its observer seam (`qs_node::observe`), and the trace
//! (`qs_reports::schema`) writes the same values. A variant added here is at once something the
//! node can say and something every trace, checker and report can read — there is no second
//! list to keep in step, and no conversion that could drop one.
//!
//! Guarantees: each type's trace name (serde, `Display`, `name`) is its variant in snake_case
//! and never changes for an existing variant, since traces of older runs are read back; `ALL`
//! lists every variant in declaration order, which is the order reports table them in.

use serde::{Deserialize, Serialize};
use strum::{Display, IntoStaticStr, VariantArray};

/// Why a node left the source it followed before (or `Start`: it had none).
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
    Display,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SourceChange {
    /// The node's first source since its process started.
    Start,
    /// Could not connect, or the connection broke or the source closed it.
    Disconnected,
    /// Nothing newer arrived within the staleness threshold.
    Stale,
    /// The source refused the node (not ready, over its connection cap, another database).
    Refused,
    /// The source no longer had the entry the node needed next.
    OutOfRetention,
    /// The source broke the chain or the protocol.
    Violation,
    /// This node's own store was damaged (a value failed its checksum): it re-bootstrapped.
    Damaged,
    /// This node's own store failed a commit (a disk error): not the source's doing; it
    /// reconnected once the store was reopened.
    StoreFailed,
}

/// A root group member's role, as Raft names it.
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
    Display,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RaftRole {
    Follower,
    /// Asking whether it could win an election before starting one (pre-vote), so a member
    /// that was cut off does not depose a healthy leader when it returns.
    PreCandidate,
    Candidate,
    Leader,
}

impl RaftRole {
    /// Every role, in declaration order.
    pub const ALL: &'static [RaftRole] = <RaftRole as VariantArray>::VARIANTS;

    /// The role as the trace and `/metrics` write it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Where a snapshot bootstrap attempt failed.
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
    Display,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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

/// A named point a run may reach. The node reaches the node probes (everything but the
/// `Fault*` kinds of an injected fault, [`Probe::is_node_probe`]); the simulator counts one
/// `Fault*` probe per fault kind it applies. A run counts each into its trace and summary, a
/// scenario names the ones it exists to reach (`[checks] probes`), a sweep tables them.
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
    Display,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    /// A listener at its cap shed a connection for a newcomer (one that had not been answered
    /// for longest and is not being served: see the node's `connections::shed`).
    ConnectionShed,
    /// A listener refused a newcomer at once: its address held its share, or the listener was
    /// at its cap with nothing it may shed.
    ConnectionRefused,
    /// A stored value failed its checksum on read.
    ChecksumFailed,
    /// A fault point fired: a commit stalled.
    FaultPointSlowCommit,
    /// A fault point fired: a server closed a connection right after its welcome.
    FaultPointDropAfterHandshake,
    /// A fault point fired: a server broke off a snapshot transfer after a chunk.
    FaultPointDropMidSnapshot,
    /// A fault point fired: a server sent a keepalive at once.
    FaultPointEarlyKeepalive,
    /// The simulator applied a fault of this kind (one probe per injectable kind).
    FaultKill,
    FaultPause,
    FaultStop,
    FaultPartition,
    FaultPartitionIn,
    FaultPartitionOut,
    FaultSplit,
    FaultClogLink,
    FaultLatency,
    FaultLoss,
    FaultSlowDisk,
    FaultSigbus,
    FaultBitRot,
    FaultPowerLoss,
    FaultDiskError,
    FaultImpostor,
    FaultOom,
    /// A store was reopened after a failed commit (a disk error) and its head read back.
    StoreReopened,
    /// A root group member snapshotted and compacted its Raft log.
    RaftLogCompacted,
    /// A root group member was sent a snapshot: the leader's Raft log no longer reached it.
    RaftSnapshotReceived,
    /// A root group member's store reached the snapshot it was sent (from a peer's log, or a
    /// copy of a peer's store: that one also counts `snapshot_installed`).
    RaftStoreCaughtUp,
    /// An operator's membership change was asked of a root group (the `membership` fault).
    FaultMembership,
    /// A root group member applied a membership change: its group's voters changed.
    RaftConfigurationChanged,
}

impl Probe {
    /// Every probe, in table order.
    pub const ALL: &'static [Probe] = <Probe as VariantArray>::VARIANTS;

    /// The name scenarios, traces and tables use.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the node reaches it (not the simulator applying a fault).
    pub fn is_node_probe(self) -> bool {
        let name = self.name();
        !name.starts_with("fault_") || name.starts_with("fault_point_")
    }
}

impl SourceChange {
    /// Every reason, in declaration order.
    pub const ALL: &'static [SourceChange] = <SourceChange as VariantArray>::VARIANTS;

    /// The reason as the trace writes it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl BootstrapStage {
    /// Every stage, in declaration order.
    pub const ALL: &'static [BootstrapStage] = <BootstrapStage as VariantArray>::VARIANTS;

    /// The stage as the trace writes it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trace's serde name, `Display` and `name`/`as_str` are one string, for every variant.
    #[test]
    fn every_variant_has_one_name() {
        fn check<T: Serialize + std::fmt::Display + Copy>(all: &[T], name: impl Fn(T) -> &'static str) {
            let mut seen = std::collections::BTreeSet::new();
            for &v in all {
                let serde = serde_json::to_value(v).unwrap();
                assert_eq!(serde.as_str(), Some(name(v)));
                assert_eq!(v.to_string(), name(v));
                assert!(seen.insert(name(v)), "{} twice", name(v));
            }
        }
        check(Probe::ALL, Probe::name);
        check(SourceChange::ALL, SourceChange::as_str);
        check(BootstrapStage::ALL, BootstrapStage::as_str);
    }

    /// Names already in traces of older runs: renaming a variant must not change them.
    #[test]
    fn trace_names_are_stable() {
        assert_eq!(Probe::ALL.len(), 43);
        assert_eq!(Probe::FaultImpostor.name(), "fault_impostor");
        assert_eq!(Probe::ALL[0].name(), "left_stale_source");
        assert_eq!(Probe::FaultPointDropMidSnapshot.name(), "fault_point_drop_mid_snapshot");
        assert_eq!(Probe::FaultPartitionIn.name(), "fault_partition_in");
        assert_eq!(Probe::StoreReopened.name(), "store_reopened");
        assert_eq!(Probe::RaftStoreCaughtUp.name(), "raft_store_caught_up");
        assert_eq!(Probe::ConnectionShed.name(), "connection_shed");
        assert_eq!(Probe::ConnectionRefused.name(), "connection_refused");
        assert_eq!(SourceChange::OutOfRetention.as_str(), "out_of_retention");
        assert_eq!(SourceChange::StoreFailed.as_str(), "store_failed");
        assert_eq!(BootstrapStage::Transfer.as_str(), "transfer");
        let node: Vec<_> = Probe::ALL.iter().filter(|p| p.is_node_probe()).collect();
        assert_eq!(node.len(), 25, "{node:?}");
        assert!(!Probe::FaultKill.is_node_probe() && Probe::FaultPointSlowCommit.is_node_probe());
    }
}
