//! The queues between a root group member's consensus and its peers, bounded by bytes as well
//! as by messages: a Raft message may be as large as [`RAFT_MESSAGE_BYTES_MAX`] (an append of
//! 1 MiB of entries plus a proposal of up to 6 MiB), so a bound on the count alone would let one
//! peer's outbox hold gigabytes of appends for a peer that reads slowly.
//!
//! Guarantees: a message is queued only with a [`Held`] share of its queue's byte budget,
//! returned when the message is sent, stepped or dropped; a message the budget has no room for
//! is dropped at once and counted (`qs_raft_messages_dropped_total`) — Raft resends what still
//! matters, as for a queue full by count. Every budget holds at least a few of the largest
//! message, so a lone large append always fits an empty queue. What every queue of a node holds
//! is counted in one total the memory budget's `buffers` component includes
//! (`NodeState::buffer_bytes`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::replication::protocol::RAFT_MESSAGE_BYTES_MAX;

/// Bytes of messages queued for one peer: four of the largest. A follower that reads this far
/// behind is an election timeout from being cut (`peers::QUEUED_MAX`) in any case.
pub(super) const OUTBOX_BYTES_MAX: usize = 4 * RAFT_MESSAGE_BYTES_MAX;
/// Bytes of inbound messages waiting for the consensus: eight of the largest, from all peers.
pub(super) const INBOX_BYTES_MAX: usize = 8 * RAFT_MESSAGE_BYTES_MAX;
const _: () = assert!(OUTBOX_BYTES_MAX >= 2 * RAFT_MESSAGE_BYTES_MAX && INBOX_BYTES_MAX >= OUTBOX_BYTES_MAX);

/// A queue's byte budget, shared by whoever queues and whoever takes, and the node's total of
/// bytes held in all its queues.
#[derive(Clone, Debug)]
pub(crate) struct ByteBudget {
    room: Arc<Semaphore>,
    node_total: Arc<AtomicU64>,
}

/// A message's share of its queue's budget: given back, and taken off the node's total, when
/// dropped.
#[derive(Debug)]
pub(crate) struct Held {
    _share: OwnedSemaphorePermit,
    bytes: u64,
    node_total: Arc<AtomicU64>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.node_total.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl ByteBudget {
    /// A budget of `bytes`, whose holdings count in `node_total`.
    pub(crate) fn new(bytes: usize, node_total: Arc<AtomicU64>) -> ByteBudget {
        assert!(bytes <= Semaphore::MAX_PERMITS, "a byte budget of {bytes} bytes is past what a semaphore counts");
        ByteBudget { room: Arc::new(Semaphore::new(bytes)), node_total }
    }

    /// A share of `bytes`, if the budget has room for it now (never waits: a member never
    /// waits on a peer).
    pub(crate) fn try_hold(&self, bytes: usize) -> Option<Held> {
        let share = self.room.clone().try_acquire_many_owned(u32::try_from(bytes).ok()?).ok()?;
        self.node_total.fetch_add(bytes as u64, Ordering::Relaxed);
        Some(Held { _share: share, bytes: bytes as u64, node_total: self.node_total.clone() })
    }

    /// Bytes the budget has room for now.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.room.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_refused_past_the_budget_and_returned_when_dropped() {
        let total = Arc::new(AtomicU64::new(0));
        let budget = ByteBudget::new(OUTBOX_BYTES_MAX, total.clone());
        let other = ByteBudget::new(INBOX_BYTES_MAX, total.clone());
        let held: Vec<Held> = (0..4).map(|_| budget.try_hold(RAFT_MESSAGE_BYTES_MAX).expect("room")).collect();
        let elsewhere = other.try_hold(100).expect("room");
        assert_eq!(budget.room(), 0);
        assert_eq!(total.load(Ordering::Relaxed), OUTBOX_BYTES_MAX as u64 + 100, "the node's total counts both");
        assert!(budget.try_hold(1).is_none(), "a full budget takes nothing more");
        drop(held);
        assert_eq!(budget.room(), OUTBOX_BYTES_MAX, "every share comes back");
        assert_eq!(total.load(Ordering::Relaxed), 100);
        drop(elsewhere);
        assert_eq!(total.load(Ordering::Relaxed), 0);
        assert!(budget.try_hold(OUTBOX_BYTES_MAX + 1).is_none(), "a message past the whole budget never fits");
        assert!(budget.try_hold(usize::MAX).is_none(), "nor one past what a share can count");
    }
}
