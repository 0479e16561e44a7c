//! The per-node charts of the run report as data: [`NodeMetric`] says which event feeds a chart,
//! its bound and where its lines break, and [`NODE_METRICS`] lists them in page order.
//!
//! Guarantee: adding a chart of a per-node metric is one entry here; `figures.rs` draws every
//! entry the same way (and leaves out one whose events the trace lacks).

use crate::schema::{Event, RunSummary};
use crate::series::Spread;

/// Per-node samples are taken once a simulated second: a longer silence means the node was not
/// running (killed, paused), and the line breaks there instead of bridging the gap.
const SAMPLE_GAP_MS: u64 = 2_500;

/// A tier's name and spread of a value at one sample, if the event is a tier's summary.
pub type TierSpread = fn(&Event) -> Option<(&str, Spread)>;

/// A chart of one value per node over time, fed by one kind of event.
#[derive(Debug)]
pub struct NodeMetric {
    /// `data-chart` of the figure (tests and links find it by this).
    pub id: &'static str,
    pub title: &'static str,
    pub y_desc: &'static str,
    /// The node, time and value an event contributes, if it is this metric's event.
    pub sample: fn(&Event) -> Option<(&str, u64, f64)>,
    /// A bound from the scenario drawn across the chart, in the chart's unit.
    pub bound: fn(&RunSummary) -> Option<f64>,
    /// Where to break a node's line: None for values that are only reported when they change.
    pub gap_ms: Option<u64>,
    /// A tier's spread of this value over all its nodes at one sample, from an event that
    /// summarizes a tier ([`Event::TierSample`]): a tier so summarized is drawn from these, not
    /// from the few nodes whose own samples the trace keeps.
    pub tier_spread: Option<TierSpread>,
    /// What the chart shows, one sentence.
    pub note: &'static str,
}

fn no_bound(_: &RunSummary) -> Option<f64> {
    None
}

pub(super) const GIB: f64 = (1u64 << 30) as f64;

/// The per-node charts, in page order, after the fault timeline.
pub const NODE_METRICS: &[NodeMetric] = &[
    NodeMetric {
        id: "applied",
        title: "Applied index per node",
        y_desc: "applied index",
        sample: |e| match e {
            Event::LagSample { at_ms, node, applied, .. } => Some((node, *at_ms, *applied as f64)),
            _ => None,
        },
        bound: no_bound,
        gap_ms: Some(SAMPLE_GAP_MS),
        tier_spread: Some(|e| match e {
            Event::TierSample { at_ms, tier, applied_min, applied_median, applied_max, .. } => Some((
                tier,
                Spread {
                    t_ms: *at_ms,
                    min: *applied_min as f64,
                    median: *applied_median as f64,
                    max: *applied_max as f64,
                },
            )),
            _ => None,
        }),
        note: "Sampled each second of the run while the node runs; a break is a node that was down.",
    },
    NodeMetric {
        id: "lag",
        title: "Replication lag per node",
        y_desc: "lag (s)",
        sample: |e| match e {
            Event::LagSample { at_ms, node, lag_ms, .. } => Some((node, *at_ms, *lag_ms as f64 / 1000.0)),
            _ => None,
        },
        bound: |s| (s.lag_max_ms > 0).then(|| s.lag_max_ms as f64 / 1000.0),
        gap_ms: Some(SAMPLE_GAP_MS),
        tier_spread: Some(|e| match e {
            Event::TierSample { at_ms, tier, lag_min_ms, lag_median_ms, lag_max_ms, .. } => Some((
                tier,
                Spread {
                    t_ms: *at_ms,
                    min: *lag_min_ms as f64 / 1000.0,
                    median: *lag_median_ms as f64 / 1000.0,
                    max: *lag_max_ms as f64 / 1000.0,
                },
            )),
            _ => None,
        }),
        note: "Age of each node's newest applied entry; the dashed red line is the scenario's bound \
               (checked while no fault is active).",
    },
    NodeMetric {
        id: "read_p99",
        title: "Read latency p99 at the edges",
        y_desc: "p99 (µs)",
        sample: |e| match e {
            Event::ReadSample { at_ms, node, p99_us, .. } => Some((node, *at_ms, *p99_us as f64)),
            _ => None,
        },
        bound: no_bound,
        gap_ms: Some(SAMPLE_GAP_MS),
        tier_spread: None,
        note: "99th percentile of memcached reads over each second of the run.",
    },
    NodeMetric {
        id: "read_p50",
        title: "Read latency p50 at the edges",
        y_desc: "p50 (µs)",
        sample: |e| match e {
            Event::ReadSample { at_ms, node, p50_us, .. } => Some((node, *at_ms, *p50_us as f64)),
            _ => None,
        },
        bound: no_bound,
        gap_ms: Some(SAMPLE_GAP_MS),
        tier_spread: None,
        note: "Median of memcached reads over each second of the run.",
    },
    NodeMetric {
        id: "disk_p99",
        title: "Disk latency p99 under slow-disk faults",
        y_desc: "p99 (ms)",
        sample: |e| match e {
            Event::DiskSample { at_ms, node, p99_us, .. } => Some((node, *at_ms, *p99_us as f64 / 1000.0)),
            _ => None,
        },
        bound: no_bound,
        gap_ms: Some(SAMPLE_GAP_MS),
        tier_spread: None,
        note: "Store operations on nodes whose disk is slow, each second of the run the fault is on.",
    },
    NodeMetric {
        id: "cache_miss",
        title: "Cache miss ratio of reads per node (5 s windows)",
        y_desc: "misses / page reads (%)",
        sample: |e| match e {
            Event::CacheSample { at_ms, node, hits, misses, .. } if hits + misses > 0 => {
                Some((node, *at_ms, *misses as f64 * 100.0 / (hits + misses) as f64))
            }
            _ => None,
        },
        bound: |s| s.miss_ratio_max.map(|r| r * 100.0),
        gap_ms: Some(SAMPLE_GAP_MS * 5),
        tier_spread: None,
        note: "Page reads that missed the modelled cache (Redwood's PagerCacheMiss over PagerCacheHit + \
               PagerCacheMiss), each 5 s window; the dashed red line is the scenario's bound.",
    },
    NodeMetric {
        id: "memory",
        title: "Modelled memory (RSS) per node",
        y_desc: "RSS (GiB)",
        sample: |e| match e {
            Event::MemorySample { at_ms, node, rss, .. } => Some((node, *at_ms, *rss as f64 / GIB)),
            _ => None,
        },
        bound: |s| s.memory_limit_bytes.map(|l| l as f64 / GIB),
        gap_ms: Some(SAMPLE_GAP_MS),
        tier_spread: None,
        note: "Base + cache + byte sample + engine structures + memtables + buffers, times the allocator's \
               overhead, at the scenario's stated scale; the dashed red line is the limit (an OOM kill past it).",
    },
    NodeMetric {
        id: "cursor",
        title: "Persisted resume position per node",
        y_desc: "cursor index",
        sample: |e| match e {
            Event::Cursor { at_ms, node, index } => Some((node, *at_ms, *index as f64)),
            _ => None,
        },
        bound: no_bound,
        gap_ms: None,
        tier_spread: None,
        note: "Where each node would resume after a restart; below the applied index means a replay.",
    },
];
