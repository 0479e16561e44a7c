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
//!
//! The layers: [`crate::state`] ([`NodeState`], shared by the node's tasks, and the simulator's
//! disk seam) below the services (`root`, `replication`, `http_api`, `memcached`), and this
//! orchestrator above them all: `tasks.rs` (the listener and background loops [`Node::start`]
//! spawns) and this file, which starts and stops a node. No service imports the orchestrator.

mod tasks;

pub use tasks::LEGACY_WRITEBACK;
use tasks::{legacy_writeback, reload_tls, run_gc, scrub, serve_memcached};

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::config::{NodeConfig, Role};
use crate::connections::{Lifecycle, ListenerKind};
pub use crate::state::SimHooks;
use crate::state::{DiskOp, NodeState};
use crate::store::{Store, StoreError, StoreLocation};

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
    #[error("loading [tls]: {0}")]
    Tls(#[from] crate::tls::MaterialError),
    #[error("starting the root group member: {0}")]
    Member(#[from] crate::consensus::MemberError),
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
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Moves a damaged store directory to `<dir>.damaged` (replacing an earlier one) and returns
/// where it went. A memory store has no directory; its damage never stops it opening.
fn set_aside_damaged_store(
    location: &StoreLocation,
    options: &crate::store::OpenOptions,
) -> Result<String, StoreError> {
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
    crate::store::faults::check_io(options.io_faults.as_ref(), crate::store::faults::IoOp::Rename)
        .and_then(|()| std::fs::rename(dir, &kept))
        .map_err(|e| io(&format!("moving {} to {}", dir.display(), kept.display()), e))?;
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
        Node::start_simulated(config, location, node_id, SimHooks::default()).await
    }

    /// [`start_on`](Self::start_on) with the simulator's [`SimHooks`] attached.
    #[expect(
        clippy::too_many_lines,
        reason = "86 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    pub async fn start_simulated(
        config: NodeConfig,
        location: &StoreLocation,
        node_id: u128,
        hooks: SimHooks,
    ) -> Result<Node, StartError> {
        // Before the store: a node whose certificates do not load must not start half-way.
        let tls = config.tls.as_ref().map(crate::tls::Tls::load).transpose()?;
        let disk = hooks.disk.clone();
        if let Some(disk) = &disk {
            let latency = disk.charge(DiskOp::Open);
            tokio::time::sleep(latency).await;
        }
        if let StoreLocation::Lmdb(live) | StoreLocation::Rocksdb(live) = location {
            let snapshots = config.snapshot_dir();
            crate::replication::bootstrap::recover_interrupted_install(live, &snapshots).map_err(|e| {
                StartError::Store(StoreError::Engine(crate::store::EngineError::failed(
                    location.kind(),
                    format!("finishing an interrupted snapshot install in {}: {e}", snapshots.display()),
                )))
            })?;
        }
        // On the simulator's failing disk, opens and commits fail as the disk says.
        let options = crate::store::OpenOptions {
            io_faults: disk.clone().map(|disk| disk as Arc<dyn crate::store::faults::IoFaults>),
            ..config.store_options()
        };
        let (store, set_aside) = match Store::open(location, &options) {
            Err(e)
                if e.is_damage()
                    && (config.role == Role::Replica || config.root.as_ref().is_some_and(|r| r.is_group())) =>
            {
                // A replica's store is a copy: set the damaged one aside (kept for a post-mortem,
                // replacing any earlier one) and start empty, to re-bootstrap from a source. A
                // root group member's too, its Raft state with it: it starts as a member whose
                // disk was replaced — fresh, granting no vote until it holds what the group
                // committed (so it never votes twice in a term it forgot, nor for a log lacking
                // what it acknowledged) — and is sent the log or a
                // snapshot, catching its store up from a peer's.
                let kept = set_aside_damaged_store(location, &options).map_err(StartError::Store)?;
                tracing::error!(node = %config.name, error = %e, kept = %kept, "the store is damaged: set aside, starting empty to re-bootstrap");
                (Store::open(location, &options)?, Some(kept))
            }
            opened => (opened?, None),
        };
        tracing::info!(node = %config.name, role = ?config.role, applied = store.applied_index(), "store open");
        let memory_disk = match location {
            StoreLocation::Memory(disk) => Some(disk.clone()),
            _ => None,
        };
        let resume_from = store.applied_index();
        let state = NodeState::with_disk(config, store, node_id, memory_disk, hooks, tls);
        if let Some(kept) = set_aside {
            state.report(crate::observe::NodeEvent::StoreSetAside { kept });
            state.found_damage();
        } else {
            state.recall_damage();
        }
        if !state.config.planted().cursor_written_at_disconnect && !state.config.planted().cursor_written_before_apply {
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
            (Role::Root, Some(root)) if root.is_group() => {
                let (writes, tasks) = crate::root::start_group(state.clone(), root)?;
                (Some(writes), Some(tasks))
            }
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
        if state.tls.is_some() {
            background.push(tokio::spawn(reload_tls(state.clone())));
        }
        if state.config.planted().acknowledge_before_sync {
            background.push(tokio::spawn(legacy_writeback(state.clone())));
        }
        let listeners = vec![
            tokio::spawn(crate::replication::server::run(state.clone(), replication)),
            tokio::spawn(serve_memcached(state.clone(), memcached)),
            tokio::spawn(crate::http_api::run(state.clone(), http, writes)),
        ];
        Ok(Node { state, listeners, root, background })
    }

    /// Shuts the node down (the real binary does on SIGTERM and SIGINT; see docs/operating.md, "Stopping a node"):
    ///
    /// 1. [`Lifecycle::Draining`]: every listener closes its socket (new clients are refused);
    ///    the root commits the batch it is gathering and every write already queued, and refuses
    ///    later ones; HTTP and memcached connections finish the request in flight and close,
    ///    replication connections close.
    /// 2. At the latest after `drain_timeout`, [`Lifecycle::Stopped`]: every connection still
    ///    open is cut (without an answer), and the root's committer, if still running, is
    ///    stopped — queued writes whose commit had not started are abandoned, never applied.
    /// 3. The background tasks are stopped and the store is closed once nothing holds it
    ///    (within `STOP_GRACE`).
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
