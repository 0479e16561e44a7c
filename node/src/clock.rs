//! The node's two kinds of time, and the rule between them.
//!
//! - **Its own wall clock** ([`unix_ms`]): what a root stamps entries with, and nothing else
//!   compares against another node's stamp. Under `--cfg madsim` it is the simulator's clock as
//!   this node's host keeps it (`simulated`, in that build only: an offset, a drift and steps),
//!   so a run is a function of its seed and clocks disagree as real ones do.
//! - **The root's clock as this node reckons it** ([`RootClock`]): how old an entry is (lag,
//!   staleness, readiness, a probed source's freshness, log retention by age, a quota ledger's
//!   refill) is measured against it, never against the node's own wall clock, because the stamp
//!   is the root's. A replica learns it from what its source tells it — every entry's stamp,
//!   and the root time its source reckons in each welcome, keepalive and entries frame — and
//!   carries it forward on its monotonic clock.
//!
//! What holds, whatever the clocks (the simulator's clock rules in `docs/checkers.md`):
//! - A replica's own wall clock — ahead, behind, drifting, stepping — changes none of its
//!   decisions: an edge 40 s ahead of its root is as fresh as one in step, and does not fail
//!   over.
//! - Lag is never negative, and never less than the time since the newest entry arrived.
//! - The root's clock as the tree sees it never steps back: a root stamps with the later of its
//!   own wall clock and the root's clock as it reckons it ([`RootClock::stamping_ms`]), so a
//!   root whose wall clock steps back, or a new leader whose clock is behind its predecessor's,
//!   carries on from where the stamps were (and a clock ahead moves the stamps forward, once).
//! - Anything timed within one node (heartbeat intervals, quota refills, deadlines) runs on the
//!   monotonic clock, so no wall-clock step stalls or hurries it.

use std::sync::Mutex;

use tokio::time::Instant;

/// Milliseconds since the Unix epoch by this node's own wall clock.
pub fn unix_ms() -> u64 {
    #[cfg(madsim)]
    return simulated::wall_ms();
    #[cfg(not(madsim))]
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// How fast this node's monotonic clock may run against the root's clock, at most (parts per
/// million): a reading of the root's clock loses this much of its weight as it ages, so an
/// estimate carried forward for a long time never runs ahead of the root's. Quartz is off by
/// tens of ppm; a thousand is a clock source that is failing.
pub const DRIFT_TOLERANCE_PPM: i128 = 1_000;

/// The root's clock as this node reckons it: the greatest of its readings — each a lower bound
/// on the root's time when it arrived — carried forward on the monotonic clock, less
/// [`DRIFT_TOLERANCE_PPM`] of the time since. A reading is a source's word (a welcome,
/// keepalive or entries frame carries the root time it reckons; a root group member's Raft
/// frames, the sender's), a client's (its hello: how a root that restarted with its wall clock
/// behind learns where its stamps were), or an entry's stamp as it is applied. A reading held in a queue (a
/// slow disk, a backlog) is only a lower one: it never pulls the estimate back. Before any
/// reading it is the node's own wall clock.
///
/// Taking the greatest is right because the root's clock, as the tree sees it, never steps
/// back: a root stamps with [`stamping_ms`](RootClock::stamping_ms), never less than what it
/// reckoned the root's clock to be, so a root whose wall clock steps back, or a new leader
/// whose clock is behind its predecessor's, carries on from where the stamps were.
#[derive(Debug)]
pub struct RootClock {
    /// The monotonic instant readings are timed from.
    epoch: Instant,
    /// The greatest reading so far, as `(root ms - mono ms) * 1e6 + mono ms * tolerance`: the
    /// readings' weights fall at the same rate, so the greatest now is the greatest of these.
    best: Mutex<Option<i128>>,
    /// PLANTED BUG (`legacy.trust_own_wall_clock`): read the node's own wall clock instead.
    trust_own_wall: bool,
}

impl RootClock {
    /// A clock that has heard nothing yet.
    pub fn new(trust_own_wall: bool) -> RootClock {
        RootClock { epoch: Instant::now(), best: Mutex::new(None), trust_own_wall }
    }

    fn mono_ms(&self) -> i128 {
        Instant::now().saturating_duration_since(self.epoch).as_millis() as i128
    }

    /// The root's clock read at least `root_ms` now. 0 is a source that has no reckoning yet
    /// (it has heard nothing itself): nothing is learnt from it.
    pub fn heard(&self, root_ms: u64) {
        if root_ms == 0 {
            return;
        }
        let now = self.mono_ms();
        let key = (i128::from(root_ms) - now) * 1_000_000 + now * DRIFT_TOLERANCE_PPM;
        let mut best = self.best.lock().unwrap_or_else(|p| p.into_inner());
        *best = Some(best.map_or(key, |b| b.max(key)));
    }

    /// The root's time now, in ms since the Unix epoch, as this node judges ages by it: its own
    /// wall clock until it has heard anything.
    pub fn now_ms(&self) -> u64 {
        if self.trust_own_wall {
            return unix_ms();
        }
        self.reckoned().unwrap_or_else(unix_ms)
    }

    /// The root's time now as this node has learnt it, None before any reading: what it may
    /// tell others (its own wall clock is no word on the root's).
    pub fn reckoned(&self) -> Option<u64> {
        let best = *self.best.lock().unwrap_or_else(|p| p.into_inner());
        best.map(|key| {
            let now = self.mono_ms();
            (now + (key - now * DRIFT_TOLERANCE_PPM).div_euclid(1_000_000)).clamp(1, i128::from(u64::MAX)) as u64
        })
    }

    /// What a root stamps an entry with now: its own wall clock, or the root's clock as it
    /// reckons it if that is later — so stamps never step back, whatever its wall clock does
    /// and whoever stamped before it.
    pub fn stamping_ms(&self) -> u64 {
        unix_ms().max(self.now_ms())
    }

    /// How old a root stamp is by the root's clock (never negative).
    pub fn age_ms(&self, stamp_ms: u64) -> u64 {
        self.now_ms().saturating_sub(stamp_ms)
    }
}

/// Per-host wall clocks under the simulator: each host's clock is the simulated wall time
/// shifted by an offset, running fast or slow by a drift, and stepped at set times — what the
/// simulator draws for each node ([`install`]). A host without one keeps the simulated time.
/// Only in the `--cfg madsim` build: what ships reads the system clock.
#[cfg(madsim)]
pub mod simulated {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    use madsim::task::NodeId;

    /// One host's wall clock against the simulated one.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct HostClock {
        /// How far ahead (negative: behind) it is at the run's start, in ms.
        pub offset_ms: i64,
        /// How fast it runs, in parts per million (negative: slow).
        pub drift_ppm: i64,
        /// Steps, in the order they happen.
        pub steps: Vec<ClockStep>,
    }

    /// A step of a host's wall clock: at `at_ms` of simulated time since the run's start, it
    /// jumps by `by_ms` (negative: back).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ClockStep {
        pub at_ms: u64,
        pub by_ms: i64,
    }

    impl HostClock {
        /// How far this clock is from the simulated one `elapsed_ms` into the run.
        pub fn skew_ms(&self, elapsed_ms: u64) -> i64 {
            let drift = (elapsed_ms as i128 * i128::from(self.drift_ppm) / 1_000_000) as i64;
            let stepped: i64 = self.steps.iter().filter(|s| s.at_ms <= elapsed_ms).map(|s| s.by_ms).sum();
            self.offset_ms + drift + stepped
        }
    }

    struct Installed {
        epoch: madsim::time::Instant,
        by_host: BTreeMap<NodeId, HostClock>,
    }

    thread_local! {
        // A madsim runtime runs on the thread that blocks on it, so the clocks of the run on
        // this thread are the ones installed here.
        static CLOCKS: RefCell<Option<Installed>> = const { RefCell::new(None) };
    }

    /// Gives each host its clock from now on (the run's start), replacing any installed before;
    /// dropping the guard takes them away.
    #[must_use = "the clocks are taken away when the guard is dropped"]
    pub fn install(by_host: BTreeMap<NodeId, HostClock>) -> Installation {
        let epoch = madsim::time::Instant::now();
        CLOCKS.with(|clocks| *clocks.borrow_mut() = Some(Installed { epoch, by_host }));
        Installation(())
    }

    /// Installed clocks; they go when this is dropped.
    #[derive(Debug)]
    pub struct Installation(());

    impl Drop for Installation {
        fn drop(&mut self) {
            CLOCKS.with(|clocks| *clocks.borrow_mut() = None);
        }
    }

    /// The current host's wall clock.
    pub(super) fn wall_ms() -> u64 {
        let now = madsim::time::TimeHandle::current().now_time();
        let simulated = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let skew = CLOCKS.with(|clocks| {
            let clocks = clocks.borrow();
            let installed = clocks.as_ref()?;
            let clock = installed.by_host.get(&madsim::plugin::node())?;
            let elapsed = madsim::time::Instant::now().saturating_duration_since(installed.epoch).as_millis() as u64;
            Some(clock.skew_ms(elapsed))
        });
        (simulated as i64 + skew.unwrap_or(0)).max(0) as u64
    }
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn carried_forward_on_the_monotonic_clock_less_the_drift_tolerance() {
        let clock = RootClock::new(false);
        clock.heard(5_000_000);
        assert_eq!(clock.now_ms(), 5_000_000);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(clock.now_ms(), 5_060_000 - 60, "a minute on, less 1 000 ppm of it");
        assert_eq!(clock.age_ms(5_000_000), 59_940);
        clock.heard(5_060_000);
        assert_eq!(clock.now_ms(), 5_060_000, "a new word at the root's time");
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_reading_never_pulls_the_clock_back() {
        // A replica an hour behind, its disk slow: the welcome says the root's time, then the
        // backlog's stamps and frames read long after they were sent.
        let clock = RootClock::new(false);
        let root = 10_000_000_000;
        clock.heard(root);
        for second in 1..=30 {
            tokio::time::advance(Duration::from_secs(1)).await;
            clock.heard(root - 3_600_000 + second * 1_000);
            clock.heard(root + second * 100);
        }
        assert_eq!(clock.now_ms(), root + 30_000 - 30);
        assert_eq!(clock.age_ms(root - 3_600_000 + 30_000), 3_600_000 - 30, "still an hour behind");
        assert_eq!(clock.age_ms(root + 40_000), 0, "a stamp ahead of the estimate is no age, not a negative one");
    }

    #[tokio::test(start_paused = true)]
    async fn stamps_never_step_back() {
        let clock = RootClock::new(false);
        let ahead = unix_ms() + 40_000;
        clock.heard(ahead); // the stamps so far came from a clock 40 s ahead of this one
        let first = clock.stamping_ms();
        assert!(first >= ahead);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(clock.stamping_ms() > first);
    }

    #[test]
    fn before_any_reading_and_when_planted_it_is_the_own_wall_clock() {
        let fresh = RootClock::new(false);
        fresh.heard(0);
        assert_eq!(fresh.reckoned(), None, "0 is no word: a source that has heard nothing");
        assert!(fresh.now_ms() > 1_600_000_000_000);
        let planted = RootClock::new(true);
        planted.heard(1);
        assert!(planted.now_ms() > 1_600_000_000_000);
    }
}
