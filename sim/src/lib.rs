//! qs-sim: runs whole clusters of the unchanged `qs-node` code under one seed, injects faults,
//! records a trace, and checks invariants as events arrive.
//!
//! Module map:
//! - [`scenario`]: the scenario file format and its validation;
//! - [`plan`]: one run's plan — the seed's draws and every node's configuration — derived once
//!   from (scenario, seed), and only read after;
//! - [`trace`]: events, the recorder (fed by the nodes through `RecorderObserver`), the digest;
//! - [`checkers`]: one invariant family per file, fed by trace events;
//! - [`resources`]: the per-node cache and memory models, scaled to the data a scenario stands
//!   for, and the sizing formulas;
//! - [`sweep`]: many scenarios × seeds, one `qsim run` process each, with shards and reports;
//! - [`explore`]: a budget of runs of one swarm scenario, its seeds chosen by probe rarity;
//! - [`sizing`]: one scenario over cache shares × key popularities, the miss-ratio curve;
//! - [`shrink`]: a failing run reduced to the smallest scenario that fails the same way;
//! - [`sync`]: the one rule for the simulator's locks (a poisoned lock belongs to a run that is
//!   already ending);
//! - [`scratch`]: where runs keep their files, and a sweep's per-run folders removed however a
//!   run ends;
//! - [`workload`]: the writers and readers, the same code on madsim's runtime and on tokio's;
//! - [`outcome`]: what one run produced, simulated or real;
//! - [`verdict`]: the judgement on a run — each checker's verdict, the exit code, the failure's
//!   signature — the same for simulated and real runs;
//! - [`certificates`]: the run's CA and node certificates, issued from the seed;
//! - `world`, `faults` (only with `--cfg madsim`): the madsim world that runs a scenario and
//!   the fault injectors; `node_log`, the nodes' own log (`qsim run --log`);
//! - `real` (only without `--cfg madsim`): the same scenario on real `qs-node` processes, judged
//!   by the same checkers (`qsim real`).

pub mod certificates;
pub mod checkers;
pub mod clocks;
pub mod explore;
#[cfg(madsim)]
pub mod faults;
pub mod knobs;
#[cfg(madsim)]
pub mod links;
#[cfg(madsim)]
pub mod node_log;
pub mod outcome;
pub mod plan;
pub mod propagation;
#[cfg(not(madsim))]
pub mod real;
pub mod resources;
pub mod scenario;
pub mod scratch;
pub mod shrink;
pub mod sizing;
pub mod sweep;
pub mod sync;
pub mod trace;
pub mod verdict;
pub mod workload;
#[cfg(madsim)]
pub mod world;

/// Exit codes of `qsim`.
pub mod exit {
    pub const PASS: u8 = 0;
    /// A checker found an invariant violation.
    pub const VIOLATION: u8 = 1;
    /// Bad arguments or a bad scenario file.
    pub const USAGE: u8 = 2;
    /// The cluster did not converge within the scenario's bound after every fault healed.
    pub const LIVENESS: u8 = 3;
    /// The simulation itself panicked.
    pub const CRASH: u8 = 4;
    /// The same seed gave two different traces.
    pub const NONDETERMINISM: u8 = 5;
    /// `qsim diff`: the two traces differ (as `diff` answers).
    pub const DIFFERENT: u8 = 1;
    /// This `qsim` was built without `--cfg madsim` and cannot run scenarios.
    pub const NOT_SIMULATOR: u8 = 70;
}
