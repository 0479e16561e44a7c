//! Disk faults: slow SSDs and failing disks (SIGBUS), charged through the node's
//! [`DiskModel`](qs_node::state::DiskModel) seam on every store operation.
//!
//! Fault model:
//! - **slow_disk** `aging`: most operations take tens to hundreds of microseconds, but 3 % of
//!   reads and 5 % of commits stall for 100–800 ms (worn flash, firmware garbage collection).
//!   `saturated`: the device queue is full — every commit waits behind the previous one and
//!   takes 1–4 s, reads take 5–50 ms. While on, the node stays correct but falls behind; its
//!   downstream nodes see it as stale and fail over to a secondary when it passes their
//!   staleness threshold. When the fault ends the disk is healthy again and the node catches up.
//! - **sigbus**: the disk has poisoned pages. At start-up (the store's head is read) and on a
//!   third of reads, the process dies the way LMDB's mmap dies on a bad page: abruptly, in the
//!   middle of whatever it was doing — the operation never returns, and the process is killed
//!   at that simulated instant by the [`supervisor`](super::process::supervisor), which
//!   restarts it after 1–10 s. It dies
//!   again at start-up, until the fault ends: then the disk is replaced by an empty one and the
//!   node bootstraps from its sources. It must not serve reads before it has caught up, and its
//!   downstream must fail over while it crash-loops.
//!
//! - **disk_error**: the disk answers EIO or ENOSPC on the operations the fault names (opening
//!   the store, a commit, a rename, the node's own file writes). An EIO on a commit landed or
//!   not, drawn half and half from the disk's stream: the node cannot know which
//!   (`qs_node::store::faults` has the model). While on, the node must refuse what it cannot
//!   make durable, lose nothing it acknowledged, and recover once the disk answers again.
//!
//! Latency is charged in simulated time before the operation runs, from a generator seeded by
//! the run's seed and the node's position, so it is part of the run's determinism. Healthy disks
//! cost a little too (so commits are never free), and are not sampled into the trace.

use std::sync::Mutex;
use std::time::Duration;

use madsim::time::Instant;
use qs_node::state::{DiskModel, DiskOp, PageAccess};
use qs_node::store::faults::{DiskError, IoFailure, IoFaults, IoOp};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::supervision::Supervision;
use crate::scenario::DiskModelKind;
use crate::sync::Locked;

/// How long an operation that hit a poisoned page "takes": forever, as far as the process is
/// concerned; the supervisor kills it at once.
const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// Latencies observed on a slow disk since the last sample.
#[derive(Debug, Default)]
pub struct DiskWindow {
    pub latencies_us: Vec<u64>,
}

#[derive(Debug)]
struct State {
    rng: ChaCha8Rng,
    slow: Option<DiskModelKind>,
    failing: bool,
    /// When the device finishes the commits queued so far.
    busy_until: Option<Instant>,
    window: DiskWindow,
    /// Whether latencies are being sampled (a slow model is on, or was within the last window).
    sampling: bool,
    /// The node's cache and memory models, if the scenario has `[resources]`.
    model: Option<crate::resources::NodeModel>,
    /// A `disk_error` fault: the error and the operations it fails.
    io_errors: Option<(DiskError, Vec<IoOp>)>,
    /// A `power_loss` may hit this disk in the run (see `IoFaults::power_can_fail`).
    power_can_fail: bool,
}

/// One node's simulated disk device: its latency model and whether it is failing.
#[derive(Debug)]
pub struct SimDisk {
    node: String,
    state: Mutex<State>,
    supervision: std::sync::Arc<Supervision>,
}

impl SimDisk {
    pub fn new(node: &str, seed: u64, position: usize, supervision: std::sync::Arc<Supervision>) -> SimDisk {
        let rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6469_736b_0000_0000 ^ position as u64);
        SimDisk {
            node: node.to_string(),
            state: Mutex::new(State {
                rng,
                slow: None,
                failing: false,
                busy_until: None,
                window: DiskWindow::default(),
                sampling: false,
                model: None,
                io_errors: None,
                power_can_fail: false,
            }),
            supervision,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    pub fn set_slow(&self, model: Option<DiskModelKind>) {
        let mut state = self.lock();
        state.slow = model;
        state.busy_until = None;
        if model.is_some() {
            state.sampling = true;
        }
    }

    /// Gives this disk's node cache and memory models (before it starts).
    pub fn set_model(&self, model: crate::resources::NodeModel) {
        self.lock().model = Some(model);
    }

    /// Runs `f` on the node's models, if it has any.
    pub fn with_model<R>(&self, f: impl FnOnce(&mut crate::resources::NodeModel) -> R) -> Option<R> {
        self.lock().model.as_mut().map(f)
    }

    /// A `power_loss` may hit this disk in the run (set before the node starts).
    pub fn set_power_can_fail(&self) {
        self.lock().power_can_fail = true;
    }

    /// Starts (Some) or ends (None) a `disk_error` fault.
    pub fn set_io_errors(&self, errors: Option<(DiskError, Vec<IoOp>)>) {
        self.lock().io_errors = errors;
    }

    pub fn set_failing(&self, failing: bool) {
        self.lock().failing = failing;
    }

    pub fn is_failing(&self) -> bool {
        self.lock().failing
    }

    /// The latencies since the last call, if this disk is being sampled.
    pub fn take_window(&self) -> Option<DiskWindow> {
        let mut state = self.lock();
        if !state.sampling {
            return None;
        }
        if state.slow.is_none() {
            state.sampling = false; // one last window after the fault ended
        }
        Some(std::mem::take(&mut state.window))
    }
}

fn micros(rng: &mut ChaCha8Rng, range: std::ops::Range<u64>) -> Duration {
    Duration::from_micros(rng.random_range(range))
}

impl IoFaults for SimDisk {
    fn io_error(&self, op: IoOp) -> Option<IoFailure> {
        let mut state = self.lock();
        let (error, ops) = state.io_errors.clone()?;
        if !ops.contains(&op) || !op.fails_with(error) {
            return None;
        }
        // Whether an EIO commit reached the disk anyway: drawn only for one, so a disk without
        // the fault draws exactly what it drew before there was one.
        let landed = error == DiskError::Eio && op == IoOp::Commit && state.rng.random_bool(0.5);
        Some(IoFailure { error, landed })
    }

    fn power_can_fail(&self) -> bool {
        self.lock().power_can_fail
    }
}

impl DiskModel for SimDisk {
    fn charge(&self, op: DiskOp) -> Duration {
        let mut state = self.lock();
        Self::charge_locked(&self.node, &self.supervision, &mut state, op)
    }

    /// With a cache model, a page read is a hit (free: memory) or a miss (a disk read, drawn
    /// from the disk's latency model like any other); without one, a `get` is one disk read.
    fn charge_pages(&self, access: PageAccess<'_>) -> Duration {
        let mut state = self.lock();
        let misses = state.model.as_mut().map(|model| match access {
            PageAccess::Get { keys } => model.get(keys),
            PageAccess::Apply { ops } => model.apply(ops),
        });
        let misses = match (misses, access) {
            (Some(misses), _) => misses,
            (None, PageAccess::Get { .. }) => {
                return Self::charge_locked(&self.node, &self.supervision, &mut state, DiskOp::Read);
            }
            (None, PageAccess::Apply { .. }) => return Duration::ZERO,
        };
        let mut total = Duration::ZERO;
        for _ in 0..misses {
            let latency = Self::charge_locked(&self.node, &self.supervision, &mut state, DiskOp::Read);
            if latency == NEVER {
                return NEVER;
            }
            total += latency;
        }
        total
    }
}

impl SimDisk {
    fn charge_locked(node: &str, supervision: &Supervision, state: &mut State, op: DiskOp) -> Duration {
        if state.failing && (op == DiskOp::Open || (op == DiskOp::Read && state.rng.random_bool(1.0 / 3.0))) {
            // Dies like a process that touched a poisoned mmap page: this operation never
            // returns, and the supervisor kills the process now.
            supervision.died_of_sigbus(node);
            return NEVER;
        }
        let rng = &mut state.rng;
        let service = match (state.slow, op) {
            (None, DiskOp::Commit { .. }) => micros(rng, 200..1_500),
            (None, _) => micros(rng, 20..200),
            (Some(DiskModelKind::Aging), DiskOp::Commit { .. }) if rng.random_bool(0.05) => {
                micros(rng, 100_000..800_000)
            }
            (Some(DiskModelKind::Aging), DiskOp::Commit { .. }) => micros(rng, 300..3_000),
            (Some(DiskModelKind::Aging), _) if rng.random_bool(0.03) => micros(rng, 100_000..800_000),
            (Some(DiskModelKind::Aging), _) => micros(rng, 50..500),
            (Some(DiskModelKind::Saturated), DiskOp::Commit { .. }) => micros(rng, 1_000_000..4_000_000),
            (Some(DiskModelKind::Saturated), _) => micros(rng, 5_000..50_000),
        };
        // Commits go through one device queue: each waits for the ones before it.
        let latency = if matches!(op, DiskOp::Commit { .. }) {
            let now = Instant::now();
            let start = state.busy_until.filter(|busy| *busy > now).unwrap_or(now);
            let done = start + service;
            state.busy_until = Some(done);
            done - now
        } else {
            service
        };
        if state.sampling {
            state.window.latencies_us.push(latency.as_micros() as u64);
        }
        latency
    }
}
