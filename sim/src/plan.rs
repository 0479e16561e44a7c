//! The plan of one run: everything a scenario and a seed decide, derived once.
//!
//! A run is a pure function of (scenario, seed). What the seed draws ([`Draws`]: the faults,
//! the related groups among them, whether the node's fault points fire, each writer's modes)
//! and every node's configuration as the node itself validated it ([`Plan::nodes`]) are worked
//! out here, once per run, and then only read: `qsim run` prints the plan, the world executes
//! it, the checkers read who follows whom from it, `shrink` pins its draws into the scenario it
//! writes, and `explore` describes seeds by it. Nothing else calls the seed's draws, so the
//! printed plan is the run's.
//!
//! Guarantees: [`Draws::of`] and [`Plan::new`] draw from no random stream but the ones seeded
//! from the seed (ChaCha8, one per family: see `scenario::swarm`), read no clock and touch no
//! file, so a plan is the same in any process on any machine. Derive it outside the simulated
//! world's thread: the run's thread must make its first hash map inside the simulation, where
//! the standard library's hash keys come from the run's seed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

use qs_node::EngineKind;
use qs_node::config::Role;

use crate::scenario::nodes::Planned;
use crate::scenario::{Fault, FaultKind, RelatedDraw, Scenario, WriterModes};

/// What a seed draws for a scenario (the file's own choices included).
#[derive(Clone, Debug, PartialEq)]
pub struct Draws {
    /// Every fault of the run: the file's, then the seed's independent draws and interrupts,
    /// then the related groups' faults, in their groups' order.
    pub faults: Vec<Fault>,
    /// The related groups whose faults close [`faults`](Self::faults) (swarm with `related`).
    pub related: Vec<RelatedDraw>,
    /// Whether the node's fault points may fire: the file's `buggify`, or drawn (swarm).
    pub fault_points: bool,
    /// Each writer's modes, in `[[workload]]` order: the file's, or drawn (swarm).
    pub writer_modes: Vec<WriterModes>,
}

impl Draws {
    pub fn of(scenario: &Scenario, seed: u64) -> Draws {
        let (faults, related) = scenario.draw_faults(seed);
        Draws {
            faults,
            related,
            fault_points: scenario.draw_fault_points(seed),
            writer_modes: scenario.draw_writer_modes(seed),
        }
    }

    /// The nodes a power loss may hit: their real files go through the simulated page cache.
    pub fn power_can_fail(&self) -> BTreeSet<String> {
        self.faults.iter().filter(|f| f.kind == FaultKind::PowerLoss).flat_map(|f| f.group_with_target()).collect()
    }

    /// Where each fault came from, in [`faults`](Self::faults) order: the file (`None`), the
    /// seed's independent draws, or a related group.
    pub fn origins(&self, from_file: usize) -> Vec<FaultOrigin> {
        let related: Vec<FaultOrigin> =
            self.related.iter().flat_map(|g| vec![FaultOrigin::Related(g.group); g.faults.len()]).collect();
        let independent = self.faults.len() - related.len();
        (0..independent)
            .map(|i| if i < from_file { FaultOrigin::File } else { FaultOrigin::Drawn })
            .chain(related)
            .collect()
    }
}

/// Where a fault of a run came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOrigin {
    /// The scenario file's `[[fault]]`.
    File,
    /// Swarm: drawn from the seed on its own (an interrupt included).
    Drawn,
    /// Swarm: a fault of a related group.
    Related(crate::scenario::RelatedGroup),
}

/// One run's plan: the seed's draws and every node as the world starts it.
#[derive(Debug)]
pub struct Plan {
    pub seed: u64,
    pub draws: Draws,
    /// Every node in topology order (root first), its configuration parsed and validated by
    /// the node, its files under the run's scratch folder. A node a power loss may hit runs
    /// LMDB with `pwrite` rather than a writable map (the simulated page cache sees writes, not
    /// stores to a map).
    pub nodes: Vec<Planned>,
    /// The run's scratch folder, which holds the nodes' files. Its name is the OS's, not the
    /// seed's: it must never reach the trace ([`redact`]).
    pub scratch: std::path::PathBuf,
}

impl Plan {
    /// The plan of `scenario` under `seed`, its nodes' files under `scratch`.
    pub fn new(scenario: &Scenario, seed: u64, scratch: &Path) -> Plan {
        let draws = Draws::of(scenario, seed);
        let power_can_fail = draws.power_can_fail();
        let mut nodes = crate::scenario::nodes::configs(scenario, scratch);
        for node in &mut nodes {
            if node.config.storage.engine == EngineKind::Lmdb && power_can_fail.contains(&node.config.name) {
                node.config.storage.write_map = Some(false);
            }
        }
        Plan { seed, draws, nodes, scratch: scratch.to_path_buf() }
    }

    /// Each node's name by its address.
    pub fn names_by_ip(&self) -> BTreeMap<IpAddr, String> {
        self.nodes.iter().map(|p| (p.ip, p.config.name.clone())).collect()
    }

    /// Each replica with the names of its configured sources, in topology order.
    pub fn sources(&self) -> BTreeMap<String, Vec<String>> {
        let names = self.names_by_ip();
        self.nodes
            .iter()
            .filter(|p| p.config.role == Role::Replica)
            .map(|p| {
                let mine = p.config.sources().iter().filter_map(|a| names.get(&a.ip()).cloned()).collect();
                (p.config.name.clone(), mine)
            })
            .collect()
    }

    /// The ports sources serve replication on: every node's, and the relays' across data
    /// centers.
    pub fn serving_ports(&self) -> BTreeSet<u16> {
        let mut serving: BTreeSet<u16> = self.nodes.iter().flat_map(|p| p.relays.iter().copied()).collect();
        serving.insert(crate::scenario::nodes::REPLICATION_PORT);
        serving
    }
}

/// Which nodes' steady series the trace of a run of `scenario` with `faults` keeps
/// ([`crate::trace::Detail`]): every node of a tier up to `[checks] trace_nodes_per_tier`, the
/// root members, and every node a fault names (its target, group and peer); the rest of a
/// larger tier is left out and the tiers summarized.
pub fn trace_detail(scenario: &Scenario, faults: &[Fault]) -> crate::trace::Detail {
    let per_tier = scenario.checks.trace_nodes_per_tier;
    let named: BTreeSet<String> = faults
        .iter()
        .flat_map(|f| f.group_with_target().into_iter().chain(f.peer.as_ref().map(|p| p.get_ref().clone())))
        .collect();
    let infos = scenario.node_infos();
    let mut place: BTreeMap<&str, usize> = BTreeMap::new();
    let mut omitted = BTreeSet::new();
    for info in &infos {
        let n = place.entry(info.tier.as_str()).or_default();
        *n += 1;
        if *n > per_tier && !crate::trace::is_root(&info.name) && !named.contains(&info.name) {
            omitted.insert(info.name.clone());
        }
    }
    let tiers = if omitted.is_empty() { Vec::new() } else { infos.into_iter().map(|i| (i.name, i.tier)).collect() };
    crate::trace::Detail { omitted, tiers }
}

/// `text` (a node's error, say) with the run's scratch folder `scratch` written as `<scratch>`:
/// the same in every process, as the trace must be.
pub fn redact(scratch: &Path, text: &str) -> String {
    text.replace(&*scratch.to_string_lossy(), "<scratch>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_the_same_however_often_it_is_derived_and_its_origins_cover_its_faults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/swarm.toml");
        let scenario = Scenario::load(&path).expect("swarm loads");
        let scratch = Path::new("/qsim-plan-test");
        for seed in 1..=20 {
            let plan = Plan::new(&scenario, seed, scratch);
            assert_eq!(plan.draws, Plan::new(&scenario, seed, scratch).draws, "seed {seed}");
            let origins = plan.draws.origins(scenario.fault.len());
            assert_eq!(origins.len(), plan.draws.faults.len());
            let related = origins.iter().filter(|o| matches!(o, FaultOrigin::Related(_))).count();
            assert_eq!(related, plan.draws.related.iter().map(|g| g.faults.len()).sum::<usize>());
            assert!(plan.nodes.iter().all(|n| n.config.storage.path.starts_with(scratch)));
            let error = format!("opening {}: Input/output error", plan.nodes[1].config.storage.path.display());
            assert!(
                redact(&plan.scratch, &error).starts_with("opening <scratch>/")
                    && !redact(&plan.scratch, &error).contains(scratch.to_str().unwrap())
            );
        }
    }

    /// A tier past `trace_nodes_per_tier` keeps its first nodes' series and those of every node
    /// a fault names, and is summarized; a tree with no such tier keeps every node's.
    #[test]
    fn the_trace_keeps_the_first_nodes_of_a_large_tier_and_every_faults_nodes() {
        let text = |count: usize, per_tier: usize| {
            format!(
                "[scenario]\nname = \"t\"\ndescription = \"d\"\nduration = \"1m\"\n\n[topology]\n\
                 tiers = [{{ name = \"mid\", count = 2 }}, {{ name = \"edge\", count = {count} }}]\n\n\
                 [[fault]]\nat = \"10s\"\nkind = \"kill\"\ntarget = \"edge-{count}\"\nduration = \"5s\"\n\n\
                 [checks]\nlag_max = \"10s\"\nconverge_within = \"30s\"\ntrace_nodes_per_tier = {per_tier}\n"
            )
        };
        let large = Scenario::parse(&text(10, 4), Path::new("s.toml")).expect("valid");
        let faults: Vec<Fault> = large.fault.iter().map(|f| f.get_ref().clone()).collect();
        let detail = trace_detail(&large, &faults);
        let omitted: Vec<&str> = detail.omitted.iter().map(String::as_str).collect();
        assert_eq!(omitted, ["edge-5", "edge-6", "edge-7", "edge-8", "edge-9"], "edge-10 has a fault");
        assert_eq!(detail.tiers.len(), 13, "every node's tier, to summarize by");
        assert_eq!(detail.tiers[0], ("root".to_string(), "root".to_string()));
        let small = Scenario::parse(&text(4, 4), Path::new("s.toml")).expect("valid");
        let detail = trace_detail(&small, &faults);
        assert!(detail.omitted.is_empty() && detail.tiers.is_empty(), "a small tree keeps everything");
    }
}
