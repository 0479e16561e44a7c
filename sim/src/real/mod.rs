//! `qsim real`: one scenario on real `qs-node` processes — real engines on disk, real sockets on
//! a loopback of the run's own, the scenario's own writers and readers, its faults on the wall
//! clock where a real equivalent exists — judged by the simulator's checkers.
//!
//! What it adds to the simulator: the nodes run on tokio's multi-threaded runtime, so a race
//! between two threads (a wakeup lost between a read and a mark, an index published after a
//! lock is released), which one simulated thread can never interleave, can happen here. What it
//! gives up: determinism (no digest; the trace and the report are the evidence), the disk
//! faults, power loss and bit rot (refused by name, or skipped with `--skip-unsupported`), the
//! `fetch` checker (no tap on the wire) and the resource models.
//!
//! Reads top to bottom in [`run`]: plan (the simulator's own [`Plan`], its addresses moved to
//! loopback), start the nodes, start the writers and readers, the safety phase's faults at
//! their times with a supervisor restarting nodes that exit on their own, the liveness phase
//! (every fault healed, the workload stopped, convergence polled over HTTP and memcached), each
//! node's summary, everything stopped; then the nodes' events files and the harness's events
//! merged and judged ([`merge`]).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use qs_node::config::NodeConfig;

use crate::checkers::reads::Reads;
use crate::outcome::RunOutcome;
use crate::plan::Plan;
use crate::scenario::fault::FaultStep;
use crate::scenario::{Fault, FaultKind, Scenario};
use crate::sync::Locked;
use crate::trace::{Event, FaultPhase, Recorder, RunPhase, SharedRecorder};
use crate::workload::{Acked, ReadWindows};

mod end;
pub mod error;
pub mod merge;
pub mod network;
pub mod processes;

pub use error::RealError;
use network::{Capabilities, Filters};
use processes::Cluster;

/// How long a node gets to answer its first status request after its process starts.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the supervisor waits before starting a node that exited on its own again (the
/// simulator's supervisor draws 1–10 s; a fixed second keeps real runs short).
const RESTART_AFTER: Duration = Duration::from_secs(1);
/// How often the schedule looks for nodes that exited, and the liveness phase at every node.
const POLL: Duration = Duration::from_millis(200);

/// How a real run is made.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `qs-node` binary to run (built with `--cfg qsim_harness` for planted bugs, as `./qsim real` builds it).
    pub node_bin: PathBuf,
    /// Skip faults this machine cannot inject, with a warning line, instead of refusing the run.
    pub skip_unsupported: bool,
    /// Make the nodes' folders (stores, configurations, logs, events files) here, a new or
    /// empty folder, and keep them after the run (by default they are in a scratch folder,
    /// removed at the end). Made in place, never copied: an LMDB file is as large as its map.
    pub keep: Option<PathBuf>,
}

/// Milliseconds since the Unix epoch: the clock the nodes' events files use.
fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
}

/// The faults of a run (its plan's draws) this machine runs, and a warning line for each it
/// skips; an error naming the first it cannot run when skipping was not asked for.
pub fn runnable_faults(
    faults: &[Fault],
    capabilities: &Capabilities,
    skip: bool,
) -> Result<(Vec<Fault>, Vec<String>), RealError> {
    let mut kept = Vec::new();
    let mut skipped = Vec::new();
    for fault in faults {
        let why = match (fault.during.is_some(), capabilities.refuses(fault.kind)) {
            (true, _) => {
                Some("it waits for a snapshot transfer in progress, which only the simulator sees".to_string())
            }
            (false, why) => why,
        };
        match why {
            None => kept.push(fault.clone()),
            Some(why) if !skip => {
                let (kind, target, at) = (fault.kind, fault.target.get_ref().clone(), fault.at);
                return Err(RealError::Unsupported { kind, target, at, why });
            }
            Some(why) => {
                skipped.push(format!("fault `{}` on {} at {:?}: {why}", fault.kind, fault.target.get_ref(), fault.at))
            }
        }
    }
    Ok((kept, skipped))
}

/// The configurations the nodes run with: the plan's, each address moved to loopback and the
/// node's outgoing connections leaving from its own address.
fn real_configs(plan: &Plan) -> Vec<NodeConfig> {
    let at = |address: SocketAddr| SocketAddr::new(network::loopback(address.ip()), address.port());
    plan.nodes
        .iter()
        .map(|planned| {
            let mut config = planned.config.clone();
            let listen = &mut config.listen;
            (listen.replication, listen.memcached, listen.http) =
                (at(listen.replication), at(listen.memcached), at(listen.http));
            let replication = &mut config.replication;
            replication.primaries = replication.primaries.iter().copied().map(at).collect();
            replication.secondaries = replication.secondaries.iter().copied().map(at).collect();
            replication.dial_from = Some(network::loopback(planned.ip));
            if let Some(root) = &mut config.root {
                for member in &mut root.members {
                    (member.replication, member.http) = (at(member.replication), at(member.http));
                }
            }
            config
        })
        .collect()
}

/// The nodes' loopback addresses by name.
fn addresses(plan: &Plan) -> BTreeMap<String, IpAddr> {
    plan.nodes.iter().map(|p| (p.config.name.clone(), network::loopback(p.ip))).collect()
}

/// Everything the run holds while it runs.
struct Harness {
    cluster: Cluster,
    filters: Filters,
    addresses: BTreeMap<String, IpAddr>,
    recorder: SharedRecorder,
    /// Faults started and not yet ended: (their number, the fault as resolved).
    open: Vec<(usize, Fault)>,
    /// A fault on the root group's leader, with the member it found leading.
    resolved: BTreeMap<usize, String>,
    /// When each node that exited on its own may be started again.
    restart_at: BTreeMap<String, Instant>,
}

impl Harness {
    fn record(&self, event: impl FnOnce(u64) -> Event) {
        let mut recorder = self.recorder.locked();
        let at_ms = recorder.now_ms();
        recorder.record(event(at_ms));
    }

    /// Starts a node's process and waits until it answers over HTTP.
    fn start(&mut self, name: &str) -> Result<(), RealError> {
        self.cluster.start(name)?;
        let http = self.cluster.nodes[name].http;
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if end::status(http).is_ok() {
                return Ok(());
            }
            if let Some((_, why)) = self.cluster.exited().into_iter().find(|(n, _)| n == name) {
                return Err(RealError::ExitedAtStart { node: name.to_string(), why });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(RealError::StartTimeout { node: name.to_string(), http, waited: START_TIMEOUT })
    }

    /// The supervisor's round: a node whose process exited on its own (not held down by a
    /// fault) is recorded as a failed start and started again [`RESTART_AFTER`] later.
    fn supervise(&mut self) {
        for (name, why) in self.cluster.exited() {
            self.record(|at_ms| Event::StartFailed { at_ms, node: name.clone(), reason: why });
            self.restart_at.insert(name, Instant::now() + RESTART_AFTER);
        }
        let due: Vec<String> =
            self.restart_at.iter().filter(|(_, at)| **at <= Instant::now()).map(|(n, _)| n.clone()).collect();
        for name in due {
            self.restart_at.remove(&name);
            let held = self.cluster.nodes[&name].held_down;
            if !held && !self.cluster.is_running(&name) {
                let _ = self.cluster.start(&name);
            }
        }
    }

    /// The member leading the root group now, by its status; the root when there is no group
    /// or none answers.
    fn leader(&self) -> String {
        self.cluster
            .nodes
            .values()
            .filter(|n| crate::trace::is_root(&n.name))
            .find(|n| end::status(n.http).is_ok_and(|s| s.leads()))
            .map_or_else(|| crate::trace::ROOT.to_string(), |n| n.name.clone())
    }

    /// Starts or ends fault number `id` and records it.
    fn apply(&mut self, id: usize, fault: &Fault, start: bool) -> Result<(), RealError> {
        let mut fault = fault.clone();
        if fault.target.get_ref() == crate::scenario::LEADER {
            let member = match self.resolved.get(&id) {
                Some(member) => member.clone(),
                None => self.leader(),
            };
            self.resolved.insert(id, member.clone());
            fault.target = toml::Spanned::new(fault.target.span(), member);
        }
        let target = fault.target.get_ref().clone();
        let mut detail = fault.detail();
        match (fault.kind, start) {
            (FaultKind::Kill, true) => {
                self.cluster.nodes.get_mut(&target).expect("validated").held_down = true;
                self.cluster.kill(&target)?;
            }
            (FaultKind::Stop, true) => {
                self.cluster.nodes.get_mut(&target).expect("validated").held_down = true;
                detail = self.cluster.stop(&target)?;
            }
            (FaultKind::Kill | FaultKind::Stop, false) => {
                self.cluster.nodes.get_mut(&target).expect("validated").held_down = false;
                self.restart_at.remove(&target);
                if !self.cluster.is_running(&target) {
                    self.cluster.start(&target)?;
                }
            }
            (FaultKind::Pause, true) => self.cluster.pause(&target)?,
            (FaultKind::Pause, false) => self.cluster.resume(&target)?,
            (_, on) => self.filters.set(id, &fault, on, &self.addresses)?,
        }
        if start {
            self.open.push((id, fault.clone()));
        } else {
            self.open.retain(|(open, _)| *open != id);
        }
        let phase = if start { FaultPhase::Start } else { FaultPhase::End };
        self.record(|at_ms| Event::Fault { at_ms, node: target, kind: fault.kind, phase, detail });
        Ok(())
    }

    /// Ends every fault under way, in the order they started: the liveness phase's heal.
    fn heal_all(&mut self) -> Result<(), RealError> {
        for (id, fault) in std::mem::take(&mut self.open) {
            self.apply(id, &fault, false)?;
        }
        self.filters.clear()
    }

    /// Sleeps until `until`, supervising meanwhile.
    fn wait_until(&mut self, until: Instant) {
        loop {
            self.supervise();
            let now = Instant::now();
            if now >= until {
                return;
            }
            std::thread::sleep((until - now).min(POLL));
        }
    }
}

/// Runs `scenario` under `seed` on real processes, with the faults `faults` (the plan's this
/// machine can inject: [`runnable_faults`]).
#[expect(
    clippy::too_many_lines,
    reason = "127 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn run(scenario: &Scenario, seed: u64, faults: &[Fault], options: &Options) -> Result<RunOutcome, RealError> {
    // The scenario as this seed runs it: its knob draws applied.
    let mut scenario = scenario.for_seed(seed);
    // Real processes read the host's one clock: a drawn clock cannot be given them.
    scenario.clocks_drawn.clear();
    let scenario = &scenario;
    // The nodes' folders: a scratch folder removed at the end, or the one to keep them in.
    let (_scratch, folder) = match &options.keep {
        Some(keep) => {
            let fresh = std::fs::read_dir(keep).map_or(true, |mut entries| entries.next().is_none());
            if !fresh {
                return Err(RealError::KeepNotEmpty { path: keep.clone() });
            }
            std::fs::create_dir_all(keep).map_err(|source| RealError::Keep { path: keep.clone(), source })?;
            (None, keep.clone())
        }
        None => {
            let root = crate::scratch::disk_root();
            let scratch = crate::scratch::ScratchDir::new_in("qsim-real-", &root)
                .map_err(|source| RealError::Scratch { root, source })?;
            let path = scratch.path().to_path_buf();
            (Some(scratch), path)
        }
    };
    let plan = Plan::new(scenario, seed, &folder);
    crate::certificates::write_at(&plan, network::loopback).map_err(RealError::Certificates)?;
    let names = scenario.node_names();
    let configs = real_configs(&plan);
    let cluster = Cluster::new(&options.node_bin, &folder, &configs)
        .map_err(|source| RealError::Configs { dir: folder.clone(), source })?;
    let start_unix_ms = unix_ms();
    let reads = Reads::default();
    // Live, only what the harness itself judges: reads against the acknowledged writes (the
    // writers' quota judge records its own violations). The rest is judged after the merge.
    let recorder = Recorder::new(move || unix_ms().saturating_sub(start_unix_ms), vec![Box::new(reads.clone())]);
    let mut harness = Harness {
        cluster,
        filters: Filters::default(),
        addresses: addresses(&plan),
        recorder: recorder.clone(),
        open: Vec::new(),
        resolved: BTreeMap::new(),
        restart_at: BTreeMap::new(),
    };
    for name in &names {
        harness.start(name)?;
    }

    // The writers and readers, on a runtime of their own.
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| RealError::Runtime { source })?;
    let acked: Acked = Arc::default();
    let windows: ReadWindows = Arc::default();
    start_clients(scenario, &plan, &configs, &clients, &recorder, &reads, &acked, &windows);
    clients.spawn(sample_reads(scenario.checks.sample_interval, windows, recorder.clone()));

    // Safety phase: faults at their times.
    let safety_from = Instant::now();
    harness.record(|at_ms| Event::Phase { at_ms, phase: RunPhase::Safety });
    let numbered: Vec<(usize, Fault)> = faults.iter().cloned().enumerate().collect();
    for step in crate::scenario::fault::steps(faults) {
        if step.at >= scenario.scenario.duration {
            continue; // ends after the safety phase: healed below
        }
        harness.wait_until(safety_from + step.at);
        let FaultStep { fault, start, .. } = step;
        let id = numbered.iter().find(|(_, f)| *f == fault).map_or(0, |(id, _)| *id);
        let under_way = harness.open.iter().any(|(open, _)| *open == id);
        if start || under_way {
            harness.apply(id, &fault, start)?;
        }
    }
    harness.wait_until(safety_from + scenario.scenario.duration);

    // Liveness phase: stop the workload, heal, converge.
    let liveness_from = safety_from.elapsed();
    harness.record(|at_ms| Event::Phase { at_ms, phase: RunPhase::Liveness });
    clients.shutdown_timeout(Duration::from_secs(1));
    harness.heal_all()?;
    let deadline = Instant::now() + scenario.checks.converge_within;
    let newest_write = recorder
        .locked()
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::WriteAcked { index, .. } => Some(*index),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let pending = loop {
        harness.supervise();
        let pending = end::pending(&harness.cluster, &acked, newest_write);
        if pending.is_empty() || Instant::now() >= deadline {
            break pending;
        }
        std::thread::sleep(POLL);
    };
    let simulated = safety_from.elapsed();
    let converged_after = pending.is_empty().then(|| simulated - liveness_from);

    end::summarize(scenario, &harness.cluster, &recorder);
    harness.cluster.stop_all();
    // Read once every node has stopped: what a node wrote while it stopped belongs to the trace.
    let mut node_events = Vec::new();
    let mut probes = BTreeMap::new();
    for name in &names {
        let read = merge::read_events_file(&harness.cluster.nodes[name].events_path, start_unix_ms)?;
        for (probe, hits) in read.probes {
            *probes.entry(probe).or_insert(0) += hits;
        }
        node_events.push(read.events);
    }

    let harness_events = recorder.locked().take_events();
    let writes_acked = harness_events.iter().filter(|e| matches!(e, Event::WriteAcked { .. })).count();
    let mut checkers = crate::checkers::of_nodes(scenario, &plan);
    let propagation = crate::propagation::Propagation::new(&scenario.node_infos());
    checkers.push(Box::new(propagation.clone()));
    let sample_ms = scenario.checks.sample_interval.as_millis() as u64;
    let events = merge::judge(&names, node_events, harness_events, sample_ms, &probes, checkers);
    let trace = crate::trace::text(&events);
    Ok(RunOutcome {
        events,
        events_omitted: 0,
        trace,
        digest: String::new(),
        pending,
        simulated,
        writes_acked,
        liveness_from,
        converged_after,
        sizing: Vec::new(),
        messages: 0,
        fetched: Vec::new(),
        propagation: propagation.rows(&scenario.tier_order()),
        knobs: scenario.knobs_drawn.iter().map(ToString::to_string).collect(),
        // Real processes read the host's one clock: nothing is skewed.
        clocks: Vec::new(),
    })
}

/// The scenario's writers and readers (`workload::specs`, as the simulator starts them) on
/// `runtime`, to the nodes' loopback addresses.
#[allow(clippy::too_many_arguments)] // the run's shared state, handed to each client
fn start_clients(
    scenario: &Scenario,
    plan: &Plan,
    configs: &[NodeConfig],
    runtime: &tokio::runtime::Runtime,
    recorder: &SharedRecorder,
    reads: &Reads,
    acked: &Acked,
    windows: &ReadWindows,
) {
    let roots: Vec<SocketAddr> =
        configs.iter().filter(|c| crate::trace::is_root(&c.name)).map(|c| c.listen.http).collect();
    let memcached: Vec<(String, SocketAddr)> = configs.iter().map(|c| (c.name.clone(), c.listen.memcached)).collect();
    let (writers, readers) = crate::workload::specs(scenario, plan.seed, &plan.draws.writer_modes, &roots, &memcached);
    let quota_per_s = crate::scenario::nodes::producer_quota(scenario);
    let quota = crate::checkers::quota::Quota::new(quota_per_s, crate::scenario::nodes::producer_burst(scenario));
    // Every root's write requests and their answers, for the census's metrics pages.
    let writes = crate::checkers::contract::WriteLedgers::default();
    for spec in writers {
        let judges = crate::workload::Judges {
            acked: acked.clone(),
            reads: reads.clone(),
            quota: quota.clone(),
            writes: writes.clone(),
            // Wall-clock runs: a busy machine may delay any answer, so no answer is owed in time.
            answers: None,
        };
        runtime.spawn(crate::workload::writer(spec, recorder.clone(), judges));
    }
    let ledgers = crate::checkers::contract::Ledgers::default();
    for spec in readers {
        runtime.spawn(crate::workload::reader(spec, recorder.clone(), reads.clone(), windows.clone(), ledgers.clone()));
    }
    let root_names: Vec<(String, SocketAddr)> =
        configs.iter().filter(|c| crate::trace::is_root(&c.name)).map(|c| (c.name.clone(), c.listen.http)).collect();
    let edges: Vec<(String, SocketAddr)> = crate::workload::edges(scenario, &memcached).into_iter().cloned().collect();
    let census = crate::workload::census::specs(scenario, plan.seed, &root_names, &edges);
    let judges = crate::workload::census::CensusJudges {
        reads: reads.clone(),
        ledgers,
        sent: crate::checkers::contract::SentValues::default(),
        acked: acked.clone(),
        quota,
        writes,
    };
    for spec in census.edges {
        runtime.spawn(crate::workload::census::edge_census(spec, recorder.clone(), judges.clone()));
    }
    if let Some(spec) = census.root {
        runtime.spawn(crate::workload::census::root_census(spec, recorder.clone(), judges));
    }
}

/// The readers' windows as `read_sample` events, once an interval.
async fn sample_reads(interval: Duration, windows: ReadWindows, recorder: SharedRecorder) {
    loop {
        tokio::time::sleep(interval).await;
        let reads = std::mem::take(&mut *windows.locked());
        let mut recorder = recorder.locked();
        let at_ms = recorder.now_ms();
        for (node, window) in reads {
            recorder.record(window.into_sample(at_ms, node));
        }
    }
}
