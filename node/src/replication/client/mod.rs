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
//!
//! The client cycles through explicit `Phase`s — a round through the sources, a bootstrap when
//! the round calls for one, a backoff — and asserts every transition against its table; each
//! connection within a round is a `link::Link`, which holds the source to the protocol's order
//! (a welcome first, never twice). `apply` checks and commits what a source sends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::bootstrap::{BootstrapFailed, RESUMES_IN_A_ROW_MAX, bootstrap};
use crate::observe::{NodeEvent, Probe, SourceChange};
use crate::state::NodeState;
use link::{Ended, follow};

mod apply;
mod link;

pub(crate) use apply::{ApplyFailed, apply_frame, decode_frame};

/// The legacy backoff's ceiling: far above any sane cap, as in the seed's incident.
const LEGACY_BACKOFF_MAX: Duration = Duration::from_secs(600);

/// Where the client stands in its cycle: a round through the sources, a bootstrap when the
/// round calls for one, a backoff, the next round ([`Phase::may_enter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Following the configured sources in order, each until it ends.
    Round,
    /// No source served our next entry and one said it no longer holds it, or our store is
    /// damaged: copying a snapshot.
    Bootstrapping,
    /// Waiting out the backoff before the next round.
    BackingOff,
}

impl Phase {
    /// The client's transition table.
    fn may_enter(self, next: Phase) -> bool {
        matches!(
            (self, next),
            (Phase::Round, Phase::Bootstrapping | Phase::BackingOff)
                | (Phase::Bootstrapping, Phase::BackingOff)
                | (Phase::BackingOff, Phase::Round)
        )
    }
}

/// What one round through the sources found.
struct RoundEnd {
    /// Whether this node applied anything in the round (or a bootstrap after it installed).
    progressed: bool,
    /// The sources that answered "out of retention": alive, and serving.
    answered_out_of_retention: Vec<SocketAddr>,
    /// Whether this node's own store holds a damaged value.
    damaged: bool,
}

impl RoundEnd {
    /// A source no longer holds our next entry and no source gave us anything, or our store is
    /// damaged. Waiting for every source to say "out of retention" would wait for ever on one
    /// that is down: one saying it is enough.
    fn calls_for_bootstrap(&self) -> bool {
        (!self.answered_out_of_retention.is_empty() && !self.progressed) || self.damaged
    }
}

/// Follows the configured sources forever.
pub async fn run(state: Arc<NodeState>) {
    let mut client = Client::new(state);
    loop {
        let mut round = client.round().await;
        if round.calls_for_bootstrap() {
            client.enter(Phase::Bootstrapping);
            round.progressed |= client.bootstrap(&round).await;
        }
        client.enter(Phase::BackingOff);
        client.back_off(round.progressed).await;
        client.enter(Phase::Round);
    }
}

/// The client's state across sources and rounds.
struct Client {
    state: Arc<NodeState>,
    sources: Vec<SocketAddr>,
    phase: Phase,
    /// The backoff's jitter, seeded by the node id so that the simulator controls it.
    rng: ChaCha8Rng,
    backoff: Duration,
    /// Sources followed since the start: every one after the first is a reconnect.
    attempts: u64,
    /// The planted legacy cursor's position, for the first source after a start.
    resume_from: Option<u64>,
    /// Why the previous source was left, for the next `NodeEvent::SourceChanged`.
    left_because: SourceChange,
    /// The source whose snapshot transfer is staged, half done.
    staged_from: Option<SocketAddr>,
    /// The source last left because it was stale, until the next source is chosen.
    left_stale: Option<SocketAddr>,
}

impl Client {
    fn new(state: Arc<NodeState>) -> Client {
        let rng = ChaCha8Rng::seed_from_u64(state.node_id as u64 ^ (state.node_id >> 64) as u64);
        // PLANTED BUG (legacy): after a restart, resume from the side file, not the store.
        let planted = state.config.planted();
        let legacy_cursor_file = planted.cursor_written_at_disconnect || planted.cursor_written_before_apply;
        let resume_from = legacy_cursor_file.then(|| legacy_cursor(&state));
        if let Some(cursor) = resume_from {
            state.cursor_persisted(cursor);
        }
        Client {
            sources: state.config.sources(),
            phase: Phase::Round,
            rng,
            backoff: state.config.replication.reconnect_backoff_min,
            attempts: 0,
            resume_from,
            left_because: SourceChange::Start,
            staged_from: None,
            left_stale: None,
            state,
        }
    }

    fn enter(&mut self, next: Phase) {
        assert!(self.phase.may_enter(next), "the replication client went from {:?} to {next:?}", self.phase);
        self.phase = next;
    }

    /// Follows each configured source in order until it ends; stops early when this node's
    /// store is found damaged.
    async fn round(&mut self) -> RoundEnd {
        assert_eq!(self.phase, Phase::Round);
        let state = self.state.clone();
        let mut round =
            RoundEnd { progressed: false, answered_out_of_retention: Vec::new(), damaged: state.is_damaged() };
        for (position, &source) in self.sources.iter().enumerate() {
            if round.damaged {
                break;
            }
            // The source just left as stale is not followed again at once: when a probe had
            // taken us there out of the configured order, that order can name it next, and going
            // straight back starts a new stale episode on the same stale source — its replicas'
            // patience runs out with ours, and they move two hops below the fault
            // (`regression/raft-leader-commits-fail-seed-154.toml`, `containment`).
            if self.left_stale.take() == Some(source) && self.sources.len() > 1 {
                continue;
            }
            if self.attempts > 0 {
                state.metrics.reconnects.inc();
            }
            self.attempts += 1;
            let before = state.read_store(|s| s.applied_index());
            let (ended, followed) = follow_and_probed(&state, source, self.resume_from.take(), self.left_because).await;
            if let Ended::Stale { .. } = ended {
                self.left_stale = Some(followed);
            }
            // Until a source has welcomed this process, it has not left one: its first source,
            // however many refused or were down, is still a (re)start.
            if state.followed_a_source() {
                self.left_because = ended.reason();
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
            round.progressed |= after > before;
            tracing::info!(node = %state.config.name, source = %followed, ?ended, applied = after, "left replication source");
            if let Ended::OutOfRetention { .. } = ended {
                round.answered_out_of_retention.push(source);
            }
            round.damaged |= ended == Ended::Damaged;
            if position + 1 < self.sources.len() {
                state.metrics.failovers.inc();
            }
        }
        round
    }

    /// Bootstraps from the first source that serves a snapshot (a verified one replaces the
    /// whole store): whether one was installed.
    async fn bootstrap(&mut self, round: &RoundEnd) -> bool {
        assert!(round.calls_for_bootstrap(), "a bootstrap only when the round calls for one");
        let state = self.state.clone();
        if round.damaged {
            tracing::warn!(node = %state.config.name, "a stored value is damaged: re-bootstrapping from a source");
            self.left_because = SourceChange::Damaged;
        }
        for source in self.bootstrap_order(round) {
            for resumed in 0.. {
                match bootstrap(&state, source).await {
                    Ok(()) => {
                        self.staged_from = None;
                        return true;
                    }
                    // A transfer that broke off after storing chunks resumes from the same
                    // source at once: each attempt stores more, so this ends.
                    Err(BootstrapFailed { reason, chunks_stored, stage })
                        if chunks_stored > 0 && resumed < RESUMES_IN_A_ROW_MAX =>
                    {
                        tracing::warn!(%source, error = %reason, chunks_stored, "snapshot transfer broke off: resuming it");
                        state.report(NodeEvent::BootstrapFailed { source, stage, chunks_stored });
                        self.staged_from = Some(source);
                    }
                    Err(BootstrapFailed { reason, chunks_stored, stage }) => {
                        tracing::warn!(%source, error = %reason, ?stage, "bootstrap attempt failed");
                        state.report(NodeEvent::BootstrapFailed { source, stage, chunks_stored });
                        break;
                    }
                }
            }
        }
        false
    }

    /// The source whose transfer is staged first: another source's export is another snapshot,
    /// and asking it would start the transfer again at chunk 0. Then the sources that just
    /// answered: one that accepts a connection and says nothing (a paused process) would hold
    /// the bootstrap for a whole `snapshot_timeout` if asked first, in configured order. The
    /// rest last.
    fn bootstrap_order(&self, round: &RoundEnd) -> Vec<SocketAddr> {
        let mut order: Vec<SocketAddr> = self.staged_from.filter(|s| self.sources.contains(s)).into_iter().collect();
        for source in round.answered_out_of_retention.iter().chain(&self.sources) {
            if !order.contains(source) {
                order.push(*source);
            }
        }
        order
    }

    /// Waits out the backoff, reset to its floor when the round progressed, then doubles it
    /// up to its ceiling.
    async fn back_off(&mut self, progressed: bool) {
        assert_eq!(self.phase, Phase::BackingOff);
        let config = &self.state.config.replication;
        if progressed {
            self.backoff = config.reconnect_backoff_min;
        }
        if self.state.config.planted().stop_serving_when_upstream_lost {
            // PLANTED BUG (legacy): uncapped, unjittered exponential backoff (bounded only by
            // LEGACY_BACKOFF_MAX so that even the bug has a limit).
            tokio::time::sleep(self.backoff).await;
            self.backoff = (self.backoff * 2).min(LEGACY_BACKOFF_MAX);
            return;
        }
        // Full jitter over [backoff/2, backoff], so replicas that lost one source together do
        // not all come back at once.
        let jittered = self.backoff.mul_f64(self.rng.random_range(0.5..=1.0));
        tokio::time::sleep(jittered).await;
        self.backoff = (self.backoff * 2).min(config.reconnect_backoff_max);
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
