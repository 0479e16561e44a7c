//! The replication client: follows the first healthy source in the configured order.
//!
//! Guarantees:
//! - Every received entry is checked before it is applied: it decodes and its hash verifies, its
//!   index is exactly one more than the last applied, its database id is ours, and its previous
//!   hash is our chain hash (the store's `apply` refuses anything else). A violation disconnects
//!   from that source, is counted, and nothing from that frame is applied.
//! - Entries of one frame are applied in one commit, with the applied index in it, so a restart
//!   resumes exactly where it stopped.
//! - When the newest entry we have is older than `staleness_failover` we judge the source as
//!   `staleness` says: leave one that went quiet or that calls itself healthy, wait for one
//!   that says it is recovering its own path, and move from that one only to a source a probe
//!   found healthy and ahead. A source silent for `staleness_failover` is left in any case.
//! - A source that no longer holds our next index answers `OutOfRetention`; we try the next
//!   source, and when no source has the history, bootstrap from a snapshot. We never skip.
//! - After trying every source without progress we wait a capped, jittered, exponential backoff.
//!   The jitter comes from a generator seeded by the node id, so the simulator controls it.
//! - Losing every source never stops this node serving reads or its own downstream clients.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use super::protocol::{ClientHello, Message, PROTOCOL_VERSION, UpstreamStatus, Want, read_message, write_message};
use super::server::KEEPALIVE_INTERVAL;
use super::staleness::{Heard, SOURCE_QUIET, Staleness, Verdict};
use crate::entry::VerifiedEntry;
use crate::metrics::Metrics;
use crate::node::{DiskOp, NodeState};
use crate::observe::{NodeEvent, Probe, SourceChange};
use crate::store::snapshot::{SnapshotImport, SnapshotManifest};
use crate::store::{Store, StoreError, StoreLocation};

/// The legacy backoff's ceiling: far above any sane cap, as in the seed's incident.
const LEGACY_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(600);

/// Why following one source ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// Could not connect, or the connection broke.
    Disconnected(String),
    /// The source refused us (reason logged and counted).
    Refused(String),
    /// Nothing newer arrived within the staleness threshold; `better` is a source a probe found
    /// healthy and ahead of us, to follow next.
    Stale { better: Option<SocketAddr> },
    /// The source sent something that breaks the chain or the protocol.
    Violation(String),
    /// The source no longer has the entry we need next.
    OutOfRetention { first_retained: u64 },
    /// Our own store holds a damaged value: we re-bootstrap.
    Damaged,
}

impl Ended {
    /// Why the source was left, for the next source's [`NodeEvent::SourceChanged`].
    fn reason(&self) -> SourceChange {
        match self {
            Ended::Disconnected(_) => SourceChange::Disconnected,
            Ended::Refused(_) => SourceChange::Refused,
            Ended::Stale { .. } => SourceChange::Stale,
            Ended::Violation(_) => SourceChange::Violation,
            Ended::OutOfRetention { .. } => SourceChange::OutOfRetention,
            Ended::Damaged => SourceChange::Damaged,
        }
    }
}

/// How long the planted `never_leave_stale_source` bug waits for a silent source: for ever, in
/// practice (a year).
const STALE_SOURCE_FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// Follows the configured sources forever.
pub async fn run(state: Arc<NodeState>) {
    let sources = state.config.sources();
    let config = state.config.replication.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(state.node_id as u64 ^ (state.node_id >> 64) as u64);
    let mut backoff = config.reconnect_backoff_min;
    let mut attempts: u64 = 0;
    // PLANTED BUG (legacy): after a restart, resume from the side file, not the store.
    let legacy_cursor_file =
        state.config.legacy.cursor_written_at_disconnect || state.config.legacy.cursor_written_before_apply;
    let mut resume_from = legacy_cursor_file.then(|| legacy_cursor(&state));
    if let Some(cursor) = resume_from {
        state.cursor_persisted(cursor);
    }
    // Why the previous source was left, for the next `NodeEvent::SourceChanged`.
    let mut left_because = SourceChange::Start;
    loop {
        let mut progressed = false;
        let mut out_of_retention = 0;
        let mut damaged = state.is_damaged();
        for (position, &source) in sources.iter().enumerate() {
            if damaged {
                break;
            }
            if attempts > 0 {
                state.metrics.reconnects.inc();
            }
            attempts += 1;
            let before = state.read_store(|s| s.applied_index());
            let mut ended = follow(&state, source, resume_from.take(), left_because).await;
            // A probe found a healthy source ahead of us: follow it before going on in order.
            while let Ended::Stale { better: Some(better) } = ended {
                state.probe(Probe::MovedToProbedSource);
                tracing::info!(node = %state.config.name, %source, %better, "left a stale source for a healthy one");
                state.metrics.failovers.inc();
                ended = follow(&state, better, None, SourceChange::Stale).await;
            }
            // Until a source has welcomed this process, it has not left one: its first source,
            // however many refused or were down, is still a (re)start.
            if state.followed_a_source() {
                left_because = ended.reason();
            }
            state.probe(match ended {
                Ended::Stale { .. } => Probe::LeftStaleSource,
                _ => Probe::LeftBrokenSource,
            });
            state.set_upstream_ok(false);
            if state.config.legacy.cursor_written_at_disconnect {
                write_legacy_cursor(&state);
            }
            let after = state.read_store(|s| s.applied_index());
            progressed |= after > before;
            tracing::info!(node = %state.config.name, %source, ?ended, applied = after, "left replication source");
            if let Ended::OutOfRetention { .. } = ended {
                out_of_retention += 1;
            }
            damaged |= ended == Ended::Damaged;
            if position + 1 < sources.len() {
                state.metrics.failovers.inc();
            }
        }
        if out_of_retention == sources.len() || damaged {
            // No source has our next entry, or our store is damaged: bootstrap from the first
            // source that serves a snapshot (a verified one replaces the whole store).
            if damaged {
                tracing::warn!(node = %state.config.name, "a stored value is damaged: re-bootstrapping from a source");
                left_because = SourceChange::Damaged;
            }
            for &source in &sources {
                match bootstrap(&state, source).await {
                    Ok(()) => {
                        progressed = true;
                        break;
                    }
                    Err(e) => tracing::warn!(%source, error = %e, "bootstrap attempt failed"),
                }
            }
        }
        if progressed {
            backoff = config.reconnect_backoff_min;
        }
        if state.config.legacy.stop_serving_when_upstream_lost {
            // PLANTED BUG (legacy): uncapped, unjittered exponential backoff (bounded only by
            // LEGACY_BACKOFF_MAX so that even the bug has a limit).
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(LEGACY_BACKOFF_MAX);
            continue;
        }
        // Full jitter over [backoff/2, backoff], so replicas that lost one source together do
        // not all come back at once.
        let jittered = backoff.mul_f64(rng.random_range(0.5..=1.0));
        tokio::time::sleep(jittered).await;
        backoff = (backoff * 2).min(config.reconnect_backoff_max);
    }
}

/// The legacy side-file cursor: `<storage path>.rts`, 0 when absent.
fn legacy_cursor_path(state: &NodeState) -> std::path::PathBuf {
    let mut name = state.config.storage.path.file_name().unwrap_or_default().to_os_string();
    name.push(".rts");
    state.config.storage.path.with_file_name(name)
}

fn legacy_cursor(state: &NodeState) -> u64 {
    std::fs::read_to_string(legacy_cursor_path(state)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

fn write_legacy_cursor(state: &NodeState) {
    let applied = state.read_store(|s| s.applied_index());
    write_legacy_cursor_at(state, applied);
}

fn write_legacy_cursor_at(state: &NodeState, index: u64) {
    match std::fs::write(legacy_cursor_path(state), index.to_string()) {
        Ok(()) => state.cursor_persisted(index),
        Err(e) => tracing::warn!(error = %e, "legacy: writing the rts cursor failed"),
    }
}

pub(super) fn hello(state: &NodeState, want: Want) -> Message {
    hello_from(state, want, None)
}

/// A hello asking for entries after `last_index`, or after the applied index when `None`.
fn hello_from(state: &NodeState, want: Want, last_index: Option<u64>) -> Message {
    let last_index = last_index.unwrap_or_else(|| state.read_store(|s| s.applied_index()));
    Message::Hello(ClientHello {
        version: PROTOCOL_VERSION,
        client_id: state.node_id,
        db_id: state.config.database_id,
        last_index,
        stop_index: None,
        newest_only: false,
        want,
    })
}

/// Connects to `source` and applies what it streams until something ends it; asks for entries
/// after `resume_from` instead of the applied index when given (the legacy cursor).
/// `left_because` says why the previous source was left (for the trace).
async fn follow(state: &NodeState, source: SocketAddr, resume_from: Option<u64>, left_because: SourceChange) -> Ended {
    let staleness = state.config.replication.staleness_failover;
    let mut stream = match timeout(staleness, TcpStream::connect(source)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Ended::Disconnected(format!("connect: {e}")),
        Err(_) => return Ended::Disconnected("connect timed out".into()),
    };
    if let Err(e) = write_message(&mut stream, &hello_from(state, Want::Log, resume_from)).await {
        return Ended::Disconnected(format!("hello: {e}"));
    }
    // Frames arrive through a reader task, so that waiting for one can be cut short to judge
    // staleness without tearing a frame in half (`read_message` is not cancel-safe).
    let (frames, mut arriving) = tokio::sync::mpsc::channel(1);
    let _reader = AbortOnDrop(tokio::spawn(async move {
        loop {
            let frame = read_message(&mut stream).await;
            let last = !matches!(frame, Ok(Some(_)));
            if frames.send(frame).await.is_err() || last {
                return;
            }
        }
    }));
    let others: Vec<SocketAddr> = state.config.sources().into_iter().filter(|s| *s != source).collect();
    let mut judgement = Staleness::default();
    let mut source_head = u64::MAX;
    let mut heard_at = Instant::now();
    // What the source's last keepalive said about its own path (healthy until it says).
    let mut last_said = UpstreamStatus::Healthy;
    // Whether a verdict to leave waited once for the frames that arrived while we judged.
    let mut deferred = false;
    // PLANTED BUG (legacy): without a staleness timeout a source that stops sending is followed
    // for as long as its connection stays open.
    let silence_allowed = if state.config.legacy.never_leave_stale_source { STALE_SOURCE_FOREVER } else { staleness };
    loop {
        if state.is_damaged() {
            return Ended::Damaged;
        }
        let message = match timeout(KEEPALIVE_INTERVAL, arriving.recv()).await {
            Err(_) => {
                // Nothing for a keepalive interval: judge a quiet source.
                let silent = heard_at.elapsed();
                if silent >= silence_allowed {
                    return Ended::Stale { better: None };
                }
                if silent > SOURCE_QUIET
                    && let Verdict::Leave { better } = judgement.judge(state, Heard::Quiet, &others).await
                    && leave_now(&arriving, &mut deferred)
                {
                    return Ended::Stale { better };
                }
                continue;
            }
            Ok(None) => return Ended::Disconnected("the connection's reader ended".into()),
            Ok(Some(Ok(Some(message)))) => message,
            Ok(Some(Ok(None))) => return Ended::Disconnected("source closed the connection".into()),
            Ok(Some(Err(e))) => return Ended::Disconnected(e.to_string()),
        };
        heard_at = Instant::now();
        match message {
            Message::Welcome { db_id, .. } if db_id != state.config.database_id => {
                return violation(&state.metrics, format!("source holds database {db_id}"));
            }
            Message::Welcome { applied_index, .. } => {
                state.set_upstream_ok(true);
                state.set_followed_a_source();
                state.heard_from_source(Some(0));
                source_head = applied_index;
                tracing::info!(node = %state.config.name, source = %source, reason = left_because.as_str(), "following a source");
                state.report(NodeEvent::SourceChanged { source, reason: left_because });
            }
            Message::Entries { entries } => {
                state.heard_from_source(None);
                let entries = match decode_frame(entries) {
                    Ok(entries) => entries,
                    Err(reason) => return violation(&state.metrics, reason),
                };
                if state.config.legacy.cursor_written_before_apply
                    && let Some(last) = entries.last()
                {
                    // PLANTED BUG (legacy): the position is saved on receipt, before the entries
                    // are applied; a crash in between resumes past entries never applied.
                    write_legacy_cursor_at(state, last.index);
                }
                let bytes: u64 = entries.iter().map(|e| e.logical_bytes()).sum();
                state.disk_io(DiskOp::Commit { bytes }).await;
                state.pages_io(entries.iter().flat_map(|e| e.ops.iter())).await;
                if let Err(reason) = apply_frame(state, &entries) {
                    return violation(&state.metrics, reason);
                }
                if state.read_store(|s| s.applied_index()) >= source_head {
                    state.set_ready(); // caught up with the source's head at connect time
                }
                // A source streaming only old entries (its disk too slow to keep up) sends no
                // keepalive to judge it by: judge it here, by what it said last.
                if let Verdict::Leave { better } = judgement.judge(state, Heard::Said(last_said), &others).await
                    && leave_now(&arriving, &mut deferred)
                {
                    return Ended::Stale { better };
                }
            }
            Message::Keepalive { upstream, .. } => {
                last_said = upstream;
                state.heard_from_source(Some(upstream.wire()));
                state.set_ready(); // the source has nothing newer
                if let Verdict::Leave { better } = judgement.judge(state, Heard::Said(upstream), &others).await
                    && leave_now(&arriving, &mut deferred)
                {
                    return Ended::Stale { better };
                }
            }
            Message::OutOfRetention { requested, first_retained } => {
                state.metrics.out_of_retention.inc();
                tracing::warn!(%source, requested, first_retained, "source no longer holds the entries we need");
                return Ended::OutOfRetention { first_retained };
            }
            Message::Refused { reason, detail } => {
                state.metrics.refusals_received.get_or_create(&Metrics::label("reason", &format!("{reason:?}"))).inc();
                tracing::warn!(%source, ?reason, %detail, "source refused us");
                return Ended::Refused(format!("{reason:?}: {detail}"));
            }
            other => {
                return violation(&state.metrics, format!("unexpected {} while following the log", other.frame_type()));
            }
        }
    }
}

/// Marks the node as no longer in the middle of a snapshot transfer when dropped.
struct Transferring<'a>(&'a NodeState);

impl Drop for Transferring<'_> {
    fn drop(&mut self) {
        self.0.set_transferring(false);
    }
}

/// Whether to act on a verdict to leave now. A source that spoke while we judged (or probed)
/// gets its frames read first — they may be the entries that make us fresh — once; a source
/// that keeps streaming old entries is left at the next verdict.
fn leave_now<T>(arriving: &tokio::sync::mpsc::Receiver<T>, deferred: &mut bool) -> bool {
    if arriving.is_empty() || *deferred {
        return true;
    }
    *deferred = true;
    false
}

/// Aborts the task when dropped: a connection's reader never outlives its `follow`.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn violation(metrics: &Metrics, reason: String) -> Ended {
    metrics.chain_violations.inc();
    tracing::error!(%reason, "replication source violated the chain or the protocol; disconnecting");
    Ended::Violation(reason)
}

/// Decodes one frame of entries, each checked against its own hash, keeping the bytes to store.
fn decode_frame(frames: Vec<Vec<u8>>) -> Result<Vec<VerifiedEntry>, String> {
    frames
        .into_iter()
        .map(|frame| VerifiedEntry::decompress(frame).map_err(|e| format!("undecodable entry: {e}")))
        .collect()
}

/// Checks and applies one frame of entries as one commit.
fn apply_frame(state: &NodeState, entries: &[VerifiedEntry]) -> Result<(), String> {
    let bytes: u64 = entries.iter().map(|e| e.logical_bytes()).sum();
    let legacy = state.config.legacy.apply_without_gap_check;
    let applied =
        state.with_store(
            |store| {
                if legacy { store.apply_without_gap_check(entries) } else { store.apply_verified(entries) }
            },
        );
    applied.map_err(|e| match e {
        StoreError::Refused(refusal) => refusal.to_string(),
        // The commit met damage already in the store (a RocksDB compaction reading a corrupt
        // block stops every write): the entries are fine, the store is not.
        damage if damage.is_damage() => {
            state.found_damage();
            format!("applying: {damage}")
        }
        other => format!("applying: {other}"),
    })?;
    state.metrics.entries_applied.inc_by(entries.len() as u64);
    state.metrics.bytes_applied.inc_by(bytes);
    if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
        state.applied(first, last);
    }
    Ok(())
}

/// Fetches a snapshot from `source` (resuming a staged one when the source still has it),
/// installs it in place of the current store, and returns. Replication then resumes from the
/// snapshot's index.
async fn bootstrap(state: &NodeState, source: SocketAddr) -> Result<(), String> {
    let staging = super::server::snapshot_dir(state).join("import");
    let staged = SnapshotImport::staged(&staging);
    if staged.is_some() {
        state.probe(Probe::SnapshotResumed);
    }
    let want = Want::Snapshot {
        resume_chunk: staged.as_ref().map_or(0, |(_, next)| *next),
        manifest_fingerprint: staged.as_ref().map(|(m, _)| m.fingerprint()),
    };
    let idle = state.config.replication.staleness_failover;
    let mut stream = timeout(idle, TcpStream::connect(source))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    write_message(&mut stream, &hello(state, want)).await.map_err(|e| e.to_string())?;
    let mut import: Option<SnapshotImport> = None;
    let _transfer = Transferring(state);
    loop {
        let message = timeout(idle, read_message(&mut stream))
            .await
            .map_err(|_| "snapshot source went quiet".to_string())?
            .map_err(|e| e.to_string())?
            .ok_or("snapshot source closed the connection")?;
        match message {
            Message::Welcome { .. } => {}
            Message::SnapshotManifest { manifest_json } => {
                let manifest: SnapshotManifest =
                    serde_json::from_slice(&manifest_json).map_err(|e| format!("snapshot manifest: {e}"))?;
                if manifest.db_id != state.config.database_id || manifest.engine != state.config.storage.engine {
                    return Err(format!("snapshot is of database {} on {}", manifest.db_id, manifest.engine));
                }
                import = Some(SnapshotImport::begin(&staging, manifest).map_err(|e| e.to_string())?);
            }
            Message::SnapshotChunk(chunk) => {
                let import = import.as_mut().ok_or("chunk before the manifest")?;
                if chunk.number < import.next_chunk() {
                    continue; // already durable from an earlier attempt
                }
                import.write_chunk(&chunk).map_err(|e| e.to_string())?;
                // Each stored chunk is a write to this node's disk.
                state.disk_io(DiskOp::Commit { bytes: chunk.bytes.len() as u64 }).await;
                state.set_transferring(import.next_chunk() < import.manifest().chunk_count());
            }
            Message::SnapshotDone => {
                let import = import.take().ok_or("snapshot ended before its manifest")?;
                return install(state, import);
            }
            Message::Refused { reason, detail } => return Err(format!("refused: {reason:?}: {detail}")),
            other => return Err(format!("unexpected {} during a snapshot transfer", other.frame_type())),
        }
    }
}

/// Verifies the finished import and swaps it in for the current store.
fn install(state: &NodeState, import: SnapshotImport) -> Result<(), String> {
    let config = &state.config;
    let options = config.store_options();
    let fresh = match config.storage.engine {
        crate::store::EngineKind::Memory => StoreLocation::Memory(Default::default()),
        kind => StoreLocation::new(kind, &super::server::snapshot_dir(state).join("installing")),
    };
    let imported = import.finish(&fresh, &options).map_err(|e| e.to_string())?;
    let index = imported.applied_index();
    let ours = state.read_store(|s| s.applied_index());
    if index < ours {
        // Never back: a node that re-bootstraps over a damaged store waits for a source that
        // has caught up with what it had applied.
        return Err(format!("the snapshot is at index {index}, behind this store's {ours}"));
    }
    match &fresh {
        StoreLocation::Memory(scratch) => match state.memory_disk() {
            // Move the imported data onto the disk that outlives this process, then reopen.
            Some(live) => {
                drop(imported);
                let live = live.clone();
                state.with_store(|store| -> Result<(), String> {
                    live.take_contents_of(scratch);
                    *store = Store::open(&StoreLocation::Memory(live), &options).map_err(|e| e.to_string())?;
                    Ok(())
                })?;
                state.after_apply();
            }
            None => state.replace_store(imported),
        },
        StoreLocation::Lmdb(new_path) | StoreLocation::Rocksdb(new_path) => {
            // Close both stores, move the new one into place, reopen it there.
            drop(imported);
            let live = config.storage.path.clone();
            let retired = super::server::snapshot_dir(state).join("retired");
            let _ = std::fs::remove_dir_all(&retired);
            state.with_store(|store| -> Result<(), String> {
                let placeholder =
                    Store::open(&StoreLocation::Memory(Default::default()), &options).map_err(|e| e.to_string())?;
                drop(std::mem::replace(store, placeholder));
                std::fs::rename(&live, &retired).map_err(|e| format!("retiring {}: {e}", live.display()))?;
                std::fs::rename(new_path, &live).map_err(|e| format!("installing {}: {e}", live.display()))?;
                *store = Store::open(&StoreLocation::new(config.storage.engine, &live), &options)
                    .map_err(|e| e.to_string())?;
                Ok(())
            })?;
            let _ = std::fs::remove_dir_all(&retired);
            state.after_apply();
        }
    }
    state.metrics.bootstraps.inc();
    state.probe(Probe::SnapshotInstalled);
    state.healed();
    let hash = state.read_store(|s| s.chain_hash());
    tracing::info!(node = %config.name, index, hash = %hash, "bootstrapped from a snapshot");
    state.report(NodeEvent::Bootstrapped { index, hash: hash.to_string() });
    state.cursor_persisted(index);
    Ok(())
}
