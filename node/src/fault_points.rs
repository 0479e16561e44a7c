//! Fault points (FoundationDB's `BUGGIFY`): the places where a real deployment misbehaves,
//! made to misbehave on purpose under the simulator.
//!
//! Guarantees:
//! - In the real binary (no `--cfg madsim`) no fault point ever fires: [`FaultPoints::fires`]
//!   is `false` without looking at anything.
//! - Under the simulator a point fires only in a process started with fault points on
//!   (`SimHooks::fault_points` of `Node::start_simulated`, which the simulator sets when a scenario asks or
//!   swarm draws it). Each point is then switched on for the process with probability 1/4 the
//!   first time it is reached, and an enabled point fires on 1/4 of its passes — FoundationDB's
//!   25 % of sites on 25 % of passes — except a stalled commit, 1 pass in 20: at 1 in 4 a
//!   replica committing a few times a second could never keep up, a node broken for good rather
//!   than one misbehaving now and then. Both draws come from madsim's seeded random stream, so a
//!   run is still a function of its seed.
//! - madsim's own `buggify` is never used: it has no per-site switch, and enabling it also makes
//!   madsim delay 10 % of all network sends by 1–4 s (`rand_delay` in madsim 0.2.34's
//!   `sim/net`) — latency no checker could see as a fault, which stalled writers for 30 s.
//! - Every firing is reported through the observer seam as a probe, so a run says which fired.

use std::sync::Mutex;

pub use crate::observe::FaultPoint;

impl FaultPoint {
    const ALL: &'static [FaultPoint] = <FaultPoint as strum::VariantArray>::VARIANTS;

    /// One pass in how many fires, once the point is switched on.
    #[cfg_attr(not(madsim), allow(dead_code))]
    fn passes_per_firing(self) -> u32 {
        match self {
            FaultPoint::SlowCommit => 20,
            _ => 4,
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
        self.into()
    }

    #[cfg_attr(not(madsim), allow(dead_code))]
    fn slot(self) -> usize {
        FaultPoint::ALL.iter().position(|p| *p == self).expect("every point is in ALL")
    }
}

/// One process's fault points: whether they are on at all, and which are switched on, decided
/// the first time each is reached.
#[derive(Debug, Default)]
pub struct FaultPoints {
    on: bool,
    enabled: Mutex<[Option<bool>; FaultPoint::ALL.len()]>,
}

impl FaultPoints {
    /// Fault points for a process: `on` only under the simulator, when the run asks.
    pub fn new(on: bool) -> FaultPoints {
        FaultPoints { on, enabled: Mutex::default() }
    }

    /// Whether `point` fires on this pass (never outside the simulator).
    pub fn fires(&self, point: FaultPoint) -> bool {
        if !self.on {
            return false;
        }
        #[cfg(madsim)]
        {
            let one_in = |n: u32| madsim::rand::random::<u32>().is_multiple_of(n);
            let mut enabled = self.enabled.lock().unwrap_or_else(|p| p.into_inner());
            let switched_on = *enabled[point.slot()].get_or_insert_with(|| one_in(4));
            switched_on && one_in(point.passes_per_firing())
        }
        #[cfg(not(madsim))]
        {
            let _ = (point, &self.enabled);
            false
        }
    }
}
