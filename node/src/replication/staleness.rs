//! When a replica leaves a stale source: contained failover.
//!
//! A fault should move only the nodes directly below it. Without care, every node under a
//! failing node goes stale at the same moment (they hold the same entries, so their lags are
//! equal) and all of them fail over at once — a cascade that churns connections across the
//! tree and helps nobody, since the nodes in the middle would have recovered the path. So each
//! node says, in its keepalives, whether it is healthy or recovering (`UpstreamStatus`, computed
//! by `NodeState::upstream_status`), and a replica past `staleness_failover`:
//!
//! - leaves a source that went quiet (no frame for [`SOURCE_QUIET`]): it is stuck or cut off;
//! - leaves a source that still says it is healthy after [`SOURCE_QUIET`] of our staleness: it
//!   had time to notice and say so, and did not;
//! - stays with a source that says it is recovering, for [`SOURCE_QUIET`] plus
//!   `reconnect_backoff_max` for each hop above the source (the deeper the trouble, the longer
//!   the nodes nearer it get to fix it first), then probes the
//!   other sources and moves only to one that says it is healthy and holds entries we lack; if
//!   none does, it stays and probes again after the same wait. The wait follows the deepest
//!   trouble the source reported in this stale episode: a source that just left its own stale
//!   source says fewer hops while it catches up, and that is the fix under way. With the root cut off nobody
//!   moves but the root's direct downstream; with a sibling path healthy, the node gets there.
//!
//! The planted `legacy.never_leave_stale_source` switch turns all of it off.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::{Instant, timeout};

use super::protocol::KEEPALIVE_INTERVAL;
use super::protocol::{Message, UpstreamStatus, Want, read_message, write_message};
use crate::entry::LogEntry;
use crate::observe::Probe;
use crate::state::NodeState;

use super::protocol::SOURCE_QUIET;

/// What a source's latest word was, for the judgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// Nothing for longer than [`SOURCE_QUIET`].
    Quiet,
    /// A keepalive with this status.
    Said(UpstreamStatus),
}

/// The verdict on the source being followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Stay,
    /// Leave it; go to `better` next if a probe found a healthy source ahead of us.
    Leave {
        better: Option<SocketAddr>,
    },
}

/// One connection's staleness state.
#[derive(Debug, Default)]
pub struct Staleness {
    /// Since when we have been past `staleness_failover` (reset by a probe that found nothing).
    stale_since: Option<Instant>,
    /// Whether this stale episode already counted as waiting for a recovering source.
    waiting: bool,
    /// The deepest trouble the source reported in this stale episode (hops up). A source that
    /// fixed its path (left its own stale source) says fewer hops while it catches up: that is
    /// the fix under way, not a reason to leave it sooner, so the patience never shrinks
    /// within an episode.
    deepest_hops: u8,
}

/// What [`Staleness::step`] decided, before any probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Stay,
    /// Stay: the source says it is recovering, and its patience has not run out.
    Wait,
    /// Leave without probing: the source went quiet, or says it is healthy while we are stale.
    Leave,
    /// Waited long enough for a recovering source: probe the others.
    Probe,
}

impl Staleness {
    /// Judges the source after hearing `heard`; `others` are the sources to probe.
    pub async fn judge(&mut self, state: &NodeState, heard: Heard, others: &[SocketAddr]) -> Verdict {
        if state.config.planted().never_leave_stale_source {
            return Verdict::Stay;
        }
        let stale = state.lag_ms() > state.config.replication.staleness_failover.as_millis() as u64;
        let backoff_max = state.config.replication.reconnect_backoff_max;
        let step = self.step(stale, heard, Instant::now(), backoff_max);
        match step {
            Step::Stay => Verdict::Stay,
            Step::Wait => {
                if !self.waiting {
                    self.waiting = true;
                    state.probe(Probe::WaitedForRecoveringSource);
                }
                Verdict::Stay
            }
            Step::Leave => Verdict::Leave { better: None },
            Step::Probe => match probe(state, others).await {
                Some(better) => Verdict::Leave { better: Some(better) },
                None => {
                    self.probe_found_nothing(heard, Instant::now());
                    Verdict::Stay
                }
            },
        }
    }

    /// The judgement without the probe: a pure function of this episode's state, whether we
    /// are past `staleness_failover`, what the source said, and the time.
    fn step(&mut self, stale: bool, heard: Heard, now: Instant, backoff_max: Duration) -> Step {
        if !stale {
            *self = Staleness::default();
            return Step::Stay;
        }
        let waited = now - *self.stale_since.get_or_insert(now);
        match heard {
            Heard::Quiet => Step::Leave,
            Heard::Said(UpstreamStatus::Healthy) if waited >= SOURCE_QUIET => Step::Leave,
            Heard::Said(UpstreamStatus::Healthy) => Step::Stay,
            Heard::Said(UpstreamStatus::Recovering { hops }) => {
                self.deepest_hops = self.deepest_hops.max(hops);
                if waited < patience(self.deepest_hops, backoff_max) { Step::Wait } else { Step::Probe }
            }
        }
    }

    /// A probe found no healthy source ahead: the wait starts again, at the source's present
    /// depth.
    fn probe_found_nothing(&mut self, heard: Heard, now: Instant) {
        self.stale_since = Some(now);
        if let Heard::Said(UpstreamStatus::Recovering { hops }) = heard {
            self.deepest_hops = hops;
        }
    }
}

/// How long to wait for a source that says it is recovering, `hops` up: [`SOURCE_QUIET`] when
/// the trouble is the source's own (time for its status to settle), and a reconnect backoff's
/// cap more for each hop above it — never less than [`SOURCE_QUIET`] a hop, the time a node
/// nearer the trouble takes to probe and move — so that the nodes nearer the trouble move
/// first. (With `reconnect_backoff_max = 100ms` an edge two hops below a slow member moved 4 ms
/// after its mid did: raft-disks seed 135, `containment`.)
fn patience(hops: u8, backoff_max: Duration) -> Duration {
    SOURCE_QUIET + backoff_max.max(SOURCE_QUIET) * u32::from(hops.max(1) - 1)
}

/// The first of `others` that says it is healthy and holds entries past ours, asked without
/// leaving the current source: a hello for the newest entries only, its welcome (its applied
/// index) and its first keepalive (its status).
async fn probe(state: &NodeState, others: &[SocketAddr]) -> Option<SocketAddr> {
    let mine = state.read_store(|s| s.applied_index());
    for &other in others {
        if probe_one(state, other, mine).await {
            tracing::info!(node = %state.config.name, source = %other, "probe: a healthy source ahead of us");
            return Some(other);
        }
    }
    None
}

async fn probe_one(state: &NodeState, source: SocketAddr, mine: u64) -> bool {
    let Ok(mut stream) = super::dial::dial(state, source, KEEPALIVE_INTERVAL).await else { return false };
    let mut hello = state.hello(Want::Log, None);
    hello.newest_only = true;
    if write_message(&mut stream, &Message::Hello(hello)).await.is_err() {
        return false;
    }
    let staleness = state.config.replication.staleness_failover;
    let mut ahead = false;
    // Welcome, then a keepalive within an interval, or the entries it applies meanwhile (a
    // newest-only hello streams from its head on): the whole exchange within SOURCE_QUIET.
    let deadline = Instant::now() + SOURCE_QUIET;
    loop {
        let Ok(Ok(Some(message))) =
            timeout(deadline.saturating_duration_since(Instant::now()), read_message(&mut stream)).await
        else {
            return false;
        };
        match message {
            Message::Welcome { db_id, applied_index, .. } if db_id == state.config.database_id => {
                ahead = applied_index > mine;
            }
            Message::Keepalive { upstream, .. } => return ahead && upstream == UpstreamStatus::Healthy,
            // It is applying new entries as they come: healthy if the newest is fresh.
            Message::Entries { entries, .. } => {
                let newest = entries.last().and_then(|frame| LogEntry::decompress(frame).ok());
                let fresh =
                    newest.is_some_and(|e| state.root_clock.age_ms(e.timestamp_ms) <= staleness.as_millis() as u64);
                return ahead && fresh;
            }
            _ => return false,
        }
    }
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;

    const BACKOFF_MAX: Duration = Duration::from_secs(5);
    const RECOVERING_1: Heard = Heard::Said(UpstreamStatus::Recovering { hops: 1 });
    const RECOVERING_2: Heard = Heard::Said(UpstreamStatus::Recovering { hops: 2 });
    const HEALTHY: Heard = Heard::Said(UpstreamStatus::Healthy);

    /// A mid whose own source went stale says "recovering, 2 hops up"; it then leaves that
    /// source and, while it catches up from a healthy one, says "1 hop up". The replica below
    /// keeps the 2-hop patience: leaving the mid at the 1-hop patience, counted from the start
    /// of the episode, moved it two hops below the fault while the fix was under way (swarm-raft
    /// seed 112 with mebibyte values: `containment`, edge-2 moved 2 hops below a member's
    /// slow disk 340 ms after its mid left that member).
    #[test]
    fn the_patience_follows_the_deepest_trouble_of_the_episode() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut staleness = Staleness::default();
        assert_eq!(staleness.step(true, RECOVERING_1, at(0), BACKOFF_MAX), Step::Wait);
        assert_eq!(staleness.step(true, RECOVERING_2, at(500), BACKOFF_MAX), Step::Wait);
        let two_hops = patience(2, BACKOFF_MAX).as_millis() as u64;
        assert!(patience(1, BACKOFF_MAX).as_millis() < u128::from(two_hops));
        assert_eq!(
            staleness.step(true, RECOVERING_1, at(2_500), BACKOFF_MAX),
            Step::Wait,
            "the mid's fix is under way"
        );
        assert_eq!(staleness.step(true, RECOVERING_1, at(two_hops - 1), BACKOFF_MAX), Step::Wait);
        assert_eq!(staleness.step(true, RECOVERING_1, at(two_hops), BACKOFF_MAX), Step::Probe);
        // A probe that found nothing starts the wait again at the source's present depth.
        staleness.probe_found_nothing(RECOVERING_1, at(two_hops));
        let one_hop = patience(1, BACKOFF_MAX).as_millis() as u64;
        assert_eq!(staleness.step(true, RECOVERING_1, at(two_hops + one_hop - 1), BACKOFF_MAX), Step::Wait);
        assert_eq!(staleness.step(true, RECOVERING_1, at(two_hops + one_hop), BACKOFF_MAX), Step::Probe);
    }

    /// Caught up, the episode ends: the next one starts from nothing.
    #[test]
    fn an_episode_ends_when_the_replica_is_no_longer_stale() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut staleness = Staleness::default();
        assert_eq!(staleness.step(true, RECOVERING_2, at(0), BACKOFF_MAX), Step::Wait);
        assert_eq!(staleness.step(false, RECOVERING_2, at(1_000), BACKOFF_MAX), Step::Stay);
        assert_eq!(staleness.step(true, RECOVERING_1, at(10_000), BACKOFF_MAX), Step::Wait);
        let one_hop = patience(1, BACKOFF_MAX).as_millis() as u64;
        assert_eq!(staleness.step(true, RECOVERING_1, at(10_000 + one_hop), BACKOFF_MAX), Step::Probe);
    }

    /// However short the reconnect backoff, each hop up adds at least [`SOURCE_QUIET`]: the
    /// node nearer the trouble has time to probe and move first.
    #[test]
    fn each_hop_adds_at_least_source_quiet() {
        let short = Duration::from_millis(100);
        assert_eq!(patience(1, short), SOURCE_QUIET);
        assert_eq!(patience(2, short), 2 * SOURCE_QUIET);
        assert_eq!(patience(3, BACKOFF_MAX), SOURCE_QUIET + 2 * BACKOFF_MAX);
    }

    /// A source that says it is healthy while we are stale gets [`SOURCE_QUIET`] to notice; a
    /// quiet one is left at once.
    #[test]
    fn a_healthy_claim_is_believed_for_source_quiet_and_a_quiet_source_is_left() {
        let start = Instant::now();
        let mut staleness = Staleness::default();
        assert_eq!(staleness.step(true, HEALTHY, start, BACKOFF_MAX), Step::Stay);
        assert_eq!(staleness.step(true, HEALTHY, start + SOURCE_QUIET, BACKOFF_MAX), Step::Leave);
        assert_eq!(Staleness::default().step(true, Heard::Quiet, start, BACKOFF_MAX), Step::Leave);
    }
}
