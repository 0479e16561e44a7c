//! Fault points (FoundationDB's `BUGGIFY`): the places where a real deployment misbehaves,
//! made to misbehave on purpose under the simulator.
//!
//! Guarantees:
//! - In the real binary (no `--cfg madsim`) no fault point ever fires: [`FaultPoints::fires`]
//!   is `false` without looking at anything.
//! - Under the simulator a point fires only in a run that enabled buggify
//!   (`madsim::buggify::enable`, which the simulator does when a scenario asks or swarm draws
//!   it). Each point is then switched on for the process with probability 1/4 the first time it
//!   is reached, and an enabled point fires on 1/4 of its passes — FoundationDB's 25 % of sites
//!   on 25 % of passes. Both draws come from madsim's seeded random stream, so a run is still a
//!   function of its seed. madsim's own `buggify()` has no per-site switch, which is why the
//!   sites are kept here.
//! - Every firing is reported through the observer seam as a probe, so a run says which fired.

use std::sync::Mutex;

use crate::observe::Probe;

/// A fault point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultPoint {
    /// A commit takes seconds (a disk stalled under a burst of other work).
    SlowCommit,
    /// A replication server closes the connection right after its welcome.
    DropAfterHandshake,
    /// A replication server closes a snapshot transfer after a chunk: the client resumes.
    DropMidSnapshot,
    /// A replication server sends a keepalive at once instead of after the interval.
    EarlyKeepalive,
}

impl FaultPoint {
    const ALL: [FaultPoint; 4] =
        [FaultPoint::SlowCommit, FaultPoint::DropAfterHandshake, FaultPoint::DropMidSnapshot, FaultPoint::EarlyKeepalive];

    /// The probe a firing reports.
    pub fn probe(self) -> Probe {
        match self {
            FaultPoint::SlowCommit => Probe::FaultPointSlowCommit,
            FaultPoint::DropAfterHandshake => Probe::FaultPointDropAfterHandshake,
            FaultPoint::DropMidSnapshot => Probe::FaultPointDropMidSnapshot,
            FaultPoint::EarlyKeepalive => Probe::FaultPointEarlyKeepalive,
        }
    }

    /// Whether a firing breaks something a checker must excuse (a stall, a dropped connection),
    /// rather than being legitimate behaviour at an unusual moment (an early keepalive).
    pub fn is_fault(self) -> bool {
        !matches!(self, FaultPoint::EarlyKeepalive)
    }

    /// Whether the misbehaviour lasts (a stall) rather than happening at once (a drop).
    pub fn lasts(self) -> bool {
        matches!(self, FaultPoint::SlowCommit)
    }

    /// The name the trace uses.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::SlowCommit => "slow_commit",
            FaultPoint::DropAfterHandshake => "drop_after_handshake",
            FaultPoint::DropMidSnapshot => "drop_mid_snapshot",
            FaultPoint::EarlyKeepalive => "early_keepalive",
        }
    }

    #[cfg_attr(not(madsim), allow(dead_code))]
    fn slot(self) -> usize {
        FaultPoint::ALL.iter().position(|p| *p == self).expect("every point is in ALL")
    }
}

/// One process's fault points: which are switched on, decided the first time each is reached.
#[derive(Debug, Default)]
pub struct FaultPoints {
    enabled: Mutex<[Option<bool>; FaultPoint::ALL.len()]>,
}

impl FaultPoints {
    /// Whether `point` fires on this pass (never outside the simulator).
    pub fn fires(&self, point: FaultPoint) -> bool {
        #[cfg(madsim)]
        {
            if !madsim::buggify::is_enabled() {
                return false;
            }
            let mut enabled = self.enabled.lock().unwrap_or_else(|p| p.into_inner());
            let on = *enabled[point.slot()].get_or_insert_with(madsim::buggify::buggify);
            on && madsim::buggify::buggify()
        }
        #[cfg(not(madsim))]
        {
            let _ = (point, &self.enabled);
            false
        }
    }
}
