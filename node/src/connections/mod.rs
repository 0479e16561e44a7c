//! The node's three listeners as an operator sees them: how many connections each holds, how
//! long a client may keep one waiting, and what happens to them at shutdown.
//!
//! Guarantees:
//! - **Bounded.** A listener never holds more than its `connections.<listener>.max` open
//!   connections. A connection past the cap is accepted and closed at once (the client sees
//!   the connection reset or closed, never a hang), counted on `/metrics`
//!   (`qs_connections_refused_total{listener}`), and logged at most once a second with how many
//!   were refused since the last message. The caps are per listener, so a flood on one port
//!   cannot take a slot of another.
//! - **Timed out.** Every wait on a client has a deadline ([`settings`]): HTTP headers (hyper's
//!   `header_read_timeout`, which also ends idle keep-alive connections), request bodies and
//!   stalled response writes; memcached request lines and reply writes; the replication hello
//!   and each frame's write. A deadline that passes closes the connection and is counted
//!   (`qs_connections_timed_out_total{listener}`).
//! - **Simulated time under the simulator.** Every deadline is a `tokio::time` timer (hyper's
//!   through [`NodeTimer`]), which is madsim's clock under `--cfg madsim`: the simulator runs
//!   these timeouts, not a variant of them, and they fire at the same simulated instant under
//!   one seed.
//! - **Drained at shutdown.** [`Lifecycle`]: at `Draining` every listener stops accepting (its
//!   socket is closed, so new clients are refused by the kernel), HTTP connections finish the
//!   request in flight and close, memcached connections finish the request in flight and
//!   close, replication connections close; at `Stopped` whatever is left is cut.
//! - **Accounted.** Each open connection is charged [`ListenerKind::buffer_bytes`] to the
//!   node's memory budget (`qs_memory_accounted_bytes{component="buffers"}`).

pub mod io;
pub mod settings;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

pub use io::{FlushWhenWritten, NodeTimer, WriteDeadline};
pub use settings::ConnectionsConfig;

use crate::metrics::Metrics;

/// One of the node's listeners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ListenerKind {
    /// Producers' writes (root), status and metrics.
    Http,
    /// Reads over the memcached text protocol.
    Memcached,
    /// Downstream replicas.
    Replication,
}

impl ListenerKind {
    pub const ALL: &'static [ListenerKind] = <ListenerKind as strum::VariantArray>::VARIANTS;

    /// The name in logs, in configuration fields and in the `listener` label of `/metrics`.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Memory an open, idle connection of this listener holds, in bytes: what the memory budget
    /// charges per connection. Each figure is the buffers the code allocates (source beside it)
    /// plus the task, the socket's registration with the runtime and the protocol's state,
    /// rounded up from a measurement: a release `qs-node` (glibc) given 1 500 and then 3 000
    /// connections that each sent half a request and went silent, its resident size before and
    /// after divided by the connections. A connection in the middle of a large request or reply
    /// holds more for that moment; those peaks are bounded by `http_api::BODY_BYTES_MAX`,
    /// `memcached::REPLY_BYTES_MAX` and `replication::server::FRAME_LIMITS`, and not charged.
    pub const fn buffer_bytes(self) -> u64 {
        match self {
            // hyper 1.x's HTTP/1 server (src/proto/h1/io.rs): a read buffer of INIT_BUFFER_SIZE
            // (8 KiB) reserved at the first read and a write buffer whose header vector starts
            // with INIT_BUFFER_SIZE capacity; 16 KiB, plus 2 KiB. Measured: 17 976 and 18 148 B
            // (13 457 and 13 630 B for connections that sent nothing: the read buffer's pages
            // are not touched until bytes arrive).
            ListenerKind::Http => 18 << 10,
            // memcached::READ_BUFFER_BYTES (an 8 KiB BufReader) and the line buffer, plus 3 KiB.
            // Measured: 11 026 and 10 977 B.
            ListenerKind::Memcached => 11 << 10,
            // No buffer between frames (replication::protocol reads a frame's length into a
            // 4-byte array and allocates the frame as it arrives): the task, socket and state
            // alone. Measured: 3 973 and 4 037 B.
            ListenerKind::Replication => 4 << 10,
        }
    }
}

/// Where a node is in its life. Stages only move forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lifecycle {
    /// Accepting and serving.
    Serving,
    /// Shutting down: no new connections; connections finish what is in flight, then close.
    Draining,
    /// The drain is over: every connection still open is cut.
    Stopped,
}

/// Waits until `lifecycle` has reached `stage` (or its sender is gone, which is the node gone).
pub async fn reached(lifecycle: &mut watch::Receiver<Lifecycle>, stage: Lifecycle) {
    let _ = lifecycle.wait_for(|now| *now >= stage).await;
}

/// One listener's cap and its counters.
#[derive(Debug)]
pub struct Gate {
    kind: ListenerKind,
    max: usize,
    permits: Arc<Semaphore>,
    open: Gauge,
    accepted: Counter,
    refused: Counter,
    timed_out: Counter,
    refusals: Mutex<RefusalLog>,
}

/// Refusals not yet logged, and when the last message was.
#[derive(Debug, Default)]
struct RefusalLog {
    logged_at: Option<Instant>,
    unlogged: u64,
}

/// How often, at most, a listener logs that it refused connections.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// An open connection's place under its listener's cap; dropping it frees the place.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    open: Gauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl Gate {
    fn new(kind: ListenerKind, max: usize, metrics: &Metrics) -> Gate {
        let label = Metrics::label("listener", kind.name());
        metrics.connections_max.get_or_create(&label).set(max as i64);
        Gate {
            kind,
            max,
            permits: Arc::new(Semaphore::new(max)),
            open: metrics.connections_open.get_or_create(&label).clone(),
            accepted: metrics.connections_accepted.get_or_create(&label).clone(),
            refused: metrics.connections_refused.get_or_create(&label).clone(),
            timed_out: metrics.connections_timed_out.get_or_create(&label).clone(),
            refusals: Mutex::new(RefusalLog::default()),
        }
    }

    /// A place for a new connection, or None (refused, counted, logged at most once a second).
    pub fn admit(&self) -> Option<Slot> {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                self.accepted.inc();
                self.open.inc();
                Some(Slot { _permit: permit, open: self.open.clone() })
            }
            Err(_) => {
                self.refused.inc();
                self.log_refusal();
                None
            }
        }
    }

    fn log_refusal(&self) {
        let mut log = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        log.unlogged += 1;
        let now = Instant::now();
        if log.logged_at.is_some_and(|at| now.saturating_duration_since(at) < REFUSAL_LOG_INTERVAL) {
            return;
        }
        tracing::warn!(
            listener = self.kind.name(),
            max = self.max,
            refused_since_last_message = log.unlogged,
            "refusing connections: the listener is at its cap (connections.{}.max)",
            self.kind.name()
        );
        log.logged_at = Some(now);
        log.unlogged = 0;
    }

    /// Counts a connection closed because a deadline passed.
    pub fn timed_out(&self) {
        self.timed_out.inc();
    }

    /// The timeout counter, for a [`WriteDeadline`] to increment.
    pub fn timed_out_counter(&self) -> Counter {
        self.timed_out.clone()
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// Waits until every connection has closed: every place is free at once.
    async fn all_closed(&self) {
        let all = u32::try_from(self.max).expect("validated: max is at most 2^20");
        // Err only if the semaphore were closed, which nothing does. The places are given back
        // at once: this only waits (a drained listener admits no one any more).
        let _ = self.permits.acquire_many(all).await;
    }
}

/// The gates of a node's three listeners.
#[derive(Debug)]
pub struct Connections {
    http: Gate,
    memcached: Gate,
    replication: Gate,
}

impl Connections {
    pub fn new(config: &ConnectionsConfig, metrics: &Metrics) -> Connections {
        Connections {
            http: Gate::new(ListenerKind::Http, config.max(ListenerKind::Http), metrics),
            memcached: Gate::new(ListenerKind::Memcached, config.max(ListenerKind::Memcached), metrics),
            replication: Gate::new(ListenerKind::Replication, config.max(ListenerKind::Replication), metrics),
        }
    }

    pub fn gate(&self, kind: ListenerKind) -> &Gate {
        match kind {
            ListenerKind::Http => &self.http,
            ListenerKind::Memcached => &self.memcached,
            ListenerKind::Replication => &self.replication,
        }
    }

    /// Bytes the open connections hold in buffers: per listener, open connections ×
    /// [`ListenerKind::buffer_bytes`].
    pub fn buffer_bytes(&self) -> u64 {
        ListenerKind::ALL.iter().map(|&kind| self.gate(kind).open() as u64 * kind.buffer_bytes()).sum()
    }

    /// Waits until every listener's connections have all closed.
    pub async fn all_closed(&self) {
        for &kind in ListenerKind::ALL {
            self.gate(kind).all_closed().await;
        }
    }
}

/// Accepts connections on `listener` until the node starts draining, serving each admitted one
/// on its own task with `serve(stream, peer, lifecycle)`; a connection still open when the node
/// reaches [`Lifecycle::Stopped`] is cut. Past the gate's cap a connection is closed at once.
/// An accept error (out of file descriptors, say) is logged and retried after a short pause
/// rather than spun on.
pub(crate) async fn accept_until_draining<F, Fut>(
    listener: TcpListener,
    gate: &Gate,
    mut lifecycle: watch::Receiver<Lifecycle>,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr, watch::Receiver<Lifecycle>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            // Fixed poll order: select!'s default random order draws from a process-wide seed,
            // which would make runs differ under one simulator seed.
            biased;
            () = reached(&mut lifecycle, Lifecycle::Draining) => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Refused: closing the stream at once is the answer.
                let Some(slot) = gate.admit() else { continue };
                let mut stopped = lifecycle.clone();
                let connection = serve(stream, peer, lifecycle.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        biased;
                        () = reached(&mut stopped, Lifecycle::Stopped) => {}
                        () = connection => {}
                    }
                    drop(slot);
                });
            }
            Err(e) => {
                tracing::warn!(listener = gate.kind.name(), error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
            }
        }
    }
}

/// Pause after a failed accept.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(50);
