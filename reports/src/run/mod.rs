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
//! - HTML is built with maud, which escapes every interpolated value: a string from the trace or
//!   the summary shows as text, never as markup. Only the charts' SVG goes in unescaped
//!   ([`chart::Svg`](crate::chart::Svg) says why that is safe).
//!
//! Adding a chart of a per-node metric is one entry in [`NODE_METRICS`].
//!
//! Files: `mod.rs` the page itself ([`render_run`], [`write_run_report`]) and its limits;
//! `metrics.rs` the per-node chart list ([`NodeMetric`], [`NODE_METRICS`]); `header.rs` the header;
//! `figures.rs` the charts; `tables.rs` the tables.

use std::path::{Path, PathBuf};

use maud::html;

use crate::chart::TimeAxis;
use crate::facts::RunFacts;
use crate::html::{page, secs};
use crate::schema::{Event, RunSummary};
use crate::series::bucket_ms;
use crate::{ReportError, load};

pub(crate) mod figures;
mod header;
mod metrics;
mod tables;
use figures::{Figure, fault_figure, memory_components_figure, metric_figure, source_figure, write_rate_figure};
use header::header;
pub use metrics::{NODE_METRICS, NodeMetric};
use tables::{
    fault_table, fetched_table, key_usage_table, node_table, propagation_table, sizing_table, violation_table,
    write_amp_table,
};

/// Above this many nodes a chart groups them by tier: 40 lines in 12 colours cannot be told
/// apart, while four tier bands can.
pub const MAX_NODE_LINES: usize = 12;
/// Lanes (rows) in the fault and source-change charts before they group by tier.
pub const MAX_LANES: usize = 24;
/// Violations listed in the table; the total is always given.
pub const MAX_VIOLATION_ROWS: usize = 50;
/// Source changes listed per node in the node table; the rest are counted.
pub const MAX_SOURCE_ROWS: usize = 6;
/// Above this many nodes the node table has one row per tier, then the rows of the nodes
/// something happened to (a fault, a failover, a bootstrap), at most this many.
pub const MAX_NODE_ROWS: usize = 100;

/// Reads `run_dir`'s summary and trace and writes `run_dir/report.html`.
pub fn write_run_report(run_dir: &Path) -> Result<PathBuf, ReportError> {
    let summary = load::run_summary(run_dir)?;
    let events = load::trace(run_dir)?;
    load::write_report(run_dir, &render_run(&summary, &events))
}

/// The run report's HTML.
#[expect(
    clippy::too_many_lines,
    reason = "72 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn render_run(summary: &RunSummary, events: &[Event]) -> String {
    let facts = RunFacts::gather(summary, events);
    let axis = TimeAxis {
        end_s: facts.end_ms as f64 / 1000.0,
        liveness_from_s: facts.liveness_from_ms.map(|ms| ms as f64 / 1000.0),
        first_violation_s: facts.violations.first().map(|v| v.at_ms as f64 / 1000.0),
    };
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
    let body = html! {
        (header(summary, &facts))
        section #timeline {
            h2 { "Timeline" }
            p.note {
                "All charts share one time axis, 0 to " (secs(facts.end_ms))
                (if summary.real { " of wall-clock time (real processes). " } else { " of simulated time. " })
                @match facts.liveness_from_ms {
                    Some(ms) if ms < facts.end_ms => {
                        "The shaded part, from " (secs(ms)) ", is the liveness phase: faults healed, writes \
                         stopped, waiting for convergence."
                    }
                    Some(ms) => { "The liveness phase began at " (secs(ms)) " and converged at once." }
                    None => { "The trace does not say when the liveness phase began." }
                }
            }
            @if let Some(v) = facts.violations.first() {
                p.note #violation-marker {
                    "The dark red vertical line marks the first violation, at " (secs(v.at_ms)) "."
                }
            }
            @for figure in &figures { (figure) }
            @if !left_out.is_empty() {
                p.note.no-data { "Not drawn, no data in this trace: " (left_out.join("; ").to_lowercase()) "." }
            }
        }
        (node_table(&facts))
        (fault_table(&facts))
        (write_amp_table(summary, &facts))
        (fetched_table(summary))
        (propagation_table(summary))
        (sizing_table(summary))
        (key_usage_table(&facts))
        (violation_table(summary, &facts))
    };
    page(&format!("qsim {} seed {}", summary.scenario, summary.seed), body)
}
