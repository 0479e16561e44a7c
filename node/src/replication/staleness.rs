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
//!   none does, it stays and probes again after the same wait. With the root cut off nobody
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
}

impl Staleness {
    /// Judges the source after hearing `heard`; `others` are the sources to probe.
    pub async fn judge(&mut self, state: &NodeState, heard: Heard, others: &[SocketAddr]) -> Verdict {
        if state.config.planted().never_leave_stale_source {
            return Verdict::Stay;
        }
        let staleness = state.config.replication.staleness_failover;
        if state.lag_ms() <= staleness.as_millis() as u64 {
            self.stale_since = None;
            self.waiting = false;
            return Verdict::Stay;
        }
        let now = Instant::now();
        let waited = now - *self.stale_since.get_or_insert(now);
        match heard {
            Heard::Quiet => Verdict::Leave { better: None },
            Heard::Said(UpstreamStatus::Healthy) if waited >= SOURCE_QUIET => Verdict::Leave { better: None },
            Heard::Said(UpstreamStatus::Healthy) => Verdict::Stay,
            Heard::Said(UpstreamStatus::Recovering { hops }) => {
                let patience = patience(state, hops);
                if waited < patience {
                    if !self.waiting {
                        self.waiting = true;
                        state.probe(Probe::WaitedForRecoveringSource);
                    }
                    return Verdict::Stay;
                }
                match probe(state, others).await {
                    Some(better) => Verdict::Leave { better: Some(better) },
                    None => {
                        self.stale_since = Some(Instant::now());
                        Verdict::Stay
                    }
                }
            }
        }
    }
}

/// How long to wait for a source that says it is recovering, `hops` up: [`SOURCE_QUIET`] when
/// the trouble is the source's own (time for its status to settle), and a reconnect backoff's
/// cap more for each hop above it, so that the nodes nearer the trouble move first.
fn patience(state: &NodeState, hops: u8) -> Duration {
    SOURCE_QUIET + state.config.replication.reconnect_backoff_max * u32::from(hops.max(1) - 1)
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
            Message::Entries { entries } => {
                let newest = entries.last().and_then(|frame| LogEntry::decompress(frame).ok());
                let fresh = newest.is_some_and(|e| {
                    crate::clock::unix_ms().saturating_sub(e.timestamp_ms) <= staleness.as_millis() as u64
                });
                return ahead && fresh;
            }
            _ => return false,
        }
    }
}
