//! The node's three listeners as an operator sees them: how many connections each holds, how
//! long a client may keep one waiting, and what happens to them at shutdown.
//!
//! Guarantees:
//! - **Bounded, and never handed to a flood.** A listener never holds more than its
//!   `connections.<listener>.max` open connections, nor more than `max_per_peer` from one client
//!   address. At the cap it sheds the connection that has gone longest without an answer and
//!   admits the newcomer in its place ([`shed`]: a half-sent request loses its slot, a producer
//!   being served does not, nor does a replication client past its hello); only when no
//!   connection may be shed, or the newcomer's address holds its share, is the newcomer closed
//!   at once (the client sees the connection reset or closed, never a hang). Counted on `/metrics`:
//!   `qs_connections_shed_total{listener}`, `qs_connections_refused_total{listener}` (of which
//!   `qs_connections_refused_per_peer_total{listener}` at the address's share); refusals are
//!   logged at most once a second with how many since the last message. The caps are per
//!   listener, so a flood on one port cannot take a slot of another.
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
pub mod shed;

use std::collections::BTreeSet;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

pub use io::{FlushWhenWritten, NodeTimer, WriteDeadline};
pub use settings::ConnectionsConfig;
pub use shed::Answering;
use shed::{Registry, SHED_WAIT, Ticket};

use crate::metrics::Metrics;
use crate::observe::Probe;

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
    /// holds more for that moment; those peaks are bounded by `limits::REQUEST_BODY_BYTES_MAX`,
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
    registry: Arc<Mutex<Registry>>,
    open: Gauge,
    accepted: Counter,
    refused: Counter,
    refused_per_peer: Counter,
    shed: Counter,
    timed_out: Counter,
    refusals: Mutex<RefusalLog>,
    /// PLANTED BUG (legacy `connections_heir_uncounted`): a newcomer admitted in a shed
    /// connection's place counts on a counter no page shows.
    heir_uncounted: bool,
}

/// What the gate answers a new connection.
#[derive(Debug)]
pub enum Admission {
    /// A place was free.
    Admitted(Slot),
    /// The listener was full and a connection is being shed for this one: its place comes
    /// when that connection's task ends ([`Waiting::place`]).
    Waiting(Waiting),
    /// Closed at once: the address holds its share, or no connection may be shed.
    Refused,
}

/// A newcomer admitted in place of a connection being shed. It is in the registry (with its
/// address's share) from admission, so its own connection can be served the moment the place
/// is free, and is removed again if the place does not come.
#[derive(Debug)]
pub struct Waiting {
    inheritance: shed::Inheritance,
    registry: Arc<Mutex<Registry>>,
    id: u64,
    peer: IpAddr,
    ticket: Ticket,
    open: Gauge,
    accepted: Counter,
    refused: Counter,
}

impl Waiting {
    /// The newcomer's answer clock and shed signal.
    pub fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    /// The place the shed connection hands over, within [`SHED_WAIT`]; None (refused, counted)
    /// past it.
    pub async fn place(self) -> Option<Slot> {
        match tokio::time::timeout(SHED_WAIT, self.inheritance).await {
            Ok(Ok(permit)) => {
                lock(&self.registry).placed(self.id);
                self.accepted.inc();
                self.open.inc();
                Some(Slot {
                    permit: Some(permit),
                    open: self.open.clone(),
                    registry: self.registry.clone(),
                    id: self.id,
                    peer: self.peer,
                    ticket: self.ticket,
                })
            }
            // The shed connection's task did not end in time (the machine overloaded), or its
            // place was lost with it (dropped without a handover: not expected).
            Ok(Err(_)) | Err(_) => {
                let mut registry = lock(&self.registry);
                // Never chosen while waiting: it has no heir of its own.
                let _ = registry.leave(self.id);
                registry.release(self.peer);
                drop(registry);
                self.refused.inc();
                None
            }
        }
    }
}

/// The registry's lock. A panic while it is held (an assertion in the registry) leaves counts
/// that can no longer be trusted: the node is stopped by the panic itself, so poisoning is not
/// recovered from.
fn lock(registry: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    registry.lock().expect("a panic while choosing a connection to shed is a bug")
}

/// Refusals not yet logged, and when the last message was.
#[derive(Debug, Default)]
struct RefusalLog {
    logged_at: Option<Instant>,
    unlogged: u64,
}

/// Why a newcomer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RefusalCause {
    /// Its address already holds `max_per_peer` connections.
    PeerShare,
    /// The listener is full and no connection in it may be shed (each is already being shed,
    /// or served and kept).
    Full,
}

/// How often, at most, a listener logs that it refused connections.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// An open connection's place under its listener's cap; dropping it frees the place and the
/// address's share.
#[derive(Debug)]
pub struct Slot {
    /// Taken in `drop` to hand to an heir; always present before.
    permit: Option<OwnedSemaphorePermit>,
    open: Gauge,
    registry: Arc<Mutex<Registry>>,
    id: u64,
    peer: IpAddr,
    ticket: Ticket,
}

impl Slot {
    /// The connection's answer clock and its shed signal.
    pub fn ticket(&self) -> &Ticket {
        &self.ticket
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut registry = lock(&self.registry);
        let heir = registry.leave(self.id);
        registry.release(self.peer);
        drop(registry);
        self.open.dec();
        // Shed for a newcomer: the place is its. If it gave up waiting, the place returns to the
        // listener as the permit drops.
        if let (Some(heir), Some(permit)) = (heir, self.permit.take()) {
            let _ = heir.send(permit);
        }
    }
}

impl Gate {
    fn new(
        kind: ListenerKind,
        (max, max_per_peer): (usize, usize),
        members: BTreeSet<IpAddr>,
        metrics: &Metrics,
        heir_uncounted: bool,
    ) -> Gate {
        let label = Metrics::label("listener", kind.name());
        metrics.connections_max.get_or_create(&label).set(max as i64);
        metrics.connections_max_per_peer.get_or_create(&label).set(max_per_peer as i64);
        Gate {
            kind,
            max,
            permits: Arc::new(Semaphore::new(max)),
            registry: Arc::new(Mutex::new(Registry::new(max_per_peer, members))),
            open: metrics.connections_open.get_or_create(&label).clone(),
            accepted: metrics.connections_accepted.get_or_create(&label).clone(),
            refused: metrics.connections_refused.get_or_create(&label).clone(),
            refused_per_peer: metrics.connections_refused_per_peer.get_or_create(&label).clone(),
            shed: metrics.connections_shed.get_or_create(&label).clone(),
            timed_out: metrics.connections_timed_out.get_or_create(&label).clone(),
            refusals: Mutex::new(RefusalLog::default()),
            heir_uncounted,
        }
    }

    /// What a new connection from `peer` gets (see the module doc): a place, a place being freed
    /// for it, or refusal (counted, logged at most once a second).
    pub fn admit(&self, peer: IpAddr) -> Admission {
        let mut registry = lock(&self.registry);
        if !registry.reserve(peer) {
            drop(registry);
            self.refused_per_peer.inc();
            self.refuse(RefusalCause::PeerShare);
            return Admission::Refused;
        }
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            let (id, ticket) = registry.enter(peer, true);
            drop(registry);
            self.accepted.inc();
            self.open.inc();
            return Admission::Admitted(Slot {
                permit: Some(permit),
                open: self.open.clone(),
                registry: self.registry.clone(),
                id,
                peer,
                ticket,
            });
        }
        if let Some(inheritance) = registry.shed_longest_waiting(peer) {
            let (id, ticket) = registry.enter(peer, false);
            drop(registry);
            self.shed.inc();
            return Admission::Waiting(Waiting {
                inheritance,
                registry: self.registry.clone(),
                id,
                peer,
                ticket,
                open: self.open.clone(),
                accepted: match self.heir_uncounted {
                    true => Counter::default(), // PLANTED BUG (legacy `connections_heir_uncounted`)
                    false => self.accepted.clone(),
                },
                refused: self.refused.clone(),
            });
        }
        registry.release(peer);
        drop(registry);
        self.refuse(RefusalCause::Full);
        Admission::Refused
    }

    fn refuse(&self, cause: RefusalCause) {
        self.refused.inc();
        self.log_refusal(cause);
    }

    fn log_refusal(&self, cause: RefusalCause) {
        let mut log = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        log.unlogged += 1;
        let now = Instant::now();
        if log.logged_at.is_some_and(|at| now.saturating_duration_since(at) < REFUSAL_LOG_INTERVAL) {
            return;
        }
        let why = match cause {
            RefusalCause::PeerShare => "a client address holds its share (connections.{}.max_per_peer)",
            RefusalCause::Full => "the listener is at its cap with no connection it may shed (connections.{}.max)",
        };
        tracing::warn!(
            listener = self.kind.name(),
            max = self.max,
            refused_since_last_message = log.unlogged,
            "refusing connections: {}",
            why.replace("{}", self.kind.name())
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
    /// The three gates. `members` are the addresses of a root group's other members: at a full
    /// replication listener their newcomers (Raft links) come before replicas' streams
    /// ([`shed`]). `heir_uncounted` is the PLANTED BUG of that name (legacy
    /// `connections_heir_uncounted`, the simulator's bug zoo only; false in every shipped node).
    pub fn new(
        config: &ConnectionsConfig,
        members: BTreeSet<IpAddr>,
        metrics: &Metrics,
        heir_uncounted: bool,
    ) -> Connections {
        let caps = |kind| (config.max(kind), config.max_per_peer(kind));
        let gate = |kind, members| Gate::new(kind, caps(kind), members, metrics, heir_uncounted);
        Connections {
            http: gate(ListenerKind::Http, BTreeSet::new()),
            memcached: gate(ListenerKind::Memcached, BTreeSet::new()),
            replication: gate(ListenerKind::Replication, members),
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
/// reaches [`Lifecycle::Stopped`], or shed for a newcomer, is cut. The stream notes each write
/// as an answer to its client ([`Answering`]), which is what choosing a connection to shed reads.
/// A refused connection is closed at once. A newcomer that finds the listener at its cap is
/// told to `reach` ([`Probe::ConnectionShed`] or [`Probe::ConnectionRefused`]: the node's
/// observer, so a run can show its caps were met). An accept error (out of file descriptors,
/// say) is logged and retried after a short pause rather than spun on.
pub(crate) async fn accept_until_draining<F, Fut>(
    listener: TcpListener,
    gate: &Gate,
    mut lifecycle: watch::Receiver<Lifecycle>,
    reach: impl Fn(Probe),
    serve: F,
) where
    F: Fn(Answering<TcpStream>, SocketAddr, watch::Receiver<Lifecycle>) -> Fut,
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
                let (ticket, place) = match gate.admit(peer.ip()) {
                    // Refused: closing the stream at once is the answer.
                    Admission::Refused => {
                        reach(Probe::ConnectionRefused);
                        continue;
                    }
                    Admission::Admitted(slot) => (slot.ticket().clone(), Place::Now(slot)),
                    Admission::Waiting(waiting) => {
                        reach(Probe::ConnectionShed);
                        (waiting.ticket().clone(), Place::Freed(waiting))
                    }
                };
                let mut stopped = lifecycle.clone();
                let connection = serve(Answering::new(stream, ticket.answered.clone()), peer, lifecycle.clone());
                tokio::spawn(async move {
                    let slot = match place {
                        Place::Now(slot) => slot,
                        // No place freed in time: dropping the connection unserved closes it.
                        Place::Freed(waiting) => match waiting.place().await {
                            Some(slot) => slot,
                            None => return,
                        },
                    };
                    tokio::select! {
                        biased;
                        () = reached(&mut stopped, Lifecycle::Stopped) => {}
                        () = ticket.shed.notified() => {
                            tracing::debug!(%peer, "connection shed for a newcomer: it had waited longest without an answer");
                        }
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

/// Where an admitted connection's place comes from.
enum Place {
    Now(Slot),
    Freed(Waiting),
}

/// Pause after a failed accept.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(50);
