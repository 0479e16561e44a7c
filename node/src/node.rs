//! One running node: its store, its listeners and its background tasks, for either role.
//!
//! Guarantees:
//! - The store is behind one lock that is never held across an `.await`, so a slow disk stalls
//!   the operation that touches it, not the executor's other tasks' bookkeeping.
//! - Every listener serves connections on their own tasks: one slow or hostile client cannot
//!   stop another from being served.
//! - A replica that loses its upstream keeps serving reads and downstream replicas with what it
//!   has (the seed's cascading disconnect came from doing otherwise).
//! - All I/O and timing go through tokio (`madsim-tokio`), so the same code runs in the
//!   simulator.
//! - Each listener holds a bounded number of connections and times out idle and slow clients
//!   (see [`crate::connections`]).
//! - [`Node::shutdown`] stops accepting, lets the root commit the batch in flight and what was
//!   already queued (or abandons it, unacknowledged, past the drain timeout), closes every
//!   connection and then the store, within `connections.drain_timeout` plus a bounded grace.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{NodeConfig, Role};
use crate::connections::{Connections, Lifecycle, ListenerKind};
use crate::fault_points::{FaultPoint, FaultPoints};
use crate::memcached::{ReadBackend, ReadCounters};
use crate::metrics::Metrics;
use crate::observe::{NodeEvent, NodeObserver};
use crate::replication::protocol::UpstreamStatus;
use crate::replication::staleness::SOURCE_QUIET;
use crate::store::{Store, StoreError, StoreLocation};

/// What a store operation is, for a [`DiskModel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskOp {
    /// Opening the store at start-up (reads its head).
    Open,
    /// A read: a key, a range of the log, a snapshot export.
    Read,
    /// One atomic, synced commit of `bytes` logical bytes.
    Commit { bytes: u64 },
}

/// The simulator's seam for the disk: how long each store operation takes, and whether it
/// kills the process. A real node has none — its disk supplies both. Under the simulator the
/// returned latency is slept in simulated time before the operation (so a slow disk delays
/// exactly the tasks that touch it), and a model may panic to kill the node's process the way a
/// SIGBUS on a poisoned mmap page does.
pub trait DiskModel: Send + Sync + std::fmt::Debug {
    fn charge(&self, op: DiskOp) -> std::time::Duration;

    /// How long the pages one read or apply touches take to reach: the simulator's cache model
    /// charges a hit nothing and a miss a read on the disk. The default has no cache: a `get`
    /// costs one disk read, an apply nothing beyond its commit.
    fn charge_pages(&self, access: PageAccess<'_>) -> std::time::Duration {
        match access {
            PageAccess::Get { .. } => self.charge(DiskOp::Read),
            PageAccess::Apply { .. } => std::time::Duration::ZERO,
        }
    }
}

/// The keys a store operation touches, for a [`DiskModel`]'s cache model.
#[derive(Clone, Copy, Debug)]
pub enum PageAccess<'a> {
    /// One memcached `get`/`gets`: its keys in request order.
    Get { keys: &'a [&'a [u8]] },
    /// One apply (a root batch or a replicated frame): its operations in order.
    Apply { ops: &'a [&'a crate::entry::Op] },
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
    newest_entry_ms: AtomicU64,
    /// When this process started (lag of a node that holds no entry yet counts from here).
    started_ms: u64,
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
    /// When the followed source was last heard from (any frame), by this node's clock.
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
    /// Serving, draining or stopped; only [`Node::shutdown`] moves it.
    lifecycle: watch::Sender<Lifecycle>,
}

impl NodeState {
    pub fn new(config: NodeConfig, store: Store, node_id: u128) -> Arc<NodeState> {
        NodeState::with_disk(config, store, node_id, None, None, None, false)
    }

    fn with_disk(
        config: NodeConfig,
        store: Store,
        node_id: u128,
        disk: Option<Arc<dyn DiskModel>>,
        memory_disk: Option<crate::store::MemDisk>,
        observer: Option<Arc<dyn NodeObserver>>,
        fault_points: bool,
    ) -> Arc<NodeState> {
        let ready = config.role == Role::Root || store.applied_index() > 0;
        let (applied, _) = watch::channel(store.applied_index());
        let metrics = Metrics::default();
        let connections = Connections::new(&config.connections, &metrics);
        let state = Arc::new(NodeState {
            config,
            node_id,
            store: RwLock::new(store),
            applied,
            newest_entry_ms: AtomicU64::new(0),
            started_ms: crate::clock::unix_ms(),
            upstream_ok: std::sync::atomic::AtomicBool::new(true),
            source_heard_ms: AtomicU64::new(0),
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
            lifecycle: watch::Sender::new(Lifecycle::Serving),
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

    /// The simulated disk a memory store lives on, if any.
    pub fn memory_disk(&self) -> Option<&crate::store::MemDisk> {
        self.memory_disk.as_ref()
    }

    /// Whether reads are served (see the field's doc).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Marks the node caught up with a source: from now on it serves reads.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Tells the node's observer (the simulator's recorder) what it did; nobody in the real
    /// binary.
    /// The store met damage ([`StoreError::is_damage`]: a value failing its checksum, a corrupt
    /// engine block or log entry): counted, and a replica heals by re-bootstrapping (the root is
    /// the source of truth and cannot; its damaged keys answer errors until rewritten).
    pub fn found_damage(&self) {
        self.metrics.checksum_failures.inc();
        self.probe(crate::observe::Probe::ChecksumFailed);
        if self.config.role == Role::Replica {
            self.damaged.store(true, Ordering::Relaxed);
        }
    }

    /// Whether this replica must re-bootstrap (see [`found_damage`](Self::found_damage)).
    pub fn is_damaged(&self) -> bool {
        self.damaged.load(Ordering::Relaxed)
    }

    /// The store was replaced by a verified snapshot: nothing damaged any more.
    pub fn healed(&self) {
        self.damaged.store(false, Ordering::Relaxed);
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
    pub fn applied(&self, first: &crate::entry::LogEntry, last: &crate::entry::LogEntry) {
        tracing::debug!(node = %self.config.name, first = first.index, last = last.index, hash = %last.hash, "applied");
        self.report(NodeEvent::Applied { first: first.index, last: last.index, hash: last.hash.to_string() });
        self.newest_entry_ms.store(last.timestamp_ms, Ordering::Relaxed);
        self.publish(last.index);
    }

    /// Refreshes the gauges and wakes waiters from the store itself (start-up, a replaced store,
    /// a failed commit): reads the newest entry back for its timestamp.
    pub fn after_apply(&self) {
        let (applied, newest_ms) = self.read_store(|store| (store.applied_index(), newest_timestamp(store)));
        if let Some(ms) = newest_ms {
            self.newest_entry_ms.store(ms, Ordering::Relaxed);
        }
        self.publish(applied);
    }

    fn publish(&self, applied: u64) {
        self.metrics.applied_index.set(applied as i64);
        self.applied.send_replace(applied);
    }

    /// Root timestamp of the newest applied entry (0 before the first).
    pub fn newest_entry_ms(&self) -> u64 {
        self.newest_entry_ms.load(Ordering::Relaxed)
    }

    /// Replication lag: how old the newest applied entry is, by this node's clock.
    pub fn lag_ms(&self) -> u64 {
        match self.config.role {
            Role::Root => 0,
            // A replica holding no entry yet is as far behind as it has been running.
            Role::Replica => crate::clock::unix_ms().saturating_sub(self.newest_entry_ms().max(self.started_ms)),
        }
    }

    /// Records whether the replication client is following a source.
    pub fn set_upstream_ok(&self, ok: bool) {
        self.upstream_ok.store(ok, Ordering::Relaxed);
    }

    /// Records a frame from the followed source; `hops` is what its keepalive said (0 healthy),
    /// None for other frames (entries mean the source is delivering: its last word stands).
    pub fn heard_from_source(&self, hops: Option<u8>) {
        self.source_heard_ms.store(crate::clock::unix_ms(), Ordering::Relaxed);
        if let Some(hops) = hops {
            self.source_hops.store(hops, Ordering::Relaxed);
        }
    }

    /// What this node's keepalives say about its own path to the root (see
    /// [`UpstreamStatus`]): the root is always healthy; a replica is healthy while it follows a
    /// source heard from within [`SOURCE_QUIET`], that source says it is healthy, and its own
    /// lag is within `staleness_failover`.
    pub fn upstream_status(&self) -> UpstreamStatus {
        if self.config.role == Role::Root {
            return UpstreamStatus::Healthy;
        }
        let quiet = crate::clock::unix_ms().saturating_sub(self.source_heard_ms.load(Ordering::Relaxed))
            > SOURCE_QUIET.as_millis() as u64;
        let stale = self.lag_ms() > self.config.replication.staleness_failover.as_millis() as u64;
        let source_hops = self.source_hops.load(Ordering::Relaxed);
        if !self.upstream_ok.load(Ordering::Relaxed) || quiet {
            UpstreamStatus::Recovering { hops: 1 }
        } else if source_hops > 0 {
            UpstreamStatus::Recovering { hops: source_hops.saturating_add(1) }
        } else if stale {
            UpstreamStatus::Recovering { hops: 1 }
        } else {
            UpstreamStatus::Healthy
        }
    }

    /// PLANTED BUG support (legacy): whether this node refuses to serve downstream now — only
    /// when `legacy.stop_serving_when_upstream_lost` or `legacy.drop_downstream_while_reconnecting`
    /// is on and it has lost its upstream.
    pub fn legacy_refuses_downstream(&self) -> bool {
        let legacy = &self.config.legacy;
        (legacy.stop_serving_when_upstream_lost || legacy.drop_downstream_while_reconnecting)
            && !self.upstream_ok.load(Ordering::Relaxed)
    }

    pub fn subscribe_applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Where the node is in its life (see [`Lifecycle`]).
    pub fn lifecycle(&self) -> watch::Receiver<Lifecycle> {
        self.lifecycle.subscribe()
    }

    /// Memory the node holds in buffers, for the memory budget's `buffers` component: the open
    /// connections' buffers ([`Connections::buffer_bytes`]) plus the key and value bytes of the
    /// writes waiting for the root's next commit.
    pub fn buffer_bytes(&self) -> u64 {
        let queued = u64::try_from(self.metrics.write_queue_bytes.get()).unwrap_or(0);
        self.connections.buffer_bytes() + queued
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

/// Why a node did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("opening the store: {0}")]
    Store(#[from] StoreError),
    #[error("listening on {addr} ({what}): {source}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A started node: its state and its tasks.
#[derive(Debug)]
pub struct Node {
    pub state: Arc<NodeState>,
    /// The accept loops: they end when the node starts draining.
    listeners: Vec<JoinHandle<()>>,
    /// The root's committer and heartbeat.
    root: Option<crate::root::RootTasks>,
    /// Replication client and garbage collection: stopped by aborting them, which lands at an
    /// `.await`, never inside a store commit (commits are synchronous).
    background: Vec<JoinHandle<()>>,
}

/// How a shutdown went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Whether everything in flight finished within the drain timeout (else it was cut).
    pub drained: bool,
    /// Connections still open at the end of the drain, then cut.
    pub connections_cut: usize,
    /// Whether the store was closed (every task holding it had ended).
    pub store_closed: bool,
}

/// How long, after the drain, the node waits for cut tasks to let go of the store.
/// Reports a lasting fault point's end when dropped.
struct FaultPointOver<'a>(&'a NodeState, FaultPoint);

impl Drop for FaultPointOver<'_> {
    fn drop(&mut self) {
        self.0.fault_point_over(self.1);
    }
}

/// How long a commit stalls when the `SlowCommit` fault point fires.
const SLOW_COMMIT: std::time::Duration = std::time::Duration::from_secs(2);

const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Moves a damaged store directory to `<dir>.damaged` (replacing an earlier one) and returns
/// where it went. A memory store has no directory; its damage never stops it opening.
fn set_aside_damaged_store(location: &StoreLocation) -> Result<String, StoreError> {
    let (StoreLocation::Lmdb(dir) | StoreLocation::Rocksdb(dir)) = location else {
        return Ok("nowhere (a memory store)".into());
    };
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".damaged");
    let kept = dir.with_file_name(name);
    let io = |what: &str, e: std::io::Error| {
        StoreError::Engine(crate::store::EngineError::failed(location.kind(), format!("{what}: {e}")))
    };
    if kept.exists() {
        std::fs::remove_dir_all(&kept).map_err(|e| io(&format!("removing {}", kept.display()), e))?;
    }
    std::fs::rename(dir, &kept).map_err(|e| io(&format!("moving {} to {}", dir.display(), kept.display()), e))?;
    Ok(kept.display().to_string())
}

impl Node {
    /// Opens the store the configuration names, binds every listener, and starts the role's tasks.
    pub async fn start(config: NodeConfig, node_id: u128) -> Result<Node, StartError> {
        let location = StoreLocation::new(config.storage.engine, &config.storage.path);
        Node::start_on(config, &location, node_id).await
    }

    /// [`start`](Self::start) on a given store location: the simulator passes the `MemDisk`
    /// that outlives the node's process, so a restarted node finds its data again.
    pub async fn start_on(config: NodeConfig, location: &StoreLocation, node_id: u128) -> Result<Node, StartError> {
        Node::start_simulated(config, location, node_id, None, None, false).await
    }

    /// [`start_on`](Self::start_on) with a simulated disk model charging every store operation,
    /// an observer told what the node does, and (under the simulator only) its fault points on.
    pub async fn start_simulated(
        config: NodeConfig,
        location: &StoreLocation,
        node_id: u128,
        disk: Option<Arc<dyn DiskModel>>,
        observer: Option<Arc<dyn NodeObserver>>,
        fault_points: bool,
    ) -> Result<Node, StartError> {
        if let Some(disk) = &disk {
            let latency = disk.charge(DiskOp::Open);
            tokio::time::sleep(latency).await;
        }
        let (store, damaged_at_open) = match Store::open(location, &config.store_options()) {
            Err(e) if e.is_damage() && config.role == Role::Replica => {
                // A replica's store is a copy: set the damaged one aside (kept for a post-mortem,
                // replacing any earlier one) and start empty, to re-bootstrap from a source.
                let kept = set_aside_damaged_store(location).map_err(StartError::Store)?;
                tracing::error!(node = %config.name, error = %e, kept = %kept, "the store is damaged: set aside, starting empty to re-bootstrap");
                (Store::open(location, &config.store_options())?, true)
            }
            opened => (opened?, false),
        };
        tracing::info!(node = %config.name, role = ?config.role, applied = store.applied_index(), "store open");
        let memory_disk = match location {
            StoreLocation::Memory(disk) => Some(disk.clone()),
            _ => None,
        };
        let resume_from = store.applied_index();
        let state = NodeState::with_disk(config, store, node_id, disk, memory_disk, observer, fault_points);
        if damaged_at_open {
            state.found_damage();
        }
        if !state.config.legacy.cursor_written_at_disconnect && !state.config.legacy.cursor_written_before_apply {
            // The position is in the store, in the same commit as the data it covers.
            state.cursor_persisted(resume_from);
        }
        let bind = |what, addr| async move {
            TcpListener::bind(addr).await.map_err(|source| StartError::Listen { what, addr, source })
        };
        let listen = state.config.listen.clone();
        let replication = bind("replication", listen.replication).await?;
        let memcached = bind("memcached", listen.memcached).await?;
        let http = bind("http", listen.http).await?;

        let (writes, root) = match (&state.config.role, &state.config.root) {
            (Role::Root, Some(root)) => {
                let (writes, tasks) = crate::root::start(state.clone(), root.batch_window, root.heartbeat_interval);
                (Some(writes), Some(tasks))
            }
            _ => (None, None),
        };
        let mut background = Vec::new();
        if state.config.role == Role::Replica {
            background.push(tokio::spawn(crate::replication::client::run(state.clone())));
        }
        background.push(tokio::spawn(run_gc(state.clone())));
        if !state.config.storage.scrub_interval.is_zero() {
            background.push(tokio::spawn(scrub(state.clone())));
        }
        if state.config.legacy.acknowledge_before_sync {
            background.push(tokio::spawn(legacy_writeback(state.clone())));
        }
        let listeners = vec![
            tokio::spawn(crate::replication::server::run(state.clone(), replication)),
            tokio::spawn(serve_memcached(state.clone(), memcached)),
            tokio::spawn(crate::http_api::run(state.clone(), http, writes)),
        ];
        Ok(Node { state, listeners, root, background })
    }

    /// Shuts the node down (the real binary does on SIGTERM and SIGINT; see the README):
    ///
    /// 1. [`Lifecycle::Draining`]: every listener closes its socket (new clients are refused);
    ///    the root commits the batch it is gathering and every write already queued, and refuses
    ///    later ones; HTTP and memcached connections finish the request in flight and close,
    ///    replication connections close.
    /// 2. At the latest after `drain_timeout`, [`Lifecycle::Stopped`]: every connection still
    ///    open is cut (without an answer), and the root's committer, if still running, is
    ///    stopped — queued writes whose commit had not started are abandoned, never applied.
    /// 3. The background tasks are stopped and the store is closed once nothing holds it
    ///    (within [`STOP_GRACE`]).
    ///
    /// Every acknowledged write was durable before it was acknowledged, so none is lost, even
    /// when the drain is cut short.
    pub async fn shutdown(self, drain_timeout: std::time::Duration) -> ShutdownReport {
        let Node { state, listeners, mut root, background } = self;
        tracing::info!(node = %state.config.name, ?drain_timeout, "shutting down: no new connections; draining");
        state.lifecycle.send_replace(Lifecycle::Draining);
        let mut committer_done = false;
        let drain = async {
            for listener in listeners {
                let _ = listener.await;
            }
            if let Some(root) = root.as_mut() {
                // By reference: on a timeout the handle is still needed to stop the task.
                let _ = (&mut root.committer).await;
                committer_done = true;
            }
            state.connections.all_closed().await;
        };
        let drained = tokio::time::timeout(drain_timeout, drain).await.is_ok();
        let connections_cut: usize = ListenerKind::ALL.iter().map(|&kind| state.connections.gate(kind).open()).sum();
        if !drained {
            tracing::warn!(
                node = %state.config.name,
                connections_cut,
                "the drain did not finish within connections.drain_timeout; cutting what is left"
            );
        }
        state.lifecycle.send_replace(Lifecycle::Stopped);
        let mut stopping = background;
        if let Some(root) = root {
            // A committer that finished was awaited to the end already (a second await panics).
            if !committer_done {
                stopping.push(root.committer);
            }
            stopping.push(root.heartbeat);
        }
        for task in &stopping {
            task.abort();
        }
        let store_closed = tokio::time::timeout(STOP_GRACE, async {
            for task in stopping {
                let _ = task.await;
            }
            state.connections.all_closed().await;
            // The cut connection tasks drop their share of the state as they end.
            let mut state = state;
            loop {
                match Arc::try_unwrap(state) {
                    Ok(owned) => {
                        drop(owned);
                        return;
                    }
                    Err(shared) => state = shared,
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await
        .is_ok();
        ShutdownReport { drained, connections_cut, store_closed }
    }
}

async fn serve_memcached(state: Arc<NodeState>, listener: TcpListener) {
    let gate = state.connections.gate(ListenerKind::Memcached);
    crate::connections::accept_until_draining(listener, gate, state.lifecycle(), |stream, peer, lifecycle| {
        let state = state.clone();
        async move {
            let limits = crate::memcached::ConnectionLimits {
                idle_timeout: Some(state.config.connections.memcached.idle_timeout),
                lifecycle: Some(lifecycle),
            };
            let result =
                crate::memcached::serve_connection_within(stream, state.as_ref(), &state.read_counters, limits).await;
            match result {
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    state.connections.gate(ListenerKind::Memcached).timed_out();
                    tracing::debug!(%peer, error = %e, "memcached connection timed out");
                }
                Err(e) => tracing::debug!(%peer, error = %e, "memcached connection ended with an error"),
                Ok(()) => {}
            }
        }
    })
    .await
}

/// Reads back every stored value against its checksum every `storage.scrub_interval`, so
/// damage nobody reads is found too.
async fn scrub(state: Arc<NodeState>) {
    loop {
        tokio::time::sleep(state.config.storage.scrub_interval).await;
        state.disk_io(DiskOp::Read).await;
        match state.read_store(|store| store.state_digest()) {
            Ok(_) => {}
            Err(e) if e.is_damage() => {
                tracing::error!(error = %e, "scrub found damage");
                state.found_damage();
            }
            Err(e) => tracing::error!(error = %e, "scrub failed"),
        }
    }
}

/// PLANTED BUG support (legacy): how often unsynced commits reach the disk — the kernel's
/// dirty-page writeback (`dirty_writeback_centisecs`, 5 s by default).
pub const LEGACY_WRITEBACK: std::time::Duration = std::time::Duration::from_secs(5);

/// PLANTED BUG support (legacy): with `acknowledge_before_sync`, nothing but this writeback
/// makes commits durable.
async fn legacy_writeback(state: Arc<NodeState>) {
    loop {
        tokio::time::sleep(LEGACY_WRITEBACK).await;
        if let Err(e) = state.with_store(|store| store.sync()) {
            tracing::error!(error = %e, "legacy writeback failed");
        }
    }
}

async fn run_gc(state: Arc<NodeState>) {
    let policy = state.config.retention.policy();
    loop {
        tokio::time::sleep(state.config.retention.gc_interval).await;
        let now = crate::clock::unix_ms();
        state.disk_io(DiskOp::Read).await;
        let outcome = state.with_store(|store| store.collect_garbage(policy, now));
        match outcome {
            Ok(outcome) if outcome.collected > 0 => {
                tracing::debug!(collected = outcome.collected, first_retained = outcome.first_retained, "log collected")
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "log garbage collection failed"),
        }
    }
}
