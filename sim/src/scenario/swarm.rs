//! Swarm mode: the faults a seed draws (see [`Swarm`](super::Swarm)).

use std::time::Duration;

use toml::Spanned;

use super::fault::{DiskError, IoOp};
use super::{DiskModelKind, During, Fault, FaultKind, Scenario, Workload, WriterModes};

impl Scenario {
    /// Whether the node's fault points are on in a run under `seed`: the file's `buggify`, or
    /// in swarm mode with `buggify`, drawn from the seed (half the seeds).
    pub fn buggify_for(&self, seed: u64) -> bool {
        use rand::{RngExt, SeedableRng};
        if self.scenario.buggify {
            return true;
        }
        self.swarm.as_ref().is_some_and(|s| s.buggify)
            && rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6275_6767_6966_7900).random_bool(0.5)
    }

    /// Each writer's modes under `seed`, in `[[workload]]` order: the file's, or (in swarm mode
    /// with `writer_modes`, for a writer left at the defaults) drawn from the seed — each mode
    /// on with probability 1/2. The quota is never drawn: it is the root's configuration.
    pub fn writer_modes_for(&self, seed: u64) -> Vec<WriterModes> {
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

    /// The faults of a run under `seed`: the file's, then (in swarm mode) those the seed draws.
    /// Drawn faults never overlap another fault on the same node.
    pub fn faults_for(&self, seed: u64) -> Vec<Fault> {
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
        let targets: Vec<String> = names.iter().skip(1).cloned().collect();
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
                        let ops: Vec<IoOp> = IoOp::ALL.into_iter().filter(|op| op.fails_with(error)).collect();
                        fault.ops = vec![ops[rng.random_range(0..ops.len())]];
                    }
                }
                _ => {}
            }
            // Faults touching a node (as target, peer or group member) never overlap on it.
            let touched = |f: &Fault| {
                let mut nodes = f.group_with_target();
                nodes.extend(f.peer.as_ref().map(|p| p.get_ref().clone()));
                nodes
            };
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

/// The most operations a drawn writer's request carries.
pub const DRAWN_BATCH_OPS_MAX: u32 = 8;

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
        quota_per_s: None,
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn swarm(interrupt: bool) -> Scenario {
        let text = format!(
            r#"
[scenario]
name = "s"
description = "d"
duration = "3m"

[topology]
tiers = [{{ name = "edge", count = 4 }}]

[swarm]
kinds = ["sigbus", "bit_rot", "latency", "kill"]
count_min = 2
count_max = 6
duration_min = "2s"
duration_max = "40s"
interrupt_bootstraps = {interrupt}

[checks]
lag_max = "30s"
converge_within = "90s"
"#
        );
        Scenario::parse(&text, Path::new("s.toml")).expect("a valid swarm scenario")
    }

    #[test]
    fn interrupts_follow_the_faults_that_send_a_node_to_a_snapshot_and_change_no_other_draw() {
        let (plain, interrupting) = (swarm(false), swarm(true));
        let (mut rebootstraps, mut interrupts, mut kinds) = (0, 0, Vec::new());
        for seed in 0..300 {
            let before = plain.faults_for(seed);
            let after = interrupting.faults_for(seed);
            assert_eq!(after[..before.len()], before[..], "seed {seed}: the other draws stay");
            assert!(before.iter().all(|f| f.during.is_none()));
            let causes: Vec<&Fault> = before.iter().filter(|f| rebootstrap_from(f).is_some()).collect();
            rebootstraps += causes.len();
            for interrupt in &after[before.len()..] {
                interrupts += 1;
                if !kinds.contains(&interrupt.kind) {
                    kinds.push(interrupt.kind);
                }
                assert_eq!(interrupt.during, Some(During::Bootstrap), "seed {seed}");
                assert!(matches!(interrupt.kind, FaultKind::Kill | FaultKind::Pause | FaultKind::Partition));
                assert!((Duration::from_secs(2)..=Duration::from_secs(40)).contains(&interrupt.duration));
                let cause =
                    causes.iter().any(|c| c.target == interrupt.target && rebootstrap_from(c) == Some(interrupt.at));
                assert!(cause, "seed {seed}: {interrupt:?} follows a sigbus or bit_rot of its node");
            }
            assert!(after.len() - before.len() <= causes.len());
        }
        // About half of the causes are followed, and every interrupting kind is drawn.
        assert!(rebootstraps > 100, "{rebootstraps}");
        assert!((rebootstraps / 3..=rebootstraps * 2 / 3).contains(&interrupts), "{interrupts} of {rebootstraps}");
        assert_eq!(kinds.len(), 3, "{kinds:?}");
    }
}
