//! The world: one scenario under one seed, as madsim nodes running the unchanged `qs-node`.
//!
//! Reads top to bottom: build the nodes from the topology, start the writer, inject the faults
//! at their times (safety phase), then heal everything, stop writing, and wait until every node
//! has converged or the bound passes (liveness phase).
//!
//! Determinism: the madsim runtime is seeded with the run's seed, and so is every choice made
//! here (the writer's keys and values). Node ids are derived from the node's position and its
//! restart count, never from OS randomness. Maps are `BTreeMap`s, so no order leaks from hashing.
//!
//! Fault model of this build (each with the node's expected behaviour):
//! - `kill`: the node's process dies (its tasks are dropped, its sockets reset); its disk (a
//!   `MemDisk`) survives. After `duration` it restarts on that disk and must resume exactly where
//!   it stopped. Its downstream nodes must fail over to their next source.
//! - `pause`: the node stops being scheduled (SIGSTOP); its connections stay open but silent, so
//!   only the staleness threshold can detect it. After `duration` it resumes.
//! - `partition`: the node can neither send nor receive. After `duration` the network heals.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use madsim::net::NetSim;
use madsim::runtime::{Handle, NodeHandle, Runtime};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tracing_subscriber::layer::SubscriberExt;

use qs_node::config::NodeConfig;
use qs_node::node::{Node, NodeState};
use qs_node::store::{MemDisk, StoreLocation};

use crate::scenario::{FaultKind, Scenario, Workload};
use crate::trace::{Event, Recorder, SharedRecorder, TraceLayer};

const DATABASE_ID: &str = "5157534d-0000-0000-0000-000000000051";
const PRODUCER_TOKEN: &str = "qsim-producer-token";
const REPLICATION_PORT: u16 = 7000;
const MEMCACHED_PORT: u16 = 11211;
const HTTP_PORT: u16 = 8000;
/// How often every running node's lag is sampled into the trace.
const LAG_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the liveness phase looks at every node.
const CONVERGENCE_POLL: Duration = Duration::from_millis(200);
/// Longest the writer waits for one write before giving up on it.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub events: Vec<Event>,
    pub digest: String,
    /// Why the run has not converged, per node; empty when it has.
    pub pending: Vec<String>,
    pub simulated: Duration,
    pub writes_acked: usize,
    /// When the liveness phase began (faults healed, writes stopped).
    pub liveness_from: Duration,
    /// How long after that the cluster converged; None if it did not within the bound.
    pub converged_after: Option<Duration>,
}

/// What the world hands back besides the trace.
struct WorldEnd {
    pending: Vec<String>,
    simulated: Duration,
    writes_acked: usize,
    liveness_from: Duration,
    converged_after: Option<Duration>,
}

impl RunOutcome {
    pub fn violations(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| matches!(e, Event::Violation { .. }))
    }
}

/// Runs `scenario` under `seed` and returns its trace and verdicts.
///
/// Call it once per process: a later run in the same process is neither deterministic (lazily
/// initialised globals drew from the first run's random stream) nor safe (tracing's global
/// callsite state still refers to spans of the first run's subscriber; a third run panics in
/// tracing-subscriber). `qsim run`, `--check-determinism`, `qsim sweep` and the benchmark all
/// start a process per run.
///
/// Each run gets a thread of its own: per-thread state the standard library seeds once (the
/// `HashMap` hash keys, drawn through `getrandom`, which madsim answers from the run's RNG)
/// would otherwise make a second run on the same thread draw differently from the first. A
/// panic inside the simulation is passed on to the caller.
pub fn run(scenario: &Scenario, seed: u64) -> RunOutcome {
    let scenario = scenario.clone();
    match std::thread::Builder::new().name(format!("qsim-seed-{seed}")).spawn(move || run_here(&scenario, seed)) {
        Ok(thread) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        Err(e) => panic!("cannot start the simulation thread: {e}"),
    }
}

fn run_here(scenario: &Scenario, seed: u64) -> RunOutcome {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let clock = || madsim::time::TimeHandle::try_current().map_or(0, |t| t.elapsed().as_millis() as u64);
    let recorder = Recorder::new(clock, crate::checkers::all(scenario));
    let subscriber = tracing_subscriber::registry().with(TraceLayer(recorder.clone()));
    let end = tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(world(scenario.clone(), seed, recorder.clone()))
    });
    let events = recorder.lock().unwrap_or_else(|p| p.into_inner()).events().to_vec();
    let digest = crate::trace::digest(&events);
    RunOutcome {
        events,
        digest,
        pending: end.pending,
        simulated: end.simulated,
        writes_acked: end.writes_acked,
        liveness_from: end.liveness_from,
        converged_after: end.converged_after,
    }
}

/// A simulated node and how to reach it.
struct SimNode {
    name: String,
    ip: IpAddr,
    handle: NodeHandle,
}

type States = Arc<Mutex<BTreeMap<String, Arc<NodeState>>>>;
/// Per key, the values it may end with: the newest acknowledged value, then the values of
/// writes sent after it whose fate is unknown (timed out, or the producer died first — the root
/// may still have committed them). A key must never end older than its newest acknowledgement.
type Acked = Arc<Mutex<BTreeMap<String, Vec<Vec<u8>>>>>;

fn ip(tier: usize, n: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, tier as u8, n as u8 + 1))
}

/// Each node's configuration, in topology order (root first). `scratch` holds the nodes'
/// files outside the store (snapshot exports and imports).
fn configs(scenario: &Scenario, scratch: &std::path::Path) -> Vec<(NodeConfig, IpAddr)> {
    let mut out = Vec::new();
    let settings = &scenario.node;
    let legacy = &scenario.legacy;
    let tail = format!(
        "[retention]\nkeep_entries_min = {}\ngc_interval = \"{}ms\"\n[legacy]\nserve_nearest_when_collected = {}\n\
         apply_without_gap_check = {}\ncursor_written_at_disconnect = {}\nstop_serving_when_upstream_lost = {}\n",
        settings.retention_entries,
        settings.gc_interval.as_millis(),
        legacy.serve_nearest_when_collected,
        legacy.apply_without_gap_check,
        legacy.cursor_written_at_disconnect,
        legacy.stop_serving_when_upstream_lost
    );
    let listen = |ip: IpAddr| {
        format!(
            "[listen]\nreplication = \"{}\"\nmemcached = \"{}\"\nhttp = \"{}\"\n",
            SocketAddr::new(ip, REPLICATION_PORT),
            SocketAddr::new(ip, MEMCACHED_PORT),
            SocketAddr::new(ip, HTTP_PORT)
        )
    };
    let head = |name: &str, role: &str| {
        format!(
            "name = \"{name}\"\nrole = \"{role}\"\ndatabase_id = \"{DATABASE_ID}\"\n[storage]\nengine = \"memory\"\npath = \"{}\"\n",
            scratch.join(name).display()
        )
    };
    let root_ip = ip(0, 0);
    let root = format!(
        "{}{}[root]\nbatch_window = \"{}ms\"\nheartbeat_interval = \"{}ms\"\n[[root.producers]]\nname = \"qsim\"\n\
         token = \"{PRODUCER_TOKEN}\"\nprefixes = [\"cfg\"]\nwrites_per_s = 1000000\nburst = 1000000\n",
        head("root", "root"),
        listen(root_ip),
        settings.batch_window.as_millis(),
        settings.heartbeat_interval.as_millis()
    );
    out.push((root, root_ip));
    let mut parents = vec![root_ip];
    for (t, tier) in scenario.topology.tiers.iter().enumerate() {
        let tier = tier.get_ref();
        let mut this_tier = Vec::new();
        for n in 0..tier.count {
            let node_ip = ip(t + 1, n);
            // Round robin over the tier above: primaries first, then secondaries.
            let pick = |k: usize| SocketAddr::new(parents[(n + k) % parents.len()], REPLICATION_PORT);
            let list = |range: std::ops::Range<usize>| {
                range.map(|k| format!("\"{}\"", pick(k))).collect::<Vec<_>>().join(", ")
            };
            let text = format!(
                "{}{}[replication]\nprimaries = [{}]\nsecondaries = [{}]\nstaleness_failover = \"{}ms\"\n",
                head(&format!("{}-{}", tier.name, n + 1), "replica"),
                listen(node_ip),
                list(0..tier.primaries),
                list(tier.primaries..tier.primaries + tier.secondaries),
                settings.staleness_failover.as_millis()
            );
            out.push((text, node_ip));
            this_tier.push(node_ip);
        }
        parents = this_tier;
    }
    out.into_iter()
        .map(|(text, ip)| {
            (
                NodeConfig::parse(&(text + &tail), "generated node configuration")
                    .expect("generated configs are valid"),
                ip,
            )
        })
        .collect()
}

fn start_nodes(scenario: &Scenario, states: &States, scratch: &std::path::Path) -> Vec<SimNode> {
    let handle = Handle::current();
    configs(scenario, scratch)
        .into_iter()
        .enumerate()
        .map(|(position, (config, ip))| {
            let name = config.name.clone();
            let disk = MemDisk::default(); // outlives every restart of this node
            let starts = Arc::new(AtomicU64::new(0));
            let states = states.clone();
            let node_name = name.clone();
            let handle = handle
                .create_node()
                .name(&name)
                .ip(ip)
                .init(move || {
                    let (config, disk, states, name) =
                        (config.clone(), disk.clone(), states.clone(), node_name.clone());
                    // A fresh process id per start, as a real restart would get.
                    let node_id = ((position as u128 + 1) << 64) | u128::from(starts.fetch_add(1, Ordering::Relaxed));
                    async move {
                        match Node::start_on(config, &StoreLocation::Memory(disk), node_id).await {
                            Ok(node) => {
                                states.lock().unwrap_or_else(|p| p.into_inner()).insert(name, node.state.clone());
                                std::future::pending::<()>().await;
                            }
                            Err(e) => panic!("node {name} failed to start: {e}"),
                        }
                    }
                })
                .build();
            SimNode { name, ip, handle }
        })
        .collect()
}

/// The writer: PUTs through the root's HTTP API at a steady rate, open loop (a slow root does
/// not slow the producer down), each write on its own connection, recording each acknowledgement.
/// It never has two writes to one key in flight, so the newest acknowledgement of a key is the
/// value the key must end with.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename these
async fn writer(
    writer_id: usize,
    root: SocketAddr,
    rate_per_s: f64,
    keys: u64,
    value_min: usize,
    value_max: usize,
    seed: u64,
    recorder: SharedRecorder,
    acked: Acked,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7772_6974_6572);
    let interval = Duration::from_secs_f64(1.0 / rate_per_s);
    let in_flight: Arc<Mutex<std::collections::BTreeSet<String>>> = Arc::default();
    loop {
        madsim::time::sleep(interval).await;
        let key = format!("cfg{writer_id}:{}", rng.random_range(0..keys));
        let len = rng.random_range(value_min..=value_max);
        let value: Vec<u8> = (0..len).map(|_| rng.random_range(b'a'..=b'z')).collect();
        if !in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
            continue; // that key's previous write is still unanswered
        }
        // Until it is answered, this value is one the key may end with.
        acked.lock().unwrap_or_else(|p| p.into_inner()).entry(key.clone()).or_default().push(value.clone());
        let (recorder, acked, in_flight) = (recorder.clone(), acked.clone(), in_flight.clone());
        tokio::spawn(async move {
            let index = madsim::time::timeout(WRITE_TIMEOUT, put(root, &key, value.clone())).await.ok().flatten();
            if let Some(index) = index {
                let mut recorder = recorder.lock().unwrap_or_else(|p| p.into_inner());
                let at_ms = recorder.now_ms();
                recorder.record(Event::WriteAcked { at_ms, key: key.clone(), index });
                // Acknowledged: nothing sent before it may be the final value any more.
                let mut acked = acked.lock().unwrap_or_else(|p| p.into_inner());
                let candidates = acked.entry(key.clone()).or_default();
                if let Some(at) = candidates.iter().rposition(|v| *v == value) {
                    candidates.drain(..at);
                }
            }
            in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        });
    }
}

/// One PUT; the root's index once the write is durable, or None if it was not acknowledged.
async fn put(root: SocketAddr, key: &str, value: Vec<u8>) -> Option<u64> {
    let mut sender = connect(root).await?;
    let request = hyper::Request::put(format!("http://{root}/v1/keys/{key}"))
        .header("host", root.to_string())
        .header("authorization", format!("Bearer {PRODUCER_TOKEN}"))
        .body(Full::new(Bytes::from(value)))
        .expect("a valid request");
    let response = sender.send_request(request).await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let body = response.into_body().collect().await.ok()?.to_bytes();
    serde_json::from_slice::<serde_json::Value>(&body).ok()?["index"].as_u64()
}

async fn connect(addr: SocketAddr) -> Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = madsim::time::timeout(WRITE_TIMEOUT, tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.ok()?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Some(sender)
}

/// One fault's start or end, at a simulated time.
#[derive(Clone, Debug)]
struct FaultStep {
    at: Duration,
    kind: FaultKind,
    node: usize,
    start: bool,
}

fn apply(step: &FaultStep, nodes: &[SimNode], recorder: &SharedRecorder) {
    let handle = Handle::current();
    let id = nodes[step.node].handle.id();
    match (step.kind, step.start) {
        (FaultKind::Kill, true) => handle.kill(id),
        (FaultKind::Kill, false) => handle.restart(id),
        (FaultKind::Pause, true) => handle.pause(id),
        (FaultKind::Pause, false) => handle.resume(id),
        (FaultKind::Partition, true) => NetSim::current().clog_node(id),
        (FaultKind::Partition, false) => NetSim::current().unclog_node(id),
    }
    let mut recorder = recorder.lock().unwrap_or_else(|p| p.into_inner());
    let at_ms = recorder.now_ms();
    let kind = serde_json::to_value(step.kind).expect("serializes").as_str().unwrap_or_default().to_string();
    let phase = if step.start { "start" } else { "end" }.to_string();
    recorder.record(Event::Fault { at_ms, node: nodes[step.node].name.clone(), kind, phase, detail: String::new() });
}

async fn world(scenario: Scenario, seed: u64, recorder: SharedRecorder) -> WorldEnd {
    let states: States = Arc::default();
    // Files outside the stores (snapshot transfers), private to this run; their names never
    // reach the trace.
    let scratch = tempfile::tempdir().expect("a scratch directory for the run");
    let nodes = start_nodes(&scenario, &states, scratch.path());
    let root_http = SocketAddr::new(nodes[0].ip, HTTP_PORT);
    let acked: Acked = Arc::default();

    // Producers run on their own simulated host, as real ones are remote.
    let producer =
        Handle::current().create_node().name("producer").ip(IpAddr::V4(Ipv4Addr::new(10, 0, 255, 1))).build();
    for (i, workload) in scenario.workload.iter().enumerate() {
        let Workload::Writer { rate_per_s, keys, value_bytes } = workload.clone();
        let (recorder, acked) = (recorder.clone(), acked.clone());
        producer.spawn(writer(
            i,
            root_http,
            rate_per_s,
            keys,
            value_bytes.min,
            value_bytes.max,
            seed + i as u64,
            recorder,
            acked,
        ));
    }

    // Lag samples, once a simulated second, from every node that is running.
    let down: Arc<Mutex<std::collections::BTreeSet<String>>> = Arc::default();
    {
        let (states, recorder, down) = (states.clone(), recorder.clone(), down.clone());
        tokio::spawn(async move {
            loop {
                madsim::time::sleep(LAG_SAMPLE_INTERVAL).await;
                let samples: Vec<(String, u64, u64)> = {
                    let down = down.lock().unwrap_or_else(|p| p.into_inner());
                    let states = states.lock().unwrap_or_else(|p| p.into_inner());
                    states
                        .iter()
                        .filter(|(name, _)| !down.contains(*name))
                        .map(|(name, state)| (name.clone(), state.lag_ms(), state.with_store(|s| s.applied_index())))
                        .collect()
                };
                let mut recorder = recorder.lock().unwrap_or_else(|p| p.into_inner());
                let at_ms = recorder.now_ms();
                for (node, lag_ms, applied) in samples {
                    recorder.record(Event::LagSample { at_ms, node, lag_ms, applied });
                }
            }
        });
    }

    // Safety phase: faults at their times.
    let mut steps: Vec<FaultStep> = Vec::new();
    for f in &scenario.faults_for(seed) {
        let node = nodes.iter().position(|n| n.name == *f.target.get_ref()).expect("validated target");
        steps.push(FaultStep { at: f.at, kind: f.kind, node, start: true });
        steps.push(FaultStep { at: f.at + f.duration, kind: f.kind, node, start: false });
    }
    steps.sort_by_key(|s| (s.at, !s.start, s.node));
    let start = madsim::time::Instant::now();
    {
        let mut recorder = recorder.lock().unwrap_or_else(|p| p.into_inner());
        let at_ms = recorder.now_ms();
        recorder.record(Event::Phase { at_ms, phase: "safety".into() });
    }
    let mut open: Vec<FaultStep> = Vec::new();
    for step in steps {
        if step.at >= scenario.scenario.duration {
            continue; // ends after the safety phase: healed below
        }
        madsim::time::sleep_until(start + step.at).await;
        apply(&step, &nodes, &recorder);
        if matches!(step.kind, FaultKind::Kill | FaultKind::Pause) {
            let mut down = down.lock().unwrap_or_else(|p| p.into_inner());
            if step.start {
                down.insert(nodes[step.node].name.clone());
            } else {
                down.remove(&nodes[step.node].name);
            }
        }
        if step.start {
            open.push(step);
        } else {
            open.retain(|s| !(s.node == step.node && s.kind == step.kind));
        }
    }
    madsim::time::sleep_until(start + scenario.scenario.duration).await;

    // Liveness phase: heal, stop writing, converge.
    let liveness_from = start.elapsed();
    {
        let mut recorder = recorder.lock().unwrap_or_else(|p| p.into_inner());
        let at_ms = recorder.now_ms();
        recorder.record(Event::Phase { at_ms, phase: "liveness".into() });
    }
    Handle::current().kill(producer.id());
    for step in open {
        apply(&FaultStep { start: false, ..step }, &nodes, &recorder);
    }
    down.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // Poll until converged; the last poll falls exactly on the deadline, so convergence that
    // comes later is a failure.
    let deadline = madsim::time::Instant::now() + scenario.checks.converge_within;
    let pending = loop {
        let pending = pending(&nodes, &states, &acked);
        let now = madsim::time::Instant::now();
        if pending.is_empty() || now >= deadline {
            break pending;
        }
        madsim::time::sleep_until((now + CONVERGENCE_POLL).min(deadline)).await;
    };
    let writes_acked = recorder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .events()
        .iter()
        .filter(|e| matches!(e, Event::WriteAcked { .. }))
        .count();
    let simulated = start.elapsed();
    let converged_after = pending.is_empty().then(|| simulated - liveness_from);
    WorldEnd { pending, simulated, writes_acked, liveness_from, converged_after }
}

/// Why the cluster has not converged yet: per node, what differs from the root.
fn pending(nodes: &[SimNode], states: &States, acked: &Acked) -> Vec<String> {
    let states = states.lock().unwrap_or_else(|p| p.into_inner());
    let head = |state: &NodeState| state.with_store(|s| (s.applied_index(), s.chain_hash(), s.state_digest().ok()));
    let Some(root) = states.get("root") else { return vec!["root has not started".into()] };
    let (root_index, root_hash, root_digest) = head(root);
    let mut out = Vec::new();
    for node in nodes {
        let Some(state) = states.get(&node.name) else {
            out.push(format!("{} has not started", node.name));
            continue;
        };
        let (index, hash, digest) = head(state);
        if index != root_index {
            out.push(format!("{} is at index {index}, the root at {root_index}", node.name));
        } else if hash != root_hash {
            out.push(format!("{} is at the root's index {index} with another chain hash", node.name));
        } else if digest != root_digest {
            out.push(format!(
                "{} is at the root's index {index} and chain hash, but holds a different state",
                node.name
            ));
        }
    }
    // Every acknowledged write survives: each key holds its newest acknowledged value, or a
    // value written after it.
    if out.is_empty() {
        for (key, candidates) in acked.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            for node in nodes {
                let got = states[&node.name].with_store(|s| s.get(key.as_bytes()));
                let fine = match &got {
                    Ok(Some(v)) => candidates.contains(v),
                    Ok(None) => candidates.is_empty(),
                    Err(_) => false,
                };
                if !fine {
                    out.push(format!("{} holds a value of {key} older than its newest acknowledged write", node.name));
                }
            }
        }
    }
    out
}
