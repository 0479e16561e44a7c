//! Swarm mode: the faults a seed draws (see [`Swarm`]).

use std::time::Duration;

use toml::Spanned;

use super::{DiskModelKind, Fault, FaultKind, Scenario, WriterModes};

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

    /// Writer `writer`'s modes under `seed`: the file's, or (in swarm mode with
    /// `writer_modes`, for a writer left at the defaults) drawn from the seed — each mode on
    /// with probability 1/2. The quota is never drawn: it is the root's configuration.
    pub fn writer_modes_for(&self, seed: u64, writer: usize, modes: WriterModes) -> WriterModes {
        use rand::{RngExt, SeedableRng};
        if !self.swarm.as_ref().is_some_and(|s| s.writer_modes) || modes != WriterModes::default() {
            return modes;
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6d6f_6465_7300_0000 ^ writer as u64);
        let batch_ops = if rng.random_bool(0.5) { rng.random_range(2..=8) } else { 1 };
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

    /// The faults of a run under `seed`: the file's, then (in swarm mode) those the seed draws.
    /// Drawn faults never overlap another fault on the same node.
    pub fn faults_for(&self, seed: u64) -> Vec<Fault> {
        use rand::{RngExt, SeedableRng};
        let mut faults: Vec<Fault> = self.fault.iter().map(|f| f.get_ref().clone()).collect();
        let Some(swarm) = &self.swarm else { return faults };
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
        faults
    }
}
