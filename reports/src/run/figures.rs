//! The run report's charts: the fault timeline and source changes as lane charts, one time chart
//! per [`NODE_METRICS`](super::NODE_METRICS) entry, modelled memory by component and the write
//! rate at the root, each a [`Figure`] with its legend and note.
//!
//! Guarantees: every chart is drawn on the page's one [`TimeAxis`]; a chart without data is
//! `None`, never an empty figure; above [`MAX_LANES`] nodes lanes group by tier, above
//! [`MAX_NODE_LINES`] lines become one band and one median per tier; far outliers are clipped at
//! the top edge and the note says how many. HTML is built with maud, which escapes every
//! interpolated value (titles, legend labels, notes); the chart itself is a [`chart::Svg`], which
//! says why it goes in unescaped.

use std::fmt::Write;

use maud::{Markup, Render, html};
use plotters::style::RGBColor;

use crate::chart::{self, Lane, Mark, Span, Svg, TimeAxis, TimeChart};
use crate::facts::{FaultSpan, RunFacts};
use crate::html::duration;
use crate::schema::{Event, FaultKind, RunSummary, SourceChange};
use crate::series::{self, bucket_ms};

use super::metrics::{GIB, NodeMetric};
use super::{MAX_LANES, MAX_NODE_LINES};

/// One chart on the page.
pub(crate) struct Figure {
    id: &'static str,
    title: String,
    /// The SVG, or why it could not be drawn.
    svg: Result<Svg, String>,
    legend: Vec<(RGBColor, String)>,
    note: String,
}

impl Figure {
    /// The same chart under another element id and title: a page showing two runs' charts
    /// side by side (`qsim diff`) needs each id once.
    pub(crate) fn renamed(self, id: &'static str, title: String) -> Figure {
        Figure { id, title, ..self }
    }
}

impl Render for Figure {
    fn render(&self) -> Markup {
        html! {
            figure.chart id={ "chart-" (self.id) } data-chart=(self.id) {
                figcaption { (self.title) }
                @match &self.svg {
                    Ok(svg) => { (svg) }
                    Err(e) => { p.note.chart-error { "This chart could not be drawn: " (e) } }
                }
                @if !self.legend.is_empty() {
                    ul.legend {
                        @for (color, label) in &self.legend {
                            li { span.sw style={ "background:" (chart::hex(*color)) } {} (label) }
                        }
                    }
                }
                @if !self.note.is_empty() {
                    p.note { (self.note) }
                }
            }
        }
    }
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

fn reason_color(reason: SourceChange) -> RGBColor {
    match reason {
        SourceChange::Start => RGBColor(0x9E, 0x9E, 0x9E),
        SourceChange::Disconnected => RGBColor(0xEF, 0x6C, 0x00),
        SourceChange::Stale => RGBColor(0x6A, 0x1B, 0x9A),
        SourceChange::Refused => RGBColor(0xC6, 0x28, 0x28),
        SourceChange::OutOfRetention => RGBColor(0x6D, 0x4C, 0x41),
        SourceChange::Violation => RGBColor(0x88, 0x0E, 0x4F),
        SourceChange::Damaged => RGBColor(0x00, 0x69, 0x5C),
        SourceChange::StoreFailed => RGBColor(0x5D, 0x40, 0x37),
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

pub(crate) fn fault_figure(facts: &RunFacts, axis: &TimeAxis) -> Option<Figure> {
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

pub(super) fn source_figure(facts: &RunFacts, axis: &TimeAxis) -> Option<Figure> {
    if !facts.any_source_changes {
        return None;
    }
    let keyed: Vec<(usize, (u64, SourceChange))> = facts
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
pub(super) fn memory_components_figure(events: &[Event], axis: &TimeAxis) -> Option<Figure> {
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

pub(super) fn write_rate_figure(events: &[Event], facts: &RunFacts, axis: &TimeAxis) -> Option<Figure> {
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

#[expect(
    clippy::too_many_lines,
    reason = "101 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub(crate) fn metric_figure(
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
    // Tiers the trace summarizes over all their nodes (it keeps some nodes' own samples only).
    let mut summarized: std::collections::BTreeMap<&str, (Vec<series::Spread>, u64)> = Default::default();
    if let Some(tier_spread) = metric.tier_spread {
        for e in events {
            if let (Some((tier, spread)), Event::TierSample { nodes, .. }) = (tier_spread(e), e) {
                let (spreads, most) = summarized.entry(tier).or_default();
                spreads.push(spread);
                *most = (*most).max(*nodes);
            }
        }
    }
    if present.is_empty() && summarized.is_empty() {
        return None;
    }
    let summarized_maxima: Vec<f64> =
        summarized.values().flat_map(|(spreads, _)| spreads.iter().map(|s| s.max)).collect();
    let mut marks = Vec::new();
    let mut legend = Vec::new();
    let mut note = metric.note.to_string();
    let to_s = |seg: Vec<(u64, f64)>| seg.into_iter().map(|(t, v)| (t as f64 / 1000.0, v)).collect::<Vec<_>>();
    if present.len() <= MAX_NODE_LINES && summarized.is_empty() {
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
        let any_summarized = !summarized.is_empty();
        for (k, (tier, members)) in facts.tiers().into_iter().enumerate() {
            let color = chart::palette(k);
            let (spreads, label) = match summarized.remove(tier.as_str()) {
                Some((tier_spreads, nodes)) => (
                    series::merge_spreads(tier_spreads, bucket, gap_ms),
                    format!("{tier} (all {nodes} node{}): median, band min–max", if nodes == 1 { "" } else { "s" }),
                ),
                None => {
                    let samples: Vec<(u64, f64)> = members.iter().flat_map(|&i| per_node[i].iter().copied()).collect();
                    if samples.is_empty() {
                        continue;
                    }
                    let n = members.iter().filter(|&&i| !per_node[i].is_empty()).count();
                    (series::spread(samples, bucket, gap_ms), format!("{tier} ({n} nodes): median, band min–max"))
                }
            };
            let band = spreads
                .iter()
                .map(|seg| seg.iter().map(|s| (s.t_ms as f64 / 1000.0, s.min, s.max)).collect())
                .collect();
            let median =
                spreads.iter().map(|seg| seg.iter().map(|s| (s.t_ms as f64 / 1000.0, s.median)).collect()).collect();
            // Bands first, so no tier's band covers another tier's median line.
            marks.insert(0, Mark::Band { color, segments: band });
            marks.push(Mark::Line { color, width: 2, segments: median });
            legend.push((color, label));
        }
        if any_summarized {
            let _ = write!(
                note,
                " Grouped by tier; a tier marked “all” is drawn from samples over every one of its nodes."
            );
        } else {
            let _ = write!(note, " {} nodes, grouped by tier.", present.len());
        }
    }
    let bound = (metric.bound)(summary);
    if let Some(y) = bound {
        marks.push(Mark::Bound { color: chart::BOUND_COLOR, y });
        legend.push((chart::BOUND_COLOR, format!("bound {y}")));
    }
    // Outliers (a node that never applied shows a lag of decades) would flatten everything else:
    // clip far outliers at the top edge and say so.
    let mut values: Vec<f64> = present.iter().flat_map(|&i| per_node[i].iter().map(|p| p.1)).collect();
    values.extend(summarized_maxima);
    values.sort_by(f64::total_cmp);
    let p99 = series::quantile(&values, 0.99).unwrap_or(0.0);
    let max = *values.last().expect("present or summarized is non-empty");
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
