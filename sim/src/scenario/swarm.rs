//! Swarm mode: the faults a seed draws (see [`Swarm`]).
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
use super::{DiskModelKind, During, Fault, FaultKind, Scenario, Swarm, Workload, WriterModes};

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

    /// The related groups `related` draws under `seed`, each placed clear of `drawn` (the run's
    /// other faults) and of the groups before it on every node it touches.
    fn draw_related(&self, seed: u64, drawn: &[Fault]) -> Vec<RelatedDraw> {
        use rand::{RngExt, SeedableRng};
        let Some(swarm) = self.swarm.as_ref().filter(|s| s.related) else { return Vec::new() };
        let outages: Vec<FaultKind> = OUTAGE_KINDS.into_iter().filter(|k| swarm.kinds.contains(k)).collect();
        if outages.is_empty() {
            return Vec::new(); // refused at load
        }
        // A stream of its own: turning `related` on leaves every other draw of the seed as it was.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7265_6c61_7465_6400);
        let world = World::of(self);
        let available: Vec<RelatedGroup> = RelatedGroup::ALL.into_iter().filter(|g| world.can_draw(*g)).collect();
        if available.is_empty() {
            return Vec::new();
        }
        let mut placed: Vec<Fault> = drawn.to_vec();
        let mut groups = Vec::new();
        for _ in 0..rng.random_range(1..=RELATED_GROUPS_MAX) {
            let group = available[rng.random_range(0..available.len())];
            for _ in 0..PLACEMENT_ATTEMPTS {
                let faults = world.draw(group, &outages, swarm, &mut rng);
                if faults.iter().all(|f| placed.iter().all(|p| !overlap(f, p))) {
                    placed.extend(faults.iter().cloned());
                    groups.push(RelatedDraw { group, faults });
                    break;
                }
            }
        }
        groups
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

/// The kinds that take a node out of service for its replicas while they last — the outages a
/// related group is made of.
pub const OUTAGE_KINDS: [FaultKind; 5] =
    [FaultKind::Kill, FaultKind::Stop, FaultKind::Pause, FaultKind::Partition, FaultKind::PowerLoss];

/// Most related groups one seed draws (at least one is tried on every seed).
pub const RELATED_GROUPS_MAX: usize = 2;

/// Places tried for one related group before it is given up (every one overlapped a fault
/// already drawn on one of its nodes).
const PLACEMENT_ATTEMPTS: usize = 8;

/// What a node out past retention needs left of the run after it comes back: time to find a
/// source that answers, bootstrap and catch up inside the safety phase.
pub const PAST_RETENTION_ROOM: Duration = Duration::from_secs(20);

/// The shapes of related faults swarm's `related` draws on purpose: outages that independent
/// draws seldom line up — a node and its sources failing together, an outage past the sources'
/// retention, a whole tier at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelatedGroup {
    /// A replica and one of its configured sources (not the root) out at overlapping times.
    ReplicaAndSource,
    /// A replica and every one of its configured sources out at overlapping times (replicas
    /// whose sources are all below the root).
    ReplicaAndAllSources,
    /// A replica out for longer than its sources' retention covers ([`Scenario::past_retention`]),
    /// and — when it has a source below the root — that source going out during the outage and
    /// still out when the replica comes back: the source that is up must say "out of retention"
    /// and the replica must not wait for the one that is down.
    PastRetention,
    /// Every node of one tier out together (one `power_loss` of the whole tier, or one fault per
    /// node at the same moment for as long), half the time past retention when the run has room.
    TierDown,
}

impl RelatedGroup {
    /// Every group, in the order draws and tables list them.
    pub const ALL: [RelatedGroup; 4] = [
        RelatedGroup::ReplicaAndSource,
        RelatedGroup::ReplicaAndAllSources,
        RelatedGroup::PastRetention,
        RelatedGroup::TierDown,
    ];

    /// The name summaries and reports use.
    pub fn name(self) -> &'static str {
        match self {
            RelatedGroup::ReplicaAndSource => "replica_and_source",
            RelatedGroup::ReplicaAndAllSources => "replica_and_all_sources",
            RelatedGroup::PastRetention => "past_retention",
            RelatedGroup::TierDown => "tier_down",
        }
    }
}

impl std::fmt::Display for RelatedGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One related group as a seed drew it: its shape and its faults (its replica's first).
#[derive(Clone, Debug, PartialEq)]
pub struct RelatedDraw {
    pub group: RelatedGroup,
    pub faults: Vec<Fault>,
}

/// What the related draws need to know of a scenario, worked out once per seed.
struct World {
    /// Every replica with its configured sources, in topology order.
    replicas: Vec<(String, Vec<String>)>,
    /// Each tier's nodes, root's excluded.
    tiers: Vec<Vec<String>>,
    /// The safety phase, in ms.
    horizon: u64,
    /// [`Scenario::past_retention`], in ms.
    past: Option<u64>,
}

impl World {
    fn of(scenario: &Scenario) -> World {
        let sources = super::nodes::source_names(scenario);
        let infos = scenario.node_infos();
        let replicas = infos.iter().filter_map(|n| sources.get(&n.name).map(|s| (n.name.clone(), s.clone()))).collect();
        let tiers = scenario
            .topology
            .tiers
            .iter()
            .map(|t| infos.iter().filter(|n| n.tier == t.get_ref().name).map(|n| n.name.clone()).collect())
            .collect();
        World {
            replicas,
            tiers,
            horizon: scenario.scenario.duration.as_millis() as u64,
            past: scenario.past_retention().map(|d| d.as_millis() as u64),
        }
    }

    /// Replicas with a source below the root (`all`: with every source below it).
    fn fed_by_replicas(&self, all: bool) -> Vec<&(String, Vec<String>)> {
        let below_root = |s: &String| s != "root";
        self.replicas
            .iter()
            .filter(|(_, sources)| if all { sources.iter().all(below_root) } else { sources.iter().any(below_root) })
            .collect()
    }

    fn can_draw(&self, group: RelatedGroup) -> bool {
        match group {
            RelatedGroup::ReplicaAndSource => !self.fed_by_replicas(false).is_empty(),
            RelatedGroup::ReplicaAndAllSources => !self.fed_by_replicas(true).is_empty(),
            RelatedGroup::PastRetention => self.past.is_some() && !self.replicas.is_empty(),
            RelatedGroup::TierDown => !self.tiers.is_empty(),
        }
    }

    /// One placement of `group` (`can_draw` holds): outages of the `outages` kinds, times in
    /// whole milliseconds inside the safety phase.
    fn draw(&self, group: RelatedGroup, outages: &[FaultKind], swarm: &Swarm, rng: &mut impl rand::Rng) -> Vec<Fault> {
        use rand::RngExt;
        let span = swarm.duration_min.as_millis() as u64..=swarm.duration_max.as_millis() as u64;
        let mut kind = || outages[rng.random_range(0..outages.len())];
        let (first_kind, second_kind) = (kind(), kind());
        match group {
            RelatedGroup::ReplicaAndSource | RelatedGroup::ReplicaAndAllSources => {
                let all = group == RelatedGroup::ReplicaAndAllSources;
                let fed = self.fed_by_replicas(all);
                let (replica, sources) = fed[rng.random_range(0..fed.len())];
                let below: Vec<&String> = sources.iter().filter(|s| *s != "root").collect();
                let chosen: Vec<&String> = if all { below } else { vec![below[rng.random_range(0..below.len())]] };
                let at = rng.random_range(0..self.horizon);
                let duration = rng.random_range(span.clone());
                let mut faults = vec![outage(first_kind, replica, at, duration)];
                for (i, source) in chosen.into_iter().enumerate() {
                    let kind = if i == 0 { second_kind } else { outages[rng.random_range(0..outages.len())] };
                    let length = rng.random_range(span.clone());
                    // Overlapping the replica's: starts before it ends, ends after it starts.
                    let from = (at + 1).saturating_sub(length);
                    let to = (at + duration - 1).min(self.horizon - 1);
                    faults.push(outage(kind, source, rng.random_range(from..=to.max(from)), length));
                }
                faults
            }
            RelatedGroup::PastRetention => {
                let past = self.past.expect("can_draw");
                let (replica, sources) = &self.replicas[rng.random_range(0..self.replicas.len())];
                let duration = rng.random_range(past..=past * 2);
                let room = PAST_RETENTION_ROOM.as_millis() as u64;
                let at = rng.random_range(0..=self.horizon - duration - room);
                let back = at + duration;
                let mut faults = vec![outage(first_kind, replica, at, duration)];
                let below: Vec<&String> = sources.iter().filter(|s| *s != "root").collect();
                if !below.is_empty() {
                    let source = below[rng.random_range(0..below.len())];
                    // Out some time during the replica's outage, and still out when it is back.
                    let from = rng.random_range(at..back);
                    let until = back + rng.random_range(span);
                    faults.push(outage(second_kind, source, from, until - from));
                }
                faults
            }
            RelatedGroup::TierDown => {
                let tier = &self.tiers[rng.random_range(0..self.tiers.len())];
                let room = PAST_RETENTION_ROOM.as_millis() as u64;
                let duration = match self.past {
                    Some(past) if rng.random_bool(0.5) => rng.random_range(past..=past * 2),
                    _ => rng.random_range(span),
                };
                let latest = self.horizon.saturating_sub(duration + room).max(1);
                let at = rng.random_range(0..latest);
                if first_kind == FaultKind::PowerLoss {
                    let mut fault = outage(first_kind, &tier[0], at, duration);
                    fault.group = tier[1..].to_vec();
                    vec![fault]
                } else {
                    tier.iter().map(|node| outage(first_kind, node, at, duration)).collect()
                }
            }
        }
    }
}

/// An outage of `kind` on `target` from `at` for `duration`, in ms.
fn outage(kind: FaultKind, target: &str, at: u64, duration: u64) -> Fault {
    Fault::new(Duration::from_millis(at), kind, target, Duration::from_millis(duration.max(1)))
}

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
            let before = plain.draw_faults(seed).0;
            let after = interrupting.draw_faults(seed).0;
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

    fn related(on: bool) -> Scenario {
        let text = format!(
            r#"
[scenario]
name = "r"
description = "d"
duration = "3m"

[topology]
tiers = [{{ name = "mid", count = 3 }}, {{ name = "edge", count = 6, primaries = 1, secondaries = 2 }}]

[node]
retention_entries = 100

[[workload]]
kind = "writer"
rate_per_s = 5
keys = 100
value_bytes = {{ min = 10, max = 200 }}

[swarm]
kinds = ["kill", "pause", "power_loss", "sigbus", "latency", "split"]
count_min = 1
count_max = 8
duration_min = "2s"
duration_max = "40s"
interrupt_bootstraps = true
related = {on}

[checks]
lag_max = "30s"
converge_within = "90s"
"#
        );
        Scenario::parse(&text, Path::new("r.toml")).expect("a valid swarm scenario")
    }

    #[test]
    fn related_groups_line_up_a_node_with_its_sources_past_retention_and_by_tier_and_change_no_other_draw() {
        let (plain, relating) = (related(false), related(true));
        let sources = super::super::nodes::source_names(&relating);
        assert_eq!(sources["edge-2"], ["mid-2", "mid-3", "mid-1"], "round robin over the mids, primary first");
        // 100 entries at 2 a second, and a collection pass.
        let past = relating.past_retention().expect("room for an outage past retention");
        assert_eq!(past, Duration::from_secs(51));
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..300 {
            let before = plain.draw_faults(seed).0;
            let after = relating.draw_faults(seed).0;
            assert_eq!(after[..before.len()], before[..], "seed {seed}: the other draws stay");
            let groups = relating.draw_faults(seed).1;
            let drawn: Vec<Fault> = groups.iter().flat_map(|g| g.faults.clone()).collect();
            assert_eq!(after[before.len()..], drawn[..], "seed {seed}: the groups close the list");
            assert!(plain.draw_faults(seed).1.is_empty());
            for (i, fault) in drawn.iter().enumerate() {
                assert!(OUTAGE_KINDS.contains(&fault.kind) && fault.during.is_none(), "seed {seed}: {fault:?}");
                assert!(fault.at < Duration::from_secs(180) && !fault.duration.is_zero(), "seed {seed}: {fault:?}");
                let clear = before.iter().chain(drawn.iter().take(i)).all(|o| !overlap(fault, o));
                assert!(clear, "seed {seed}: {fault:?} overlaps on its node");
            }
            let ends = |f: &Fault| f.at + f.duration;
            for RelatedDraw { group, faults } in &groups {
                seen.insert(*group);
                let replica = faults[0].target.get_ref();
                match group {
                    RelatedGroup::ReplicaAndSource | RelatedGroup::ReplicaAndAllSources => {
                        let expected = if *group == RelatedGroup::ReplicaAndSource { 2 } else { 4 };
                        assert_eq!(faults.len(), expected, "seed {seed}: {faults:?}");
                        for source in &faults[1..] {
                            assert!(sources[replica].contains(source.target.get_ref()), "seed {seed}: {faults:?}");
                            let overlapping = source.at < ends(&faults[0]) && faults[0].at < ends(source);
                            assert!(overlapping, "seed {seed}: {faults:?}");
                        }
                    }
                    RelatedGroup::PastRetention => {
                        assert!((past..=past * 2).contains(&faults[0].duration), "seed {seed}: {faults:?}");
                        assert!(ends(&faults[0]) + PAST_RETENTION_ROOM <= Duration::from_secs(180));
                        if replica.starts_with("edge") {
                            let source = &faults[1];
                            assert!(sources[replica].contains(source.target.get_ref()), "seed {seed}: {faults:?}");
                            let out_at_return = source.at < ends(&faults[0]) && ends(&faults[0]) < ends(source);
                            assert!(out_at_return && source.at >= faults[0].at, "seed {seed}: {faults:?}");
                        } else {
                            assert_eq!(faults.len(), 1, "a mid's one source is the root: {faults:?}");
                        }
                    }
                    RelatedGroup::TierDown => {
                        let mut nodes: Vec<String> = faults.iter().flat_map(Fault::group_with_target).collect();
                        nodes.sort();
                        let tier = if replica.starts_with("mid") { 3 } else { 6 };
                        assert_eq!(nodes.len(), tier, "seed {seed}: {faults:?}");
                        assert!(faults.iter().all(|f| (f.at, f.duration) == (faults[0].at, faults[0].duration)));
                    }
                }
            }
        }
        assert_eq!(seen.len(), RelatedGroup::ALL.len(), "every group is drawn: {seen:?}");
    }

    #[test]
    fn related_needs_an_outage_kind_and_a_short_retention_for_its_past_retention_group() {
        let text = "[scenario]\nname = \"r\"\ndescription = \"d\"\nduration = \"3m\"\n[topology]\ntiers = [{ name = \"e\", count = 2 }]\n\
                    [swarm]\nkinds = [\"latency\"]\ncount_min = 1\ncount_max = 2\nduration_min = \"2s\"\nduration_max = \"4s\"\n\
                    related = true\n[checks]\nlag_max = \"30s\"\nconverge_within = \"90s\"\n";
        let err = Scenario::parse(text, Path::new("r.toml")).unwrap_err().to_string();
        assert!(err.contains("field `swarm`") && err.contains("related draws outages"), "{err}");
        let ok = Scenario::parse(&text.replace("[\"latency\"]", "[\"kill\"]"), Path::new("r.toml")).expect("valid");
        // The default retention (100 000 entries) is never passed in three minutes.
        assert_eq!(ok.past_retention(), None);
        for seed in 0..50 {
            let groups = ok.draw_faults(seed).1;
            assert!(!groups.is_empty(), "seed {seed}: a tier can always go down");
            assert!(groups.iter().all(|g| g.group == RelatedGroup::TierDown), "seed {seed}: {groups:?}");
        }
    }
}
