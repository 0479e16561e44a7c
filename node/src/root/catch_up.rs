//! A root group member catching its store up to a Raft snapshot: the case the seed calls hard,
//! where a member fell behind the leader's Raft log and must "fall back to asynchronous
//! replication to catch up before doing proper Raft synchronous writes".
//!
//! A member's Raft snapshot carries no data: it says which Raft index it stands for and where
//! the store stood there (the Quicksilver log's index and chain hash, a [`StorePoint`]). A
//! member that installs one brings its store to that point the way a replica follows a source:
//! it pulls the missing Quicksilver entries from a peer's log, up to the point and no further
//! (the replication protocol's stop index), every entry checked against the chain. A peer that
//! no longer holds them (its log collected) sends a copy of its whole store instead, which is
//! made this member's own before it is swapped in (the copy's Raft state is the peer's).
//!
//! Guarantees:
//! - **Nothing after the snapshot is applied before the store reached it**: the group calls
//!   [`catch_up`] before it applies any later entry, and again at start when the store is
//!   behind the snapshot its log begins after (a crash in the middle resumes, never restarts).
//! - **The point is checked, not trusted**: the store's chain hash at the snapshot's index must
//!   be the snapshot's, or the member stops as damaged (its store forked from the group).
//! - **A damaged store heals from a peer** ([`heal`]): a member whose read or scrub found a value
//!   failing its checksum copies a peer's store the same way, at or past what it applied.
//! - **Never past the point by the log**: the entries after it come through Raft; a store copy
//!   may be ahead, and then the member skips the committed entries the copy already holds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::timeout;

use super::peers::REDIAL_AFTER;
use crate::connections::{Lifecycle, reached};
use crate::consensus::{DiskStep, MemberError, RaftWrite, StorePoint};
use crate::replication::bootstrap::{RESUMES_IN_A_ROW_MAX, bootstrap_preparing};
use crate::replication::client::{ApplyFailed, apply_frame, decode_frame};
use crate::replication::protocol::{Message, Want, read_message, write_message};
use crate::state::{DiskOp, NodeState};

/// A snapshot's Raft index and the point its store must reach.
#[derive(Clone, Copy, Debug)]
pub(super) struct Target {
    pub raft_index: u64,
    pub point: StorePoint,
}

/// The other members' replication addresses, and the one a catch-up asks first: the last to
/// bring this member's store to a snapshot's point. A peer cut off from the leader is behind
/// every snapshot the leader sends; asked first at each, it would cost every round the
/// progress deadline, and a member sent snapshot after snapshot by a leader that compacts
/// faster than that would not rejoin.
#[derive(Debug)]
pub(super) struct Peers {
    addresses: Vec<SocketAddr>,
    first: usize,
}

impl Peers {
    pub(super) fn new(addresses: Vec<SocketAddr>) -> Peers {
        assert!(!addresses.is_empty(), "a root group member has peers");
        Peers { addresses, first: 0 }
    }

    fn current(&self) -> SocketAddr {
        self.addresses[self.first]
    }

    /// Leaves the current peer for the next in the roster's order.
    fn next(&mut self) {
        self.first = (self.first + 1) % self.addresses.len();
    }

    /// Every peer, the current one first.
    pub(super) fn in_order(&self) -> Vec<SocketAddr> {
        let (before, from) = self.addresses.split_at(self.first);
        from.iter().chain(before).copied().collect()
    }
}

/// How long a peer may stay silent during a pull before it is left for the next.
const SILENCE_MAX: Duration = Duration::from_secs(5);
/// How long a peer may keep a pull open without sending an entry, keepalives or not, before it
/// is left for the next: a peer that is itself behind the stop (cut off from the leader, its
/// own consensus paused) would otherwise hold this member for as long as it stays behind.
const PROGRESS_MAX: Duration = Duration::from_secs(10);

/// Brings the store to `target` from `peers` (tried in turn from the current one, each again
/// after [`REDIAL_AFTER`]; the one that brings it there stays current). Returns the Raft index the store then holds applied — the target's, or
/// past it when a peer's store copy was — or `None` when the node drains first. `own` is the
/// member's Raft state, written into a store copy before it is swapped in.
pub(super) async fn catch_up(
    state: &Arc<NodeState>,
    peers: &mut Peers,
    target: Target,
    own: &RaftWrite,
    lifecycle: &mut watch::Receiver<Lifecycle>,
) -> Result<Option<u64>, MemberError> {
    let point = target.point;
    tracing::info!(node = %state.config.name, raft_index = target.raft_index, log_index = point.log_index, "the root group member catches its store up to a snapshot");
    for attempt in 0.. {
        let (raft_applied, head, hash) = state
            .read_store(|s| Ok::<_, crate::store::StoreError>((s.raft_applied()?, s.applied_index(), s.chain_hash())))
            .map_err(MemberError::disk(DiskStep::ReadApplied))?;
        if raft_applied >= target.raft_index {
            if attempt > 0 {
                state.probe(crate::observe::Probe::RaftStoreCaughtUp); // by a copy of a peer's store
            }
            return Ok(Some(raft_applied));
        }
        if head > point.log_index {
            return Err(MemberError::Damaged(format!(
                "the store holds Quicksilver entry {head}, past entry {} that Raft entry {} leaves: it applied entries the group did not commit",
                point.log_index, target.raft_index
            )));
        }
        let skip = state.config.planted().raft_snapshot_without_catch_up;
        if head == point.log_index || skip {
            // PLANTED BUG (legacy `raft_snapshot_without_catch_up`): recorded as reached
            // wherever the store stands.
            if hash != point.hash && !skip {
                return Err(MemberError::Damaged(format!(
                    "the store's entry {head} has hash {hash}, the group's has {}: this member's log forked",
                    point.hash
                )));
            }
            state
                .with_store(|s| s.apply_raft(&[], target.raft_index, None))
                .map_err(MemberError::disk(DiskStep::RecordApplied { index: target.raft_index }))?;
            state.metrics.raft_applied_index.set(target.raft_index as i64);
            if !skip {
                state.probe(crate::observe::Probe::RaftStoreCaughtUp);
            }
            tracing::info!(node = %state.config.name, raft_index = target.raft_index, "the root group member's store caught up");
            return Ok(Some(target.raft_index));
        }
        let peer = peers.current();
        let pulled = tokio::select! {
            biased;
            () = reached(lifecycle, Lifecycle::Draining) => return Ok(None),
            pulled = pull(state, peer, point.log_index) => pulled,
        };
        match pulled {
            Ok(()) => {}
            Err(Pull::Store(e)) => return Err(MemberError::Disk { step: DiskStep::CatchUp, source: e }),
            Err(Pull::OutOfRetention { first_retained }) => {
                tracing::warn!(node = %state.config.name, %peer, first_retained, wanted = head + 1, "the peer no longer holds the entries this member lacks: copying its store");
                peers.next(); // its log is collected: the next catch-up asks another first
                if !copy_peer_store(state, peer, own, lifecycle).await {
                    return Ok(None);
                }
            }
            Err(Pull::Failed(e)) => {
                tracing::warn!(node = %state.config.name, %peer, error = %e, "catching up from a peer failed");
                peers.next();
                pause(lifecycle).await;
            }
        }
    }
    unreachable!("the attempts never run out")
}

/// Replaces a store found damaged (a value failed its checksum: bit rot) with a copy of a
/// peer's, made this member's own before it is swapped in, at or past what this store applied
/// (the bootstrap refuses a copy behind it: the leader waits for a peer that caught up). Tries
/// the peers in turn until one copy installs. Returns the Raft index the store then holds
/// applied, or `None` when the node drains first.
pub(super) async fn heal(
    state: &Arc<NodeState>,
    peers: &[SocketAddr],
    own: &RaftWrite,
    lifecycle: &mut watch::Receiver<Lifecycle>,
) -> Result<Option<u64>, MemberError> {
    tracing::warn!(node = %state.config.name, "the root group member's store is damaged: copying a peer's");
    let mut attempt = 0;
    while state.is_damaged() {
        let peer = peers[attempt % peers.len()];
        attempt += 1;
        if !copy_peer_store(state, peer, own, lifecycle).await {
            return Ok(None);
        }
    }
    let applied = state.read_store(|s| s.raft_applied()).map_err(MemberError::disk(DiskStep::ReadApplied))?;
    tracing::info!(node = %state.config.name, applied, "the root group member's store was replaced by a peer's copy");
    Ok(Some(applied))
}

/// Copies `peer`'s store in place of this one, made this member's own (`own`) before the swap;
/// a failed copy is logged and waited out. False when the node drains first.
async fn copy_peer_store(
    state: &NodeState,
    peer: SocketAddr,
    own: &RaftWrite,
    lifecycle: &mut watch::Receiver<Lifecycle>,
) -> bool {
    let voters: Vec<u64> = state.config.root.iter().flat_map(|root| root.first_voters()).collect();
    // The copy may have applied past the end of this member's own log: its state then gains a
    // snapshot record at the copy's applied index, so it restarts from the copy (see
    // `consensus::own_state_over_copy`).
    let prepare = |store: &mut crate::store::Store| {
        let copy = store.raft_records()?;
        let point = StorePoint { log_index: store.applied_index(), hash: store.chain_hash() };
        let own = crate::consensus::own_state_over_copy(own, &copy, &voters, point)
            .map_err(|e| crate::store::StoreError::CorruptMeta(e.to_string()))?;
        store.adopt_raft(&own)
    };
    // A transfer that broke off after storing chunks resumes from the same peer at once: each
    // attempt stores more, so this ends. Another peer's export is another snapshot, and asking
    // it would start again at chunk 0 — with a store of many chunks and transfers that keep
    // breaking off, a member turning from peer to peer never finished a copy.
    for resumed in 0.. {
        let copied = tokio::select! {
            biased;
            () = reached(lifecycle, Lifecycle::Draining) => return false,
            copied = bootstrap_preparing(state, peer, &prepare) => copied,
        };
        match copied {
            Ok(()) => return true,
            Err(e) if e.chunks_stored > 0 && resumed < RESUMES_IN_A_ROW_MAX => {
                tracing::warn!(node = %state.config.name, %peer, error = %e.reason, chunks_stored = e.chunks_stored, "copying a peer's store broke off: resuming it");
            }
            Err(e) => {
                tracing::warn!(node = %state.config.name, %peer, error = %e.reason, "copying a peer's store failed");
                pause(lifecycle).await;
                return true;
            }
        }
    }
    unreachable!("the resumes end in a copy or a failure")
}

async fn pause(lifecycle: &mut watch::Receiver<Lifecycle>) {
    tokio::select! {
        biased;
        () = reached(lifecycle, Lifecycle::Draining) => {}
        () = tokio::time::sleep(REDIAL_AFTER) => {}
    }
}

/// Why a pull ended before the store reached its stop.
enum Pull {
    /// The peer no longer holds the next entry.
    OutOfRetention { first_retained: u64 },
    /// The peer failed (unreachable, silent, refused, sent entries that do not chain): try
    /// another.
    Failed(String),
    /// This member's store failed: it restarts from it.
    Store(crate::store::StoreError),
}

/// Pulls the Quicksilver entries after the store's head up to `stop` from `peer`.
async fn pull(state: &NodeState, peer: SocketAddr, stop: u64) -> Result<(), Pull> {
    let mut stream =
        crate::replication::dial::dial(state, peer, SILENCE_MAX).await.map_err(|e| Pull::Failed(e.to_string()))?;
    let mut hello = state.hello(Want::Log, None);
    hello.stop_index = Some(stop);
    write_message(&mut stream, &Message::Hello(hello)).await.map_err(|e| Pull::Failed(format!("hello: {e}")))?;
    let mut progress_by = tokio::time::Instant::now() + PROGRESS_MAX;
    // PLANTED BUG (legacy `raft_catch_up_without_progress_deadline`): a peer that keeps the
    // pull open is followed however long it sends nothing.
    let progress_deadline = !state.config.planted().raft_catch_up_without_progress_deadline;
    loop {
        if progress_deadline && tokio::time::Instant::now() >= progress_by {
            return Err(Pull::Failed(format!(
                "sent no entry for {PROGRESS_MAX:?} while this member's store is behind entry {stop}: it lacks them"
            )));
        }
        let message = timeout(SILENCE_MAX, read_message(&mut stream))
            .await
            .map_err(|_| Pull::Failed(format!("silent for {SILENCE_MAX:?}")))?
            .map_err(|e| Pull::Failed(e.to_string()))?
            .ok_or_else(|| Pull::Failed("closed the connection before the stop".into()))?;
        match message {
            Message::Welcome { db_id, .. } if db_id != state.config.database_id => {
                return Err(Pull::Failed(format!("holds database {db_id}")));
            }
            Message::Welcome { .. } | Message::Keepalive { .. } => {}
            Message::Entries { entries, .. } => {
                let entries = decode_frame(entries).map_err(Pull::Failed)?;
                if let Some(past) = entries.iter().find(|e| e.index > stop) {
                    return Err(Pull::Failed(format!("sent entry {} past the stop at {stop}", past.index)));
                }
                let bytes: u64 = entries.iter().map(|e| e.logical_bytes()).sum();
                state.disk_io(DiskOp::Commit { bytes }).await;
                match apply_frame(state, &entries) {
                    Ok(()) => {}
                    Err(ApplyFailed::Refused(e)) => return Err(Pull::Failed(e.to_string())),
                    Err(ApplyFailed::Store(e)) => return Err(Pull::Store(e)),
                }
                if state.read_store(|s| s.applied_index()) >= stop {
                    return Ok(());
                }
                progress_by = tokio::time::Instant::now() + PROGRESS_MAX;
            }
            Message::OutOfRetention { first_retained, .. } => return Err(Pull::OutOfRetention { first_retained }),
            Message::Refused { reason, detail } => return Err(Pull::Failed(format!("refused ({reason}): {detail}"))),
            other => return Err(Pull::Failed(format!("sent a {} frame while streaming the log", other.frame_type()))),
        }
    }
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;
    use crate::replication::protocol::UpstreamStatus;

    #[test]
    fn the_peer_that_served_stays_first_and_a_failed_one_is_left_for_the_next() {
        let addresses: Vec<SocketAddr> =
            ["10.0.0.2:7000", "10.0.0.3:7000", "10.0.0.4:7000"].iter().map(|a| a.parse().unwrap()).collect();
        let mut peers = Peers::new(addresses.clone());
        assert_eq!(peers.current(), addresses[0]);
        peers.next();
        assert_eq!(peers.current(), addresses[1]);
        assert_eq!(peers.in_order(), [addresses[1], addresses[2], addresses[0]]);
        peers.next();
        peers.next();
        assert_eq!(peers.current(), addresses[0], "round the roster");
    }

    /// A peer that answers the pull and keeps it alive with keepalives but never sends an entry
    /// (it is behind the stop itself) is left after [`PROGRESS_MAX`], not followed for ever.
    /// Real sockets, the runtime's clock paused (it jumps to each next timer when idle).
    #[tokio::test(start_paused = true)]
    async fn a_peer_that_sends_only_keepalives_is_left() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = listener.local_addr().unwrap();
        let state = super::super::test_root_state();
        let db_id = state.config.database_id;
        let behind = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let Some(Message::Hello(_)) = read_message(&mut stream).await.unwrap() else { panic!("no hello") };
            let welcome =
                Message::Welcome { server_id: 2, db_id, applied_index: 0, first_retained_index: 1, root_ms: 0 };
            write_message(&mut stream, &welcome).await.unwrap();
            let keepalive = Message::Keepalive { applied_index: 0, upstream: UpstreamStatus::Healthy, root_ms: 0 };
            loop {
                if write_message(&mut stream, &keepalive).await.is_err() {
                    return; // the member left
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let started = tokio::time::Instant::now();
        let pulled = timeout(Duration::from_secs(3600), pull(&state, peer, 50)).await.expect("the pull ends");
        let Err(Pull::Failed(why)) = pulled else { panic!("a pull that got nothing succeeded") };
        assert!(why.contains("sent no entry"), "{why}");
        assert!(started.elapsed() >= PROGRESS_MAX, "left after {:?}", started.elapsed());
        behind.await.unwrap();
    }
}
