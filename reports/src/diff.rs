//! Two runs side by side (`qsim diff`): where their traces part, what differs in what produced
//! them (build, scenario, seed, engine, settings), their verdicts, and their fault timelines and
//! lag charts on one time axis.
//!
//! Guarantees:
//! - Traces are compared line by line as written (canonical JSON, one event a line), so the
//!   divergence found is the first event whose bytes differ — the comparison
//!   `qsim run --check-determinism` makes. Identical traces have no divergence; a trace that is
//!   a strict prefix of the other diverges where the shorter one ends.
//! - Nothing is guessed: a side read from a bare trace file without a `summary.json` beside it
//!   shows its provenance and verdicts as unknown, and its charts are left out with a note.
//! - HTML is built with maud, which escapes every interpolated value.

use std::path::{Path, PathBuf};

use maud::{Markup, Render, html};

use crate::chart::TimeAxis;
use crate::facts::RunFacts;
use crate::html::{badge, page, secs, table};
use crate::load::{SUMMARY_FILE, TRACE_FILE};
use crate::run::NODE_METRICS;
use crate::run::figures::{fault_figure, metric_figure};
use crate::schema::{Event, RunSummary, parse_trace};
use crate::series::bucket_ms;
use crate::{ReportError, load};

/// Events of context shown on each side of a divergence by default.
pub const CONTEXT_DEFAULT: usize = 3;

/// One run as `qsim diff` reads it.
#[derive(Clone, Debug)]
pub struct Side {
    /// What the user named (a folder or a trace file), as given.
    pub origin: PathBuf,
    /// `summary.json` beside the trace, when there is one.
    pub summary: Option<RunSummary>,
    /// The trace's lines as written, blank lines dropped.
    pub lines: Vec<String>,
    pub events: Vec<Event>,
}

impl Side {
    /// Reads a run folder (its `trace.jsonl` and `summary.json`) or a trace file (and the
    /// `summary.json` beside it, if any). A folder without a summary is refused: a run folder
    /// always has one, so its absence means the path is not what the user meant.
    pub fn load(path: &Path) -> Result<Side, ReportError> {
        let (trace_path, summary) = if path.is_dir() {
            (path.join(TRACE_FILE), Some(load::run_summary(path)?))
        } else {
            let beside = path.parent().map(|p| p.join(SUMMARY_FILE)).filter(|p| p.is_file());
            let summary = match beside {
                Some(_) => Some(load::run_summary(path.parent().expect("a file with a sibling has a parent"))?),
                None => None,
            };
            (path.to_path_buf(), summary)
        };
        let text = load::read_trace_text(&trace_path)?;
        let events =
            parse_trace(&text).map_err(|message| ReportError::BadTrace { path: trace_path.clone(), message })?;
        let lines = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
        Ok(Side { origin: path.to_path_buf(), summary, lines, events })
    }
}

/// Where two traces part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The index (from 0) of the first event that differs: the events before it are identical.
    pub index: usize,
    /// Up to `context` identical events just before it, with their indexes.
    pub before: Vec<(usize, String)>,
    /// From the divergence on, up to `context + 1` events of each side (empty: that trace ended).
    pub a: Vec<(usize, String)>,
    pub b: Vec<(usize, String)>,
    /// Events from the divergence to the end, per side.
    pub rest_a: usize,
    pub rest_b: usize,
}

/// The first event at which `a` and `b` differ, with `context` events around it; `None` when
/// they are identical.
pub fn first_divergence<S: AsRef<str>>(a: &[S], b: &[S], context: usize) -> Option<Divergence> {
    let index = (0..a.len().max(b.len())).find(|&i| a.get(i).map(AsRef::as_ref) != b.get(i).map(AsRef::as_ref))?;
    let window = |side: &[S], from: usize, to: usize| -> Vec<(usize, String)> {
        (from..to.min(side.len())).map(|i| (i, side[i].as_ref().to_string())).collect()
    };
    Some(Divergence {
        index,
        before: window(a, index.saturating_sub(context), index),
        a: window(a, index, index + context + 1),
        b: window(b, index, index + context + 1),
        rest_a: a.len() - index.min(a.len()),
        rest_b: b.len() - index.min(b.len()),
    })
}

/// One fact about what produced a run, for both sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvenanceRow {
    pub field: &'static str,
    pub a: String,
    pub b: String,
}

impl ProvenanceRow {
    pub fn differs(&self) -> bool {
        self.a != self.b
    }
}

/// What produced each run and what it found, field by field (`unknown` where a side has no
/// summary).
pub fn provenance(a: Option<&RunSummary>, b: Option<&RunSummary>) -> Vec<ProvenanceRow> {
    type Field = (&'static str, fn(&RunSummary) -> String);
    let fields: [Field; 14] = [
        ("build", |s| s.build.clone()),
        ("scenario", |s| s.scenario.clone()),
        ("scenario file", |s| s.path.display().to_string()),
        ("seed", |s| s.seed.to_string()),
        ("engine", |s| s.engine.clone()),
        ("nodes", |s| s.nodes.len().to_string()),
        ("lag bound", |s| format!("{} ms", s.lag_max_ms)),
        ("converge within", |s| format!("{} ms", s.converge_within_ms)),
        ("sample interval", |s| format!("{} ms", s.sample_interval_ms)),
        ("memory limit", |s| s.memory_limit_bytes.map_or("none".into(), |b| format!("{b} bytes"))),
        ("outcome", |s| s.outcome.clone()),
        ("events", |s| s.events.to_string()),
        ("simulated", |s| secs(s.simulated_ms)),
        ("digest", |s| s.digest.clone()),
    ];
    let get = |s: Option<&RunSummary>, f: fn(&RunSummary) -> String| s.map_or("unknown".to_string(), f);
    fields.iter().map(|&(field, f)| ProvenanceRow { field, a: get(a, f), b: get(b, f) }).collect()
}

/// Each checker's verdict on both sides, in `a`'s order then any only `b` has.
pub fn verdicts(a: Option<&RunSummary>, b: Option<&RunSummary>) -> Vec<(String, String, String)> {
    let mut checkers: Vec<String> = Vec::new();
    for s in [a, b].into_iter().flatten() {
        for v in &s.verdicts {
            let name = v.checker.to_string();
            if !checkers.contains(&name) {
                checkers.push(name);
            }
        }
    }
    let of = |s: Option<&RunSummary>, checker: &str| -> String {
        let Some(s) = s else { return "unknown".into() };
        match s.verdicts.iter().find(|v| v.checker.to_string() == checker) {
            Some(v) if v.violations > 0 => format!("{} ({} violations)", v.status.as_str(), v.violations),
            Some(v) => v.status.as_str().to_string(),
            None => "not run".into(),
        }
    };
    checkers.into_iter().map(|c| (of(a, &c), of(b, &c), c)).map(|(x, y, c)| (c, x, y)).collect()
}

/// The event's time, read from its line (`at_ms`), for a caption.
fn at_ms(line: &str) -> Option<u64> {
    serde_json::from_str::<serde_json::Value>(line).ok()?.get("at_ms")?.as_u64()
}

/// The diff page: provenance, the divergence, verdicts, and both runs' charts on one axis.
#[expect(
    clippy::too_many_lines,
    reason = "103 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn render_diff(a: &Side, b: &Side, divergence: Option<&Divergence>) -> String {
    let rows: Vec<Vec<Markup>> = provenance(a.summary.as_ref(), b.summary.as_ref())
        .into_iter()
        .map(|r| {
            let mark = if r.differs() {
                badge(false, "differs", None)
            } else {
                html! { "same" }
            };
            vec![r.field.render(), html! { code { (r.a) } }, html! { code { (r.b) } }, mark]
        })
        .collect();
    let verdict_rows: Vec<Vec<Markup>> = verdicts(a.summary.as_ref(), b.summary.as_ref())
        .into_iter()
        .map(|(checker, x, y)| {
            let mark = if x != y {
                badge(false, "differs", None)
            } else {
                html! { "same" }
            };
            vec![checker.render(), x.render(), y.render(), mark]
        })
        .collect();
    let end_ms = [&a.events, &b.events].iter().filter_map(|e| e.iter().map(Event::at_ms).max()).max().unwrap_or(0);
    let divergence_ms =
        divergence.and_then(|d| d.a.first().into_iter().chain(d.b.first()).filter_map(|(_, line)| at_ms(line)).min());
    let axis = TimeAxis { end_s: end_ms as f64 / 1000.0, liveness_from_s: None, first_violation_s: None };
    let charts = |side: &Side, tag: &'static str, letter: &str| -> Markup {
        let Some(summary) = &side.summary else {
            return html! { p.note { "Run " (letter) " has no summary.json: its charts are not drawn." } };
        };
        let facts = RunFacts::gather(summary, &side.events);
        let lag = NODE_METRICS.iter().find(|m| m.id == "lag").expect("the lag chart is one of the node metrics");
        let faults = fault_figure(&facts, &axis);
        let lags = metric_figure(lag, summary, &facts, &side.events, &axis, bucket_ms(end_ms));
        let (fault_id, lag_id) = if tag == "a" { ("a-faults", "a-lag") } else { ("b-faults", "b-lag") };
        html! {
            @match faults {
                Some(f) => { (f.renamed(fault_id, format!("Run {letter}: faults injected"))) }
                None => { p.note { "Run " (letter) ": no faults were injected." } }
            }
            @match lags {
                Some(f) => { (f.renamed(lag_id, format!("Run {letter}: replication lag"))) }
                None => { p.note { "Run " (letter) ": no lag samples." } }
            }
        }
    };
    let event_list = |events: &[(usize, String)], ended: &str| -> Markup {
        html! {
            @if events.is_empty() { p.note { (ended) } }
            @else { ol.events { @for (i, line) in events { li value=(i + 1) { code { (line) } } } } }
        }
    };
    let body = html! {
        h1 { "qsim diff" }
        p #sides {
            "A: " code #side-a { (a.origin.display().to_string()) } br;
            "B: " code #side-b { (b.origin.display().to_string()) }
        }
        section #divergence {
            h2 { "Where the traces part" }
            @match divergence {
                None => {
                    p #identical { (badge(true, "identical", None)) " Both traces have the same "
                        (a.lines.len()) " events, byte for byte." }
                }
                Some(d) => {
                    p #first-divergence {
                        (badge(false, "diverge", None)) " The traces are identical for " (d.index)
                        " events and part at event " (d.index + 1)
                        @if let Some(ms) = divergence_ms { ", at " (secs(ms)) " of simulated time" }
                        ". After it, A has " (d.rest_a) " events and B " (d.rest_b) "."
                    }
                    @if !d.before.is_empty() {
                        h3 { "The same on both sides, just before" }
                        (event_list(&d.before, ""))
                    }
                    h3 { "A from there" }
                    (event_list(&d.a, "A's trace ended here."))
                    h3 { "B from there" }
                    (event_list(&d.b, "B's trace ended here."))
                }
            }
        }
        section #provenance {
            h2 { "What produced them" }
            (table("provenance", &["", "A", "B", ""], &rows))
        }
        section #verdicts {
            h2 { "Verdicts" }
            @if verdict_rows.is_empty() { p.note { "Neither side has a summary with verdicts." } }
            @else { (table("verdicts", &["checker", "A", "B", ""], &verdict_rows)) }
        }
        section #timeline {
            h2 { "Faults and lag, on one time axis" }
            p.note {
                "Every chart runs from 0 to " (secs(end_ms)) ", the later of the two traces' last events."
                @if let Some(ms) = divergence_ms { " The traces part at " (secs(ms)) "." }
            }
            (charts(a, "a", "A"))
            (charts(b, "b", "B"))
        }
    };
    page("qsim diff", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_traces_have_no_divergence() {
        let a = ["x", "y", "z"];
        assert_eq!(first_divergence(&a, &a, 3), None);
        let empty: [&str; 0] = [];
        assert_eq!(first_divergence(&empty, &empty, 3), None);
    }

    #[test]
    fn the_first_differing_line_is_found_with_context_on_each_side() {
        let a = ["0", "1", "2", "3", "4a", "5a", "6a"];
        let b = ["0", "1", "2", "3", "4b", "5b"];
        let d = first_divergence(&a, &b, 2).expect("they differ");
        assert_eq!(d.index, 4);
        assert_eq!(d.before, vec![(2, "2".to_string()), (3, "3".to_string())]);
        assert_eq!(d.a, vec![(4, "4a".to_string()), (5, "5a".to_string()), (6, "6a".to_string())]);
        assert_eq!(d.b, vec![(4, "4b".to_string()), (5, "5b".to_string())]);
        assert_eq!((d.rest_a, d.rest_b), (3, 2));
    }

    #[test]
    fn a_prefix_diverges_where_the_shorter_trace_ends() {
        let a = ["0", "1"];
        let b = ["0", "1", "2", "3"];
        let d = first_divergence(&a, &b, 3).expect("b goes on");
        assert_eq!(d.index, 2);
        assert!(d.a.is_empty());
        assert_eq!((d.rest_a, d.rest_b), (0, 2));
        let d = first_divergence(&b, &a, 3).expect("symmetric");
        assert_eq!((d.index, d.rest_a, d.rest_b), (2, 2, 0));
        assert_eq!(first_divergence(&["a"], &["b"], 0).map(|d| d.before.len()), Some(0));
    }

    #[test]
    fn provenance_without_a_summary_is_unknown_not_guessed() {
        let rows = provenance(None, None);
        assert!(rows.iter().all(|r| r.a == "unknown" && r.b == "unknown" && !r.differs()));
        assert!(verdicts(None, None).is_empty());
    }
}
