//! The root's write path: producers' writes, batched into log entries, plus heartbeats.
//!
//! Guarantees:
//! - Writes that arrive within one batch window commit together, as one log entry (or a few,
//!   when the batch is over the entry limits), in one store commit.
//! - A write whose key already holds the same value (or, for a delete, holds nothing) is dropped
//!   before it reaches the log, and counted — the seed's fix for producers that rewrite
//!   identical values. A value that cannot be read (it fails its checksum) is never taken for
//!   the same value or for nothing: the write is logged, and repairs the key everywhere.
//! - A write is acknowledged only after the commit that holds it returned: an acknowledged write
//!   is durable on the root. A write whose commit failed is answered [`WriteError::Unknown`]:
//!   a failed commit may have reached the disk (an fsync error says nothing of what the device
//!   kept), so it is never called "not applied"; the store is reopened before the next commit
//!   and any entry that landed is replicated like every other.
//! - A heartbeat entry (an entry with no operations) is written at the heartbeat interval when no
//!   other entry was, so every replica can measure its lag from the newest entry's timestamp.
//! - At shutdown ([`Lifecycle::Draining`]) the batch being gathered is committed at once, the
//!   queue is closed — a write submitted after that is refused with "the root is shutting down"
//!   and never applied — and every write already queued is committed and answered before the
//!   committer ends. A write whose commit never ran (the committer cut at
//!   [`Lifecycle::Stopped`]) is answered with the same refusal: a refused write is never applied.
//! - The key and value bytes of every write from its submission until its batch is answered are
//!   on the `qs_write_queue_bytes` gauge, which the memory budget charges as `buffers`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::connections::{Lifecycle, reached};
use crate::entry::Op;
use crate::state::{DiskOp, NodeState};

mod batch;
mod catch_up;
mod group;
mod peers;
mod proposal;
pub(crate) mod queues;

/// A Raft message from a peer for this member's consensus: the peer's member id, the encoded
/// message, and its share of the inbox's byte budget.
pub(crate) type RaftInbound = (u64, Vec<u8>, queues::Held);
pub mod quota;

/// Most write requests gathered into one batch; the rest wait for the next window.
pub const WRITE_REQUESTS_PER_BATCH_MAX: usize = 10_000;
/// Requests queued for the committer before producers wait for room.
pub const WRITE_QUEUE_DEPTH_MAX: usize = 10_000;

/// Why a write was not acknowledged. Each kind says whether any of it may have been applied
/// ([`WriteError::may_have_applied`]) and whose fault it was ([`WriteError::client_at_fault`]),
/// which is what an HTTP front end answers from (4xx, 503 or 500).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// An operation the log cannot hold (a bad key, a value over the limit): refused before it
    /// joined a batch, so it can fail no other producer's write.
    #[error("{0}")]
    Invalid(crate::entry::EntryError),
    /// The root is shutting down; the write was not applied.
    #[error("the root is shutting down; the write was not applied")]
    ShuttingDown,
    /// The store could not be made ready to write (reopened after a failed commit).
    #[error("the store is not ready to write: {0}")]
    StoreNotReady(String),
    /// The store refused the commit before writing anything (a disk it knows is failing).
    #[error("commit refused: {0}")]
    Refused(String),
    /// Valid operations could not be sealed into entries: a bug in the root, never the
    /// producer's doing; nothing was applied.
    #[error("sealing the batch's entries failed: {0}")]
    Sealing(crate::entry::EntryError),
    /// The commit holding the write failed, and may or may not have reached the disk.
    #[error("commit failed, its outcome unknown: {0}")]
    Unknown(String),
    /// A root group member that does not lead: write to the leader at `leader` (its HTTP
    /// address), or, when no leader is known (an election is under way), retry shortly.
    /// Nothing was applied.
    #[error("this root group member does not lead; {}", leader.map_or("no leader is known: retry shortly".to_string(), |l| format!("the leader is at {l}")))]
    NotLeader { leader: Option<std::net::SocketAddr> },
    /// A root group member just elected leader, still applying what was committed before its
    /// term: retry shortly (within a round trip between members). Nothing was applied.
    #[error("this root group member was just elected and is applying its predecessor's last writes; retry shortly")]
    LeaderNotReady,
    /// A root group member that is not taking part in its group now (it heals its store, catches
    /// it up, or restarts its consensus after a failure): retry shortly, at any member. Nothing
    /// was applied.
    #[error("this root group member is {}; the write was not applied: retry shortly", .0.describe())]
    MemberPaused(crate::consensus::Pause),
    /// The leader proposed the write at Raft index `index`, but a new leader's entry took that
    /// index: the write was not applied.
    #[error("leadership changed: Raft index {index} holds another leader's entry; the write was not applied")]
    Overwritten { index: u64 },
    /// A read on a root group's leader that no majority confirmed in time: this member may
    /// have been deposed without knowing it yet. Retry shortly, at any member.
    #[error("this root group member could not confirm it still leads; the read was not answered: retry shortly")]
    ReadUnconfirmed,
}

impl WriteError {
    /// The producer sent something no root would accept; retrying it cannot help.
    pub fn client_at_fault(&self) -> bool {
        matches!(self, WriteError::Invalid(_))
    }

    /// Some of the write may be durable (and will then replicate): the producer must read
    /// before assuming either outcome.
    pub fn may_have_applied(&self) -> bool {
        matches!(self, WriteError::Unknown(_))
    }
}

/// One producer request: its operations, and where to send the index that made them durable.
#[derive(Debug)]
pub struct WriteRequest {
    pub ops: Vec<Op>,
    pub reply: oneshot::Sender<Result<WriteReceipt, WriteError>>,
    /// Its bytes on the write queue gauge, for as long as the request exists.
    _queued: QueuedBytes,
}

/// Bytes added to a gauge, taken off again when dropped.
#[derive(Debug)]
struct QueuedBytes {
    gauge: Gauge,
    bytes: i64,
}

impl QueuedBytes {
    fn new(gauge: &Gauge, bytes: u64) -> QueuedBytes {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        gauge.inc_by(bytes);
        QueuedBytes { gauge: gauge.clone(), bytes }
    }
}

impl Drop for QueuedBytes {
    fn drop(&mut self) {
        self.gauge.dec_by(self.bytes);
    }
}

/// What a producer learns about its committed write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteReceipt {
    /// The root's applied index after the commit that holds the write.
    pub index: u64,
    /// How many of the request's operations were dropped as identical rewrites.
    pub identical_dropped: usize,
}

/// Handle producers use to submit writes.
#[derive(Clone, Debug)]
pub struct WriteQueue {
    requests: mpsc::Sender<WriteRequest>,
    queued_bytes: Gauge,
    /// A root group member's consensus, which confirms reads (None: a root of one).
    reads: Option<mpsc::Sender<group::ReadReply>>,
    /// A root group member's consensus, which makes membership changes (None: a root of one).
    members: Option<mpsc::Sender<group::MembershipRequest>>,
}

pub use group::MembershipRefused;

/// How long an operator's membership change waits to be made: a change of several voters takes
/// two commits (into joint consensus and out), and an election may come between.
pub const MEMBERSHIP_CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

impl WriteQueue {
    /// Waits until a read of this root's store may be answered: at once on a root of one; on
    /// a root group's leader, once it confirmed it still leads and applied what the group had
    /// committed then (see `group::reads`), so that a member deposed without knowing it never
    /// answers a read that misses what the new leader acknowledged. An `Err` says where to
    /// read instead, as for a write (nothing was read).
    pub async fn confirm_read(&self) -> Result<(), WriteError> {
        let Some(reads) = &self.reads else { return Ok(()) };
        let (reply, confirmed) = oneshot::channel();
        reads.send(reply).await.map_err(|_| WriteError::ShuttingDown)?;
        match tokio::time::timeout(group::READ_CONFIRM_TIMEOUT, confirmed).await {
            Ok(Ok(answer)) => answer,
            // Dropped unanswered: the consensus ended (the node drains).
            Ok(Err(_)) => Err(WriteError::ShuttingDown),
            Err(_) => Err(WriteError::ReadUnconfirmed),
        }
    }

    /// Asks the group for `change` of its voters and waits until this member applied the
    /// configuration it made (see `group::membership`), up to [`MEMBERSHIP_CHANGE_TIMEOUT`]. A
    /// root of one has no group to change.
    pub async fn change_membership(
        &self,
        change: crate::consensus::MembershipChange,
    ) -> Result<crate::consensus::Configuration, MembershipRefused> {
        let Some(members) = &self.members else {
            return Err(MembershipRefused::Unknown("this root is not a root group member".into()));
        };
        let shutting_down = || MembershipRefused::Unknown("the node is shutting down".into());
        let (reply, made) = oneshot::channel();
        members.send(group::MembershipRequest { change, reply }).await.map_err(|_| shutting_down())?;
        match tokio::time::timeout(MEMBERSHIP_CHANGE_TIMEOUT, made).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(shutting_down()),
            Err(_) => Err(MembershipRefused::Unknown(format!(
                "not made within {MEMBERSHIP_CHANGE_TIMEOUT:?} (the group may be electing a leader)"
            ))),
        }
    }

    /// Submits `ops` and waits until they are durable. An `Err` says whether they may have been
    /// applied ([`WriteError::may_have_applied`]). Every operation is validated first, so one
    /// producer's bad operation never fails the batch it would have shared with others.
    pub async fn write(&self, ops: Vec<Op>) -> Result<WriteReceipt, WriteError> {
        for op in &ops {
            op.validate().map_err(WriteError::Invalid)?;
        }
        let (reply, receipt) = oneshot::channel();
        let queued = QueuedBytes::new(&self.queued_bytes, ops.iter().map(Op::logical_bytes).sum());
        let request = WriteRequest { ops, reply, _queued: queued };
        self.requests.send(request).await.map_err(|_| WriteError::ShuttingDown)?;
        // The sender is dropped unanswered only when the committer ended before committing it.
        receipt.await.map_err(|_| WriteError::ShuttingDown)?
    }
}

/// The root's write-path tasks.
#[derive(Debug)]
pub struct RootTasks {
    /// Ends once the node is draining and every queued write is answered.
    pub committer: JoinHandle<()>,
    /// Ends once the node is draining: the heartbeat, or a root group member's consensus.
    pub heartbeat: JoinHandle<()>,
}

/// Starts the committer and heartbeat tasks; returns the queue producers write into.
pub fn start(state: Arc<NodeState>, batch_window: Duration, heartbeat_interval: Duration) -> (WriteQueue, RootTasks) {
    restore_quotas(&state);
    let (tx, rx) = mpsc::channel(WRITE_QUEUE_DEPTH_MAX);
    let queue =
        WriteQueue { requests: tx, queued_bytes: state.metrics.write_queue_bytes.clone(), reads: None, members: None };
    let committer = tokio::spawn(run_committer(state.clone(), rx, batch_window, Sink::Store));
    let heartbeat = tokio::spawn(run_heartbeat(state, heartbeat_interval));
    (queue, RootTasks { committer, heartbeat })
}

/// [`start`] for a member of a root group (`[[root.members]]`): the committer's batches go to
/// the member's consensus (see `group`), which also proposes the heartbeats; `heartbeat` is
/// the consensus task. Fails when the member's Raft state in the store cannot be read back.
pub fn start_group(
    state: Arc<NodeState>,
    root: &crate::config::RootConfig,
) -> Result<(WriteQueue, RootTasks), crate::consensus::MemberError> {
    let (tx, rx) = mpsc::channel(WRITE_QUEUE_DEPTH_MAX);
    restore_quotas(&state);
    let (channels, consensus) = group::start(state.clone(), root)?;
    let queue = WriteQueue {
        requests: tx,
        queued_bytes: state.metrics.write_queue_bytes.clone(),
        reads: Some(channels.reads),
        members: Some(channels.members),
    };
    let committer = tokio::spawn(run_committer(state, rx, root.batch_window, Sink::Group(channels.batches)));
    Ok((queue, RootTasks { committer, heartbeat: consensus }))
}

/// Lowers the producers' buckets to what the store's last commit recorded, refilled since: a
/// restart hands no producer a second burst, nor does a member's store replaced by a peer's
/// copy (the copy's record is the peer's). A record that does not decode is logged and ignored
/// (the buckets keep what they hold: full at a start, as before records were kept).
fn restore_quotas(state: &NodeState) {
    match state.read_store(|store| store.quota_ledger()) {
        Ok(Some(bytes)) => adopt_quota_ledger(state, &bytes, "the store's"),
        Ok(None) => {}
        Err(e) => {
            tracing::error!(error = %e, "reading the producers' quota record failed: their buckets keep what they hold")
        }
    }
}

/// Lowers the producers' buckets to the encoded ledger `bytes` (`whose`, for the log), refilled
/// to the root's clock as this node reckons it — at a start, before it has heard its group, its
/// own wall clock.
fn adopt_quota_ledger(state: &NodeState, bytes: &[u8], whose: &str) {
    if state.config.planted().quotas_forgotten {
        return; // PLANTED BUG (legacy `quotas_forgotten`)
    }
    match quota::Ledger::decode(bytes) {
        Ok((ledger, _)) => state.quotas.adopt(&ledger, state.root_now_ms()),
        Err(e) => {
            tracing::error!(error = %e, whose, "a producers' quota ledger is damaged: their buckets keep what they hold")
        }
    }
}

/// On a root group member that does not lead now, the answer its writes get
/// ([`WriteError::NotLeader`]), so the HTTP API redirects a write before it spends the
/// producer's quota here; None on the leader and on a root of one. By the member's last
/// reported role: a write that slips past a change is refused by the consensus all the same.
pub fn not_leading(state: &NodeState) -> Option<WriteError> {
    let root = state.config.root.as_ref()?;
    root.member_id?;
    let view = state.raft_view();
    if let Some(pause) = view.and_then(|v| v.paused) {
        return Some(WriteError::MemberPaused(pause));
    }
    match view {
        Some(v) if v.role == crate::consensus::Role::Leader && v.serving => return None,
        // Just elected: it takes writes (and spends quota) once it applied what was committed
        // before its term, its predecessor's last quota ledger among it.
        Some(v) if v.role == crate::consensus::Role::Leader => return Some(WriteError::LeaderNotReady),
        _ => {}
    }
    let leader = view.and_then(|v| root.member(v.leader)).map(|m| m.http);
    Some(WriteError::NotLeader { leader })
}

/// Where the committer's batches go.
enum Sink {
    /// Committed to this root's store.
    Store,
    /// Proposed by this root group member's consensus, which answers them.
    Group(mpsc::Sender<Vec<WriteRequest>>),
}

impl Sink {
    async fn take(&self, state: &NodeState, batch: Vec<WriteRequest>) {
        match self {
            Sink::Store => commit(state, batch).await,
            // A consensus that ended (the member stopped) drops the batch unanswered: "the root
            // is shutting down; the write was not applied", which is so.
            Sink::Group(batches) => {
                let _ = batches.send(batch).await;
            }
        }
    }
}

async fn run_committer(
    state: Arc<NodeState>,
    mut rx: mpsc::Receiver<WriteRequest>,
    batch_window: Duration,
    sink: Sink,
) {
    let mut lifecycle = state.lifecycle();
    loop {
        let first = tokio::select! {
            // Fixed poll order: select!'s default random order draws from a process-wide
            // seed, which would make runs differ under one simulator seed.
            biased;
            () = reached(&mut lifecycle, Lifecycle::Draining) => break,
            first = rx.recv() => match first {
                Some(request) => request,
                None => return,
            },
        };
        let deadline = tokio::time::Instant::now() + batch_window;
        let mut batch = vec![first];
        while batch.len() < WRITE_REQUESTS_PER_BATCH_MAX {
            tokio::select! {
                biased;
                // Shutting down: the batch in flight commits now rather than at its window's end.
                () = reached(&mut lifecycle, Lifecycle::Draining) => break,
                next = rx.recv() => match next {
                    Some(request) => batch.push(request),
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        sink.take(&state, batch).await;
    }
    // Draining: no new writes; the ones already queued are committed and answered.
    rx.close();
    let mut drained = 0;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < WRITE_REQUESTS_PER_BATCH_MAX
            && let Ok(request) = rx.try_recv()
        {
            batch.push(request);
        }
        drained += batch.len();
        sink.take(&state, batch).await;
    }
    tracing::info!(node = %state.config.name, drained, "write queue drained: later writes are refused");
}

async fn commit(state: &NodeState, batch: Vec<WriteRequest>) {
    let bytes: u64 = batch.iter().flat_map(|r| r.ops.iter()).map(Op::logical_bytes).sum();
    state.disk_io(DiskOp::Commit { bytes }).await;
    state.pages_io(batch.iter().flat_map(|r| r.ops.iter())).await;
    commit_batch(state, batch);
}

async fn run_heartbeat(state: Arc<NodeState>, interval: Duration) {
    let mut lifecycle = state.lifecycle();
    loop {
        tokio::select! {
            biased;
            () = reached(&mut lifecycle, Lifecycle::Draining) => return,
            () = tokio::time::sleep(interval) => {}
        }
        // Idle by the monotonic clock: a wall clock that steps back must not silence the root.
        if state.since_applied() >= interval {
            state.disk_io(DiskOp::Commit { bytes: 0 }).await;
            let committed = state.with_store(|store| {
                state.settle(store)?;
                let entry = store.next_entry(state.root_now_ms(), Vec::new()).expect("an empty entry is in limits");
                store.apply(std::slice::from_ref(&entry))?;
                // Published under the store lock, so the committer cannot publish an older index
                // after this one.
                state.applied(&entry, &entry);
                Ok::<_, crate::store::StoreError>(())
            });
            if let Err(e) = committed {
                tracing::error!(error = %e, "heartbeat commit failed");
            }
        }
    }
}

/// Drops identical rewrites, packs the rest into entries, commits them in one apply, and
/// answers every request.
fn commit_batch(state: &NodeState, batch: Vec<WriteRequest>) {
    let timestamp_ms = state.root_now_ms();
    let outcome = state.with_store(|store| {
        // After a failed commit the head is unknown until the store is reopened.
        state.settle(store).map_err(|e| WriteError::StoreNotReady(e.to_string()))?;
        let requests: Vec<&[Op]> = batch.iter().map(|r| r.ops.as_slice()).collect();
        let judged = batch::judge(state, store, &requests, |_| None);
        let entries = batch::pack(store, timestamp_ms, judged.kept.clone()).map_err(WriteError::Sealing)?;
        // The buckets after the batch's requests took their tokens, committed with them.
        let quotas = state.quotas.ledger(timestamp_ms).to_bytes();
        store.apply_root(&entries, quotas).map_err(|e| match e {
            // Refused before anything was written.
            crate::store::StoreError::Refused(_) | crate::store::StoreError::Unsettled { .. } => {
                WriteError::Refused(e.to_string())
            }
            e => WriteError::Unknown(e.to_string()),
        })?;
        // Published under the store lock: the heartbeat cannot publish a newer index first, so
        // the applied index (and the cas token and gauge) never step back.
        if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
            state.applied(first, last);
        }
        Ok::<_, WriteError>((store.applied_index(), judged))
    });
    match outcome {
        Ok((index, judged)) => {
            judged.report(state);
            for (request, identical_dropped) in batch.into_iter().zip(judged.dropped) {
                state.metrics.writes_identical_dropped.inc_by(identical_dropped as u64);
                let _ = request.reply.send(Ok(WriteReceipt { index, identical_dropped }));
            }
        }
        Err(e) => {
            state.after_apply();
            tracing::error!(error = %e, "write batch commit failed");
            for request in batch {
                let _ = request.reply.send(Err(e.clone()));
            }
        }
    }
}

/// A root's state on a memory store, for the root's tests that talk to peers over real sockets
/// (its listen addresses are never bound).
#[cfg(all(test, not(madsim)))]
pub(crate) fn test_root_state() -> Arc<NodeState> {
    let config = crate::config::NodeConfig::parse(
        r#"
        name = "member-1"
        role = "root"
        database_id = "2a"
        [storage]
        engine = "memory"
        [listen]
        replication = "127.0.0.1:7001"
        memcached = "127.0.0.1:11001"
        http = "127.0.0.1:8001"
        [root]
        batch_window = "1ms"
        "#,
        "member-1.toml",
    )
    .unwrap();
    let location = crate::store::StoreLocation::Memory(crate::store::MemDisk::default());
    let store = crate::store::Store::open(&location, &config.store_options()).unwrap();
    NodeState::new(config, store, 1)
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;
    use crate::config::NodeConfig;
    use crate::store::{MemDisk, Store, StoreLocation};

    const ROOT: &str = r#"
        name = "root"
        role = "root"
        database_id = "2a"
        [storage]
        engine = "memory"
        [listen]
        replication = "127.0.0.1:7000"
        memcached = "127.0.0.1:11000"
        http = "127.0.0.1:8000"
        [root]
        batch_window = "1ms"
        [[root.producers]]
        name = "dns"
        token = "dns-token-1"
        prefixes = ["dns:"]
        writes_per_s = 10
        burst = 20
    "#;

    fn set(key: &str, value: &str) -> Op {
        Op::Set { key: key.as_bytes().to_vec(), value: value.as_bytes().to_vec() }
    }

    /// A membership change the group does not make (no leader, say) is answered "outcome
    /// unknown" after MEMBERSHIP_CHANGE_TIMEOUT, at its shipped 10 s (what docs/operating.md
    /// tells an operator), and not before. On tokio's paused clock: no machine's speed counts.
    #[tokio::test(start_paused = true)]
    async fn a_change_never_made_is_answered_unknown_after_the_shipped_timeout() {
        assert_eq!(MEMBERSHIP_CHANGE_TIMEOUT, Duration::from_secs(10));
        let (requests, _) = mpsc::channel(1);
        let (members, mut held) = mpsc::channel(1);
        let queue = WriteQueue { requests, queued_bytes: Gauge::default(), reads: None, members: Some(members) };
        let asked = tokio::time::Instant::now();
        let change = crate::consensus::MembershipChange { add: vec![4], remove: vec![3] };
        let (answer, request) = tokio::join!(queue.change_membership(change), held.recv());
        assert_eq!(asked.elapsed(), MEMBERSHIP_CHANGE_TIMEOUT);
        let Err(MembershipRefused::Unknown(why)) = answer else { panic!("{answer:?}") };
        assert!(why.contains("not made within 10s"), "{why}");
        drop(request); // held unanswered the whole time
    }

    /// A stored value that fails its checksum is not "absent" and not "the same": a delete or
    /// an identical set of it is logged (and repairs it), never dropped while answered 200.
    #[tokio::test]
    async fn a_write_over_a_damaged_value_is_logged_not_dropped() {
        let config = NodeConfig::parse(ROOT, "root.toml").unwrap();
        let disk = MemDisk::default();
        let store = Store::open(&StoreLocation::Memory(disk.clone()), &config.store_options()).unwrap();
        let state = NodeState::new(config, store, 1);
        let (queue, _tasks) = start(state.clone(), Duration::from_millis(1), Duration::from_secs(3600));
        queue.write(vec![set("dns:a", "1"), set("dns:b", "2")]).await.unwrap();
        let same = queue.write(vec![set("dns:a", "1")]).await.unwrap();
        assert_eq!(same.identical_dropped, 1, "an identical rewrite of a sound value is dropped");

        assert!(disk.corrupt_value(b"dns:a") && disk.corrupt_value(b"dns:b"));
        let before = state.read_store(|s| s.applied_index());
        let deleted = queue.write(vec![Op::Delete { key: b"dns:a".to_vec() }]).await.unwrap();
        assert_eq!(deleted.identical_dropped, 0, "the delete of a damaged value is kept");
        assert_eq!(deleted.index, before + 1, "and logged");
        let rewritten = queue.write(vec![set("dns:b", "2")]).await.unwrap();
        assert_eq!((rewritten.identical_dropped, rewritten.index), (0, before + 2), "a set repairs it, logged");
        state.read_store(|s| {
            assert_eq!(s.get(b"dns:a").unwrap(), None);
            assert_eq!(s.get(b"dns:b").unwrap().as_deref(), Some(&b"2"[..]));
        });
        assert_eq!(state.metrics.checksum_failures.get(), 2, "each damaged read is counted");
    }

    /// A disk whose reads fail with EIO while its switch is on.
    #[derive(Debug, Default)]
    struct UnreadableDisk(std::sync::atomic::AtomicBool);

    impl crate::store::faults::IoFaults for UnreadableDisk {
        fn io_error(&self, op: crate::store::faults::IoOp) -> Option<crate::store::faults::IoFailure> {
            let fail = op == crate::store::faults::IoOp::Read && self.0.load(std::sync::atomic::Ordering::SeqCst);
            fail.then_some(crate::store::faults::IoFailure {
                error: crate::store::faults::DiskError::Eio,
                landed: false,
            })
        }
    }

    /// A key whose current value cannot be read is not an absent key: a delete of it is logged
    /// (its commit still lands), never dropped as an identical rewrite while answered 200.
    #[tokio::test]
    async fn a_delete_of_a_key_the_disk_cannot_read_is_logged_not_dropped() {
        let config = NodeConfig::parse(ROOT, "root.toml").unwrap();
        let disk = Arc::new(UnreadableDisk::default());
        let options = crate::store::OpenOptions { io_faults: Some(disk.clone()), ..config.store_options() };
        let store = Store::open(&StoreLocation::Memory(MemDisk::default()), &options).unwrap();
        let state = NodeState::new(config, store, 1);
        let (queue, _tasks) = start(state.clone(), Duration::from_millis(1), Duration::from_secs(3600));
        let written = queue.write(vec![set("dns:a", "1")]).await.unwrap();
        disk.0.store(true, std::sync::atomic::Ordering::SeqCst);
        let deleted = queue.write(vec![Op::Delete { key: b"dns:a".to_vec() }]).await.unwrap();
        assert_eq!((deleted.identical_dropped, deleted.index), (0, written.index + 1), "kept and logged");
        disk.0.store(false, std::sync::atomic::Ordering::SeqCst);
        state.read_store(|s| assert_eq!(s.get(b"dns:a").unwrap(), None, "the key is gone"));
        assert_eq!(state.metrics.checksum_failures.get(), 0, "an I/O error is not damage");
    }

    /// A disk that fails the next commit with EIO, the write landing anyway.
    #[derive(Debug, Default)]
    struct LandsThenFails(std::sync::Mutex<bool>);

    impl crate::store::faults::IoFaults for LandsThenFails {
        fn io_error(&self, op: crate::store::faults::IoOp) -> Option<crate::store::faults::IoFailure> {
            let fail = op == crate::store::faults::IoOp::Commit && std::mem::take(&mut *self.0.lock().unwrap());
            fail.then_some(crate::store::faults::IoFailure {
                error: crate::store::faults::DiskError::Eio,
                landed: true,
            })
        }
    }

    /// A commit that failed may have landed: its writes are answered "unknown" (500), never "not
    /// applied" (503), and the next write finds the landed entry and follows it.
    #[tokio::test]
    async fn a_failed_commit_is_answered_unknown_and_the_next_write_follows_what_landed() {
        let config = NodeConfig::parse(ROOT, "root.toml").unwrap();
        let disk = Arc::new(LandsThenFails::default());
        let options = crate::store::OpenOptions { io_faults: Some(disk.clone()), ..config.store_options() };
        let store = Store::open(&StoreLocation::Memory(MemDisk::default()), &options).unwrap();
        let state = NodeState::new(config, store, 1);
        let (queue, _tasks) = start(state.clone(), Duration::from_millis(1), Duration::from_secs(3600));
        let first = queue.write(vec![set("dns:a", "1")]).await.unwrap();
        *disk.0.lock().unwrap() = true;
        let failed = queue.write(vec![set("dns:b", "2")]).await.expect_err("the commit failed");
        assert!(matches!(failed, WriteError::Unknown(_)), "{failed:?}");
        let next = queue.write(vec![set("dns:c", "3")]).await.unwrap();
        assert_eq!(next.index, first.index + 2, "the landed entry keeps its index; the next write follows it");
        state.read_store(|s| {
            assert_eq!(s.get(b"dns:b").unwrap().as_deref(), Some(&b"2"[..]), "it landed");
            assert!(!s.is_unsettled());
        });
    }

    /// An operation no root would accept is the producer's fault (400) and fails only its own
    /// write: queued beside a valid write in the same batch window, the valid one commits.
    #[tokio::test]
    async fn an_invalid_operation_fails_only_its_own_write() {
        let config = NodeConfig::parse(ROOT, "root.toml").unwrap();
        let store = Store::open(&StoreLocation::Memory(MemDisk::default()), &config.store_options()).unwrap();
        let state = NodeState::new(config, store, 1);
        let (queue, _tasks) = start(state.clone(), Duration::from_millis(50), Duration::from_secs(3600));
        let too_big = Op::Set { key: b"dns:big".to_vec(), value: vec![b'x'; crate::limits::VALUE_BYTES_MAX + 1] };
        let (bad, good) = tokio::join!(queue.write(vec![too_big]), queue.write(vec![set("dns:ok", "1")]));
        let bad = bad.expect_err("a value over VALUE_BYTES_MAX is refused");
        assert!(matches!(bad, WriteError::Invalid(_)), "{bad:?}");
        assert!(bad.client_at_fault() && !bad.may_have_applied());
        assert!(bad.to_string().contains("VALUE_BYTES_MAX"), "{bad}");
        assert_eq!(good.expect("the valid write commits").index, 1);
        state.read_store(|s| assert_eq!(s.get(b"dns:big").unwrap(), None));
    }
}
