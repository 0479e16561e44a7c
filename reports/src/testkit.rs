//! Synthetic runs for tests and the benchmark: a deterministic summary and trace that look like
//! the simulator's, with every event kind of the schema available.
//!
//! Guarantees: the same [`Options`] give the same run; events come out in time order; applied
//! indices per node go 1, 2, 3, … (a node that was down catches up in one batch); a node that is
//! down (kill, pause, partition, sigbus) neither applies nor samples; its children move to a
//! sibling of their source. It is a stand-in for the simulator, not a model of the node: it is
//! here so the reports can be tested on event kinds the simulator does not emit yet, and
//! benchmarked without building the simulator.

use std::path::PathBuf;

use crate::schema::{
    Checker, Event, FaultKind, FaultPhase, FetchedRow, NodeFetched, NodeInfo, Probe, ProbeHits, PropagationRow,
    RunPhase, RunSummary, SourceChange, Verdict, VerdictStatus,
};

/// A fault to inject: `end_ms` None means no end event (it lasts to the liveness phase).
#[derive(Clone, Debug)]
pub struct FaultPlan {
    pub node: String,
    pub kind: FaultKind,
    pub detail: String,
    pub start_ms: u64,
    pub end_ms: Option<u64>,
}

/// A violation to report: (at_ms, checker, node, index, message).
pub type ViolationPlan = (u64, Checker, String, u64, String);

#[derive(Clone, Debug)]
pub struct Options {
    pub scenario: String,
    pub seed: u64,
    /// Tiers top-down with their node counts; the first is the root tier (one node, `root`).
    pub tiers: Vec<(String, usize)>,
    pub seconds: u64,
    /// When the liveness phase starts (writes stop); the run ends at `seconds`.
    pub liveness_at_s: u64,
    pub writes_per_s: u64,
    pub faults: Vec<FaultPlan>,
    /// `read_sample` per edge (the last tier) per second.
    pub read_samples: bool,
    /// `cursor` every 5 s per node, `node_summary` per node and `key_usage` per prefix at the end.
    pub end_of_run: bool,
    pub violations: Vec<ViolationPlan>,
}

impl Options {
    /// The reference world's shape and rates: 40 nodes (root, 4 mids, 8 regions, 27 edges),
    /// ten simulated minutes, 50 writes/s, nine faults spread over the run.
    pub fn reference() -> Options {
        let mut faults = Vec::new();
        let plan = [
            ("edge-22", FaultKind::Pause, 22_696, 72_621),
            ("region-8", FaultKind::Pause, 60_595, 90_608),
            ("edge-19", FaultKind::Partition, 177_581, 187_811),
            ("edge-6", FaultKind::Partition, 340_000, 358_000),
            ("region-2", FaultKind::Pause, 361_000, 382_000),
            ("edge-4", FaultKind::Pause, 365_000, 388_000),
            ("edge-18", FaultKind::Partition, 455_000, 477_000),
            ("edge-15", FaultKind::Pause, 525_000, 555_000),
            ("edge-16", FaultKind::Pause, 560_000, 588_000),
        ];
        for (node, kind, start, end) in plan {
            faults.push(FaultPlan {
                node: node.into(),
                kind,
                detail: String::new(),
                start_ms: start,
                end_ms: Some(end),
            });
        }
        Options {
            scenario: "reference".into(),
            seed: 1,
            tiers: vec![("root".into(), 1), ("mid".into(), 4), ("region".into(), 8), ("edge".into(), 27)],
            seconds: 600,
            liveness_at_s: 600,
            writes_per_s: 50,
            faults,
            read_samples: false,
            end_of_run: false,
            violations: Vec::new(),
        }
    }

    /// A slow-SSD failover with every event kind: seven nodes, 60 s; mid-1 is killed (its edges
    /// fail over), mid-2's disk turns slow (its edges go stale and move), edge-4 takes a SIGBUS
    /// with no end event; one lag violation; read, disk, cursor, node and key-usage events.
    pub fn slow_disk_failover() -> Options {
        let fault = |node: &str, kind: FaultKind, detail: &str, start_ms, end_ms| FaultPlan {
            node: node.into(),
            kind,
            detail: detail.into(),
            start_ms,
            end_ms,
        };
        Options {
            scenario: "slow-disk-failover".into(),
            seed: 7,
            tiers: vec![("root".into(), 1), ("mid".into(), 2), ("edge".into(), 4)],
            seconds: 60,
            liveness_at_s: 52,
            writes_per_s: 20,
            faults: vec![
                fault("mid-1", FaultKind::Kill, "", 10_000, Some(20_000)),
                fault("mid-2", FaultKind::SlowDisk, "p50 8 ms, p99 40 ms", 30_000, Some(45_000)),
                fault("edge-4", FaultKind::Sigbus, "mmap read past a truncated file", 48_000, None),
            ],
            read_samples: true,
            end_of_run: true,
            violations: vec![(
                36_000,
                Checker::Lag,
                "edge-3".into(),
                512,
                "lag 41.2 s while no fault was active, bound 35 s".into(),
            )],
        }
    }
}

struct Node {
    name: String,
    tier: String,
    depth: u32,
    address: String,
    /// Index of the current source in `nodes`.
    source: Option<usize>,
    applied: u64,
    failovers: u64,
}

/// Deterministic xorshift, enough for jitter.
struct Rng(u64);

impl Rng {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

fn down_kind(kind: FaultKind) -> bool {
    matches!(kind, FaultKind::Kill | FaultKind::Pause | FaultKind::Partition | FaultKind::Sigbus)
}

/// The probes a trace's `probes` event counted (none without one).
fn probe_hits(events: &[Event]) -> Vec<ProbeHits> {
    events
        .iter()
        .find_map(|e| match e {
            Event::Probes { hits, .. } => Some(hits.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Builds the run.
#[expect(
    clippy::too_many_lines,
    reason = "300 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn generate(opts: &Options) -> (RunSummary, Vec<Event>) {
    let mut rng = Rng(opts.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut nodes: Vec<Node> = Vec::new();
    let mut tier_start = Vec::new();
    for (depth, (tier, count)) in opts.tiers.iter().enumerate() {
        tier_start.push(nodes.len());
        for n in 1..=*count {
            let name = if depth == 0 { "root".to_string() } else { format!("{tier}-{n}") };
            let source = (depth > 0).then(|| {
                let parents = opts.tiers[depth - 1].1;
                tier_start[depth - 1] + (n - 1) % parents
            });
            nodes.push(Node {
                name,
                tier: tier.clone(),
                depth: depth as u32,
                address: format!("10.0.{depth}.{n}"),
                source,
                applied: 0,
                failovers: 0,
            });
        }
    }
    let end_ms = opts.seconds * 1000;
    let liveness_ms = opts.liveness_at_s * 1000;
    let mut events = vec![Event::Phase { at_ms: 0, phase: RunPhase::Safety }];
    for node in &nodes {
        if let Some(s) = node.source {
            events.push(Event::SourceChanged {
                at_ms: 0,
                node: node.name.clone(),
                source: nodes[s].address.clone(),
                reason: SourceChange::Start,
            });
        }
    }
    for f in &opts.faults {
        let fault = |at_ms, phase: FaultPhase| Event::Fault {
            at_ms,
            node: f.node.clone(),
            kind: f.kind,
            phase,
            detail: f.detail.clone(),
        };
        events.push(fault(f.start_ms, FaultPhase::Start));
        if let Some(end) = f.end_ms {
            events.push(fault(end, FaultPhase::End));
        }
    }
    let active = |name: &str, t: u64, pred: fn(FaultKind) -> bool| {
        opts.faults.iter().any(|f| {
            f.node == name && pred(f.kind) && f.start_ms <= t && t < f.end_ms.unwrap_or(liveness_ms).min(liveness_ms)
        })
    };
    // Children move off a source once it goes down (or, on a slow disk, three seconds later).
    for f in &opts.faults {
        let Some(src) = nodes.iter().position(|n| n.name == f.node) else { continue };
        let (reason, delay) =
            if down_kind(f.kind) { (SourceChange::Disconnected, 200) } else { (SourceChange::Stale, 3_000) };
        let siblings: Vec<usize> =
            (0..nodes.len()).filter(|&i| i != src && nodes[i].depth == nodes[src].depth).collect();
        let Some(&to) = siblings.first() else { continue };
        for i in 0..nodes.len() {
            if nodes[i].source == Some(src) {
                nodes[i].source = Some(to);
                nodes[i].failovers += 1;
                events.push(Event::SourceChanged {
                    at_ms: f.start_ms + delay + 10 * i as u64,
                    node: nodes[i].name.clone(),
                    source: nodes[to].address.clone(),
                    reason,
                });
            }
        }
    }

    let mut batch_times: Vec<u64> = vec![0];
    let mut pending_writes: Vec<(u64, String)> = Vec::new();
    let mut writes = 0u64;
    let mut key_n = 0u64;
    for s in 0..opts.seconds {
        let second = s * 1000;
        // Samples at the top of the second, before this second's batches.
        for node in &nodes {
            if active(&node.name, second, down_kind) || second == 0 {
                continue;
            }
            let root_index = batch_times.len() as u64 - 1;
            let lag_ms = if node.applied >= root_index {
                0
            } else {
                second.saturating_sub(batch_times[node.applied as usize + 1])
            };
            events.push(Event::LagSample { at_ms: second, node: node.name.clone(), lag_ms, applied: node.applied });
            if opts.read_samples && node.depth as usize == opts.tiers.len() - 1 {
                let slow = 1 + lag_ms / 1000;
                events.push(Event::ReadSample {
                    at_ms: second,
                    node: node.name.clone(),
                    reads: 900 + rng.next(200),
                    misses: rng.next(5),
                    p50_us: 60 + rng.next(30) * slow,
                    p99_us: 250 + rng.next(200) * slow,
                    max_us: 900 + rng.next(2000),
                    errors: 0,
                });
            }
            if active(&node.name, second, |k| k == FaultKind::SlowDisk) {
                events.push(Event::DiskSample {
                    at_ms: second,
                    node: node.name.clone(),
                    ops: 40 + rng.next(20),
                    p50_us: 8_000 + rng.next(2_000),
                    p99_us: 40_000 + rng.next(10_000),
                    max_us: 90_000 + rng.next(30_000),
                });
            }
            if opts.end_of_run && s % 5 == 0 {
                events.push(Event::Cursor { at_ms: second, node: node.name.clone(), index: node.applied });
            }
        }
        if second >= liveness_ms {
            continue;
        }
        for w in 0..opts.writes_per_s {
            key_n += 1;
            let key = format!("cfg{}:{}", key_n % 5, key_n % 997);
            pending_writes.push((second + w * 1000 / opts.writes_per_s.max(1), key));
        }
        // Two batch windows a second.
        for half in [250u64, 750] {
            let t = second + half + rng.next(40);
            let index = batch_times.len() as u64;
            batch_times.push(t);
            for node in &mut nodes {
                if active(&node.name, t, down_kind) {
                    continue;
                }
                let mut at = t + 3 * node.depth as u64 + rng.next(4);
                if active(&node.name, t, |k| k == FaultKind::SlowDisk) {
                    at += 30;
                }
                events.push(Event::Applied {
                    at_ms: at,
                    node: node.name.clone(),
                    first: node.applied + 1,
                    last: index,
                    hash: format!("{:016x}", index.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                });
                node.applied = index;
            }
            let (acked, rest): (Vec<_>, Vec<_>) = pending_writes.drain(..).partition(|(at, _)| *at <= t);
            pending_writes = rest;
            for (_, key) in acked {
                writes += 1;
                events.push(Event::WriteAcked { at_ms: t + 1, key, index, version: writes, deleted: false });
            }
        }
    }
    if liveness_ms <= end_ms {
        events.push(Event::Phase { at_ms: liveness_ms, phase: RunPhase::Liveness });
    }
    for (at_ms, checker, node, index, message) in &opts.violations {
        events.push(Event::Violation {
            at_ms: *at_ms,
            checker: *checker,
            node: node.clone(),
            index: *index,
            message: message.clone(),
        });
    }
    if opts.end_of_run {
        for node in &nodes {
            let logical = node.applied * 1_700;
            events.push(Event::NodeSummary {
                at_ms: end_ms,
                node: node.name.clone(),
                tier: node.tier.clone(),
                applied: node.applied,
                failovers: node.failovers,
                bootstraps: u64::from(node.name == "edge-4"),
                bogus_requests: if node.depth == 0 { 3 } else { 0 },
                logical_bytes: logical,
                engine_bytes_written: Some(logical * (3 + node.depth as u64)),
            });
        }
        for (i, prefix) in ["cfg0", "cfg1", "dns", "waf"].iter().enumerate() {
            let keys = 200 + 50 * i as u64;
            events.push(Event::KeyUsage {
                at_ms: end_ms,
                prefix: prefix.to_string(),
                keys,
                bytes: keys * 300,
                reads: if *prefix == "waf" { 0 } else { keys * 40 },
                never_read: if *prefix == "waf" { keys } else { i as u64 * 7 },
            });
        }
        events.push(Event::Bootstrapped {
            at_ms: 49_000.min(end_ms),
            node: "edge-4".into(),
            index: 10,
            hash: "synthetic".into(),
        });
        let mut hits: Vec<ProbeHits> = Vec::new();
        for f in &opts.faults {
            let Some(probe) = f.kind.probe() else { continue };
            match hits.iter_mut().find(|h| h.probe == probe) {
                Some(h) => h.hits += 1,
                None => hits.push(ProbeHits { probe, hits: 1 }),
            }
        }
        hits.push(ProbeHits { probe: Probe::LeftBrokenSource, hits: 2 });
        hits.sort_by_key(|h| h.probe);
        events.push(Event::Probes { at_ms: end_ms, hits });
    }
    events.sort_by_key(Event::at_ms);

    let max_lag_ms = events
        .iter()
        .filter_map(|e| match e {
            Event::LagSample { lag_ms, .. } => Some(*lag_ms),
            _ => None,
        })
        .max();
    let failing: Vec<&ViolationPlan> = opts.violations.iter().collect();
    let verdicts = [Checker::Sequence, Checker::Chain, Checker::Lag, Checker::Convergence]
        .iter()
        .map(|&checker| {
            let mine: Vec<&&ViolationPlan> = failing.iter().filter(|v| v.1 == checker).collect();
            Verdict {
                checker,
                status: if mine.is_empty() { VerdictStatus::Pass } else { VerdictStatus::Fail },
                violations: mine.len() as u64,
                first: mine.first().map(|v| format!("{} at {} ms, index {}: {}", v.2, v.0, v.3, v.4)),
            }
        })
        .collect();
    let summary = RunSummary {
        scenario: opts.scenario.clone(),
        description: format!("Synthetic run of {} nodes for the reports' tests and benchmark.", nodes.len()),
        path: PathBuf::from(format!("scenarios/{}.toml", opts.scenario)),
        seed: opts.seed,
        engine: "memory".into(),
        build: "qs-reports testkit".into(),
        outcome: if failing.is_empty() { "pass" } else { "violation" }.into(),
        digest: "synthetic".into(),
        events: events.len() as u64,
        events_omitted: 0,
        simulated_ms: end_ms,
        messages: 0,
        liveness_from_ms: liveness_ms,
        converged_after_ms: Some(1_200),
        max_lag_ms,
        lag_max_ms: 35_000,
        converge_within_ms: 60_000,
        sample_interval_ms: 1000,
        miss_ratio_max: None,
        memory_limit_bytes: None,
        sizing: Vec::new(),
        signature: (!failing.is_empty()).then(|| "synthetic: a planted violation".to_string()),
        probes: probe_hits(&events),
        // Each replica read every entry once, at a kilobyte an entry.
        fetched: nodes
            .iter()
            .filter(|n| n.depth > 0)
            .map(|n| NodeFetched {
                node: n.name.clone(),
                fetched: FetchedRow { bytes: n.applied * 1024, entries: n.applied, ..FetchedRow::default() },
            })
            .collect(),
        // Every tier a second behind the root at the median, five at the 99th percentile.
        propagation: ["mid", "edge"]
            .iter()
            .map(|tier| PropagationRow {
                tier: tier.to_string(),
                entries: writes,
                p50_ms: 1_000,
                p99_ms: 5_000,
                max_ms: 9_000,
            })
            .collect(),
        knobs: vec!["apply_batch_entries_max = 7".into()],
        clocks: vec!["edge-1 +40s +100ppm, at 30s steps -30s".into()],
        writes_acked: writes,
        pending: Vec::new(),
        violations: opts
            .violations
            .iter()
            .map(|(at_ms, checker, node, index, message)| {
                Event::Violation {
                    at_ms: *at_ms,
                    checker: *checker,
                    node: node.clone(),
                    index: *index,
                    message: message.clone(),
                }
                .line()
            })
            .collect(),
        verdicts,
        nodes: nodes
            .iter()
            .map(|n| NodeInfo { name: n.name.clone(), tier: n.tier.clone(), depth: n.depth, datacenter: None })
            .collect(),
        reproduce: format!("./qsim run scenarios/{}.toml --seed {}", opts.scenario, opts.seed),
        real: false,
    };
    (summary, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_deterministic_ordered_and_gapless() {
        let opts = Options::slow_disk_failover();
        let (summary, events) = generate(&opts);
        assert_eq!(generate(&opts).1, events, "same options, same run");
        assert!(events.windows(2).all(|w| w[0].at_ms() <= w[1].at_ms()));
        for node in &summary.nodes {
            let mut next = 1;
            for e in &events {
                if let Event::Applied { node: n, first, last, .. } = e
                    && *n == node.name
                {
                    assert_eq!(*first, next, "{}", node.name);
                    next = last + 1;
                }
            }
        }
        let kinds: std::collections::BTreeSet<String> =
            events.iter().map(|e| e.line().split('"').nth(3).unwrap().to_string()).collect();
        assert_eq!(kinds.len(), 14, "every event kind: {kinds:?}");
    }
}
