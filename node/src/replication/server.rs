//! The replication server: streams this node's log, or a snapshot, to downstream nodes.
//!
//! Guarantees:
//! - A client with this node's own id (self-replication), another database id, or another
//!   protocol version is refused with a reason it can log; every refusal is counted by reason.
//! - Entries are streamed from the client's `last_index + 1`, in order, each verified when read
//!   from the store. If that index was collected, the client is told so explicitly
//!   (`OutOfRetention`) and the connection ends: it is never sent the nearest surviving entry.
//! - A caught-up client gets a `Keepalive` every [`KEEPALIVE_INTERVAL`], so it can tell a quiet
//!   source from a dead one; each carries this node's `UpstreamStatus` (healthy, or recovering
//!   its own path to the root), so a client below a failing node waits for it.
//! - At most `bootstraps_served_max` snapshot transfers run at once; one over it is refused
//!   (`TooManyBootstraps`) and the client tries elsewhere or later.
//! - Serving never blocks this node's own replication or reads: each client is its own task.
//! - At a full replication listener a served client is never shed for a replica: once its
//!   hello is accepted (a log stream, a snapshot transfer, a proven member's Raft link) it keeps
//!   its place, and a replica's newcomer takes the place of a connection still in its handshake
//!   or hello, or is refused. Only another root member's newcomer may take a replica's place.
//! - A client's hello must arrive within `connections.replication.idle_timeout`, and a frame
//!   that cannot be written for that long (the client stopped reading) ends the connection;
//!   both are counted as timeouts. When the node drains, every replication connection closes at
//!   once: a downstream replica fails over or reconnects, as after any disconnect.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::protocol::{
    ClientHello, KEEPALIVE_INTERVAL, Message, PROTOCOL_VERSION, ProtocolError, RefusalReason, Want, read_message,
    write_message,
};
use crate::connections::io::abort_when_unacknowledged;
use crate::connections::{Lifecycle, ListenerKind, WriteDeadline, accept_until_draining, reached};
use crate::entry::StoredEntry;
use crate::fault_points::FaultPoint;
use crate::metrics::Metrics;
use crate::observe::Probe;
use crate::state::{DiskOp, NodeState};
use crate::store::snapshot::{SnapshotManifest, SnapshotSource};
use crate::store::{LogRead, LogReadLimits};
use crate::tls::{PeerIdentity, Secured, Tapped};

/// Bounds on one `Entries` frame.
pub const FRAME_LIMITS: LogReadLimits = LogReadLimits { entries_max: 256, bytes_max: 4 << 20 };
/// How long a finished export is kept for clients resuming an interrupted bootstrap.
const EXPORT_REUSE_MAX: Duration = Duration::from_secs(600);

/// One export on disk. Its folder is removed when the last holder lets it go: the cache, when
/// a newer export replaces it, or the last transfer still reading it — never under a client.
#[derive(Debug)]
struct Export {
    dir: PathBuf,
    /// As served (in this node's chunk size): what a resuming client names.
    manifest: SnapshotManifest,
    made: tokio::time::Instant,
}

impl Drop for Export {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not remove a snapshot export");
        }
    }
}

/// The newest snapshot export, shared by every client that can use it.
#[derive(Debug, Default)]
struct ExportCache {
    newest: Option<Arc<Export>>,
    exports_made: u64,
}

/// Accepts replication clients until the node drains.
pub async fn run(state: Arc<NodeState>, listener: TcpListener) {
    let bootstraps = Arc::new(Semaphore::new(state.config.replication.bootstraps_served_max));
    let exports = Arc::new(Mutex::new(ExportCache::default()));
    let gate = state.connections.gate(ListenerKind::Replication);
    let reach = |probe| state.probe(probe);
    accept_until_draining(listener, gate, state.lifecycle(), reach, |stream, peer, mut lifecycle| {
        let (state, bootstraps, exports) = (state.clone(), bootstraps.clone(), exports.clone());
        async move {
            let gate = state.connections.gate(ListenerKind::Replication);
            let idle = state.config.connections.replication.idle_timeout;
            let answered = stream.answered();
            // A client served past its hello is kept at a full listener: one that vanished
            // without a reset must not hold its place for as long as keepalives fit its buffer.
            abort_when_unacknowledged(stream.get_ref(), idle);
            let stream = WriteDeadline::new(stream, idle, gate.timed_out_counter());
            let secured = async {
                match &state.tls {
                    None => Some((Secured::Plain(stream), PeerIdentity::Unauthenticated(peer.ip()))),
                    // The handshake within the hello's deadline: a peer that stalls in it is
                    // a client that sends no hello.
                    Some(tls) => {
                        let tls = tls.accept(&state.metrics, ListenerKind::Replication, peer, stream, idle).await?;
                        // The replication listener requires a client certificate: a handshake
                        // that succeeded has one.
                        let identity = PeerIdentity::of_client(&tls).expect("mutual TLS: the client presented one");
                        let local = state.config.listen.replication;
                        Some((Secured::Tls(Box::new(Tapped::new(tls, local, peer, state.observer()))), identity))
                    }
                }
            };
            let served = tokio::select! {
                // Fixed poll order: select!'s default random order draws from a process-wide
                // seed, which would make runs differ under one simulator seed.
                biased;
                () = reached(&mut lifecycle, Lifecycle::Draining) => Ok(()),
                served = async {
                    match secured.await {
                        Some((stream, identity)) => {
                            let client = Client { identity: &identity, answered: &answered };
                            serve(&state, stream, &client, &bootstraps, &exports).await
                        }
                        None => Ok(()),
                    }
                } => served,
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "replication client disconnected");
            }
        }
    })
    .await
}

async fn refuse<S: AsyncWrite + Unpin>(
    stream: &mut S,
    metrics: &Metrics,
    reason: RefusalReason,
    detail: String,
) -> Result<(), ProtocolError> {
    tracing::warn!(?reason, %detail, "refusing replication client");
    metrics.refused_handshakes.get_or_create(&Metrics::label("reason", &format!("{reason:?}"))).inc();
    write_message(stream, &Message::Refused { reason, detail }).await
}

/// Who is at the other end of a replication connection, and the connection's answer clock.
struct Client<'a> {
    identity: &'a PeerIdentity,
    answered: &'a crate::connections::shed::Answered,
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    state: &NodeState,
    mut stream: S,
    client: &Client<'_>,
    bootstraps: &Semaphore,
    exports: &Mutex<ExportCache>,
) -> Result<(), ProtocolError> {
    let metrics = &state.metrics;
    let idle = state.config.connections.replication.idle_timeout;
    let Ok(hello) = tokio::time::timeout(idle, read_message(&mut stream)).await else {
        state.connections.gate(ListenerKind::Replication).timed_out();
        let detail = format!("no hello within connections.replication.idle_timeout ({idle:?})");
        return Err(ProtocolError::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, detail)));
    };
    let hello = match hello {
        Ok(Some(Message::Hello(hello))) => hello,
        Ok(Some(other)) => {
            let detail = format!("expected a hello, got {}", other.frame_type());
            return refuse(&mut stream, metrics, RefusalReason::BadHandshake, detail).await;
        }
        Ok(None) => return Ok(()),
        Err(e) => {
            let detail = format!("bad hello: {e}");
            return refuse(&mut stream, metrics, RefusalReason::BadHandshake, detail).await;
        }
    };
    if hello.version != PROTOCOL_VERSION {
        let detail =
            format!("protocol version {} is not supported; this node speaks {PROTOCOL_VERSION}", hello.version);
        return refuse(&mut stream, metrics, RefusalReason::UnsupportedVersion, detail).await;
    }
    if hello.client_id == state.node_id {
        let detail =
            format!("client id {:032x} is this node's own id: a node must not replicate from itself", hello.client_id);
        return refuse(&mut stream, metrics, RefusalReason::SelfReplication, detail).await;
    }
    if hello.db_id != state.config.database_id {
        let detail = format!("this node holds database {}, not {}", state.config.database_id, hello.db_id);
        return refuse(&mut stream, metrics, RefusalReason::WrongDatabase, detail).await;
    }
    state.heard_from_client(hello.root_ms);
    if state.legacy_refuses_downstream() {
        let detail = "legacy: this node lost its upstream and stopped serving".to_string();
        return refuse(&mut stream, metrics, RefusalReason::ShuttingDown, detail).await;
    }
    match hello.want.clone() {
        Want::Log => {
            keep_replica(state, client);
            stream_log(state, stream, &hello).await
        }
        Want::Snapshot { resume_chunk, manifest_fingerprint } => {
            let Ok(_permit) = bootstraps.try_acquire() else {
                let detail = format!(
                    "already serving {} bootstraps, the most this node serves at once",
                    state.config.replication.bootstraps_served_max
                );
                return refuse(&mut stream, metrics, RefusalReason::TooManyBootstraps, detail).await;
            };
            keep_replica(state, client);
            serve_snapshot(state, stream, exports, resume_chunk, manifest_fingerprint, hello.last_index).await
        }
        Want::Raft { member } => serve_raft(state, stream, client, member).await,
    }
}

/// Keeps a replica being served from here on (a log stream, a snapshot transfer) at a full
/// listener: a stream is answered by every frame and keepalive, so it is never idle, and
/// shedding it for another replica only moves the same demand elsewhere (`connections::shed`).
fn keep_replica(state: &NodeState, client: &Client<'_>) {
    // PLANTED BUG (legacy `replication_shed_served`): not kept.
    if !state.config.planted().replication_shed_served {
        client.answered.keep();
    }
}

/// Hands every Raft message from root member `member` to this member's consensus, until the
/// connection ends — once the peer proved it is that member ([`PeerIdentity::names`] its
/// configured replication address): a hello's member id is a claim, and any certificate the
/// CA signed could make it. A message that finds the consensus's inbox full is dropped, as the
/// network may drop it: Raft resends what matters.
async fn serve_raft<S: AsyncRead + AsyncWrite + Unpin>(
    state: &NodeState,
    mut stream: S,
    client: &Client<'_>,
    member: u64,
) -> Result<(), ProtocolError> {
    let identity = client.identity;
    let root = state.config.root.as_ref();
    let claimed = root.filter(|root| root.member_id != Some(member)).and_then(|root| root.member(member));
    let Some(((inbox, budget), claimed)) = state.raft_inbox.get().zip(claimed) else {
        let detail = match root.and_then(|root| root.member_id) {
            Some(me) => format!("this node is member {me} of a root group without a member {member}"),
            None => "this node is not a member of a root group".to_string(),
        };
        return refuse(&mut stream, &state.metrics, RefusalReason::NotAMember, detail).await;
    };
    if !state.config.planted().raft_trust_claimed_member
        && let Err(why) = identity.names(claimed.replication.ip())
    {
        let detail = format!("a peer claiming to be root member {member} did not prove it: {why}");
        return refuse(&mut stream, &state.metrics, RefusalReason::NotThatMember, detail).await;
    }
    welcome(state, &mut stream).await?;
    // A proven member's link: it only receives, and the group's elections depend on it.
    client.answered.keep();
    loop {
        match read_message(&mut stream).await? {
            None => return Ok(()),
            Some(Message::Raft { message, root_ms }) => {
                // An admitted member's word on the root's clock (an impostor never gets here).
                state.root_clock.heard(root_ms);
                // Past the inbox's bytes or its count: dropped, and Raft resends what matters.
                let queued = budget.try_hold(message.len()).map(|held| inbox.try_send((member, message, held)));
                if !matches!(queued, Some(Ok(()))) {
                    state.metrics.raft_messages_dropped.inc();
                }
            }
            Some(other) => {
                let detail =
                    format!("member {member} sent a {} frame where only Raft frames may come", other.frame_type());
                return Err(ProtocolError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, detail)));
            }
        }
    }
}

async fn welcome<S: AsyncWrite + Unpin>(state: &NodeState, stream: &mut S) -> Result<(), ProtocolError> {
    let (applied_index, first_retained_index) = state.read_store(|s| (s.applied_index(), s.first_retained_index()));
    let welcome = Message::Welcome {
        server_id: state.node_id,
        db_id: state.config.database_id,
        applied_index,
        first_retained_index,
        root_ms: state.root_word_ms(),
    };
    write_message(stream, &welcome).await
}

async fn stream_log<S: AsyncRead + AsyncWrite + Unpin>(
    state: &NodeState,
    mut stream: S,
    hello: &ClientHello,
) -> Result<(), ProtocolError> {
    welcome(state, &mut stream).await?;
    if state.fault_point(FaultPoint::DropAfterHandshake) {
        return Ok(()); // FAULT POINT: the connection drops right after the handshake
    }
    let mut applied = state.subscribe_applied();
    // A newest-only client (a replica's probe) gets what this node applies from now on — but
    // never what the client said it holds: a source behind it (catching up after a partition)
    // would otherwise stream it a burst it has, to be thrown away.
    let mut last = if hello.newest_only {
        state.read_store(|s| s.applied_index()).max(hello.last_index)
    } else {
        hello.last_index
    };
    loop {
        if hello.stop_index.is_some_and(|stop| last >= stop) || state.legacy_refuses_downstream() {
            return Ok(());
        }
        // Seen before the store is read, not after: an apply published between the read and
        // the mark would otherwise go unnoticed until the next keepalive, a second later.
        applied.mark_unchanged();
        // A client that has everything this node applied needs no read: the applied index is
        // the store's head, in memory. Only a read that returns entries touches the disk.
        if state.read_store(|store| last < store.applied_index()) {
            state.disk_io(DiskOp::Read).await;
        }
        let read = state.read_store(|store| store.read_stored_log_after(last, FRAME_LIMITS));
        let read = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::error!(error = %e, after = last, "reading the log for a replication client failed");
                if e.is_damage() {
                    // Nothing damaged is forwarded: the entries never left the store.
                    state.found_damage();
                }
                return Ok(()); // drop the client; it will find another source
            }
        };
        match read {
            LogRead::Entries(entries) if !entries.is_empty() => {
                let stop = hello.stop_index.unwrap_or(u64::MAX);
                let entries: Vec<_> = entries.into_iter().take_while(|e| e.index() <= stop).collect();
                last = entries.last().map_or(last, StoredEntry::index);
                // Forwarded as stored: each entry checked (decompressed, parsed, hash verified)
                // on the way out of the store, never built or compressed again.
                let frames = entries.into_iter().map(StoredEntry::into_compressed).collect();
                let root_ms = state.root_word_ms();
                write_message(&mut stream, &Message::Entries { entries: frames, root_ms }).await?;
            }
            LogRead::Collected { first_retained } if state.config.planted().serve_nearest_when_collected => {
                // PLANTED BUG (legacy): carry on from the nearest entry still held.
                tracing::warn!(requested = last + 1, first_retained, "legacy: serving the nearest entries instead");
                last = first_retained - 1;
            }
            LogRead::Collected { first_retained } => {
                tracing::info!(requested = last + 1, first_retained, "client asked for collected history");
                state.probe(Probe::OutOfRetentionAnswered);
                let answer = Message::OutOfRetention { requested: last + 1, first_retained };
                return write_message(&mut stream, &answer).await;
            }
            LogRead::Entries(_) | LogRead::Ahead { .. } => {
                // Caught up (or ahead of us): wait for new entries, keeping the client informed.
                tokio::select! {
                // Fixed poll order: select!'s default random order draws from a process-wide
                // seed, which would make runs differ under one simulator seed.
                biased;
                    changed = applied.changed() => if changed.is_err() { return Ok(()) },
                    // FAULT POINT: now and then a keepalive comes at once.
                    () = tokio::time::sleep(if state.fault_point(FaultPoint::EarlyKeepalive) {
                        Duration::ZERO
                    } else {
                        KEEPALIVE_INTERVAL
                    }) => {
                        let applied_index = *applied.borrow();
                        let upstream = state.upstream_status();
                        let root_ms = state.root_word_ms();
                        write_message(&mut stream, &Message::Keepalive { applied_index, upstream, root_ms }).await?;
                    }
                }
            }
        }
    }
}

async fn serve_snapshot<S: AsyncRead + AsyncWrite + Unpin>(
    state: &NodeState,
    mut stream: S,
    exports: &Mutex<ExportCache>,
    resume_chunk: u64,
    fingerprint: Option<String>,
    client_index: u64,
) -> Result<(), ProtocolError> {
    // Held for the whole transfer: the export's folder outlives every client reading it.
    let (_export, source) = match current_export(state, exports, fingerprint.as_deref(), client_index) {
        Ok(found) => found,
        Err(e) => {
            tracing::error!(error = %e, "exporting a snapshot failed");
            return write_message(&mut stream, &Message::Refused { reason: RefusalReason::ShuttingDown, detail: e })
                .await;
        }
    };
    welcome(state, &mut stream).await?;
    state.probe(Probe::SnapshotServed);
    let manifest = source.manifest().clone();
    let resumed = fingerprint.as_deref() == Some(manifest.fingerprint().as_str());
    let first = if resumed { resume_chunk.min(manifest.chunk_count()) } else { 0 };
    let manifest_json = serde_json::to_vec(&manifest).expect("a manifest always serializes");
    write_message(&mut stream, &Message::SnapshotManifest { manifest_json }).await?;
    for number in first..manifest.chunk_count() {
        // A chunk is a read of the disk: under the simulator it takes the disk's time, so the
        // transfers of a tier bootstrapping together interleave as they do on a real machine.
        state.disk_io(DiskOp::Read).await;
        let chunk = source.read_chunk(number).map_err(|e| ProtocolError::Io(std::io::Error::other(e.to_string())))?;
        write_message(&mut stream, &Message::SnapshotChunk(chunk)).await?;
        if number + 1 < manifest.chunk_count() && state.fault_point(FaultPoint::DropMidSnapshot) {
            return Ok(()); // FAULT POINT: the transfer breaks off; the client resumes it
        }
    }
    write_message(&mut stream, &Message::SnapshotDone).await
}

/// The export a client at `client_index` gets: the newest one while it is younger than
/// [`EXPORT_REUSE_MAX`] and either is the one the client is resuming (`fingerprint`) or is
/// still of use to it (a client resuming an older one starts this one afresh) — not behind
/// the client, and with this node's log still holding every entry after it, so the client
/// follows the log from there. Otherwise a fresh export. So a
/// tier that falls out of retention together shares one export instead of each client's
/// export deleting the one the others are reading.
fn current_export(
    state: &NodeState,
    exports: &Mutex<ExportCache>,
    fingerprint: Option<&str>,
    client_index: u64,
) -> Result<(Arc<Export>, SnapshotSource), String> {
    let mut cache = exports.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(export) = &cache.newest {
        let fresh = export.made.elapsed() < EXPORT_REUSE_MAX;
        let resuming = fingerprint == Some(export.manifest.fingerprint().as_str());
        let first_retained = state.read_store(|s| s.first_retained_index());
        let of_use =
            export.manifest.applied_index >= client_index && export.manifest.applied_index + 1 >= first_retained;
        if fresh && (resuming || of_use) {
            return Ok((export.clone(), open_export(state, &export.dir)?));
        }
    }
    let root = state.config.snapshot_dir();
    cache.exports_made += 1;
    let dir = root.join(format!("export-{}", cache.exports_made));
    if dir.exists() {
        // Left by an earlier process of this node (numbers start again at each start).
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    state.read_store(|store| store.export_snapshot(&dir)).map_err(|e| e.to_string())?;
    let source = open_export(state, &dir)?;
    let export = Arc::new(Export { dir, manifest: source.manifest().clone(), made: tokio::time::Instant::now() });
    // The one it replaces is removed once the last transfer reading it ends.
    cache.newest = Some(export.clone());
    Ok((export, source))
}

/// An export, served in `replication.snapshot_chunk_bytes` chunks.
fn open_export(state: &NodeState, dir: &std::path::Path) -> Result<SnapshotSource, String> {
    SnapshotSource::open(dir)
        .and_then(|s| s.with_chunk_bytes(state.config.replication.snapshot_chunk_bytes.as_u64()))
        .map_err(|e| e.to_string())
}
