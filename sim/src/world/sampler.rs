//! The once-a-second sampler: every running node's lag, every edge's reads, every slow disk,
//! and, with `[resources]`, every node's cache and memory models — including the OOM kills.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::NodeHandle;
use qs_node::state::NodeState;

use crate::faults::disk::SimDisk;
use crate::resources::CACHE_WINDOW;
use crate::trace::{Event, SharedRecorder};
use crate::workload::ReadWindows;

use super::{States, live, record};
use crate::sync::Locked;

/// The nodes whose cache and memory are modelled, and what an OOM kill does to them.
pub(super) struct ResourceNodes {
    /// Each node's name, madsim handle and disk (which holds its models).
    pub nodes: Vec<(String, NodeHandle, Arc<SimDisk>)>,
    /// How long the supervisor waits before restarting an OOM-killed node.
    pub oom_restart: Duration,
}

/// How often the sampler samples, and what it summarizes.
pub(super) struct Sampling {
    pub interval: Duration,
    /// Each node's tier in topology order, when the trace summarizes tiers
    /// ([`crate::trace::Detail::tiers`]); empty otherwise.
    pub tiers: Vec<(String, String)>,
}

/// Every `interval` (a simulated second by default): every running node's lag, every edge's
/// reads, every slow disk, and the resource models (memory each time, the cache every
/// [`CACHE_WINDOW`] or each time if the interval is longer); with tiers to summarize, each
/// tier's spread of lag and applied index over all its running nodes.
#[expect(
    clippy::too_many_lines,
    reason = "97 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub(super) async fn sampler(
    Sampling { interval, tiers }: Sampling,
    states: States,
    nodes: Vec<(String, Arc<SimDisk>)>,
    down: Arc<Mutex<BTreeSet<String>>>,
    windows: ReadWindows,
    recorder: SharedRecorder,
    resources: Option<ResourceNodes>,
) {
    let oomed: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let mut synced: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    let cache_every = (CACHE_WINDOW.as_millis() / interval.as_millis()).max(1) as u64;
    let mut tick = 0u64;
    loop {
        madsim::time::sleep(interval).await;
        tick += 1;
        let running: BTreeMap<String, Arc<NodeState>> = {
            let down = down.locked();
            let oomed = oomed.locked();
            live(&states).into_iter().filter(|(name, _)| !down.contains(name) && !oomed.contains(name)).collect()
        };
        let samples: Vec<(String, u64)> =
            running.iter().map(|(name, state)| (name.clone(), state.read_store(|s| s.applied_index()))).collect();
        let reads = std::mem::take(&mut *windows.locked());
        {
            let mut recorder = recorder.locked();
            let at_ms = recorder.now_ms();
            let mut measured: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for (node, applied) in samples {
                // The simulator's measurement, from the root's commits: not the node's own word.
                let lag_ms = recorder.lag_ms(applied, at_ms);
                if !tiers.is_empty() {
                    measured.insert(node.clone(), (lag_ms, applied));
                }
                recorder.record(Event::LagSample { at_ms, node, lag_ms, applied });
            }
            for sample in tier_samples(at_ms, &tiers, &measured) {
                recorder.record(sample);
            }
            for (node, window) in reads {
                recorder.record(window.into_sample(at_ms, node));
            }
            for (node, device) in &nodes {
                if let Some(mut window) = device.take_window() {
                    let (p50_us, p99_us, max_us) = crate::workload::percentiles(&mut window.latencies_us);
                    let ops = window.latencies_us.len() as u64;
                    recorder.record(Event::DiskSample { at_ms, node: node.clone(), ops, p50_us, p99_us, max_us });
                }
            }
        }
        let Some(resources) = &resources else { continue };
        for (name, handle, device) in &resources.nodes {
            let Some(state) = running.get(name) else { continue };
            resync(name, state, device, &mut synced);
            let at_ms = super::now_ms();
            let Some((memory, limit)) = device.with_model(|m| (m.memory(at_ms), m.models.memory_limit())) else {
                continue;
            };
            let window =
                tick.is_multiple_of(cache_every).then(|| device.with_model(|m| m.take_window(at_ms))).flatten();
            let over = limit.is_some_and(|limit| memory.rss() > limit);
            {
                let mut recorder = recorder.locked();
                let at_ms = recorder.now_ms();
                if let Some(w) = window {
                    recorder.record(Event::CacheSample {
                        at_ms,
                        node: name.clone(),
                        hits: w.reads.hits,
                        misses: w.reads.misses,
                        apply_hits: w.applies.hits,
                        apply_misses: w.applies.misses,
                        pages_held: w.pages_held,
                        capacity_pages: w.capacity_pages,
                        warm: w.warm,
                    });
                }
                recorder.record(Event::MemorySample {
                    at_ms,
                    node: name.clone(),
                    rss: memory.rss(),
                    limit: limit.unwrap_or(0),
                    base: memory.base,
                    cache: memory.cache,
                    byte_sample: memory.byte_sample,
                    engine: memory.engine,
                    memtables: memory.memtables,
                    buffers: memory.buffers,
                    allocator_overhead: memory.allocator_overhead,
                });
            }
            if over {
                oom_kill(
                    name,
                    handle,
                    limit.unwrap_or(0),
                    memory.rss(),
                    resources.oom_restart,
                    &down,
                    &oomed,
                    &recorder,
                );
            }
        }
    }
}

/// One [`Event::TierSample`] per tier with a running node, in topology order: the least,
/// median and greatest of `measured` (lag, applied index) over the tier's nodes.
fn tier_samples(at_ms: u64, tiers: &[(String, String)], measured: &BTreeMap<String, (u64, u64)>) -> Vec<Event> {
    let mut grouped: Vec<(&str, Vec<u64>, Vec<u64>)> = Vec::new();
    for (node, tier) in tiers {
        let Some(&(lag, applied)) = measured.get(node) else { continue };
        if grouped.last().is_none_or(|(t, _, _)| *t != tier) {
            grouped.push((tier, Vec::new(), Vec::new()));
        }
        let (_, lags, applieds) = grouped.last_mut().expect("pushed above");
        lags.push(lag);
        applieds.push(applied);
    }
    grouped
        .into_iter()
        .map(|(tier, mut lags, mut applieds)| {
            lags.sort_unstable();
            applieds.sort_unstable();
            let median = |v: &[u64]| v[v.len() / 2];
            Event::TierSample {
                at_ms,
                tier: tier.to_string(),
                nodes: lags.len() as u64,
                lag_min_ms: lags[0],
                lag_median_ms: median(&lags),
                lag_max_ms: lags[lags.len() - 1],
                applied_min: applieds[0],
                applied_median: median(&applieds),
                applied_max: applieds[applieds.len() - 1],
            }
        })
        .collect()
}

/// After a process (re)start or a snapshot bootstrap, lays the node's model pages out again if
/// its store holds other data than the layout (the data arrived without applies).
fn resync(name: &str, state: &Arc<NodeState>, device: &SimDisk, synced: &mut BTreeMap<String, (usize, u64)>) {
    // The process (its state's address) and its bootstrap count: either changing means data may
    // have arrived around the applies. The address is compared, never ordered or printed.
    let instance = (Arc::as_ptr(state) as usize, state.metrics.bootstraps.get());
    if synced.get(name) == Some(&instance) {
        return;
    }
    synced.insert(name.to_string(), instance);
    let Ok(stats) = state.read_store(|s| s.stats()) else { return };
    let matches = device.with_model(|m| m.layout_matches(stats.key_count, stats.logical_bytes)).unwrap_or(true);
    if !matches && let Ok(pairs) = state.read_store(|s| s.dump()) {
        device.with_model(|m| m.rebuild(pairs.into_iter().map(|(k, v)| (k, v.len()))));
    }
}

/// The node's modelled memory passed its limit: kill its process now (fdbserver exits at its
/// next once-a-second check) and restart it after `restart` (fdbmonitor), both traced as an
/// `oom` fault. A node a scenario fault holds down at that moment stays down: that fault's end
/// restarts it.
#[allow(clippy::too_many_arguments)]
fn oom_kill(
    name: &str,
    handle: &NodeHandle,
    limit: u64,
    rss: u64,
    restart: Duration,
    down: &Arc<Mutex<BTreeSet<String>>>,
    oomed: &Arc<Mutex<BTreeSet<String>>>,
    recorder: &SharedRecorder,
) {
    oomed.locked().insert(name.to_string());
    let detail = format!("modelled RSS {} over the limit {}", bytesize::ByteSize(rss), bytesize::ByteSize(limit));
    record(recorder, |at_ms| Event::Fault {
        at_ms,
        node: name.to_string(),
        kind: crate::trace::FaultKind::Oom,
        phase: crate::trace::FaultPhase::Start,
        detail,
    });
    crate::faults::process::kill(handle);
    let (name, handle, down, oomed, recorder) =
        (name.to_string(), handle.clone(), down.clone(), oomed.clone(), recorder.clone());
    tokio::spawn(async move {
        madsim::time::sleep(restart).await;
        if !down.locked().contains(&name) {
            crate::faults::process::restart(&handle);
        }
        oomed.locked().remove(&name);
        record(&recorder, |at_ms| Event::Fault {
            at_ms,
            node: name,
            kind: crate::trace::FaultKind::Oom,
            phase: crate::trace::FaultPhase::End,
            detail: "restarted by its supervisor".into(),
        });
    });
}
