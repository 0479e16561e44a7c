//! The typed seam through which a node tells whoever watches it what it did: every apply, a
//! snapshot bootstrap, a change of source and a persisted resume position, as [`NodeEvent`]s,
//! and each time it passes a [`Probe`] — a named point a test run wants to know it reached.
//!
//! Under the simulator the watcher is the trace recorder, whose checkers judge these events. The
//! real binary has none unless it is started with `--events FILE`: then [`EventsFile`] appends
//! each event to the file as one JSON line ([`EventLine`], with the wall-clock time), which
//! `qsim real` merges into a run's trace. Typed, so a renamed field is a compile error in the
//! simulator, not a checker gone silently blind; the file's lines are these same types.

use std::net::SocketAddr;

pub use qs_vocab::{BootstrapStage, Probe, SourceChange};

/// What a node did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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
    /// A root group member applied a membership change committed at Raft `index`: the group's
    /// voters are now `voters` (and, while joint, `outgoing` too). Sorted.
    RaftConfiguration { index: u64, voters: Vec<u64>, outgoing: Vec<u64> },
    /// A root group member took up a configuration without applying a change: the one it
    /// restored at start (its snapshot's, then the changes its log held up to what it had
    /// applied) or a snapshot it was sent held. It says the group's voters were `voters` (and
    /// `outgoing`) at Raft `index`. Sorted.
    RaftConfigurationHeld { index: u64, voters: Vec<u64>, outgoing: Vec<u64> },
    /// The store was found damaged at start and set aside (`kept`: where it went); the node
    /// started with an empty one — a root group member with no Raft state, as after its disk
    /// was replaced.
    StoreSetAside { kept: String },
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
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
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

/// One line of an events file: when (wall-clock ms since the Unix epoch), which node, what.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventLine {
    pub at_unix_ms: u64,
    pub node: String,
    pub event: NodeEvent,
}

/// The real binary's watcher with `--events FILE`: each event appended to the file as one
/// [`EventLine`] and a newline, in a single `write` on a file opened for appending — a process
/// killed mid-run leaves whole lines only, and a restarted one appends after them.
#[derive(Debug)]
pub struct EventsFile {
    file: std::sync::Mutex<std::fs::File>,
    path: std::path::PathBuf,
}

impl EventsFile {
    /// Opens `path` for appending, creating it if it is missing.
    pub fn open(path: &std::path::Path) -> std::io::Result<EventsFile> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(EventsFile { file: std::sync::Mutex::new(file), path: path.to_path_buf() })
    }
}

impl NodeObserver for EventsFile {
    fn observe(&self, node: &str, event: NodeEvent) {
        use std::io::Write;
        let at_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        let line = EventLine { at_unix_ms, node: node.to_string(), event };
        let mut text = serde_json::to_vec(&line).expect("an event line always serializes");
        text.push(b'\n');
        // The lock orders lines; a poisoned one only means another writer panicked mid-line.
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(e) = file.write_all(&text) {
            tracing::error!(path = %self.path.display(), error = %e, "cannot append to the events file: this event is lost");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of event is written as one line and read back to the same value.
    #[test]
    fn events_file_lines_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let events = vec![
            NodeEvent::Applied { first: 1, last: 3, hash: "ab".into() },
            NodeEvent::Bootstrapped { index: 9, hash: "cd".into() },
            NodeEvent::BootstrapFailed {
                source: "127.0.1.1:7000".parse().unwrap(),
                stage: BootstrapStage::Manifest,
                chunks_stored: 2,
            },
            NodeEvent::SourceChanged { source: "127.0.1.2:7000".parse().unwrap(), reason: SourceChange::Stale },
            NodeEvent::CursorPersisted { index: 4 },
            NodeEvent::Reached(Probe::LeftStaleSource),
            NodeEvent::FaultPoint { point: FaultPoint::SlowCommit, active: true },
            NodeEvent::RaftRole { term: 2, role: crate::consensus::Role::Leader, leader: 1 },
        ];
        {
            let file = EventsFile::open(&path).unwrap();
            for event in &events[..4] {
                file.observe("edge-1", event.clone());
            }
        }
        // A restarted process appends after the lines already there.
        let file = EventsFile::open(&path).unwrap();
        for event in &events[4..] {
            file.observe("edge-1", event.clone());
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let back: Vec<EventLine> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(back.iter().map(|line| line.event.clone()).collect::<Vec<_>>(), events);
        assert!(back.iter().all(|line| line.node == "edge-1" && line.at_unix_ms > 1_600_000_000_000));
    }
}
