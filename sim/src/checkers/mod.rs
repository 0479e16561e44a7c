//! Invariant checkers, one family per file, fed by trace events as they happen.
//!
//! Each checker reports a violation with the node, the simulated time, the index, and what was
//! expected against what was found.

pub mod admission;
pub mod cache;
pub mod chain;
pub mod containment;
pub mod contract;
pub mod convergence;
pub mod cursor;
pub mod fetch;
pub mod installs;
pub mod lag;
pub mod leadership;
pub mod listener_counts;
pub mod member_liveness;
pub mod membership;
pub mod memory;
pub mod progress;
pub mod quota;
pub mod raft;
pub mod reads;
pub mod sequence;
pub mod start;
pub mod write_answers;

use crate::plan::Plan;
use crate::scenario::Scenario;
use crate::trace::{Checker, Observer};

/// The checkers that watch a run of `scenario` under `plan`; `reads` is shared with the
/// readers, which feed it each read, and `fetch` with the simulated network, which feeds it every
/// replica's reads from its sources.
pub fn all(scenario: &Scenario, plan: &Plan, reads: &reads::Reads, fetch: &fetch::Fetch) -> Vec<Box<dyn Observer>> {
    let mut checkers = of_nodes(scenario, plan);
    // In this place in the list: the order checkers report one event's violations in is the
    // trace's, and so the digest's.
    checkers.insert(OF_NODES_BEFORE_WIRE, Box::new(fetch.clone()));
    checkers.insert(OF_NODES_BEFORE_WIRE + 1, Box::new(reads.clone()));
    checkers
}

/// How many of [`of_nodes`]' checkers come before `fetch` and `reads` in [`all`].
const OF_NODES_BEFORE_WIRE: usize = 7;

/// The checkers that judge what the nodes report and the faults and writes the run records:
/// [`all`] but `fetch` (fed by a tap on the simulated network) and `reads` (fed by the readers
/// themselves). A real run (`crate::real`) judges its merged trace with these.
pub fn of_nodes(scenario: &Scenario, plan: &Plan) -> Vec<Box<dyn Observer>> {
    let paths = paths(scenario, plan);
    let lag_bound_ms = paths.bound_ms;
    let mut sources = paths.sources.clone();
    // A root group member's store catches up from its peers (a copy of one's store when none
    // holds its next entry): for `installs`, they are its sources.
    let members = scenario.topology.root_names();
    let roster = scenario.topology.roster_names();
    if roster.len() > 1 {
        for member in &roster {
            let peers = roster.iter().filter(|peer| *peer != member).cloned().collect();
            sources.insert(member.clone(), peers);
        }
    }
    let names_by_ip = paths.names_by_ip.clone();
    let mut checkers: Vec<Box<dyn Observer>> = vec![
        Box::new(sequence::Sequence::default()),
        Box::new(chain::Chain::default()),
        Box::new(lag::Lag::with_paths(scenario.checks.lag_max.as_millis() as u64, paths.clone())),
        Box::new(containment::Containment::new(paths)),
        Box::new(cursor::Cursor::default()),
        Box::new(start::Start::default()),
        Box::new(installs::Installs::new(scenario.node.retention_entries, sources, names_by_ip)),
        Box::new(progress::Progress::new(
            scenario.checks.lag_max.as_millis() as u64,
            scenario.workload.iter().any(|w| matches!(w, crate::scenario::Workload::Writer { .. })),
        )),
    ];
    if scenario.topology.root_members > 1 {
        checkers.push(Box::new(raft::Raft::default()));
        let standby = scenario.topology.roster_names().split_off(members.len());
        checkers.push(Box::new(leadership::Leadership::new(members.clone(), standby.clone(), plan.draws.fault_points)));
        let rejoin_ms = lag_bound_ms + leadership::ELECT_WITHIN_MS;
        checkers.push(Box::new(member_liveness::MemberLiveness::new(&members, &standby, rejoin_ms)));
        let first = (1..=scenario.topology.root_members as u64).collect();
        let asked = plan
            .draws
            .faults
            .iter()
            .filter(|f| f.kind == crate::scenario::FaultKind::Membership)
            .map(|f| (f.at.as_millis() as u64, f.add.clone(), f.remove.clone()))
            .collect();
        checkers.push(Box::new(membership::Membership::new(first, asked)));
    }
    if has_impostors(scenario) {
        checkers.push(Box::new(admission::Admission));
    }
    if let Some(resources) = &scenario.resources {
        if let Some(bound) = resources.miss_ratio_max {
            checkers.push(Box::new(cache::Cache::new(bound)));
        }
        checkers.push(Box::new(memory::Memory));
    }
    checkers
}

/// Who follows whom (node names), and the per-node lag bound during faults.
fn paths(scenario: &Scenario, plan: &Plan) -> lag::Paths {
    let settings = &scenario.node;
    let bound_ms =
        (settings.staleness_failover + settings.heartbeat_interval).as_millis() as u64 + lag::FAILOVER_MARGIN_MS;
    lag::Paths { sources: plan.sources(), bound_ms, names_by_ip: plan.names_by_ip() }
}

/// The `fetch` judge for a run under `plan`: its nodes by address, and the ports sources serve
/// replication on (every node's, and the relays' across data centers).
pub fn fetch_judge(plan: &Plan) -> fetch::FetchJudge {
    fetch::FetchJudge::new(plan.names_by_ip(), plan.serving_ports())
}

/// Faults now on, counted: two alike (one kind on one node, the same detail) may overlap — a
/// swarm draws faults over each other — and the end of the first leaves the second on.
#[derive(Debug)]
pub struct ActiveFaults<K: Ord>(std::collections::BTreeMap<K, u32>);

impl<K: Ord> Default for ActiveFaults<K> {
    fn default() -> Self {
        ActiveFaults(std::collections::BTreeMap::new())
    }
}

impl<K: Ord> ActiveFaults<K> {
    /// A fault `key` starts, or (`starts` false) ends; an end without a start is ignored.
    pub fn follow(&mut self, key: K, starts: bool) {
        use std::collections::btree_map::Entry;
        match (self.0.entry(key), starts) {
            (Entry::Vacant(none), true) => {
                none.insert(1);
            }
            (Entry::Occupied(mut on), true) => *on.get_mut() += 1,
            (Entry::Occupied(mut on), false) if *on.get() > 1 => *on.get_mut() -= 1,
            (Entry::Occupied(on), false) => {
                on.remove();
            }
            (Entry::Vacant(_), false) => {}
        }
    }

    pub fn contains(&self, key: &K) -> bool {
        self.0.contains_key(key)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Which faults are on, and since when none is: the "settled" judgement the `lag` and `cache`
/// checkers share (a fault anywhere pauses them everywhere; never blame a node for what a fault
/// explains). Faults are counted ([`ActiveFaults`]): two of one kind on one node may overlap
/// (two links of one node cut, a swarm's partitions drawn over each other).
#[derive(Debug, Default)]
pub struct FaultQuiet {
    active: ActiveFaults<(String, crate::trace::FaultKind)>,
    healthy_since_ms: u64,
}

impl FaultQuiet {
    /// Follows a `fault` event's start or end; other events are ignored. Returns whether the
    /// event was a fault.
    pub fn observe(&mut self, event: &crate::trace::Event) -> bool {
        let crate::trace::Event::Fault { at_ms, node, kind, phase, .. } = event else { return false };
        let starts = *phase == crate::trace::FaultPhase::Start;
        self.active.follow((node.clone(), *kind), starts);
        if !starts && self.active.is_empty() {
            self.healthy_since_ms = *at_ms;
        }
        true
    }

    /// How long no fault has been active at `at_ms` (since the run began if none ever was);
    /// None while one is.
    pub fn quiet_for_ms(&self, at_ms: u64) -> Option<u64> {
        self.active.is_empty().then(|| at_ms.saturating_sub(self.healthy_since_ms))
    }
}

/// Whether `scenario` has impostors for the `admission` checker to judge (written in its
/// faults: swarm mode never draws them).
fn has_impostors(scenario: &Scenario) -> bool {
    scenario.fault.iter().any(|f| f.get_ref().kind == crate::scenario::FaultKind::Impostor)
}

/// Checker names, in the order verdicts are printed. `convergence` is judged at the end of the
/// liveness phase rather than per event.
pub const NAMES: [Checker; 12] = [
    Checker::Sequence,
    Checker::Chain,
    Checker::Lag,
    Checker::Containment,
    Checker::Cursor,
    Checker::Start,
    Checker::Installs,
    Checker::Fetch,
    Checker::Reads,
    Checker::Quota,
    Checker::Progress,
    Checker::Convergence,
];

/// The checkers whose verdicts a run of `scenario` prints: [`NAMES`], then `raft` with a root
/// group, `cache` (with a miss-ratio bound) and `memory` when the scenario models resources, and
/// `coverage` when it names its probes.
pub fn names(scenario: &Scenario) -> Vec<Checker> {
    let mut names = NAMES.to_vec();
    if scenario.topology.root_members > 1 {
        names.push(Checker::Raft);
    }
    if has_impostors(scenario) {
        names.push(Checker::Admission);
    }
    // The census's replies and the configuration's refusals (`crate::knobs::refusals`).
    names.push(Checker::Contract);
    if let Some(resources) = &scenario.resources {
        if resources.miss_ratio_max.is_some() {
            names.push(Checker::Cache);
        }
        names.push(Checker::Memory);
    }
    if !scenario.checks.probes.is_empty() {
        names.push(Checker::Coverage);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::FaultQuiet;
    use crate::trace::{Event, FaultKind, FaultPhase};

    fn fault(at_ms: u64, node: &str, detail: &str, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: node.into(), kind: FaultKind::ClogLink, phase, detail: detail.into() }
    }

    #[test]
    fn two_overlapping_faults_of_one_kind_on_one_node_keep_it_unquiet_until_both_end() {
        let mut quiet = FaultQuiet::default();
        assert_eq!(quiet.quiet_for_ms(5_000), Some(5_000));
        quiet.observe(&fault(10_000, "mid-1", "link to root", FaultPhase::Start));
        quiet.observe(&fault(12_000, "mid-1", "link to mid-2", FaultPhase::Start));
        quiet.observe(&fault(20_000, "mid-1", "link to root", FaultPhase::End));
        assert_eq!(quiet.quiet_for_ms(25_000), None, "the second cut is still on");
        quiet.observe(&fault(30_000, "mid-1", "link to mid-2", FaultPhase::End));
        assert_eq!(quiet.quiet_for_ms(35_000), Some(5_000), "quiet since the last one ended");
    }
}
