//! Swarm mode: the faults a seed draws (see [`Swarm`](super::Swarm)).
//!
//! Guarantees: every draw is a pure function of the scenario and the seed; each family of
//! draws has a random stream of its own (independent faults, interrupts, related groups,
//! fault points, writer modes), so turning one option on leaves the others' draws exactly as
//! they were; a drawn fault never overlaps another fault on a node it touches, but for an
//! interrupt, whose time is a transfer's; and every drawn fault is one `Scenario::load` accepts
//! written out (the shrinker's explicit schedule re-parses them).

use std::time::Duration;

use toml::Spanned;

use super::fault::{DiskError, IoOp};
use super::workload::DRAWN_BATCH_OPS_MAX;

mod related;
#[cfg(test)]
mod tests;

use super::{DiskModelKind, During, Fault, FaultKind, Scenario, Workload, WriterModes};
pub use related::{OUTAGE_KINDS, RELATED_GROUPS_MAX, RelatedDraw, RelatedGroup};

impl Scenario {
    /// Whether the node's fault points are on in a run under `seed`: the file's `buggify`, or
    /// in swarm mode with `buggify`, drawn from the seed (half the seeds). Read through
    /// [`Draws`](crate::plan::Draws).
    pub(crate) fn draw_fault_points(&self, seed: u64) -> bool {
        use rand::{RngExt, SeedableRng};
        if self.scenario.buggify {
            return true;
        }
        self.swarm.as_ref().is_some_and(|s| s.buggify)
            && rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6275_6767_6966_7900).random_bool(0.5)
    }

    /// Each writer's modes under `seed`, in `[[workload]]` order: the file's, or (in swarm mode
    /// with `writer_modes`, for a writer left at the defaults) drawn from the seed — each mode
    /// on with probability 1/2. The quota is never drawn: it is the root's configuration. Read
    /// through [`Draws`](crate::plan::Draws).
    pub(crate) fn draw_writer_modes(&self, seed: u64) -> Vec<WriterModes> {
        let draws = self.swarm.as_ref().is_some_and(|s| s.writer_modes);
        self.workload
            .iter()
            .filter_map(|w| match w {
                Workload::Writer { modes, .. } => Some(*modes),
                _ => None,
            })
            .enumerate()
            .map(
                |(writer, modes)| {
                    if draws && modes == WriterModes::default() { drawn_modes(seed, writer) } else { modes }
                },
            )
            .collect()
    }

    /// The faults of a run under `seed`: the file's, then (in swarm mode) those the seed draws
    /// independently, the interrupts of `interrupt_bootstraps`, and last the faults of the
    /// groups `related` draws — with those groups (none but in swarm mode with `related`), in
    /// the order their faults close the list. Drawn faults never overlap another fault on the
    /// same node, but for an interrupt (its time is the transfer's). Read through
    /// [`Draws`](crate::plan::Draws).
    pub(crate) fn draw_faults(&self, seed: u64) -> (Vec<Fault>, Vec<RelatedDraw>) {
        let mut faults = self.independent_faults_for(seed);
        let related = self.draw_related(seed, &faults);
        faults.extend(related.iter().flat_map(|group| group.faults.iter().cloned()));
        (faults, related)
    }

    /// How long an outage lasts, at the least, before the entries its node needs next may have
    /// been collected everywhere: `retention_entries` entries at the most the root writes a
    /// second — one a batch window while writes arrive (at most the writers' request rate),
    /// else one a heartbeat interval — plus a collection pass. `None` when that leaves no room
    /// in the run for the node to come back and catch up ([`PAST_RETENTION_ROOM`]).
    pub fn past_retention(&self) -> Option<Duration> {
        let writes_per_s: f64 = self
            .workload
            .iter()
            .filter_map(|w| match w {
                Workload::Writer { rate_per_s, .. } => Some(*rate_per_s),
                _ => None,
            })
            .sum();
        let node = &self.node;
        let per_window = 1.0 / node.batch_window.as_secs_f64();
        let per_heartbeat = 1.0 / node.heartbeat_interval.as_secs_f64();
        let entries_per_s = writes_per_s.min(per_window).max(per_heartbeat);
        let least = Duration::from_secs_f64(node.retention_entries as f64 / entries_per_s) + node.gc_interval;
        // The drawn outage is up to twice that, and then its node must come back inside the run.
        (least * 2 + PAST_RETENTION_ROOM < self.scenario.duration).then_some(least)
    }

    /// The file's faults, the ones the seed draws one by one, and the interrupts.
    #[expect(
        clippy::too_many_lines,
        reason = "81 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    fn independent_faults_for(&self, seed: u64) -> Vec<Fault> {
        use rand::{RngExt, SeedableRng};
        let mut faults: Vec<Fault> = self.fault.iter().map(|f| f.get_ref().clone()).collect();
        let Some(swarm) = &self.swarm else { return faults };
        let from_file = faults.len();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7377_6172_6d00_0000);
        // Which kinds are on for this seed: each with probability 1/2, at least one.
        let mut kinds: Vec<FaultKind> = swarm.kinds.iter().copied().filter(|_| rng.random_bool(0.5)).collect();
        if kinds.is_empty() {
            kinds.push(swarm.kinds[rng.random_range(0..swarm.kinds.len())]);
        }
        let names = self.node_names();
        // Every replica; in a root group its members too (a root of one is the one node no
        // drawn fault takes out: the run would be about nothing else).
        let group = self.topology.root_members > 1;
        let targets: Vec<String> = names.iter().filter(|n| group || !crate::trace::is_root(n)).cloned().collect();
        let horizon = self.scenario.duration.as_millis() as u64;
        let count = rng.random_range(swarm.count_min..=swarm.count_max);
        for _ in 0..count {
            let kind = kinds[rng.random_range(0..kinds.len())];
            let target = if kind.is_network_wide() {
                "network".to_string()
            } else {
                targets[rng.random_range(0..targets.len())].clone()
            };
            let at = Duration::from_millis(rng.random_range(0..horizon));
            let span = swarm.duration_min.as_millis() as u64..=swarm.duration_max.as_millis() as u64;
            let duration = Duration::from_millis(rng.random_range(span));
            let mut fault = Fault::new(at, kind, &target, duration);
            match kind {
                FaultKind::ClogLink => {
                    let others: Vec<&String> = names.iter().filter(|n| **n != target).collect();
                    fault.peer = Some(Spanned::new(0..0, others[rng.random_range(0..others.len())].clone()));
                }
                FaultKind::Split => {
                    let extra = rng.random_range(0..=2usize);
                    fault.group = (0..extra).map(|_| targets[rng.random_range(0..targets.len())].clone()).collect();
                    fault.group.sort();
                    fault.group.dedup();
                }
                FaultKind::SlowDisk => {
                    fault.model =
                        Some(if rng.random_bool(0.5) { DiskModelKind::Aging } else { DiskModelKind::Saturated });
                }
                FaultKind::Latency => fault.latency = Some(Duration::from_millis(rng.random_range(20..=200))),
                FaultKind::Loss => fault.rate = Some(rng.random_range(0.01..0.2)),
                FaultKind::DiskError => {
                    let error = if rng.random_bool(0.5) { DiskError::Eio } else { DiskError::Enospc };
                    fault.error = Some(error);
                    // Half fail everything; half one operation alone (a rename alone reaches
                    // the middle of a snapshot install, which a failing commit never lets start;
                    // a read alone reaches the lookups a write makes first).
                    if rng.random_bool(0.5) {
                        let ops: Vec<IoOp> = IoOp::ALL.iter().copied().filter(|op| op.fails_with(error)).collect();
                        fault.ops = vec![ops[rng.random_range(0..ops.len())]];
                    }
                }
                _ => {}
            }
            // Faults touching a node (as target, peer or group member) never overlap on it.
            let mine = touched(&fault);
            let overlaps = faults
                .iter()
                .any(|f| at < f.at + f.duration && f.at < at + duration && touched(f).iter().any(|n| mine.contains(n)));
            if !overlaps {
                faults.push(fault);
            }
        }
        if swarm.interrupt_bootstraps {
            // Each from its own stream: turning this on leaves the faults drawn above as they were.
            let span = swarm.duration_min.as_millis() as u64..=swarm.duration_max.as_millis() as u64;
            let interrupts: Vec<Fault> = faults[from_file..]
                .iter()
                .enumerate()
                .filter_map(|(drawn, f)| {
                    let from = rebootstrap_from(f)?;
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x696e_7465_7272_7570 ^ drawn as u64);
                    if !rng.random_bool(0.5) {
                        return None;
                    }
                    let kind = [FaultKind::Kill, FaultKind::Pause, FaultKind::Partition][rng.random_range(0..3)];
                    let duration = Duration::from_millis(rng.random_range(span.clone()));
                    let mut interrupt = Fault::new(from, kind, f.target.get_ref(), duration);
                    interrupt.during = Some(During::Bootstrap);
                    Some(interrupt)
                })
                .collect();
            faults.extend(interrupts);
        }
        faults
    }
}

/// Faults on one node overlap in time: `a` and `b` touch a node in common (as target, peer or
/// group member) at some moment. A fault that waits for a transfer (`during`) may start any
/// time after its `at`, so it counts as lasting from `at` on.
fn overlap(a: &Fault, b: &Fault) -> bool {
    let end = |f: &Fault| if f.during.is_some() { Duration::MAX } else { f.at + f.duration };
    let nodes = touched(b);
    a.at < end(b) && b.at < end(a) && touched(a).iter().any(|n| nodes.contains(n))
}

/// The nodes a fault touches: its target, its group and its peer.
fn touched(fault: &Fault) -> Vec<String> {
    let mut nodes = fault.group_with_target();
    nodes.extend(fault.peer.as_ref().map(|p| p.get_ref().clone()));
    nodes
}

/// What a node out past retention needs left of the run after it comes back: time to find a
/// source that answers, bootstrap and catch up inside the safety phase.
pub const PAST_RETENTION_ROOM: Duration = Duration::from_secs(20);

/// Writer `writer`'s modes drawn from `seed`.
fn drawn_modes(seed: u64, writer: usize) -> WriterModes {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6d6f_6465_7300_0000 ^ writer as u64);
    let batch_ops = if rng.random_bool(0.5) { rng.random_range(2..=DRAWN_BATCH_OPS_MAX) } else { 1 };
    let mut share = |on: bool, share: f64| if on && rng.random_bool(0.5) { share } else { 0.0 };
    WriterModes {
        batch_ops,
        repeat_share: share(batch_ops > 1, 0.3),
        delete_share: share(true, 0.1),
        rewrite_share: share(true, 0.1),
        outside_prefix_share: share(true, 0.02),
        read_back_share: 0.0,
        quota_per_s: None,
        quota_burst: None,
    }
}

/// When `fault` starts sending its target back to a snapshot, if it does: a `sigbus` node's disk
/// is replaced (empty) when the fault ends; `bit_rot` damage is found by a read or the scrub
/// some time after it strikes.
fn rebootstrap_from(fault: &Fault) -> Option<Duration> {
    match fault.kind {
        FaultKind::Sigbus => Some(fault.at + fault.duration),
        FaultKind::BitRot => Some(fault.at),
        _ => None,
    }
}
