//! The typed seam through which a node tells whoever watches it what it did: every apply, a
//! snapshot bootstrap, a change of source and a persisted resume position, as [`NodeEvent`]s.
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
        }
    }
}

/// What a node did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// Entries `first..=last` were applied in one commit; `hash` is the chain hash after `last`.
    Applied { first: u64, last: u64, hash: String },
    /// A snapshot at `index` (chain hash `hash`) was installed.
    Bootstrapped { index: u64, hash: String },
    /// The node now follows `source`; `reason` says why it left the one before.
    SourceChanged { source: SocketAddr, reason: SourceChange },
    /// The node persisted its resume position `index` (the store's applied index, or a legacy
    /// side-file cursor).
    CursorPersisted { index: u64 },
}

/// Whoever watches a node: told each [`NodeEvent`] as it happens, on the node's own task.
pub trait NodeObserver: Send + Sync + std::fmt::Debug {
    fn observe(&self, node: &str, event: NodeEvent);
}
