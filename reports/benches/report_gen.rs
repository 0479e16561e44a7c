//! Report generation time and size for a run of about 40 nodes and ten simulated minutes.
//!
//! `QSIM_REPORT_RUN=<run folder>`: that run (its `summary.json` and `trace.jsonl`); otherwise a
//! synthetic run with the reference world's shape and event mix (`testkit::Options::reference`:
//! 40 nodes over four tiers, 600 s, a lag sample per node per second, two applied batches a
//! second, 50 writes/s, nine faults), then the same with the events the simulator is gaining (a
//! read sample per edge per second, cursors, node and key-usage summaries).
//!
//! Prints, per run: events, trace size, load (read + parse) and render times (median of
//! `QSIM_REPORT_REPEAT` runs, default 5) and the page's size.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use qs_reports::schema::{Event, RunSummary};
use qs_reports::testkit::{Options, generate};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn measure(
    name: &str,
    summary: &RunSummary,
    events: &[Event],
    load: Option<Duration>,
    trace_bytes: u64,
    repeat: usize,
) {
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..repeat {
        let started = Instant::now();
        let html = qs_reports::render_run(summary, events);
        times.push(started.elapsed());
        size = html.len();
    }
    println!(
        "{name:<44} {:>5} {:>6} {:>8} {:>9.1} {:>8} {:>10} {:>8.0}",
        summary.nodes.len(),
        summary.simulated_ms / 1000,
        events.len(),
        trace_bytes as f64 / 1e6,
        load.map(ms).unwrap_or_else(|| "-".into()),
        ms(median(times)),
        size as f64 / 1e3,
    );
}

fn main() {
    let repeat: usize = std::env::var("QSIM_REPORT_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    println!(
        "{:<44} {:>5} {:>6} {:>8} {:>9} {:>8} {:>10} {:>8}",
        "run", "nodes", "sim s", "events", "trace MB", "load ms", "render ms", "html KB"
    );
    if let Some(dir) = std::env::var_os("QSIM_REPORT_RUN").map(PathBuf::from) {
        let started = Instant::now();
        let summary = qs_reports::load::run_summary(&dir).unwrap_or_else(|e| panic!("{e}"));
        let events = qs_reports::load::trace(&dir).unwrap_or_else(|e| panic!("{e}"));
        let load = started.elapsed();
        let trace_bytes = std::fs::metadata(dir.join("trace.jsonl")).map(|m| m.len()).unwrap_or(0);
        measure(
            &format!("{} seed {} (QSIM_REPORT_RUN)", summary.scenario, summary.seed),
            &summary,
            &events,
            Some(load),
            trace_bytes,
            repeat,
        );
        return;
    }
    let reference = Options::reference();
    let mut richer = Options::reference();
    richer.read_samples = true;
    richer.end_of_run = true;
    for (name, opts) in [("synthetic reference mix", reference), ("synthetic + read samples, summaries", richer)] {
        let (summary, events) = generate(&opts);
        let trace: String = events.iter().map(|e| e.line() + "\n").collect();
        let started = Instant::now();
        let parsed = qs_reports::schema::parse_trace(&trace).expect("synthetic traces parse");
        let load = started.elapsed();
        measure(name, &summary, &parsed, Some(load), trace.len() as u64, repeat);
    }
}
