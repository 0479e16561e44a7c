//! The faults a scenario injects, what a fault may wait for, and swarm mode's settings (the
//! drawing itself is `swarm.rs`).

use std::time::Duration;

pub use qs_node::store::faults::{DiskError, IoOp};
use serde::Deserialize;
use toml::Spanned;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    pub kind: FaultKind,
    /// A node, `network` for the network-wide kinds (`latency`, `loss`), or with a root group
    /// [`LEADER`]: whichever member leads when the fault starts.
    pub target: Spanned<String>,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// `clog_link`: the node at the other end of the link. `impostor` with `credentials =
    /// "stolen"`: the node whose certificate and key the impostor took.
    #[serde(default)]
    pub peer: Option<Spanned<String>>,
    /// `impostor`: what the impostor presents (`stolen` by default: `peer`'s certificate).
    #[serde(default)]
    pub credentials: Option<Credentials>,
    /// `split`: the nodes on the target's side; every link between them and the rest is cut.
    /// `power_loss`: the nodes that lose power with the target (a rack, a data center).
    #[serde(default)]
    pub group: Vec<String>,
    /// `slow_disk`: the latency model.
    #[serde(default)]
    pub model: Option<DiskModelKind>,
    /// `latency`: the added one-way delay of every message (each draws from latency..2×latency).
    #[serde(default, with = "humantime_serde")]
    pub latency: Option<Duration>,
    /// `loss`: the share of messages lost (TCP retransmits them, with backoff).
    #[serde(default)]
    pub rate: Option<f64>,
    /// Start not at `at` but at the first moment after it that the target is in the middle of
    /// something: `bootstrap` — a snapshot transfer with a chunk stored and more to come (for
    /// `kill`, `pause` and `partition`). If that never happens, the fault never starts.
    #[serde(default)]
    pub during: Option<During>,
    /// `disk_error`: the error the disk answers (`eio` by default).
    #[serde(default)]
    pub error: Option<DiskError>,
    /// `disk_error`: the operations that fail (`open`, `commit`, `rename`, `write`, `read`);
    /// all its error can fail when empty.
    #[serde(default)]
    pub ops: Vec<IoOp>,
    /// `membership`: the member ids to add as voters (members of the roster).
    #[serde(default)]
    pub add: Vec<u64>,
    /// `membership`: the voters to remove (then stopped for good).
    #[serde(default)]
    pub remove: Vec<u64>,
}

/// The target that names a root group's leader at the moment the fault starts (the member
/// whose newest role report is the leader of the highest term); the fault's end acts on the
/// same member, whoever leads by then.
pub const LEADER: &str = "leader";

/// How a `clog_link` fault's detail starts, before the peer's name.
const CLOGGED_LINK_TO: &str = "link to ";

/// What a fault with `during` waits for its target to be doing.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum During {
    Bootstrap,
}

impl Fault {
    /// A fault of `kind` on `target` with no parameters.
    pub fn new(at: Duration, kind: FaultKind, target: &str, duration: Duration) -> Fault {
        Fault {
            at,
            kind,
            target: Spanned::new(0..0, target.to_string()),
            duration,
            peer: None,
            credentials: None,
            group: Vec::new(),
            model: None,
            latency: None,
            rate: None,
            during: None,
            error: None,
            ops: Vec::new(),
            add: Vec::new(),
            remove: Vec::new(),
        }
    }

    /// The peer a `clog_link` fault's [`detail`](Fault::detail) names, read back from a trace.
    pub fn clogged_peer(detail: &str) -> Option<&str> {
        detail.strip_prefix(CLOGGED_LINK_TO).filter(|peer| *peer != "?")
    }

    /// The parameters in words (empty when the kind has none), for the trace and the settings.
    pub fn detail(&self) -> String {
        match self.kind {
            FaultKind::ClogLink => {
                format!("{CLOGGED_LINK_TO}{}", self.peer.as_ref().map_or("?", |p| p.get_ref().as_str()))
            }
            FaultKind::Split => format!("[{}] cut off from the rest", self.group_with_target().join(", ")),
            FaultKind::SlowDisk => format!("{:?}", self.model.unwrap_or(DiskModelKind::Aging)).to_lowercase(),
            FaultKind::Latency => format!("+{:?}", self.latency.unwrap_or_default()),
            FaultKind::Loss => format!("{:.1}% lost", self.rate.unwrap_or_default() * 100.0),
            FaultKind::Sigbus => "crash loop until the disk is replaced".into(),
            FaultKind::Impostor => match self.credentials.unwrap_or_default() {
                Credentials::Stolen => {
                    format!("{}'s certificate", self.peer.as_ref().map_or("?", |p| p.get_ref().as_str()))
                }
                other => other.describe().to_string(),
            },
            FaultKind::Membership => format!("add {:?}, remove {:?}", self.add, self.remove),
            FaultKind::DiskError => {
                let ops: Vec<&str> = self.failing_ops().iter().map(|op| op.as_str()).collect();
                format!("{} on {}", self.error.unwrap_or(DiskError::Eio).as_str(), ops.join(", "))
            }
            _ if self.during == Some(During::Bootstrap) => "in the middle of a snapshot transfer".into(),
            _ => String::new(),
        }
    }

    /// `disk_error`: the operations that fail, in a fixed order (every one its error can fail
    /// when `ops` is empty: a full disk still reads).
    pub fn failing_ops(&self) -> Vec<IoOp> {
        let error = self.error.unwrap_or(DiskError::Eio);
        let mut ops = if self.ops.is_empty() {
            IoOp::ALL.iter().copied().filter(|op| op.fails_with(error)).collect()
        } else {
            self.ops.clone()
        };
        ops.sort();
        ops.dedup();
        ops
    }

    /// `split`'s side: the target and its group.
    pub fn group_with_target(&self) -> Vec<String> {
        let mut side = vec![self.target.get_ref().clone()];
        side.extend(self.group.iter().filter(|n| *n != self.target.get_ref()).cloned());
        side
    }
}

/// What an `impostor` presents when it dials a root member.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Credentials {
    /// A replica's own certificate and key (`peer`'s): it chains to the run's CA, as every
    /// node's does, but names the replica's address, not a member's.
    #[default]
    Stolen,
    /// A certificate for the impostor's address from a CA the nodes do not trust.
    ForeignCa,
    /// A certificate the run's CA signed for a member's address, expired long before the run.
    Expired,
    /// No TLS at all: the hello in plaintext.
    Plaintext,
}

impl Credentials {
    /// In words, for the trace.
    pub fn describe(self) -> &'static str {
        match self {
            Credentials::Stolen => "a replica's certificate",
            Credentials::ForeignCa => "a certificate from another CA",
            Credentials::Expired => "an expired certificate for a member's address",
            Credentials::Plaintext => "no TLS",
        }
    }
}

/// A slow SSD's latency model (healthy disks answer in tens to hundreds of microseconds).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskModelKind {
    /// Mostly healthy, with tail stalls of hundreds of milliseconds (worn flash, GC pauses).
    Aging,
    /// Every commit queues behind the last; batch commits take seconds.
    Saturated,
}

/// Swarm mode: the seed picks which of `kinds` are on (a non-empty subset), how many faults
/// there are, and each one's time, target (any node but the root) and duration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Swarm {
    pub kinds: Vec<FaultKind>,
    pub count_min: usize,
    pub count_max: usize,
    #[serde(with = "humantime_serde")]
    pub duration_min: Duration,
    #[serde(with = "humantime_serde")]
    pub duration_max: Duration,
    /// Draw whether the node's fault points are on from the seed too (half the seeds).
    #[serde(default)]
    pub buggify: bool,
    /// Draw each writer's modes from the seed too (batches, repeated keys, deletes, identical
    /// rewrites, keys outside the prefixes), wherever the file leaves them at their defaults.
    #[serde(default)]
    pub writer_modes: bool,
    /// After each drawn fault that sends its node back to a snapshot (`sigbus`, from when its
    /// disk is replaced; `bit_rot`, from when it strikes), draw on half of them a `kill`,
    /// `pause` or `partition` of that node that waits for the transfer to be under way
    /// (`during = "bootstrap"`). Such a fault may overlap others on its node: its time is the
    /// transfer's. Transfers of one chunk are never caught: give the nodes small
    /// `snapshot_chunk_bytes`.
    #[serde(default)]
    pub interrupt_bootstraps: bool,
    /// Draw related fault groups on purpose too (`swarm::RelatedGroup`): a replica and one or
    /// all of its configured sources out at overlapping times, a replica out past its sources'
    /// retention while a source is out too, a whole tier out together — from a stream of its
    /// own, so the faults drawn without it stay as they were. Its outages are of the `kinds`
    /// among kill, stop, pause, partition and power_loss; never overlapping another fault on
    /// the same node.
    #[serde(default)]
    pub related: bool,
}

/// What a fault does: one definition, shared with the trace (`fault` events).
pub use qs_reports::schema::FaultKind;

/// One fault's start or end, at a time from the run's start (simulated, or the wall clock's in a real run).
#[derive(Clone, Debug)]
pub struct FaultStep {
    pub at: Duration,
    pub fault: Fault,
    pub start: bool,
}

/// The start and end steps of `faults`, in the order they happen (ends before starts at one
/// instant, so back-to-back faults on a node do not overlap). Faults that wait for their
/// target (`during`) have no fixed time: the world triggers them.
pub fn steps(faults: &[Fault]) -> Vec<FaultStep> {
    let mut steps: Vec<FaultStep> = faults
        .iter()
        .filter(|f| f.during.is_none())
        .flat_map(|f| {
            [
                FaultStep { at: f.at, fault: f.clone(), start: true },
                FaultStep { at: f.at + f.duration, fault: f.clone(), start: false },
            ]
        })
        .collect();
    steps.sort_by_key(|s| (s.at, s.start));
    steps
}
