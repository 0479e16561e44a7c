//! Time and health as a node tells them: the root's clock (its reckoning, what it stamps with,
//! what it tells others), how far behind it is, and the status its keepalives give its
//! downstream — healthy, or recovering its path to the root and how many hops up the trouble is.
//!
//! Guarantees: every age of a root stamp is judged against the root's clock as this node
//! reckons it (`crate::clock::RootClock`), never its own wall clock; everything timed within the
//! node (since the last apply, since the source was heard) runs on the monotonic clock.

use std::sync::atomic::Ordering;

use super::NodeState;
use crate::config::Role;
use crate::replication::protocol::{SOURCE_QUIET, UpstreamStatus};

/// How far ahead of this node's own reckoning of the root's clock a client's hello may move it
/// (a root that restarted with its wall clock behind learns where its stamps were; a client
/// cannot move them further: it may read, not write).
pub const HELLO_ROOT_AHEAD_MAX: std::time::Duration = std::time::Duration::from_secs(3600);

impl NodeState {
    /// A client of this database's word on the root's clock (its hello's `root_ms`): a root
    /// that restarted with its wall clock behind its last stamps stamps on from where they
    /// were. Taken up to `HELLO_ROOT_AHEAD_MAX` (one hour) ahead of this node's own reckoning, no
    /// further.
    pub fn heard_from_client(&self, root_ms: u64) {
        if root_ms <= self.root_now_ms().saturating_add(HELLO_ROOT_AHEAD_MAX.as_millis() as u64) {
            self.root_clock.heard(root_ms);
        }
    }

    /// Root timestamp of the newest applied entry (0 before the first).
    pub fn newest_entry_ms(&self) -> u64 {
        self.newest_entry_ms.load(Ordering::Relaxed)
    }

    /// The root's clock now: what a root stamps with when it is the one stamping (a root of
    /// one, a group's leader: `RootClock::stamping_ms`, never behind the stamps before), else the
    /// root's clock as this node reckons it ([`root_clock`](Self::root_clock)).
    pub fn root_now_ms(&self) -> u64 {
        if self.is_stamping() { self.root_clock.stamping_ms() } else { self.root_clock.now_ms() }
    }

    /// How long since this process last applied an entry, by the monotonic clock (`MAX` before
    /// its first): what a root's heartbeat waits on, so no step of its wall clock holds one back.
    pub fn since_applied(&self) -> std::time::Duration {
        match self.applied_at_ms.load(Ordering::Relaxed) {
            0 => std::time::Duration::MAX,
            at => std::time::Duration::from_millis((self.running_ms() + 1).saturating_sub(at)),
        }
    }

    /// The root's clock as this node may tell others — in welcomes, keepalives and entries
    /// frames to its downstream, in Raft frames to its peers: what it stamps with if it is the
    /// one stamping, what it has learnt otherwise, and 0 (no word) before it has learnt
    /// anything: its own wall clock is no word on the root's.
    pub fn root_word_ms(&self) -> u64 {
        if self.is_stamping() { self.root_clock.stamping_ms() } else { self.root_clock.reckoned().unwrap_or(0) }
    }

    /// A root of one, or a group's leader: the node whose clock stamps entries.
    fn is_stamping(&self) -> bool {
        self.config.role == Role::Root
            && (!self.config.root.as_ref().is_some_and(crate::config::RootConfig::is_group)
                || self.raft_view().is_some_and(|v| v.role == crate::consensus::Role::Leader))
    }

    /// Monotonic ms since this process started.
    pub(super) fn running_ms(&self) -> u64 {
        tokio::time::Instant::now().saturating_duration_since(self.started).as_millis() as u64
    }

    /// How old the newest applied entry is by the root's clock, but no more than this process
    /// has been running (one that just started has not had time to fall behind; one holding no
    /// entry yet is as far behind as it has been running).
    fn newest_age_ms(&self) -> u64 {
        let newest = self.newest_entry_ms();
        let running = self.running_ms();
        if newest == 0 { running } else { self.root_clock.age_ms(newest).min(running) }
    }

    /// Replication lag: how old the newest applied entry is, by the root's clock.
    pub fn lag_ms(&self) -> u64 {
        match self.config.role {
            Role::Root => 0,
            Role::Replica => self.newest_age_ms(),
        }
    }

    /// Records whether the replication client is following a source.
    pub fn set_upstream_ok(&self, ok: bool) {
        self.upstream_ok.store(ok, Ordering::Relaxed);
    }

    /// Records a frame from the followed source; `hops` is what its keepalive said (0 healthy),
    /// None for other frames (entries mean the source is delivering: its last word stands).
    pub fn heard_from_source(&self, hops: Option<u8>) {
        self.source_heard_ms.store(self.running_ms() + 1, Ordering::Relaxed);
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
            return self.member_status();
        }
        let quiet = match self.source_heard_ms.load(Ordering::Relaxed) {
            0 => true,
            heard => (self.running_ms() + 1).saturating_sub(heard) > SOURCE_QUIET.as_millis() as u64,
        };
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

    /// A root's status for its downstream. A root of one is the head of the log: healthy. A
    /// root group member is healthy while it leads, or follows a leader it knows and its
    /// newest applied entry is younger than `staleness_failover` (the leader writes a heartbeat
    /// every `heartbeat_interval`, so an older one means it is not being kept up to date). A
    /// member that knows no leader (an election, a partition it cannot hear across) or has
    /// fallen behind says it is recovering, so the tier below its replicas waits for them
    /// rather than moving too — the containment a replica below a recovering source keeps.
    fn member_status(&self) -> UpstreamStatus {
        if !self.config.root.as_ref().is_some_and(crate::config::RootConfig::is_group) {
            return UpstreamStatus::Healthy;
        }
        let Some(view) = self.raft_view() else {
            return UpstreamStatus::Recovering { hops: 1 }; // starting: it has not heard its group yet
        };
        if view.paused.is_some() {
            return UpstreamStatus::Recovering { hops: 1 };
        }
        let following = view.role == crate::consensus::Role::Leader
            || (view.role == crate::consensus::Role::Follower && view.leader != 0);
        let age_ms = self.newest_age_ms();
        let current = view.role == crate::consensus::Role::Leader
            || age_ms <= self.config.replication.staleness_failover.as_millis() as u64;
        if following && current { UpstreamStatus::Healthy } else { UpstreamStatus::Recovering { hops: 1 } }
    }

    /// PLANTED BUG support (legacy): whether this node refuses to serve downstream now — only
    /// when `legacy.stop_serving_when_upstream_lost` or `legacy.drop_downstream_while_reconnecting`
    /// is on and it has lost its upstream.
    pub fn legacy_refuses_downstream(&self) -> bool {
        let legacy = self.config.planted();
        (legacy.stop_serving_when_upstream_lost || legacy.drop_downstream_while_reconnecting)
            && !self.upstream_ok.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;

    /// At the shipped cap: a hello's root time up to an hour ahead moves a root's stamps
    /// there; one further ahead moves nothing.
    #[tokio::test]
    async fn a_clients_word_moves_the_stamps_up_to_the_cap_and_no_further() {
        let hour = HELLO_ROOT_AHEAD_MAX.as_millis() as u64;
        assert_eq!(hour, 3_600_000, "the shipped cap");
        let state = crate::root::test_root_state();
        let own = crate::clock::unix_ms();
        state.heard_from_client(own + hour + 60_000);
        assert!(state.root_now_ms() < own + 60_000, "past the cap: nothing moved");
        state.heard_from_client(own + hour - 60_000);
        assert!(state.root_now_ms() >= own + hour - 60_000, "within the cap: the stamps carry on from it");
    }
}
