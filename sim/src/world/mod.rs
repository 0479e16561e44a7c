//! The world: one scenario under one seed, as madsim nodes running the unchanged `qs-node`.
//!
//! Reads top to bottom: build the nodes from the topology, start the writers and readers,
//! inject the faults at their times (safety phase), then heal everything, stop the workload,
//! and wait until every node has converged or the bound passes (liveness phase). Last, every
//! node's totals and the root's key usage go into the trace for the report.
//!
//! Determinism: the madsim runtime is seeded with the run's seed, and so is every choice made
//! here (the workloads' keys and values, the disks' latencies). Node ids are derived from the
//! node's position and its restart count, never from OS randomness. Maps are `BTreeMap`s, so
//! no order leaks from hashing.
//!
//! Each node runs on its own simulated disk ([`crate::faults::disk::SimDisk`] for latency and
//! failure, a `MemDisk` for the data) that outlives restarts. The fault models are in
//! [`crate::faults`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::{Handle, Runtime};

use qs_node::node::{Node, SimHooks};
use qs_node::state::NodeState;
use qs_node::store::{EngineKind, MemDisk, StoreLocation};

use crate::checkers::fetch::Fetch;
use crate::checkers::reads::Reads;
use crate::faults::SimNode;
use crate::faults::disk::SimDisk;
use crate::faults::supervision::Supervision;
use crate::plan::Plan;
use crate::scenario::Scenario;
use crate::scenario::nodes::{HTTP_PORT, MEMCACHED_PORT, Planned, REPLICATION_PORT};
use crate::trace::{Event, Recorder, RecorderObserver, SharedRecorder};
use crate::workload::{Acked, ReadWindows};

pub use crate::outcome::RunOutcome;

pub use crate::certificates;
mod book;
mod end;
mod sampler;
mod wire_tap;
use crate::sync::Locked;
use book::{FaultBook, ImpostorBase, Triggered};
use end::{pending, summarize};
use sampler::sampler;

/// How long a (re)started node's process takes before it opens its store.
const PROCESS_START: Duration = Duration::from_millis(5);
/// How far the simulated clock jumps before anything starts, from madsim's start in 2022 to the
/// 2060s: ahead of any real clock. RocksDB keeps one process-wide timer thread on the real clock
/// for its periodic tasks, but a node registers them at open from simulated time. Dated after
/// every real "now", they never fire during a run (where they would act at wall-clock moments),
/// and a registration never races a running task (RocksDB refuses a task dated before the one
/// it is running, which failed the open).
const SIM_CLOCK_AHEAD: Duration = Duration::from_secs(40 * 365 * 24 * 60 * 60);
/// How often the liveness phase looks at every node.
const CONVERGENCE_POLL: Duration = Duration::from_millis(200);

/// What the world hands back besides the trace.
struct WorldEnd {
    sizing: Vec<qs_reports::schema::SizingRow>,
    pending: Vec<String>,
    simulated: Duration,
    writes_acked: usize,
    liveness_from: Duration,
    converged_after: Option<Duration>,
    messages: u64,
}

/// Runs `scenario` under `seed` and returns its trace and verdicts: [`Prepared::new`], then
/// [`Prepared::run`].
pub fn run(scenario: &Scenario, seed: u64) -> RunOutcome {
    Prepared::new(scenario, seed).run()
}

/// A run made ready to start: its scratch folder and its [`Plan`], both made on the caller's
/// thread.
///
/// Call [`run`](Prepared::run) once per process: a later run in the same process is not deterministic (lazily
/// initialised globals drew from the first run's random stream). `qsim run`, `--check-determinism`, `qsim sweep` and the benchmark all
/// start a process per run.
///
/// Each run gets a thread of its own: per-thread state the standard library seeds once (the
/// `HashMap` hash keys, drawn through `getrandom`, which madsim answers from the run's RNG)
/// would otherwise make a second run on the same thread draw differently from the first. A
/// panic inside the simulation is passed on to the caller.
///
/// The run's scratch directory (the nodes' on-disk stores, snapshot transfers) is made here,
/// on the caller's thread, outside the simulation, and removed when the run ends. Made inside
/// it, a run depended on the machine: tempfile names the directory from a generator seeded with
/// the clock and the thread id — simulated, so the same in every run of any seed — and once its
/// first three names were taken (three other runs alive at once, or left behind by killed ones)
/// it reseeded from `getrandom`, which madsim answers from the run's random stream: one extra
/// draw shifted every later choice of the run (`sim/tests/integration/concurrent.rs`). Out here, the names
/// and that reseed come from the OS and never touch the run's stream.
///
/// The plan is derived here too, off the run's thread, so that thread makes its first hash map
/// inside the simulation (see [`crate::plan`]).
#[derive(Debug)]
pub struct Prepared {
    scenario: Scenario,
    plan: Plan,
    scratch: crate::scratch::ScratchDir,
}

impl Prepared {
    pub fn new(scenario: &Scenario, seed: u64) -> Prepared {
        // The scenario as this seed runs it: its knob draws applied.
        let scenario = &scenario.for_seed(seed);
        let scratch = crate::scratch::ScratchDir::new("qsim-run-").expect("a scratch directory for the run");
        let plan = Plan::new(scenario, seed, scratch.path());
        certificates::write(&plan).expect("the run's certificates are written into its scratch folder");
        Prepared { scenario: scenario.clone(), plan, scratch }
    }

    /// What the run will do.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The scenario as the run runs it: the file's, with the seed's knob draws applied.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Runs the plan on a thread of its own and removes the scratch folder after.
    pub fn run(self) -> RunOutcome {
        let Prepared { scenario, plan, scratch } = self;
        let seed = plan.seed;
        let outcome =
            match std::thread::Builder::new().name(format!("qsim-seed-{seed}")).spawn(move || run_here(scenario, plan))
            {
                Ok(thread) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(e) => panic!("cannot start the simulation thread: {e}"),
            };
        drop(scratch);
        outcome
    }
}

/// madsim's configuration for a scenario: madsim's defaults, with every TCP connection's
/// window bounded (the carried patch) so a writer to a reader that stopped reading waits.
fn simulator_config(scenario: &Scenario) -> madsim::Config {
    let mut config = madsim::Config::default();
    config.tcp.window_bytes = Some(scenario.topology.tcp_window_bytes());
    config
}

fn run_here(scenario: Scenario, plan: Plan) -> RunOutcome {
    let runtime = Runtime::with_seed_and_config(plan.seed, simulator_config(&scenario));
    let reads = Reads::default();
    let fetch = Fetch::new(crate::checkers::fetch_judge(&plan));
    let propagation = crate::propagation::Propagation::new(&scenario.node_infos());
    let answers = crate::checkers::write_answers::WriteAnswers::default();
    let mut observers = crate::checkers::all(&scenario, &plan, &reads, &fetch);
    observers.push(Box::new(propagation.clone()));
    observers.push(Box::new(answers.clone()));
    let recorder = Recorder::new(now_ms, observers);
    let tier_order = scenario.tier_order();
    let knobs = scenario.knobs_drawn.iter().map(ToString::to_string).collect();
    let clocks = scenario.clocks_drawn.iter().map(ToString::to_string).collect();
    // Nodes report to the recorder through the typed seam (`RecorderObserver`), not through
    // `tracing`: no subscriber is installed, so the node's log lines cost next to nothing here.
    let judges = WorldJudges { reads: reads.clone(), fetch: fetch.clone(), answers };
    let end = runtime.block_on(world(scenario, plan, recorder.clone(), judges));
    let blind = fetch.lock().blind(end.simulated.as_millis() as u64);
    if let Some(blind) = blind {
        recorder.locked().record(blind);
    }
    let (events, events_omitted) = {
        let mut recorder = recorder.locked();
        (recorder.take_events(), recorder.omitted())
    };
    let trace = crate::trace::text(&events);
    let digest = crate::trace::digest(&trace);
    RunOutcome {
        events,
        events_omitted,
        trace,
        digest,
        pending: end.pending,
        simulated: end.simulated,
        writes_acked: end.writes_acked,
        liveness_from: end.liveness_from,
        converged_after: end.converged_after,
        sizing: end.sizing,
        messages: end.messages,
        fetched: fetch
            .lock()
            .totals()
            .into_iter()
            .map(|(node, fetched)| qs_reports::schema::NodeFetched { node: node.to_string(), fetched })
            .collect(),
        propagation: propagation.rows(&tier_order),
        knobs,
        clocks,
    }
}

/// Each node's state, held weakly: a killed process's store must close when its tasks are
/// dropped (an LMDB environment may be open only once per process), not live on in here.
type States = Arc<Mutex<BTreeMap<String, std::sync::Weak<NodeState>>>>;

/// The nodes whose process is running now, by name.
fn live(states: &States) -> BTreeMap<String, Arc<NodeState>> {
    let states = states.locked();
    states.iter().filter_map(|(name, state)| Some((name.clone(), state.upgrade()?))).collect()
}

#[expect(
    clippy::too_many_lines,
    reason = "87 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn start_nodes(
    scenario: &Scenario,
    plan: Plan,
    states: &States,
    supervision: &Arc<Supervision>,
    observer: &Arc<dyn qs_node::observe::NodeObserver>,
    relayed: &crate::links::Relayed,
) -> Vec<SimNode> {
    let handle = Handle::current();
    let cross_dc_latency = scenario.topology.cross_dc_latency;
    let tcp_window = scenario.topology.tcp_window_bytes();
    let models = scenario.models().map(Arc::new);
    let (seed, fault_points) = (plan.seed, plan.draws.fault_points);
    // The nodes a power loss may hit: their real files go through the simulated page cache
    // (and their LMDB writes with `pwrite`: the plan set that).
    let power_can_fail = plan.draws.power_can_fail();
    let scratch = plan.scratch.clone();
    plan.nodes
        .into_iter()
        .enumerate()
        .map(|(position, Planned { config, ip, relays })| {
            let name = config.name.clone();
            let store_path = (config.storage.engine != EngineKind::Memory).then(|| config.storage.path.clone());
            // The node's own folder: its LMDB environment, snapshot transfers, legacy side files.
            if let Some(dir) = config.storage.path.parent() {
                std::fs::create_dir_all(dir).expect("a directory for the node's files");
            }
            // The disk outlives every restart of this node; a sigbus fault replaces its data.
            let data = Arc::new(Mutex::new(MemDisk::default()));
            let device = Arc::new(SimDisk::new(&name, seed, position, supervision.clone()));
            let page_cache = match config.storage.path.parent() {
                Some(dir) if store_path.is_some() && power_can_fail.contains(&name) => {
                    device.set_power_can_fail();
                    match crate::faults::page_cache::watch(dir) {
                        Ok(watch) => Some(watch),
                        Err(e) => panic!("{name}'s folder {} in the simulated page cache: {e}", dir.display()),
                    }
                }
                _ => None,
            };
            if let Some(models) = &models {
                device.set_model(crate::resources::NodeModel::new(models.clone()));
            }
            let starts = Arc::new(AtomicU64::new(0));
            let sigterm = Arc::new(tokio::sync::Notify::new());
            let (states, node_name, init_data, init_device, init_observer, init_supervision, init_sigterm) = (
                states.clone(),
                name.clone(),
                data.clone(),
                device.clone(),
                observer.clone(),
                supervision.clone(),
                sigterm.clone(),
            );
            let init_scratch = scratch.clone();
            let init_relayed = relayed.clone();
            let handle = handle
                .create_node()
                .name(&name)
                .ip(ip)
                .init(move || {
                    let scratch = init_scratch.clone();
                    let (config, states, name) = (config.clone(), states.clone(), node_name.clone());
                    let disk = init_data.locked().clone();
                    let device: Arc<dyn qs_node::state::DiskModel> = init_device.clone();
                    let observer = init_observer.clone();
                    // A fresh process id per start, as a real restart would get.
                    let node_id = ((position as u128 + 1) << 64) | u128::from(starts.fetch_add(1, Ordering::Relaxed));
                    let (relays, relayed) = (relays.clone(), init_relayed.clone());
                    let supervision = init_supervision.clone();
                    let sigterm = init_sigterm.clone();
                    // A new process: an empty cache (but LMDB's, in the OS), a young heap.
                    init_device.with_model(|m| m.process_started(now_ms()));
                    async move {
                        // A process takes a moment to start: the tasks of the one it replaces
                        // (woken by the kill) are dropped first, releasing its ports.
                        madsim::time::sleep(PROCESS_START).await;
                        // This host's relays for replicas in other data centers live and die
                        // with it.
                        let served = SocketAddr::new(ip, REPLICATION_PORT);
                        for port in relays {
                            let listen = SocketAddr::new(ip, port);
                            let link = crate::links::Link { latency: cross_dc_latency, window: tcp_window };
                            tokio::spawn(crate::links::relay(listen, served, link, relayed.clone()));
                        }
                        let location = match config.storage.engine {
                            EngineKind::Memory => StoreLocation::Memory(disk),
                            kind => StoreLocation::new(kind, &config.storage.path),
                        };
                        let hooks = SimHooks { disk: Some(device), observer: Some(observer), fault_points };
                        match Node::start_simulated(config, &location, node_id, hooks).await {
                            Ok(node) => {
                                states.locked().insert(name.clone(), Arc::downgrade(&node.state));
                                // Runs until killed, or until SIGTERM (a `stop` fault): then the
                                // node's own graceful shutdown, and the process exits.
                                sigterm.notified().await;
                                let drain_timeout = node.state.config.connections.drain_timeout;
                                let report = node.shutdown(drain_timeout).await;
                                tracing::info!(node = %name, ?report, "stopped by SIGTERM");
                                std::future::pending::<()>().await;
                            }
                            // The process exits; its supervisor records why (the run's folder
                            // redacted: its name is the OS's) and starts it again.
                            Err(e) => supervision.failed_to_start(&name, crate::plan::redact(&scratch, &e.to_string())),
                        }
                    }
                })
                .build();
            SimNode { name, ip, handle, device, data, store_path, page_cache, sigterm }
        })
        .collect()
}

/// Simulated time since the run started, in ms (the trace's clock).
pub(crate) fn now_ms() -> u64 {
    madsim::time::TimeHandle::try_current()
        .map_or(0, |t| t.elapsed().saturating_sub(SIM_CLOCK_AHEAD).as_millis() as u64)
}

/// Records one event at the current simulated time.
fn record(recorder: &SharedRecorder, event: impl FnOnce(u64) -> Event) {
    let mut recorder = recorder.locked();
    let at_ms = recorder.now_ms();
    recorder.record(event(at_ms));
}

/// The checkers the world's clients and network feed directly, beside the trace.
struct WorldJudges {
    reads: Reads,
    fetch: Fetch,
    answers: crate::checkers::write_answers::WriteAnswers,
}

/// Executes `plan`. Its nodes' files (on-disk stores, snapshot transfers) live in the run's
/// scratch folder, made by [`Prepared::new`] outside the simulation; its name never reaches the
/// trace.
#[expect(
    clippy::too_many_lines,
    reason = "171 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
async fn world(scenario: Scenario, plan: Plan, recorder: SharedRecorder, judges: WorldJudges) -> WorldEnd {
    let WorldJudges { reads, fetch, answers } = judges;
    let seed = plan.seed;
    let (faults, writer_modes) = (plan.draws.faults.clone(), plan.draws.writer_modes.clone());
    // Which nodes' steady series the trace keeps: a tree of thousands keeps a sample of each
    // tier and every fault's nodes, and a summary of each tier.
    let detail = crate::plan::trace_detail(&scenario, &faults);
    recorder.locked().keep_detail(&detail);
    madsim::time::advance(SIM_CLOCK_AHEAD);
    // Validation as part of the product: a refused value the nodes' validation accepts.
    for accepted in crate::knobs::refusals(&scenario) {
        record(&recorder, |at_ms| Event::Violation {
            at_ms,
            checker: crate::trace::Checker::Contract,
            node: "configuration".into(),
            index: 0,
            message: accepted,
        });
    }
    // Every replica's reads from its sources to the `fetch` checker: from the wire, or over TLS
    // from the nodes' decrypted reads (see `wire_tap`).
    if !scenario.node.tls {
        wire_tap::tap_the_wire(fetch.clone(), recorder.clone());
    }
    let relayed = crate::links::Relayed::default();
    let states: States = Arc::default();
    let supervision = Arc::new(Supervision::default());
    let observer: Arc<dyn qs_node::observe::NodeObserver> = Arc::new(wire_tap::WorldObserver {
        events: RecorderObserver(recorder.clone()),
        fetch,
        relayed: relayed.clone(),
    });
    let impostors = ImpostorBase::of(&plan);
    let nodes = Arc::new(start_nodes(&scenario, plan, &states, &supervision, &observer, &relayed));
    // Each host's wall clock, from now on (the nodes' processes have not started yet).
    let hosts: BTreeMap<&str, madsim::task::NodeId> = nodes.iter().map(|n| (n.name.as_str(), n.handle.id())).collect();
    let _clocks = qs_node::clock::simulated::install(
        scenario.clocks_drawn.iter().filter_map(|c| Some((*hosts.get(c.node.as_str())?, c.host_clock()))).collect(),
    );
    let supervised = nodes.iter().map(|n| (n.name.clone(), n.handle.clone(), n.device.clone())).collect();
    // The nodes a fault holds down: shared by the fault book and the supervisor.
    let down: Arc<Mutex<std::collections::BTreeSet<String>>> = Arc::default();
    tokio::spawn(crate::faults::process::supervisor(supervision, supervised, down.clone(), recorder.clone(), seed));
    let root_http: Vec<SocketAddr> =
        nodes.iter().filter(|n| crate::trace::is_root(&n.name)).map(|n| SocketAddr::new(n.ip, HTTP_PORT)).collect();
    let acked: Acked = Arc::default();
    let windows: ReadWindows = Arc::default();

    // Producers and readers run on hosts of their own, as real clients are remote.
    let handle = Handle::current();
    let producer = handle.create_node().name("producer").ip(crate::scenario::nodes::PRODUCER_IP).build();
    let mut clients = vec![producer.id()];
    // The writers share one producer, so one bucket.
    let quota_per_s = crate::scenario::nodes::producer_quota(&scenario);
    let quota = crate::checkers::quota::Quota::new(quota_per_s, crate::scenario::nodes::producer_burst(&scenario));
    let memcached: Vec<(String, SocketAddr)> =
        nodes.iter().map(|n| (n.name.clone(), SocketAddr::new(n.ip, MEMCACHED_PORT))).collect();
    let (writers, readers) = crate::workload::specs(&scenario, seed, &writer_modes, &root_http, &memcached);
    // Every root's write requests and their answers, for the census's metrics pages.
    let writes = crate::checkers::contract::WriteLedgers::default();
    for spec in writers {
        let (acked, reads, quota, writes) = (acked.clone(), reads.clone(), quota.clone(), writes.clone());
        let judges = crate::workload::Judges { acked, reads, quota, writes, answers: Some(answers.clone()) };
        producer.spawn(crate::workload::writer(spec, recorder.clone(), judges));
    }
    let ledgers = crate::checkers::contract::Ledgers::default();
    // Each reader on a host of its own, numbered by its edge's place among the edges.
    let mut edges: Vec<String> = Vec::new();
    for spec in readers {
        let e = edges.iter().position(|edge| *edge == spec.edge).unwrap_or_else(|| {
            edges.push(spec.edge.clone());
            edges.len() - 1
        });
        let host =
            handle.create_node().name(format!("reader-{}", spec.edge)).ip(crate::scenario::nodes::reader_ip(e)).build();
        clients.push(host.id());
        host.spawn(crate::workload::reader(spec, recorder.clone(), reads.clone(), windows.clone(), ledgers.clone()));
    }
    // The census: its edge sessions on a host of their own, its root session beside the writers.
    let root_names: Vec<(String, SocketAddr)> = nodes
        .iter()
        .filter(|n| crate::trace::is_root(&n.name))
        .map(|n| (n.name.clone(), SocketAddr::new(n.ip, HTTP_PORT)))
        .collect();
    let edges: Vec<(String, SocketAddr)> = crate::workload::edges(&scenario, &memcached).into_iter().cloned().collect();
    let census = crate::workload::census::specs(&scenario, seed, &root_names, &edges);
    let census_judges = crate::workload::census::CensusJudges {
        reads: reads.clone(),
        ledgers: ledgers.clone(),
        sent: crate::checkers::contract::SentValues::default(),
        acked: acked.clone(),
        quota: quota.clone(),
        writes: writes.clone(),
    };
    if !census.edges.is_empty() {
        let host = handle.create_node().name("census").ip(crate::scenario::nodes::CENSUS_IP).build();
        clients.push(host.id());
        for spec in census.edges {
            host.spawn(crate::workload::census::edge_census(spec, recorder.clone(), census_judges.clone()));
        }
    }
    if let Some(spec) = census.root {
        producer.spawn(crate::workload::census::root_census(spec, recorder.clone(), census_judges));
    }

    // The impostors' host, when the run has any: a client, killed when the liveness phase begins.
    let impostor_host = (!impostors.members.is_empty()).then(|| {
        let host = handle.create_node().name("impostor").ip(crate::faults::impostor::IMPOSTOR_IP).build();
        clients.push(host.id());
        host
    });
    let book = FaultBook {
        nodes: nodes.clone(),
        recorder: recorder.clone(),
        open: Arc::default(),
        down,
        resolved: Arc::default(),
        retired: Arc::default(),
    };
    let devices = nodes.iter().map(|n| (n.name.clone(), n.device.clone())).collect();
    let resource_nodes = scenario.resources.as_ref().map(|spec| sampler::ResourceNodes {
        nodes: nodes.iter().map(|n| (n.name.clone(), n.handle.clone(), n.device.clone())).collect(),
        oom_restart: spec.oom_restart,
    });
    let sampling = sampler::Sampling { interval: scenario.checks.sample_interval, tiers: detail.tiers };
    tokio::spawn(sampler(
        sampling,
        states.clone(),
        devices,
        book.down.clone(),
        windows.clone(),
        recorder.clone(),
        resource_nodes,
    ));

    // Safety phase: faults at their times.
    let start = madsim::time::Instant::now();
    record(&recorder, |at_ms| Event::Phase { at_ms, phase: crate::trace::RunPhase::Safety });
    for fault in faults.iter().filter(|f| f.during.is_some()).cloned() {
        let triggered = Triggered { fault, states: states.clone(), book: book.clone() };
        tokio::spawn(triggered.run(start, scenario.scenario.duration));
    }
    for step in crate::faults::steps(&faults) {
        if step.at >= scenario.scenario.duration {
            continue; // ends after the safety phase: healed below
        }
        madsim::time::sleep_until(start + step.at).await;
        book.apply(&step);
        if step.start && step.fault.kind == crate::scenario::FaultKind::Impostor {
            let impostor = impostors.impostor(&book.resolve(&step).fault, &states, &recorder);
            let host = impostor_host.as_ref().expect("made for a run with impostor faults");
            host.spawn(impostor.run(step.fault.duration));
        }
        if step.start && step.fault.kind == crate::scenario::FaultKind::Membership {
            let operator = book.operator(&step, start + scenario.scenario.duration);
            producer.spawn(operator.run());
        }
    }
    madsim::time::sleep_until(start + scenario.scenario.duration).await;

    // Liveness phase: heal, stop the workload, converge.
    let liveness_from = start.elapsed();
    record(&recorder, |at_ms| Event::Phase { at_ms, phase: crate::trace::RunPhase::Liveness });
    for client in clients {
        handle.kill(client);
    }
    book.heal_all();
    // Poll until converged; the last poll falls exactly on the deadline, so convergence that
    // comes later is a failure.
    let deadline = madsim::time::Instant::now() + scenario.checks.converge_within;
    let pending = loop {
        let pending = pending(&nodes, &states, &acked, &book.retired.locked());
        let now = madsim::time::Instant::now();
        if pending.is_empty() || now >= deadline {
            break pending;
        }
        madsim::time::sleep_until((now + CONVERGENCE_POLL).min(deadline)).await;
    };
    let simulated = start.elapsed();
    summarize(&scenario, &nodes, &states, &reads, &recorder);
    end::write_counters_at_the_end(&nodes, &states, &writes, &recorder);
    end::connection_counters_at_the_end(&nodes, &states, &recorder);
    {
        // Last: what the run exercised.
        let mut recorder = recorder.locked();
        let (at_ms, hits) = (recorder.now_ms(), recorder.probe_hits());
        recorder.record(Event::Probes { at_ms, hits });
    }
    let writes_acked = recorder.locked().events().iter().filter(|e| matches!(e, Event::WriteAcked { .. })).count();
    let converged_after = pending.is_empty().then(|| simulated - liveness_from);
    let sizing = end::sizing(&scenario, &nodes, &recorder);
    let messages = madsim::net::NetSim::current().stat().msg_count;
    WorldEnd { sizing, pending, simulated, writes_acked, liveness_from, converged_after, messages }
}
