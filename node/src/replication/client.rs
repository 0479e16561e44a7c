//! The replication client: follows the first healthy source in the configured order.
//!
//! Guarantees:
//! - Every received entry is checked before it is applied: it decodes and its hash verifies, its
//!   index is exactly one more than the last applied, its database id is ours, and its previous
//!   hash is our chain hash (the store's `apply` refuses anything else). A violation disconnects
//!   from that source, is counted, and nothing from that frame is applied.
//! - Entries of one frame are applied at most `apply_batch_entries_max` to a commit, with the
//!   applied index in it, so a restart resumes exactly where it stopped.
//! - When the newest entry we have is older than `staleness_failover` we judge the source as
//!   `staleness` says: leave one that went quiet or that calls itself healthy, wait for one
//!   that says it is recovering its own path, and move from that one only to a source a probe
//!   found healthy and ahead. A source silent for `staleness_failover` is left in any case, and
//!   so is one whose keepalives say it holds entries we lack while it sends none for as long (a
//!   stalled stream): every wait of this client has a deadline — connecting and the hello
//!   within `staleness_failover`, every step of a bootstrap within `snapshot_timeout`.
//! - A source that no longer holds our next index answers `OutOfRetention`; we try the next
//!   source, and when a round of every source brought nothing and one of them said so, we
//!   bootstrap from a snapshot (a source that is down cannot veto it), asking the sources that
//!   answered first (one that is paused cannot hold it up). We never skip. A transfer that
//!   broke off resumes from the source it was staged from.
//! - After trying every source without progress we wait a capped, jittered, exponential backoff.
//!   The jitter comes from a generator seeded by the node id, so the simulator controls it.
//! - Losing every source never stops this node serving reads or its own downstream clients.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::{Instant, timeout};

use super::bootstrap::{BootstrapFailed, RESUMES_IN_A_ROW_MAX, bootstrap};
use super::protocol::{KEEPALIVE_INTERVAL, SOURCE_QUIET, WELCOME_WITHIN};
use super::protocol::{Message, UpstreamStatus, Want, read_message, write_message};
use super::staleness::{Heard, Staleness, Verdict};
use crate::entry::VerifiedEntry;
use crate::metrics::Metrics;
use crate::observe::{NodeEvent, Probe, SourceChange};
use crate::state::{DiskOp, NodeState};
use crate::store::StoreError;

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
    /// Our own store failed a commit (a disk error): no fault of the source's. The store is
    /// settled (reopened) before the next apply.
    StoreFailed(String),
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
            Ended::StoreFailed(_) => SourceChange::StoreFailed,
        }
    }
}

/// How long the planted `never_leave_stale_source` bug waits for a silent source: for ever, in
/// practice (a year).
const STALE_SOURCE_FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// Follows the configured sources forever.
#[expect(
    clippy::too_many_lines,
    reason = "104 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub async fn run(state: Arc<NodeState>) {
    let sources = state.config.sources();
    let config = state.config.replication.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(state.node_id as u64 ^ (state.node_id >> 64) as u64);
    let mut backoff = config.reconnect_backoff_min;
    let mut attempts: u64 = 0;
    // PLANTED BUG (legacy): after a restart, resume from the side file, not the store.
    let legacy_cursor_file =
        state.config.planted().cursor_written_at_disconnect || state.config.planted().cursor_written_before_apply;
    let mut resume_from = legacy_cursor_file.then(|| legacy_cursor(&state));
    if let Some(cursor) = resume_from {
        state.cursor_persisted(cursor);
    }
    // Why the previous source was left, for the next `NodeEvent::SourceChanged`.
    let mut left_because = SourceChange::Start;
    // The source whose snapshot transfer is staged, half done.
    let mut staged_from: Option<SocketAddr> = None;
    // The source last left because it was stale, until the next source is chosen.
    let mut left_stale: Option<SocketAddr> = None;
    loop {
        let mut progressed = false;
        // The sources that answered "out of retention" this round: alive, and serving.
        let mut answered_out_of_retention: Vec<SocketAddr> = Vec::new();
        // Sources that ended without saying whether they hold our next entry (down, refusing,
        // silent or misbehaving): they cannot veto a bootstrap another source calls for.
        let mut damaged = state.is_damaged();
        for (position, &source) in sources.iter().enumerate() {
            if damaged {
                break;
            }
            // The source just left as stale is not followed again at once: when a probe had
            // taken us there out of the configured order, that order can name it next, and going
            // straight back starts a new stale episode on the same stale source — its replicas'
            // patience runs out with ours, and they move two hops below the fault
            // (`regression/raft-leader-commits-fail-seed-154.toml`, `containment`).
            if left_stale.take() == Some(source) && sources.len() > 1 {
                continue;
            }
            if attempts > 0 {
                state.metrics.reconnects.inc();
            }
            attempts += 1;
            let before = state.read_store(|s| s.applied_index());
            let (ended, followed) = follow_and_probed(&state, source, resume_from.take(), left_because).await;
            if let Ended::Stale { .. } = ended {
                left_stale = Some(followed);
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
            if state.config.planted().cursor_written_at_disconnect {
                write_legacy_cursor(&state);
            }
            let after = state.read_store(|s| s.applied_index());
            progressed |= after > before;
            tracing::info!(node = %state.config.name, source = %followed, ?ended, applied = after, "left replication source");
            if let Ended::OutOfRetention { .. } = ended {
                answered_out_of_retention.push(source);
            }
            damaged |= ended == Ended::Damaged;
            if position + 1 < sources.len() {
                state.metrics.failovers.inc();
            }
        }
        if (!answered_out_of_retention.is_empty() && !progressed) || damaged {
            // A source no longer holds our next entry and no source gave us anything this
            // round, or our store is damaged: bootstrap from the first source that serves a
            // snapshot (a verified one replaces the whole store). Waiting for every source to
            // say "out of retention" would wait for ever on one that is down.
            if damaged {
                tracing::warn!(node = %state.config.name, "a stored value is damaged: re-bootstrapping from a source");
                left_because = SourceChange::Damaged;
            }
            // The source whose transfer is staged first: another source's export is another
            // snapshot, and asking it would start the transfer again at chunk 0. Then the
            // sources that just answered: one that accepts a connection and says nothing (a
            // paused process) would hold the bootstrap for a whole `snapshot_timeout` if asked
            // first, in configured order. The rest last.
            let mut order: Vec<SocketAddr> = staged_from.filter(|s| sources.contains(s)).into_iter().collect();
            for source in answered_out_of_retention.iter().chain(&sources) {
                if !order.contains(source) {
                    order.push(*source);
                }
            }
            'sources: for source in order {
                for resumed in 0.. {
                    match bootstrap(&state, source).await {
                        Ok(()) => {
                            progressed = true;
                            staged_from = None;
                            break 'sources;
                        }
                        // A transfer that broke off after storing chunks resumes from the same
                        // source at once: each attempt stores more, so this ends.
                        Err(BootstrapFailed { reason, chunks_stored, stage })
                            if chunks_stored > 0 && resumed < RESUMES_IN_A_ROW_MAX =>
                        {
                            tracing::warn!(%source, error = %reason, chunks_stored, "snapshot transfer broke off: resuming it");
                            state.report(NodeEvent::BootstrapFailed { source, stage, chunks_stored });
                            staged_from = Some(source);
                        }
                        Err(BootstrapFailed { reason, chunks_stored, stage }) => {
                            tracing::warn!(%source, error = %reason, ?stage, "bootstrap attempt failed");
                            state.report(NodeEvent::BootstrapFailed { source, stage, chunks_stored });
                            break;
                        }
                    }
                }
            }
        }
        if progressed {
            backoff = config.reconnect_backoff_min;
        }
        if state.config.planted().stop_serving_when_upstream_lost {
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

/// Follows `source`, then each healthy source a probe found ahead of the one being left, until
/// one ends without such a find: how that one ended, and which source it was.
async fn follow_and_probed(
    state: &NodeState,
    source: SocketAddr,
    resume_from: Option<u64>,
    left_because: SourceChange,
) -> (Ended, SocketAddr) {
    let mut followed = source;
    let mut ended = follow(state, source, resume_from, left_because).await;
    while let Ended::Stale { better: Some(better) } = ended {
        state.probe(Probe::MovedToProbedSource);
        tracing::info!(node = %state.config.name, left = %followed, %better, "left a stale source for a healthy one");
        state.metrics.failovers.inc();
        followed = better;
        ended = follow(state, better, None, SourceChange::Stale).await;
    }
    (ended, followed)
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

/// Connects to `source` and applies what it streams until something ends it; asks for entries
/// after `resume_from` instead of the applied index when given (the legacy cursor).
/// `left_because` says why the previous source was left (for the trace).
#[expect(
    clippy::too_many_lines,
    reason = "145 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
async fn follow(state: &NodeState, source: SocketAddr, resume_from: Option<u64>, left_because: SourceChange) -> Ended {
    let staleness = state.config.replication.staleness_failover;
    let welcome_within = staleness.min(WELCOME_WITHIN);
    let mut stream = match super::dial::dial(state, source, welcome_within).await {
        Ok(stream) => stream,
        Err(e) => return Ended::Disconnected(e.to_string()),
    };
    match timeout(staleness, write_message(&mut stream, &Message::Hello(state.hello(Want::Log, resume_from)))).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Ended::Disconnected(format!("hello: {e}")),
        Err(_) => return Ended::Disconnected("sending the hello timed out".into()),
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
    let mut welcomed = false;
    // What the source's last keepalive said about its own path (healthy until it says).
    let mut last_said = UpstreamStatus::Healthy;
    // Whether a verdict to leave waited once for the frames that arrived while we judged.
    let mut deferred = false;
    // Since when the source's keepalives have said it holds entries we lack (none arriving).
    let mut behind_since: Option<Instant> = None;
    // PLANTED BUG (legacy): without a staleness timeout a source that stops sending is followed
    // for as long as its connection stays open.
    let silence_allowed =
        if state.config.planted().never_leave_stale_source { STALE_SOURCE_FOREVER } else { staleness };
    loop {
        if state.is_damaged() {
            return Ended::Damaged;
        }
        let message = match timeout(KEEPALIVE_INTERVAL, arriving.recv()).await {
            Err(_) => {
                // Nothing for a keepalive interval: judge a quiet source.
                let silent = heard_at.elapsed();
                if !welcomed && silent >= welcome_within {
                    return Ended::Disconnected(format!("no welcome within {welcome_within:?}"));
                }
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
            Message::Welcome { applied_index, root_ms, .. } => {
                welcomed = true;
                state.root_clock.heard(root_ms);
                state.set_upstream_ok(true);
                state.set_followed_a_source();
                state.heard_from_source(Some(0));
                source_head = applied_index;
                tracing::info!(node = %state.config.name, source = %source, reason = left_because.as_str(), "following a source");
                state.report(NodeEvent::SourceChanged { source, reason: left_because });
            }
            Message::Entries { entries, root_ms } => {
                state.root_clock.heard(root_ms);
                state.heard_from_source(None);
                behind_since = None;
                let entries = match decode_frame(entries) {
                    Ok(entries) => entries,
                    Err(reason) => return violation(&state.metrics, reason),
                };
                if state.config.planted().cursor_written_before_apply
                    && let Some(last) = entries.last()
                {
                    // PLANTED BUG (legacy): the position is saved on receipt, before the entries
                    // are applied; a crash in between resumes past entries never applied.
                    write_legacy_cursor_at(state, last.index);
                }
                let bytes: u64 = entries.iter().map(|e| e.logical_bytes()).sum();
                state.disk_io(DiskOp::Commit { bytes }).await;
                state.pages_io(entries.iter().flat_map(|e| e.ops.iter())).await;
                match apply_frame(state, &entries) {
                    Ok(()) => {}
                    Err(ApplyFailed::Refused(refusal)) => return violation(&state.metrics, refusal.to_string()),
                    Err(ApplyFailed::Store(_)) if state.is_damaged() => return Ended::Damaged,
                    Err(ApplyFailed::Store(e)) => {
                        let reason = format!("applying: {e}");
                        tracing::error!(node = %state.config.name, %reason, "applying entries failed in this node's own store");
                        return Ended::StoreFailed(reason);
                    }
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
            Message::Keepalive { upstream, applied_index, root_ms } => {
                state.root_clock.heard(root_ms);
                last_said = upstream;
                state.heard_from_source(Some(upstream.wire()));
                let ours = state.read_store(|s| s.applied_index());
                if applied_index > ours {
                    // The source holds entries we lack, yet sends keepalives instead of them: a
                    // stalled stream. A moment of it is a race (it applied one as the keepalive
                    // left); `staleness_failover` of it is a source to leave, not wait on.
                    let since = *behind_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= staleness {
                        state.metrics.failovers.inc();
                        tracing::warn!(node = %state.config.name, %source, source_index = applied_index, ours, waited = ?since.elapsed(), "the source holds entries we lack but has sent none: leaving it");
                        return Ended::Stale { better: None };
                    }
                } else {
                    behind_since = None;
                    state.set_ready(); // the source has nothing newer
                }
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
pub(crate) fn decode_frame(frames: Vec<Vec<u8>>) -> Result<Vec<VerifiedEntry>, String> {
    frames
        .into_iter()
        .map(|frame| VerifiedEntry::decompress(frame).map_err(|e| format!("undecodable entry: {e}")))
        .collect()
}

/// Why a frame was not applied: the source's doing, or this node's store's.
pub(crate) enum ApplyFailed {
    /// The entries were refused (a gap, a broken chain, another database): the source's fault.
    Refused(crate::store::ApplyRefusal),
    /// The store failed (damage, a disk error): this node's.
    Store(StoreError),
}

/// Checks and applies one frame of entries, at most `replication.apply_batch_entries_max` to a
/// commit.
pub(crate) fn apply_frame(state: &NodeState, entries: &[VerifiedEntry]) -> Result<(), ApplyFailed> {
    let per_commit = state.config.replication.apply_batch_entries_max.max(1);
    entries.chunks(per_commit).try_for_each(|batch| apply_batch(state, batch))
}

/// Checks and applies `entries` as one commit.
fn apply_batch(state: &NodeState, entries: &[VerifiedEntry]) -> Result<(), ApplyFailed> {
    let bytes: u64 = entries.iter().map(|e| e.logical_bytes()).sum();
    let legacy = state.config.planted().apply_without_gap_check;
    let applied = state.with_store(|store| {
        // After a failed commit the head is unknown until the store is reopened.
        state.settle(store)?;
        if legacy { store.apply_without_gap_check(entries) } else { store.apply_verified(entries) }?;
        // Published under the store lock, as every apply is (see `NodeState::applied`).
        if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
            state.applied(first, last);
        }
        Ok(())
    });
    applied.map_err(|e| match e {
        StoreError::Refused(refusal) => ApplyFailed::Refused(refusal),
        // The commit met damage already in the store (a RocksDB compaction reading a corrupt
        // block stops every write): the entries are fine, the store is not.
        damage if damage.is_damage() => {
            state.found_damage();
            ApplyFailed::Store(damage)
        }
        other => ApplyFailed::Store(other),
    })?;
    state.metrics.entries_applied.inc_by(entries.len() as u64);
    state.metrics.bytes_applied.inc_by(bytes);
    Ok(())
}

// NodeState reads the clock, which under madsim needs its runtime: the tokio build runs these.
#[cfg(all(test, not(madsim)))]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::config::NodeConfig;
    use crate::entry::{DatabaseId, Op};
    use crate::observe::NodeObserver;
    use crate::state::SimHooks;
    use crate::store::{MemDisk, OpenOptions, Store, StoreLocation};

    /// The commits a replica made: each `Applied` event's first and last index.
    #[derive(Debug, Default)]
    struct Commits(Mutex<Vec<(u64, u64)>>);

    impl NodeObserver for Commits {
        fn observe(&self, _node: &str, event: NodeEvent) {
            if let NodeEvent::Applied { first, last, .. } = event {
                self.0.lock().unwrap().push((first, last));
            }
        }
    }

    /// A replica with `apply_batch_entries_max` at `per_commit` (None: the shipped default).
    fn replica(per_commit: Option<usize>) -> (Arc<NodeState>, Arc<Commits>) {
        let limit = per_commit.map_or(String::new(), |n| format!("apply_batch_entries_max = {n}\n"));
        let text = format!(
            "name = \"edge\"\nrole = \"replica\"\ndatabase_id = \"2a\"\n[storage]\nengine = \"memory\"\n\
             [listen]\nreplication = \"127.0.0.1:7001\"\nmemcached = \"127.0.0.1:11001\"\nhttp = \"127.0.0.1:8001\"\n\
             [replication]\nprimaries = [\"127.0.0.1:7000\"]\n{limit}"
        );
        let config = NodeConfig::parse(&text, "edge.toml").unwrap();
        let store = Store::open(&StoreLocation::Memory(MemDisk::default()), &config.store_options()).unwrap();
        let commits = Arc::new(Commits::default());
        let observer: Arc<dyn NodeObserver> = commits.clone();
        (
            NodeState::with_disk(
                config,
                store,
                1,
                None,
                SimHooks { observer: Some(observer), ..SimHooks::default() },
                None,
            ),
            commits,
        )
    }

    /// `count` entries as a source sends them, chained from the start.
    fn frame(count: u64) -> Vec<VerifiedEntry> {
        let mut root = Store::open(&StoreLocation::Memory(MemDisk::default()), &OpenOptions::new(DatabaseId(0x2a)))
            .expect("a root store");
        (1..=count)
            .map(|i| {
                let ops = vec![Op::Set { key: format!("k{i}").into_bytes(), value: b"v".to_vec() }];
                let entry = root.next_entry(i, ops).expect("an entry");
                root.apply(std::slice::from_ref(&entry)).expect("applied at the root");
                VerifiedEntry::decompress(entry.compress()).expect("a sound entry")
            })
            .collect()
    }

    #[test]
    fn a_frame_is_applied_at_most_apply_batch_entries_max_to_a_commit() {
        let (state, commits) = replica(Some(2));
        assert!(apply_frame(&state, &frame(5)).is_ok());
        assert_eq!(*commits.0.lock().unwrap(), vec![(1, 2), (3, 4), (5, 5)], "three commits of at most two");
        assert_eq!(state.read_store(|s| s.applied_index()), 5);
    }

    #[test]
    fn at_the_shipped_default_a_frame_of_a_thousand_is_one_commit() {
        let (state, commits) = replica(None);
        assert_eq!(state.config.replication.apply_batch_entries_max, 1_000, "the documented default");
        assert!(apply_frame(&state, &frame(1_001)).is_ok());
        assert_eq!(*commits.0.lock().unwrap(), vec![(1, 1_000), (1_001, 1_001)]);
    }
}
