//! The run report: one static HTML page for one (scenario, seed).
//!
//! Guarantees:
//! - The header shows scenario, description, seed, engine, build, the reproduce command in a
//!   `<pre id="reproduce">`, every checker's verdict, and for a failure the first violation in
//!   words.
//! - Every time chart shares one x axis (0 to the end of the run) and shades the liveness phase;
//!   the fault timeline comes first, so a fault lines up with what it did below it.
//! - No chart is drawn without data: a chart whose events the trace lacks is left out, and one
//!   line says which were left out.
//! - A series has at most ~600 points (min/max per bucket), and with more than
//!   [`MAX_NODE_LINES`] nodes a chart draws one band (min–max) and one median line per tier.
//! - Every string from the trace or summary is escaped.
//!
//! Adding a chart of a per-node metric is one entry in [`NODE_METRICS`].

use std::fmt::Write;
use std::path::{Path, PathBuf};

use plotters::style::RGBColor;

use crate::chart::{self, Lane, Mark, Span, TimeAxis, TimeChart};
use crate::facts::{FaultSpan, RunFacts};
use crate::html::{badge, duration, esc, page, secs};
use crate::schema::{Event, FaultKind, RunSummary, SourceReason, VerdictStatus};
use crate::series::{self, bucket_ms};
use crate::{ReportError, load};

mod tables;
use tables::{fault_table, key_usage_table, node_table, sizing_table, violation_table, write_amp_table};

/// Above this many nodes a chart groups them by tier: 40 lines in 12 colours cannot be told
/// apart, while four tier bands can.
pub const MAX_NODE_LINES: usize = 12;
/// Lanes (rows) in the fault and source-change charts before they group by tier.
pub const MAX_LANES: usize = 24;
/// Violations listed in the table; the total is always given.
pub const MAX_VIOLATION_ROWS: usize = 50;
/// Source changes listed per node in the node table; the rest are counted.
pub const MAX_SOURCE_ROWS: usize = 6;
/// Per-node samples are taken once a simulated second: a longer silence means the node was not
/// running (killed, paused), and the line breaks there instead of bridging the gap.
const SAMPLE_GAP_MS: u64 = 2_500;

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
    /// What the chart shows, one sentence.
    pub note: &'static str,
}

fn no_bound(_: &RunSummary) -> Option<f64> {
    None
}

const GIB: f64 = (1u64 << 30) as f64;

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
        note: "Sampled each simulated second while the node runs; a break is a node that was down.",
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
        note: "99th percentile of memcached reads over each simulated second.",
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
        note: "Median of memcached reads over each simulated second.",
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
        note: "Store operations on nodes whose disk is slow, each simulated second the fault is on.",
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
        note: "Where each node would resume after a restart; below the applied index means a replay.",
    },
];

/// One chart on the page.
struct Figure {
    id: &'static str,
    title: String,
    /// The SVG, or why it could not be drawn.
    svg: Result<String, String>,
    legend: Vec<(RGBColor, String)>,
    note: String,
}

impl Figure {
    fn html(&self, out: &mut String) {
        let _ = write!(
            out,
            "<figure class=\"chart\" id=\"chart-{id}\" data-chart=\"{id}\"><figcaption>{}</figcaption>",
            esc(&self.title),
            id = self.id
        );
        match &self.svg {
            Ok(svg) => out.push_str(svg),
            Err(e) => {
                let _ = write!(out, "<p class=\"note chart-error\">This chart could not be drawn: {}</p>", esc(e));
            }
        }
        if !self.legend.is_empty() {
            out.push_str("<ul class=\"legend\">");
            for (color, label) in &self.legend {
                let _ = write!(
                    out,
                    "<li><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
                    chart::hex(*color),
                    esc(label)
                );
            }
            out.push_str("</ul>");
        }
        if !self.note.is_empty() {
            let _ = write!(out, "<p class=\"note\">{}</p>", esc(&self.note));
        }
        out.push_str("</figure>\n");
    }
}

/// Reads `run_dir`'s summary and trace and writes `run_dir/report.html`.
pub fn write_run_report(run_dir: &Path) -> Result<PathBuf, ReportError> {
    let summary = load::run_summary(run_dir)?;
    let events = load::trace(run_dir)?;
    load::write_report(run_dir, &render_run(&summary, &events))
}

/// The run report's HTML.
pub fn render_run(summary: &RunSummary, events: &[Event]) -> String {
    let facts = RunFacts::gather(summary, events);
    let axis = TimeAxis {
        end_s: facts.end_ms as f64 / 1000.0,
        liveness_from_s: facts.liveness_from_ms.map(|ms| ms as f64 / 1000.0),
        first_violation_s: facts.violations.first().map(|v| v.at_ms as f64 / 1000.0),
    };
    let mut body = String::new();
    header(&mut body, summary, &facts);

    body.push_str("<section id=\"timeline\"><h2>Timeline</h2>");
    let _ = write!(
        body,
        "<p class=\"note\">All charts share one time axis, 0 to {} of simulated time. {}</p>",
        secs(facts.end_ms),
        match facts.liveness_from_ms {
            Some(ms) if ms < facts.end_ms => format!(
                "The shaded part, from {}, is the liveness phase: faults healed, writes stopped, waiting for \
                 convergence.",
                secs(ms)
            ),
            Some(ms) => format!("The liveness phase began at {} and converged at once.", secs(ms)),
            None => "The trace does not say when the liveness phase began.".into(),
        }
    );
    if let Some(v) = facts.violations.first() {
        let _ = write!(
            body,
            "<p class=\"note\" id=\"violation-marker\">The dark red vertical line marks the first violation, at {}.</p>",
            secs(v.at_ms)
        );
    }
    let mut left_out: Vec<&str> = Vec::new();
    let mut figures: Vec<Figure> = Vec::new();
    match fault_figure(&facts, &axis) {
        Some(f) => figures.push(f),
        None => left_out.push("fault timeline (no faults were injected)"),
    }
    let bucket = bucket_ms(facts.end_ms);
    for metric in NODE_METRICS {
        // The resource charts belong to runs that model caches and memory; elsewhere their
        // absence is no gap worth a note.
        let modelled = !summary.sizing.is_empty() || !matches!(metric.id, "cache_miss" | "memory");
        match metric_figure(metric, summary, &facts, events, &axis, bucket) {
            Some(f) => figures.push(f),
            None if modelled => left_out.push(metric.title),
            None => {}
        }
        if metric.id == "memory"
            && let Some(f) = memory_components_figure(events, &axis)
        {
            figures.push(f);
        }
        if metric.id == "lag" {
            match source_figure(&facts, &axis) {
                Some(f) => figures.push(f),
                None => left_out.push("source changes"),
            }
            match write_rate_figure(events, &facts, &axis) {
                Some(f) => figures.push(f),
                None => left_out.push("write rate at the root"),
            }
        }
    }
    for figure in &figures {
        figure.html(&mut body);
    }
    if !left_out.is_empty() {
        let _ = write!(
            body,
            "<p class=\"note no-data\">Not drawn, no data in this trace: {}.</p>",
            esc(&left_out.join("; ").to_lowercase())
        );
    }
    body.push_str("</section>\n");

    node_table(&mut body, &facts);
    fault_table(&mut body, &facts);
    write_amp_table(&mut body, summary, &facts);
    sizing_table(&mut body, summary);
    key_usage_table(&mut body, &facts);
    violation_table(&mut body, summary, &facts);
    page(&format!("qsim {} seed {}", summary.scenario, summary.seed), &body)
}

fn header(out: &mut String, s: &RunSummary, facts: &RunFacts) {
    let pass = s.outcome == "pass";
    let outcome = if s.outcome.is_empty() { "unknown".to_string() } else { s.outcome.to_uppercase() };
    let _ = write!(
        out,
        "<header><h1><span id=\"scenario\">{}</span> · seed <span id=\"seed\">{}</span> {}</h1>",
        esc(&s.scenario),
        s.seed,
        badge(pass, &outcome).replace("class=\"badge", "id=\"outcome\" class=\"badge")
    );
    if !s.description.is_empty() {
        let _ = write!(out, "<p class=\"desc\" id=\"description\">{}</p>", esc(&s.description));
    }
    let lag = match s.max_lag_ms {
        Some(lag) if s.lag_max_ms > 0 => format!("{} (bound {})", duration(lag), duration(s.lag_max_ms)),
        Some(lag) => duration(lag),
        None => "no samples".into(),
    };
    let converged = match (s.converged_after_ms, facts.liveness_from_ms) {
        (Some(ms), _) => {
            format!("{} after the liveness phase began (limit {})", duration(ms), duration(s.converge_within_ms))
        }
        (None, _) => format!("did not converge within {}", duration(s.converge_within_ms)),
    };
    let facts_rows: [(&str, &str, String); 10] = [
        ("scenario file", "path", esc(&s.path.display().to_string())),
        ("seed", "seed-value", s.seed.to_string()),
        ("engine", "engine", esc(or_unknown(&s.engine))),
        ("build", "build", esc(or_unknown(&s.build))),
        ("nodes", "node-count", facts.nodes.len().to_string()),
        ("simulated", "simulated", secs(s.simulated_ms)),
        ("writes acknowledged", "writes", s.writes_acked.to_string()),
        ("max lag", "max-lag", esc(&lag)),
        ("convergence", "convergence", esc(&converged)),
        ("trace", "digest", format!("{} events, digest <code>{}</code>", s.events, esc(&s.digest))),
    ];
    out.push_str("<dl class=\"facts\">");
    for (label, id, value) in facts_rows {
        let _ = write!(out, "<dt>{label}</dt><dd id=\"{id}\">{value}</dd>");
    }
    out.push_str("</dl>");
    let _ = write!(
        out,
        "<h2>Reproduce</h2><pre class=\"reproduce\" id=\"reproduce\"><code>{}</code></pre>",
        esc(&s.reproduce)
    );

    out.push_str("<h2>Verdicts</h2>");
    if s.verdicts.is_empty() {
        out.push_str("<p class=\"note\">The summary records no checker verdicts.</p>");
    } else {
        out.push_str(
            "<table id=\"verdicts\"><thead><tr><th>checker</th><th>verdict</th><th>violations</th>\
             <th>first</th></tr></thead><tbody>",
        );
        for v in &s.verdicts {
            let ok = v.status == VerdictStatus::Pass;
            let _ = write!(
                out,
                "<tr class=\"verdict {}\" data-checker=\"{}\"><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                if ok { "pass" } else { "fail" },
                esc(v.checker.as_str()),
                esc(v.checker.as_str()),
                badge(ok, v.status.as_str()),
                v.violations,
                esc(v.first.as_deref().unwrap_or(""))
            );
        }
        out.push_str("</tbody></table>");
    }
    if !pass {
        out.push_str("<div class=\"first-violation\" id=\"first-violation\"><strong>First violation.</strong> ");
        if let Some(v) = facts.violations.first() {
            let _ = write!(
                out,
                "Checker <b>{}</b> at node <b>{}</b>, {} into the run, index {}: {}.",
                esc(v.checker.as_str()),
                esc(&v.node),
                esc(&secs(v.at_ms)),
                v.index,
                esc(&v.message)
            );
        } else if let Some(v) = s.verdicts.iter().find(|v| v.status != VerdictStatus::Pass) {
            let _ = write!(
                out,
                "Checker <b>{}</b>: {}.",
                esc(v.checker.as_str()),
                esc(v.first.as_deref().unwrap_or("no detail recorded"))
            );
        } else {
            let _ = write!(out, "The run ended as <b>{}</b> with no failing verdict recorded.", esc(&s.outcome));
        }
        if !s.pending.is_empty() {
            out.push_str("<br>Not converged at the end:<ul>");
            for p in &s.pending {
                let _ = write!(out, "<li>{}</li>", esc(p));
            }
            out.push_str("</ul>");
        }
        out.push_str("</div>");
    }
    out.push_str("</header>\n");
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}

fn fault_color(kind: FaultKind) -> RGBColor {
    match kind {
        FaultKind::Kill => RGBColor(0xC6, 0x28, 0x28),
        FaultKind::Pause => RGBColor(0xEF, 0x6C, 0x00),
        FaultKind::Partition => RGBColor(0x6A, 0x1B, 0x9A),
        FaultKind::SlowDisk => RGBColor(0x6D, 0x4C, 0x41),
        FaultKind::Sigbus => RGBColor(0x88, 0x0E, 0x4F),
        _ => RGBColor(0x45, 0x5A, 0x64),
    }
}

fn reason_color(reason: SourceReason) -> RGBColor {
    match reason {
        SourceReason::Start => RGBColor(0x9E, 0x9E, 0x9E),
        SourceReason::Disconnected => RGBColor(0xEF, 0x6C, 0x00),
        SourceReason::Stale => RGBColor(0x6A, 0x1B, 0x9A),
        SourceReason::Refused => RGBColor(0xC6, 0x28, 0x28),
        SourceReason::OutOfRetention => RGBColor(0x6D, 0x4C, 0x41),
        SourceReason::Violation => RGBColor(0x88, 0x0E, 0x4F),
        SourceReason::Damaged => RGBColor(0x00, 0x69, 0x5C),
    }
}

/// Lanes for the items of `keyed` (node index, item), one per node, or one per tier when more
/// than [`MAX_LANES`] nodes have items.
fn lanes_by_node<T>(facts: &RunFacts, keyed: &[(usize, T)], mut add: impl FnMut(&mut Lane, &T)) -> Vec<Lane> {
    let mut nodes: Vec<usize> = keyed.iter().map(|(i, _)| *i).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.len() <= MAX_LANES {
        nodes
            .iter()
            .map(|&i| {
                let mut lane = Lane { label: facts.nodes[i].name.clone(), spans: vec![], markers: vec![] };
                for (_, item) in keyed.iter().filter(|(n, _)| *n == i) {
                    add(&mut lane, item);
                }
                lane
            })
            .collect()
    } else {
        facts
            .tiers()
            .into_iter()
            .filter_map(|(tier, members)| {
                let mut lane = Lane { label: format!("{tier} tier"), spans: vec![], markers: vec![] };
                for (_, item) in keyed.iter().filter(|(n, _)| members.contains(n)) {
                    add(&mut lane, item);
                }
                (!lane.spans.is_empty() || !lane.markers.is_empty()).then_some(lane)
            })
            .collect()
    }
}

fn legend_of<K: Copy + PartialEq + std::fmt::Display>(
    keys: impl Iterator<Item = K>,
    color: fn(K) -> RGBColor,
) -> Vec<(RGBColor, String)> {
    let mut seen: Vec<K> = Vec::new();
    for k in keys {
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    seen.into_iter().map(|k| (color(k), k.to_string())).collect()
}

fn fault_figure(facts: &RunFacts, axis: &TimeAxis) -> Option<Figure> {
    if facts.faults.is_empty() {
        return None;
    }
    let keyed: Vec<(usize, &FaultSpan)> =
        facts.faults.iter().filter_map(|f| facts.node_index(&f.node).map(|i| (i, f))).collect();
    let lanes = lanes_by_node(facts, &keyed, |lane, f| {
        lane.spans.push(Span {
            start_s: f.start_ms as f64 / 1000.0,
            end_s: f.end_ms as f64 / 1000.0,
            color: fault_color(f.kind),
            text: f.kind.to_string(),
        })
    });
    let open = facts.faults.iter().filter(|f| f.open_ended).count();
    let mut note = format!("Faults: {}, on {} lanes.", facts.faults.len(), lanes.len());
    if open > 0 {
        let _ = write!(note, " {open} had no end event and are drawn to the liveness phase.");
    }
    if facts.unmatched_fault_ends > 0 {
        let _ = write!(note, " {} end events had no start and are not drawn.", facts.unmatched_fault_ends);
    }
    Some(Figure {
        id: "faults",
        title: "Faults injected".into(),
        svg: chart::lanes_svg(axis, &lanes),
        legend: legend_of(facts.faults.iter().map(|f| f.kind), fault_color),
        note,
    })
}

fn source_figure(facts: &RunFacts, axis: &TimeAxis) -> Option<Figure> {
    if !facts.any_source_changes {
        return None;
    }
    let keyed: Vec<(usize, (u64, SourceReason))> = facts
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.sources.iter().map(move |c| (i, (c.at_ms, c.reason))))
        .collect();
    let lanes = lanes_by_node(facts, &keyed, |lane, &(at_ms, reason)| {
        lane.markers.push((at_ms as f64 / 1000.0, reason_color(reason)))
    });
    Some(Figure {
        id: "sources",
        title: "Source changes and reconnects".into(),
        svg: chart::lanes_svg(axis, &lanes),
        legend: legend_of(keyed.iter().map(|(_, (_, r))| *r), reason_color),
        note: "Each dot: the node connected to a new upstream source; its colour is why it left the one before.".into(),
    })
}

/// The modelled memory of the node that reached the largest RSS, component by component, with
/// its limit: which term grew (the byte sample with the data, allocator overhead with uptime).
fn memory_components_figure(events: &[Event], axis: &TimeAxis) -> Option<Figure> {
    let node = events
        .iter()
        .filter_map(|e| match e {
            Event::MemorySample { node, rss, .. } => Some((node, *rss)),
            _ => None,
        })
        .fold(None::<(&String, u64)>, |best, (node, rss)| match best {
            Some((_, top)) if top >= rss => best,
            _ => Some((node, rss)),
        })?
        .0;
    const NAMES: [&str; 7] = ["base", "cache", "byte sample", "engine", "memtables", "buffers", "allocator overhead"];
    let mut series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); NAMES.len()];
    let mut limit = 0u64;
    for e in events {
        if let Event::MemorySample {
            at_ms,
            node: n,
            limit: l,
            base,
            cache,
            byte_sample,
            engine,
            memtables,
            buffers,
            allocator_overhead,
            ..
        } = e
            && n == node
        {
            limit = *l;
            let t = *at_ms as f64 / 1000.0;
            for (i, v) in
                [base, cache, byte_sample, engine, memtables, buffers, allocator_overhead].into_iter().enumerate()
            {
                series[i].push((t, *v as f64 / GIB));
            }
        }
    }
    let mut marks = Vec::new();
    let mut legend = Vec::new();
    for (i, points) in series.into_iter().enumerate() {
        if points.iter().all(|p| p.1 == 0.0) {
            continue; // a component this node's model does not have
        }
        let color = chart::palette(i);
        marks.push(Mark::Line { color, width: 2, segments: vec![points] });
        legend.push((color, NAMES[i].to_string()));
    }
    if limit > 0 {
        marks.push(Mark::Bound { color: RGBColor(0xC6, 0x28, 0x28), y: limit as f64 / GIB });
        legend.push((RGBColor(0xC6, 0x28, 0x28), "limit (the sum of all lines)".into()));
    }
    let chart = TimeChart { y_desc: "GiB".into(), marks, y_top: None };
    Some(Figure {
        id: "memory_components",
        title: format!("Modelled memory of {node} by component"),
        svg: chart.svg(axis),
        legend,
        note: "The node that reached the largest modelled RSS; each component at the scenario's stated scale. \
               RSS is their sum; past the limit the node is OOM-killed."
            .into(),
    })
}

fn write_rate_figure(events: &[Event], facts: &RunFacts, axis: &TimeAxis) -> Option<Figure> {
    // Five seconds at least: the root commits in batch windows, so one-second counts jitter.
    let rate_bucket = bucket_ms(facts.end_ms).max(5000);
    let mut counts = vec![0u64; (facts.end_ms / rate_bucket + 1) as usize];
    let mut any = false;
    for e in events {
        if let Event::WriteAcked { at_ms, .. } = e {
            any = true;
            let b = ((*at_ms / rate_bucket) as usize).min(counts.len() - 1);
            counts[b] += 1;
        }
    }
    if !any {
        return None;
    }
    let per_s = 1000.0 / rate_bucket as f64;
    let points: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .map(|(b, &c)| (((b as u64 * rate_bucket) as f64 + rate_bucket as f64 / 2.0) / 1000.0, c as f64 * per_s))
        .filter(|(t, _)| *t <= axis.end_s)
        .collect();
    let chart = TimeChart {
        y_desc: "writes/s".into(),
        marks: vec![Mark::Line { color: chart::palette(0), width: 2, segments: vec![points] }],
        y_top: None,
    };
    Some(Figure {
        id: "write_rate",
        title: "Write rate at the root".into(),
        svg: chart.svg(axis),
        legend: vec![],
        note: format!("Acknowledged writes per second, averaged over {} buckets.", duration(rate_bucket)),
    })
}

fn metric_figure(
    metric: &NodeMetric,
    summary: &RunSummary,
    facts: &RunFacts,
    events: &[Event],
    axis: &TimeAxis,
    bucket: u64,
) -> Option<Figure> {
    // A break in a line is a gap of 2.5 sampling intervals (scenarios of days sample less often).
    let scale = summary.sample_interval_ms.max(1000) / 1000;
    let gap_ms = metric.gap_ms.map(|gap| gap * scale);
    // Samples per node index, in trace (time) order.
    let mut per_node: Vec<Vec<(u64, f64)>> = vec![Vec::new(); facts.nodes.len()];
    for e in events {
        if let Some((node, t, v)) = (metric.sample)(e)
            && let Some(i) = facts.node_index(node)
        {
            per_node[i].push((t, v));
        }
    }
    let present: Vec<usize> = (0..per_node.len()).filter(|&i| !per_node[i].is_empty()).collect();
    if present.is_empty() {
        return None;
    }
    let mut marks = Vec::new();
    let mut legend = Vec::new();
    let mut note = metric.note.to_string();
    let to_s = |seg: Vec<(u64, f64)>| seg.into_iter().map(|(t, v)| (t as f64 / 1000.0, v)).collect::<Vec<_>>();
    if present.len() <= MAX_NODE_LINES {
        let global_colors = facts.nodes.len() <= MAX_NODE_LINES;
        for (k, &i) in present.iter().enumerate() {
            let color = chart::palette(if global_colors { i } else { k });
            let segments = series::segments(&per_node[i], gap_ms)
                .into_iter()
                .map(|seg| to_s(series::min_max(&seg, bucket)))
                .collect();
            marks.push(Mark::Line { color, width: 2, segments });
            legend.push((color, facts.nodes[i].name.clone()));
        }
    } else {
        for (k, (tier, members)) in facts.tiers().into_iter().enumerate() {
            let samples: Vec<(u64, f64)> = members.iter().flat_map(|&i| per_node[i].iter().copied()).collect();
            if samples.is_empty() {
                continue;
            }
            let color = chart::palette(k);
            let spreads = series::spread(samples, bucket, gap_ms);
            let band = spreads
                .iter()
                .map(|seg| seg.iter().map(|s| (s.t_ms as f64 / 1000.0, s.min, s.max)).collect())
                .collect();
            let median =
                spreads.iter().map(|seg| seg.iter().map(|s| (s.t_ms as f64 / 1000.0, s.median)).collect()).collect();
            // Bands first, so no tier's band covers another tier's median line.
            marks.insert(0, Mark::Band { color, segments: band });
            marks.push(Mark::Line { color, width: 2, segments: median });
            let n = members.iter().filter(|&&i| !per_node[i].is_empty()).count();
            legend.push((color, format!("{tier} ({n} nodes): median, band min–max")));
        }
        let _ = write!(note, " {} nodes, grouped by tier.", present.len());
    }
    let bound = (metric.bound)(summary);
    if let Some(y) = bound {
        marks.push(Mark::Bound { color: chart::BOUND_COLOR, y });
        legend.push((chart::BOUND_COLOR, format!("bound {y}")));
    }
    // Outliers (a node that never applied shows a lag of decades) would flatten everything else:
    // clip far outliers at the top edge and say so.
    let mut values: Vec<f64> = present.iter().flat_map(|&i| per_node[i].iter().map(|p| p.1)).collect();
    values.sort_by(f64::total_cmp);
    let p99 = series::quantile(&values, 0.99).unwrap_or(0.0);
    let max = *values.last().expect("present is non-empty");
    let reference = p99.max(bound.unwrap_or(0.0));
    let y_top = (reference > 0.0 && max > 20.0 * reference).then_some(reference * 1.5);
    if let Some(top) = y_top {
        let clipped = values.iter().filter(|&&v| v > top).count();
        let _ = write!(note, " {clipped} samples above {top:.1} (up to {max:.3e}) are clipped at the top edge.");
    }
    Some(Figure {
        id: metric.id,
        title: metric.title.into(),
        svg: TimeChart { y_desc: metric.y_desc.into(), marks, y_top }.svg(axis),
        legend,
        note,
    })
}
