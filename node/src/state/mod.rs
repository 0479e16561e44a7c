//! [`NodeState`]: what every task of one node shares — the store behind its lock, the applied
//! index, upstream health, fault points, metrics and counters — and the node's read backend
//! for memcached.
//!
//! Guarantees: the store lock is never held across an `.await` (store operations are
//! synchronous; simulated disk latency is slept before taking it), and reads are refused, not
//! answered empty, while a replica that started empty has not yet caught up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::config::{NodeConfig, Role};
use crate::connections::{Connections, Lifecycle};
use crate::fault_points::{FaultPoint, FaultPoints};
use crate::memcached::{ReadBackend, ReadCounters};
use crate::metrics::Metrics;
use crate::observe::{NodeEvent, NodeObserver};
use crate::replication::protocol::{ClientHello, PROTOCOL_VERSION, Want};
use crate::store::Store;
use crate::store::faults::IoOp;
use crate::tls::Tls;

mod disk;
mod upstream;
pub use disk::{DiskModel, DiskOp, PageAccess};

/// Reports a lasting fault point's end when dropped.
struct FaultPointOver<'a>(&'a NodeState, FaultPoint);

impl Drop for FaultPointOver<'_> {
    fn drop(&mut self) {
        self.0.fault_point_over(self.1);
    }
}

/// How long a commit stalls when the `SlowCommit` fault point fires.
const SLOW_COMMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a harness attaches to a node it starts; the default, nothing, is a plain real node. The
/// real binary attaches only an observer (`--events`); the simulator attaches all three.
#[derive(Clone, Debug, Default)]
pub struct SimHooks {
    /// A disk model charging every store operation (and failing them, as the fault says).
    pub disk: Option<Arc<dyn DiskModel>>,
    /// Told what the node does, as it does it.
    pub observer: Option<Arc<dyn NodeObserver>>,
    /// The node's fault points may fire (under the simulator only; see `crate::fault_points`).
    pub fault_points: bool,
}

/// State shared by every task of one node.
#[derive(Debug)]
pub struct NodeState {
    pub config: NodeConfig,
    /// Random per process: the handshake's anti-self-replication id.
    pub node_id: u128,
    /// Read-locked by reads (which run on every runtime worker at once), write-locked by applies.
    store: RwLock<Store>,
    applied: watch::Sender<u64>,
    /// The root stamp of the newest applied entry (0 before the first).
    newest_entry_ms: AtomicU64,
    /// The root's clock as this node reckons it: what stamps are aged against (`crate::clock`).
    pub root_clock: crate::clock::RootClock,
    /// When this process started, by the monotonic clock (lag of a node counts from here at
    /// most: one that just started has not had time to fall behind).
    started: tokio::time::Instant,
    /// Whether this node currently follows a source (always true on the root).
    upstream_ok: std::sync::atomic::AtomicBool,
    /// Whether a snapshot transfer is under way with a chunk stored and more to come.
    transferring: std::sync::atomic::AtomicBool,
    /// Whether a replication source has welcomed this process yet.
    followed_a_source: std::sync::atomic::AtomicBool,
    /// Whether this replica found a damaged value and must re-bootstrap.
    damaged: std::sync::atomic::AtomicBool,
    /// Which fault points this process has switched on (see `fault_points`).
    fault_points: FaultPoints,
    /// When this process last applied an entry: monotonic ms since `started`, plus one (0: not
    /// yet).
    applied_at_ms: AtomicU64,
    /// When the followed source was last heard from (any frame): monotonic ms since `started`,
    /// plus one (0: never).
    source_heard_ms: AtomicU64,
    /// What the followed source's last keepalive said: 0 healthy, else its recovery hops.
    source_hops: std::sync::atomic::AtomicU8,
    pub metrics: Metrics,
    pub read_counters: ReadCounters,
    /// Simulated disk latency and failure; None on a real disk.
    disk: Option<Arc<dyn DiskModel>>,
    /// The simulated disk a memory store lives on, so a snapshot installs onto it.
    memory_disk: Option<crate::store::MemDisk>,
    /// Who is told what this node did (the simulator's recorder); None in the real binary.
    observer: Option<Arc<dyn NodeObserver>>,
    /// Whether reads are served: false only while a replica that started with an empty store
    /// has not yet caught up with a source once (it would answer with nothing, or with data
    /// older than what its clients read before its disk was replaced).
    ready: std::sync::atomic::AtomicBool,
    /// The listeners' caps and counters.
    pub connections: Connections,
    /// The certificates in use, with `[tls]` set.
    pub tls: Option<Tls>,
    /// Serving, draining or stopped; only `Node::shutdown` moves it.
    pub(crate) lifecycle: watch::Sender<Lifecycle>,
    /// A root group member's consensus inbox: (from member, encoded Raft message, its share of
    /// the inbox's byte budget), and the budget. Set once, when the member's consensus starts;
    /// unset on every other node.
    pub(crate) raft_inbox:
        std::sync::OnceLock<(tokio::sync::mpsc::Sender<crate::root::RaftInbound>, crate::root::queues::ByteBudget)>,
    /// Bytes of Raft messages queued in this member's inbox and its peers' outboxes
    /// (`root::queues`), counted in [`buffer_bytes`](Self::buffer_bytes).
    pub(crate) raft_queued_bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// A root group member's last reported term, role and leader; None before its consensus
    /// reported one, and on every other node.
    raft_view: std::sync::Mutex<Option<RaftView>>,
    /// A root group member's configuration as its consensus applied it (None: not a member,
    /// or not started yet).
    raft_configuration: std::sync::Mutex<Option<crate::consensus::Configuration>>,
    /// A root's producers and their buckets (none on a replica).
    pub quotas: crate::root::quota::Quotas,
}

/// A root group member's view of its group, as its consensus last reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftView {
    pub term: u64,
    pub role: crate::consensus::Role,
    /// The member it knows leads (0: none known).
    pub leader: u64,
    /// It leads and has applied everything committed before its term: it may take writes (and
    /// spend producers' quotas) now.
    pub serving: bool,
    /// It is not taking part in its group now, and why: writes are refused ("not applied")
    /// until it is back, whatever its last role.
    pub paused: Option<crate::consensus::Pause>,
}

impl NodeState {
    pub fn new(config: NodeConfig, store: Store, node_id: u128) -> Arc<NodeState> {
        NodeState::with_disk(config, store, node_id, None, SimHooks::default(), None)
    }

    pub(crate) fn with_disk(
        config: NodeConfig,
        store: Store,
        node_id: u128,
        memory_disk: Option<crate::store::MemDisk>,
        hooks: SimHooks,
        tls: Option<Tls>,
    ) -> Arc<NodeState> {
        let SimHooks { disk, observer, fault_points } = hooks;
        // A replica serves reads at once only from a store it had caught up with before: one
        // that started empty and has not caught up since (its `catching-up` marker is there)
        // holds whatever a source gave it first, maybe an old state from one that was behind.
        let catching_up = catching_up_marker(&config);
        let ready = config.role == Role::Root || (store.applied_index() > 0 && !catching_up.exists());
        if config.role == Role::Replica
            && store.applied_index() == 0
            && let Err(e) = crate::store::snapshot::write_synced(
                &catching_up,
                b"this replica started empty and has not caught up: no reads at start\n",
            )
        {
            tracing::error!(marker = %catching_up.display(), error = %e, "could not record that this replica is catching up: a restart before it has would serve reads from a partial store");
        }
        let (applied, _) = watch::channel(store.applied_index());
        let metrics = Metrics::default();
        // The other members' hosts: their Raft links come first at this member's full
        // replication listener (a member dials from the host it listens on).
        let members = config.root.as_ref().map_or_else(Default::default, |root| {
            root.members.iter().filter(|m| Some(m.id) != root.member_id).map(|m| m.replication.ip()).collect()
        });
        let heir_uncounted = config.planted().connections_heir_uncounted;
        let connections = Connections::new(&config.connections, members, &metrics, heir_uncounted);
        let quotas = crate::root::quota::Quotas::new(config.root.as_ref().map_or(&[], |root| &root.producers[..]));
        let root_clock = crate::clock::RootClock::new(config.planted().trust_own_wall_clock);
        let state = Arc::new(NodeState {
            config,
            node_id,
            store: RwLock::new(store),
            applied,
            newest_entry_ms: AtomicU64::new(0),
            root_clock,
            started: tokio::time::Instant::now(),
            upstream_ok: std::sync::atomic::AtomicBool::new(true),
            source_heard_ms: AtomicU64::new(0),
            applied_at_ms: AtomicU64::new(0),
            fault_points: FaultPoints::new(fault_points),
            transferring: std::sync::atomic::AtomicBool::new(false),
            followed_a_source: std::sync::atomic::AtomicBool::new(false),
            damaged: std::sync::atomic::AtomicBool::new(false),
            source_hops: std::sync::atomic::AtomicU8::new(0),
            metrics,
            read_counters: ReadCounters::default(),
            disk,
            memory_disk,
            observer,
            ready: std::sync::atomic::AtomicBool::new(ready),
            connections,
            tls,
            lifecycle: watch::Sender::new(Lifecycle::Serving),
            raft_inbox: std::sync::OnceLock::new(),
            raft_queued_bytes: std::sync::Arc::default(),
            raft_view: std::sync::Mutex::new(None),
            raft_configuration: std::sync::Mutex::new(None),
            quotas,
        });
        state.after_apply();
        state
    }

    /// Runs `f` with the store locked. Never call it while holding another lock, and never
    /// `.await` inside `f`.
    pub fn with_store<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        // A panic inside `f` cannot leave the store half-changed: a commit is atomic.
        let mut store = self.store.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut store)
    }

    /// Runs `f` with the store read-locked: beside other reads, never beside a change. The same
    /// rules as [`with_store`](Self::with_store).
    pub fn read_store<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        let store = self.store.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&store)
    }

    /// Charges a store operation to the simulated disk (nothing on a real one). Call it before
    /// the operation, outside [`with_store`](Self::with_store).
    pub async fn disk_io(&self, op: DiskOp) {
        if matches!(op, DiskOp::Commit { .. }) && self.fault_point(FaultPoint::SlowCommit) {
            // FAULT POINT: a commit stalls for seconds, as behind a burst of other writes. Its
            // end is reported however the stall ends (also when the process dies in it).
            let _over = FaultPointOver(self, FaultPoint::SlowCommit);
            tokio::time::sleep(SLOW_COMMIT).await;
        }
        if let Some(disk) = &self.disk {
            let latency = disk.charge(op);
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
        }
    }

    /// Charges the pages an apply of `ops` touches to the simulated disk's cache model (nothing
    /// on a real disk). Call it before the apply, outside [`with_store`](Self::with_store).
    pub async fn pages_io<'a>(&self, ops: impl Iterator<Item = &'a crate::entry::Op>) {
        if let Some(disk) = &self.disk {
            let ops: Vec<&crate::entry::Op> = ops.collect();
            let latency = disk.charge_pages(PageAccess::Apply { ops: &ops });
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
        }
    }

    /// How this node opens its store: the configuration's options, on the simulator's disk (its
    /// I/O errors) when there is one.
    pub fn store_options(&self) -> crate::store::OpenOptions {
        crate::store::OpenOptions { io_faults: self.io_faults(), ..self.config.store_options() }
    }

    /// The simulated disk's I/O errors, if any (none on a real node).
    pub fn io_faults(&self) -> Option<Arc<dyn crate::store::faults::IoFaults>> {
        self.disk.clone().map(|disk| disk as Arc<dyn crate::store::faults::IoFaults>)
    }

    /// Settles the store after a failed commit, before a change: reopens it and reports the
    /// entries the failed commit turned out to hold as applied (see [`Store::settle`]). Call
    /// it inside [`with_store`](Self::with_store), before every apply.
    pub fn settle(&self, store: &mut Store) -> Result<(), crate::store::StoreError> {
        if !store.is_unsettled() {
            return Ok(());
        }
        let landed = store.settle()?;
        self.probe(crate::observe::Probe::StoreReopened);
        match (landed.first(), landed.last()) {
            (Some(first), Some(last)) => self.applied(first, last),
            _ => self.publish(store.applied_index()),
        }
        Ok(())
    }

    /// The simulated disk a memory store lives on, if any.
    pub fn memory_disk(&self) -> Option<&crate::store::MemDisk> {
        self.memory_disk.as_ref()
    }

    /// Whether reads are served (see the field's doc).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Marks the node caught up with a source: from now on it serves reads — once its newest
    /// entry is fresh (the root stamped it within `staleness_failover`). Caught up with a
    /// source that is itself behind (paused, cut off from the root, not yet aware of it) is not
    /// caught up: a replica that started empty (a new disk) would serve an old state to readers
    /// that read a newer one from it before. A root whose path is healthy stamps an entry every
    /// heartbeat, so a replica that has caught up on a healthy path always has one.
    pub fn set_ready(&self) {
        if self.is_ready() {
            return;
        }
        let age_ms = self.root_clock.age_ms(self.newest_entry_ms());
        if age_ms <= self.config.replication.staleness_failover.as_millis() as u64 {
            self.ready.store(true, Ordering::Relaxed);
            let marker = catching_up_marker(&self.config);
            if let Err(e) = std::fs::remove_file(&marker)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::error!(marker = %marker.display(), error = %e, "could not remove the catching-up marker: the next start waits to catch up again");
            }
        }
    }

    /// Tells the node's observer (the simulator's recorder) what it did; nobody in the real
    /// binary.
    /// The store met damage ([`StoreError::is_damage`](crate::store::StoreError::is_damage): a value failing its checksum, a corrupt
    /// engine block or log entry): counted, and a replica heals by re-bootstrapping (the root is
    /// the source of truth and cannot; its damaged keys answer errors until rewritten).
    ///
    /// The verdict outlives the process: a marker file beside the store
    /// ([`damage_marker`](Self::damage_marker)) is written at once and removed only by a
    /// verified install, so a replica restarted before it healed (a crash in the middle of the
    /// re-bootstrap) still knows its store is damaged, instead of following the log on top of it.
    pub fn found_damage(&self) {
        self.metrics.checksum_failures.inc();
        self.probe(crate::observe::Probe::ChecksumFailed);
        if self.heals_from_others() {
            self.must_bootstrap();
        }
    }

    /// Whether a damaged store here is replaced by another node's copy: a replica's from its
    /// sources, a root group member's from its peers. (A root of one has no one to copy.)
    fn heals_from_others(&self) -> bool {
        self.config.role == Role::Replica || self.config.root.as_ref().is_some_and(|root| root.is_group())
    }

    /// This root group member's store cannot be followed from: it forked from the group's log,
    /// or holds Raft state it cannot read. Like a damaged one, it is replaced by a peer's copy.
    pub fn forked(&self) {
        if self.heals_from_others() {
            self.must_bootstrap();
        }
    }

    /// This replica has no store it could serve (a snapshot swap failed and the old store
    /// could not be reopened): reads are refused and it bootstraps again.
    pub fn lost_store(&self) {
        self.ready.store(false, Ordering::Relaxed);
        self.must_bootstrap();
    }

    fn must_bootstrap(&self) {
        if !self.damaged.swap(true, Ordering::Relaxed) {
            let marker = self.damage_marker();
            let written = crate::store::faults::check_io(self.io_faults().as_ref(), IoOp::Write).and_then(|()| {
                crate::store::snapshot::write_synced(&marker, b"a stored value failed its checksum: re-bootstrap\n")
            });
            if let Err(e) = written {
                tracing::error!(marker = %marker.display(), error = %e, "could not record the damage on disk: a restart before the re-bootstrap would forget it until a read or scrub finds it again");
            }
        }
    }

    /// The file whose presence says this replica's store is damaged and must be replaced.
    pub fn damage_marker(&self) -> std::path::PathBuf {
        self.config.snapshot_dir().join("damaged")
    }

    /// At start-up: takes up a damage verdict an earlier process recorded and did not heal.
    pub fn recall_damage(&self) -> bool {
        let recorded = self.heals_from_others() && self.damage_marker().exists();
        if recorded {
            tracing::warn!(node = %self.config.name, "an earlier process found this store damaged and had not replaced it: re-bootstrapping");
            self.damaged.store(true, Ordering::Relaxed);
        }
        recorded
    }

    /// Whether this replica must re-bootstrap (see [`found_damage`](Self::found_damage)).
    pub fn is_damaged(&self) -> bool {
        self.damaged.load(Ordering::Relaxed)
    }

    /// The store was replaced by a verified snapshot: nothing damaged any more.
    pub fn healed(&self) {
        if self.damaged.swap(false, Ordering::Relaxed) {
            let marker = self.damage_marker();
            if let Err(e) = std::fs::remove_file(&marker)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::error!(marker = %marker.display(), error = %e, "could not remove the damage marker: the next start re-bootstraps once more");
            }
        }
    }

    /// Records that a replication source welcomed this process.
    pub fn set_followed_a_source(&self) {
        self.followed_a_source.store(true, Ordering::Relaxed);
    }

    /// Whether a replication source has welcomed this process yet.
    pub fn followed_a_source(&self) -> bool {
        self.followed_a_source.load(Ordering::Relaxed)
    }

    /// Records whether a snapshot transfer is under way, a chunk stored and more to come.
    pub fn set_transferring(&self, transferring: bool) {
        self.transferring.store(transferring, Ordering::Relaxed);
    }

    /// Whether this node is in the middle of a snapshot transfer (a fault may wait for it).
    pub fn is_transferring(&self) -> bool {
        self.transferring.load(Ordering::Relaxed)
    }

    /// Whether fault point `point` fires now (never in the real binary); a firing is a probe.
    /// A momentary point (a dropped connection, an early keepalive) is reported as starting
    /// and ending at once; a lasting one (a stalled commit) must be ended with
    /// [`fault_point_over`](Self::fault_point_over).
    pub fn fault_point(&self, point: FaultPoint) -> bool {
        let fires = self.fault_points.fires(point);
        if fires {
            self.probe(point.probe());
            if point.is_fault() {
                self.report(NodeEvent::FaultPoint { point, active: true });
                if !point.lasts() {
                    self.fault_point_over(point);
                }
            }
        }
        fires
    }

    /// A lasting fault point stopped misbehaving.
    pub fn fault_point_over(&self, point: FaultPoint) {
        self.report(NodeEvent::FaultPoint { point, active: false });
    }

    /// The hello this node opens a replication connection with: its id and database, asking
    /// for `want` after `last_index`, or after its applied index when `None`.
    pub fn hello(&self, want: Want, last_index: Option<u64>) -> ClientHello {
        let last_index = last_index.unwrap_or_else(|| self.read_store(|s| s.applied_index()));
        ClientHello {
            version: PROTOCOL_VERSION,
            client_id: self.node_id,
            db_id: self.config.database_id,
            last_index,
            stop_index: None,
            newest_only: false,
            want,
            root_ms: self.root_word_ms(),
        }
    }

    /// Counts `probe` with the observer (nothing in the real binary).
    pub fn probe(&self, probe: crate::observe::Probe) {
        self.report(NodeEvent::Reached(probe));
    }

    pub fn report(&self, event: NodeEvent) {
        if let Some(observer) = &self.observer {
            observer.observe(&self.config.name, event);
        }
    }

    /// Records a persisted resume position, which the simulator checks never runs ahead of what
    /// the node applied.
    pub fn cursor_persisted(&self, index: u64) {
        tracing::debug!(node = %self.config.name, index, "resume position persisted");
        self.report(NodeEvent::CursorPersisted { index });
    }

    /// Replaces the store (after a snapshot bootstrap).
    pub fn replace_store(&self, store: Store) {
        self.with_store(|current| *current = store);
        self.after_apply();
    }

    /// Records that `entries` (one commit's worth, in order) were applied: the event the
    /// simulator's checkers consume, the newest root timestamp (for lag), and a wake-up for
    /// everything waiting on new entries. Takes the entries so nothing is read back.
    ///
    /// Call it inside [`with_store`](Self::with_store), in the closure that committed them: two
    /// writers (the root's committer and heartbeat) publishing after the lock is released could
    /// publish out of order, and the applied index would step back.
    pub fn applied(&self, first: &crate::entry::LogEntry, last: &crate::entry::LogEntry) {
        // The planted `apply_without_gap_check` lets a source's stale entries in: stepping back
        // is then the bug the checkers are there to see, not a crash.
        assert!(
            last.index >= *self.applied.borrow() || self.config.planted().apply_without_gap_check,
            "the applied index steps back: {} after {}",
            last.index,
            *self.applied.borrow()
        );
        tracing::debug!(node = %self.config.name, first = first.index, last = last.index, hash = %last.hash, "applied");
        self.report(NodeEvent::Applied { first: first.index, last: last.index, hash: last.hash.to_string() });
        self.newest_entry_ms.store(last.timestamp_ms, Ordering::Relaxed);
        // A lower bound on the root's clock (a backlog's stamps are long past: they never pull
        // the reckoning back).
        self.root_clock.heard(last.timestamp_ms);
        self.applied_at_ms.store(self.running_ms() + 1, Ordering::Relaxed);
        self.publish(last.index);
    }

    /// Refreshes the gauges and wakes waiters from the store itself (start-up, a replaced store,
    /// a failed commit): reads the newest entry back for its timestamp.
    pub fn after_apply(&self) {
        let (applied, newest_ms) = self.read_store(|store| (store.applied_index(), newest_timestamp(store)));
        if let Some(ms) = newest_ms {
            self.newest_entry_ms.store(ms, Ordering::Relaxed);
            // A root's stamps carry on from its store's newest, whatever its wall clock did
            // while it was down.
            if self.config.role == Role::Root {
                self.root_clock.heard(ms);
            }
        }
        self.publish(applied);
    }

    fn publish(&self, applied: u64) {
        self.metrics.applied_index.set(applied as i64);
        self.applied.send_replace(applied);
    }

    /// Whoever watches this node (the simulator's recorder); None in the real binary.
    pub(crate) fn observer(&self) -> Option<Arc<dyn NodeObserver>> {
        self.observer.clone()
    }

    pub fn subscribe_applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Where the node is in its life (see [`Lifecycle`]).
    /// This root group member's view of its group (None: not a member, or not reported yet).
    pub fn raft_view(&self) -> Option<RaftView> {
        *self.raft_view.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records what the member's consensus reported.
    pub(crate) fn set_raft_view(&self, view: RaftView) {
        *self.raft_view.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(view);
    }

    /// This root group member's configuration of its group (None: not a member, or not
    /// started yet).
    pub fn raft_configuration(&self) -> Option<crate::consensus::Configuration> {
        self.raft_configuration.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub(crate) fn set_raft_configuration(&self, configuration: crate::consensus::Configuration) {
        *self.raft_configuration.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(configuration);
    }

    pub fn lifecycle(&self) -> watch::Receiver<Lifecycle> {
        self.lifecycle.subscribe()
    }

    /// Memory the node holds in buffers, for the memory budget's `buffers` component: the open
    /// connections' buffers ([`Connections::buffer_bytes`]), the key and value bytes of the
    /// writes waiting for the root's next commit, and a root group member's queued Raft messages.
    pub fn buffer_bytes(&self) -> u64 {
        let queued = u64::try_from(self.metrics.write_queue_bytes.get()).unwrap_or(0);
        let raft = self.raft_queued_bytes.load(std::sync::atomic::Ordering::Relaxed);
        self.connections.buffer_bytes() + queued + raft
    }
}

fn newest_timestamp(store: &Store) -> Option<u64> {
    let applied = store.applied_index();
    if applied == 0 || applied < store.first_retained_index() {
        return None;
    }
    match store.read_log_after(applied - 1, crate::store::LogReadLimits { entries_max: 1, bytes_max: usize::MAX }) {
        Ok(crate::store::LogRead::Entries(entries)) => entries.first().map(|e| e.timestamp_ms),
        _ => None,
    }
}

impl ReadBackend for NodeState {
    fn get_each(&self, keys: &[&[u8]], found: &mut dyn FnMut(usize, Option<&[u8]>) -> bool) -> Result<(), String> {
        if !self.is_ready() {
            return Err("not ready: this replica started empty and is still catching up".into());
        }
        let result = self.read_store(|store| store.get_each(keys, found));
        result.map_err(|e| {
            if e.is_damage() {
                self.found_damage();
            }
            e.to_string()
        })
    }

    fn read_latency(&self, keys: &[&[u8]]) -> std::time::Duration {
        self.disk.as_ref().map_or(std::time::Duration::ZERO, |disk| disk.charge_pages(PageAccess::Get { keys }))
    }

    fn cas_token(&self) -> u64 {
        *self.applied.borrow()
    }

    fn stats(&self) -> Vec<(String, String)> {
        let (applied, first) = self.read_store(|s| (s.applied_index(), s.first_retained_index()));
        vec![
            ("qs_node".into(), self.config.name.clone()),
            ("qs_applied_index".into(), applied.to_string()),
            ("qs_first_retained_index".into(), first.to_string()),
            ("qs_lag_ms".into(), self.lag_ms().to_string()),
        ]
    }
}

/// The file whose presence says a replica started empty and has not caught up since (see
/// [`NodeState::set_ready`]): beside the damage marker, in the node's snapshot folder.
fn catching_up_marker(config: &NodeConfig) -> std::path::PathBuf {
    config.snapshot_dir().join("catching-up")
}
