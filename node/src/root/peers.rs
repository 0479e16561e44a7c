//! Carrying a root group member's Raft messages to its peers: one connection per peer on the
//! peer's replication port (over mutual TLS with `[tls]`), opened with a [`Want::Raft`] hello.
//!
//! Guarantees: a member never waits on a peer — messages queue per peer and are dropped past
//! the queue's depth (Raft resends what matters); a peer that is unreachable is dialled again
//! every [`REDIAL_AFTER`]; a send that cannot finish within [`SEND_DEADLINE`] (the peer stopped
//! reading: paused, its socket buffer full) breaks the connection and drops what queued, so a
//! peer that comes back is never handed a stale backlog; a message that waited in the queue
//! longer than [`QUEUED_MAX`] (a peer that reads, but slower than its leader writes) is
//! dropped rather than sent; every task ends when the node drains.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::connections::{Lifecycle, reached};
use crate::replication::protocol::{ClientHello, Message, Want, read_message, write_message};
use crate::state::NodeState;

/// How long a member gives a peer to accept its connection and answer its hello.
pub(super) const CONNECT_DEADLINE: Duration = Duration::from_secs(2);
/// How long a member waits before dialling a peer again after a failed connection.
pub(super) const REDIAL_AFTER: Duration = Duration::from_millis(200);
/// How long one message may take to leave for a peer. An election timeout (at least
/// `ELECTION_TICKS` ticks): a peer that read nothing for that long is no follower to keep
/// writing to — its leader would be replaced by now if it were the one not reading — and what
/// queued meanwhile is stale.
pub(super) const SEND_DEADLINE: Duration =
    Duration::from_millis(crate::consensus::TICK.as_millis() as u64 * crate::consensus::ELECTION_TICKS as u64);

/// How long a message may wait in a peer's queue before it is dropped unsent: an election
/// timeout, as [`SEND_DEADLINE`]. A peer that reads slower than its leader writes (it persists
/// every append it takes) would otherwise be handed, for as long as it stays behind, what the
/// leader sent seconds ago — the same stale appends and snapshots again and again, each an
/// answer to an answer of its own, while the leader's fresh ones wait behind them (a member
/// back from a partition stayed 26 s behind its group so).
pub(super) const QUEUED_MAX: Duration = SEND_DEADLINE;

/// A message to a peer, when it was queued, and its share of the outbox's bytes.
pub(super) type Queued = (tokio::time::Instant, Vec<u8>, super::queues::Held);

/// Where a member's consensus queues the messages for one peer, and that queue's byte budget.
pub(super) type Outbox = (mpsc::Sender<Queued>, super::queues::ByteBudget);

/// Carries this member's messages to `peer`, dialling it (over TLS with `[tls]`) and again
/// after every failure, until the member's consensus ends or the node stops. Messages that
/// queued when a dial or a send fails are dropped (see [`discard_queued`]).
pub(super) async fn send_to_peer(
    state: Arc<NodeState>,
    me: u64,
    peer: u64,
    address: SocketAddr,
    mut outbox: mpsc::Receiver<Queued>,
) {
    let mut lifecycle: watch::Receiver<Lifecycle> = state.lifecycle();
    let deadline = CONNECT_DEADLINE;
    let stale_backlog = state.config.planted().raft_send_stale_backlog;
    loop {
        let connected = tokio::select! {
            biased;
            () = reached(&mut lifecycle, Lifecycle::Draining) => return,
            connected = connect(&state, me, address, deadline) => connected,
        };
        let mut stream = match connected {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(peer, %address, error = %e, "could not reach a root group member");
                discard_queued(&state, &mut outbox);
                tokio::select! {
                    biased;
                    () = reached(&mut lifecycle, Lifecycle::Draining) => return,
                    () = tokio::time::sleep(REDIAL_AFTER) => continue,
                }
            }
        };
        loop {
            let message = tokio::select! {
                biased;
                () = reached(&mut lifecycle, Lifecycle::Draining) => return,
                message = outbox.recv() => match message {
                    // PLANTED BUG (legacy `raft_send_stale_backlog`): no message is too old to send.
                    Some((queued, _, _)) if queued.elapsed() > QUEUED_MAX && !stale_backlog => {
                        state.metrics.raft_messages_dropped.inc(); // stale: Raft resends what matters
                        continue;
                    }
                    Some((_, message, _held)) => message, // its bytes return once it is taken
                    None => return,
                },
            };
            let frame = Message::Raft { message, root_ms: state.root_word_ms() };
            let sent = if stale_backlog {
                Ok(write_message(&mut stream, &frame).await) // PLANTED BUG: no send deadline
            } else {
                tokio::time::timeout(SEND_DEADLINE, write_message(&mut stream, &frame)).await
            };
            let failed = match sent {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("the peer read nothing for {SEND_DEADLINE:?}"),
            };
            tracing::debug!(peer, %address, error = %failed, "a root group member's connection broke");
            state.metrics.raft_messages_dropped.inc(); // the one whose send was cut
            discard_queued(&state, &mut outbox);
            break;
        }
    }
}

/// Drops the messages queued for a peer that cannot be reached. Raft resends what still
/// matters once the peer answers again (the leader probes it from where it stands), while a
/// backlog delivered late would carry appends the leader may since have compacted away —
/// stale, and in the way of the snapshot the peer needs.
fn discard_queued(state: &NodeState, outbox: &mut mpsc::Receiver<Queued>) {
    let mut dropped = 0;
    while outbox.try_recv().is_ok() {
        dropped += 1;
    }
    state.metrics.raft_messages_dropped.inc_by(dropped);
}

/// Dials a peer member and says who this member is.
async fn connect(
    state: &NodeState,
    me: u64,
    address: SocketAddr,
    deadline: Duration,
) -> Result<crate::replication::dial::SourceStream, String> {
    let mut stream = crate::replication::dial::dial(state, address, deadline).await.map_err(|e| e.to_string())?;
    let hello = ClientHello::new(state.node_id, state.config.database_id, 0, Want::Raft { member: me });
    write_message(&mut stream, &Message::Hello(hello)).await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(deadline, read_message(&mut stream)).await {
        Ok(Ok(Some(Message::Welcome { .. }))) => Ok(stream),
        Ok(Ok(Some(Message::Refused { reason, detail }))) => Err(format!("refused ({reason}): {detail}")),
        Ok(Ok(Some(other))) => Err(format!("answered a Raft hello with a {} frame", other.frame_type())),
        Ok(Ok(None)) => Err("closed the connection after the hello".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer to the hello within {deadline:?}")),
    }
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;

    /// A peer that welcomes the link and then reads nothing more (a paused process: its socket
    /// buffer fills) is dropped after [`SEND_DEADLINE`] and dialled again; what queued for it is
    /// dropped, not delivered late. On real sockets, where the kernel's buffers fill; under the
    /// simulator the carried madsim patch's TCP windows push back the same way, and a Raft
    /// scenario's paused member meets this deadline there.
    #[tokio::test]
    async fn a_peer_that_stops_reading_is_cut_and_dialled_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let state = super::super::test_root_state();
        let (outbox, rx) = mpsc::channel(1 << 16);
        let budget = crate::root::queues::ByteBudget::new(usize::MAX >> 4, state.raft_queued_bytes.clone());
        let sender = tokio::spawn(send_to_peer(state.clone(), 1, 2, address, rx));

        // The paused peer: answers the hello, then never reads again (and keeps the socket).
        let (mut first, _) = listener.accept().await.unwrap();
        assert!(matches!(read_message(&mut first).await.unwrap(), Some(Message::Hello(_))));
        let welcome = Message::Welcome {
            server_id: 2,
            db_id: state.config.database_id,
            applied_index: 0,
            first_retained_index: 1,
            root_ms: 0,
        };
        write_message(&mut first, &welcome).await.unwrap();
        // Far more than any socket buffer holds: the sender's write blocks.
        for _ in 0..1024 {
            let held = budget.try_hold(64 << 10).expect("a budget far past the test's bytes");
            outbox.send((tokio::time::Instant::now(), vec![7; 64 << 10], held)).await.unwrap();
        }
        // The sender gives up on it and dials again, however long the machine takes to get there
        // (the bound is for a broken build, not a slow one).
        let again = tokio::time::timeout(Duration::from_secs(120), listener.accept()).await;
        assert!(again.is_ok(), "no new connection after the peer stopped reading: the send blocks for ever");
        assert!(state.metrics.raft_messages_dropped.get() > 0, "what queued for the stalled peer is dropped");
        state.lifecycle.send_replace(Lifecycle::Draining);
        sender.await.unwrap();
        drop(first);
    }
}
