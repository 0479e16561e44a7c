//! Swarm's related groups (`related = true`): outages drawn together on purpose — a replica
//! with one or all of its sources, a replica out past its sources' retention, a whole tier —
//! from a random stream of their own, each placed clear of every other fault on its nodes.

use std::time::Duration;

use super::{PAST_RETENTION_ROOM, overlap};
use crate::scenario::{Fault, FaultKind, Scenario, Swarm};

impl Scenario {
    /// The related groups `related` draws under `seed`, each placed clear of `drawn` (the run's
    /// other faults) and of the groups before it on every node it touches.
    pub(super) fn draw_related(&self, seed: u64, drawn: &[Fault]) -> Vec<RelatedDraw> {
        use rand::{RngExt, SeedableRng};
        let Some(swarm) = self.swarm.as_ref().filter(|s| s.related) else { return Vec::new() };
        let outages: Vec<FaultKind> = OUTAGE_KINDS.into_iter().filter(|k| swarm.kinds.contains(k)).collect();
        if outages.is_empty() {
            return Vec::new(); // refused at load
        }
        // A stream of its own: turning `related` on leaves every other draw of the seed as it was.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7265_6c61_7465_6400);
        let world = World::of(self);
        let available: Vec<RelatedGroup> = RelatedGroup::ALL.iter().copied().filter(|g| world.can_draw(*g)).collect();
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

/// The kinds that take a node out of service for its replicas while they last — the outages a
/// related group is made of.
pub const OUTAGE_KINDS: [FaultKind; 5] =
    [FaultKind::Kill, FaultKind::Stop, FaultKind::Pause, FaultKind::Partition, FaultKind::PowerLoss];

/// Most related groups one seed draws (at least one is tried on every seed).
pub const RELATED_GROUPS_MAX: usize = 2;

/// Places tried for one related group before it is given up (every one overlapped a fault
/// already drawn on one of its nodes).
const PLACEMENT_ATTEMPTS: usize = 8;

/// The shapes of related faults swarm's `related` draws on purpose: outages that independent
/// draws seldom line up — a node and its sources failing together, an outage past the sources'
/// retention, a whole tier at once.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    pub const ALL: &'static [RelatedGroup] = <RelatedGroup as strum::VariantArray>::VARIANTS;

    /// The name summaries and reports use.
    pub fn name(self) -> &'static str {
        self.into()
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
        let sources = crate::scenario::nodes::source_names(scenario);
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
        let below_root = |s: &String| !crate::trace::is_root(s);
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
                let below: Vec<&String> = sources.iter().filter(|s| !crate::trace::is_root(s)).collect();
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
                let below: Vec<&String> = sources.iter().filter(|s| !crate::trace::is_root(s)).collect();
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
