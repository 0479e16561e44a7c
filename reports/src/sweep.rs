//! The sweep report: one static HTML page for a `qsim sweep` folder.
//!
//! Guarantees:
//! - Every (scenario, seed) of the summary has one grid cell (up to [`MAX_PASSING_CELLS`] passing
//!   cells per scenario; failing cells are never left out), coloured and worded by whether the
//!   run ended as its scenario expects, linking to `<scenario>/seed-<seed>/report.html` — the
//!   run folder `qsim sweep` writes, relative, so the sweep folder can be moved or served as is.
//! - Totals per outcome and per scenario; per scenario the distribution of max lag and of
//!   convergence time (a table of quantiles and a histogram each, drawn only with data).
//! - Every run that did not end as expected is listed with its first problem, its reproduce
//!   command and its link.
//! - A run whose folder is missing or whose `summary.json` cannot be read is shown as such; it
//!   never fails the page.
//! - HTML is built with maud, which escapes every interpolated value: scenario names, first
//!   problems and reproduce commands show as text; link targets are percent-encoded first
//!   ([`run_link`]); only the histograms' SVG goes in unescaped ([`chart::Svg`] says why).

use std::path::{Path, PathBuf};

use maud::{Markup, html};

use crate::chart;
use crate::html::{badge, duration, page, url_segment};
#[cfg(test)]
use crate::schema::{KnownFailures, Probe, ProbeHits};
use crate::schema::{Outcome, RunResult, SweepSummary};
use crate::series::quantile;
use crate::{ReportError, load};

/// Passing cells drawn per scenario: a 100 000-seed shard would otherwise be a 10 MB page; the
/// rest are counted. Failing cells are always drawn.
pub const MAX_PASSING_CELLS: usize = 2_000;
/// Rows of the failing-runs table (and of the expected-failures table); the rest are counted.
pub const MAX_PROBLEM_ROWS: usize = 200;

/// What was found in a run's folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunFolder {
    /// The folder was not looked at (rendering from a summary alone).
    Unchecked,
    /// `summary.json` is there and parses.
    Ok,
    /// No folder at this path.
    Missing(PathBuf),
    /// The folder is there but its summary is not usable; the error says why.
    Broken(String),
}

/// The run's folder relative to the sweep folder, as `qsim sweep` lays it out.
pub fn run_folder(result: &RunResult) -> PathBuf {
    PathBuf::from(&result.scenario).join(format!("seed-{}", result.seed))
}

/// The relative link to the run's report.
pub fn run_link(result: &RunResult) -> String {
    format!("{}/seed-{}/{}", url_segment(&result.scenario), result.seed, load::REPORT_FILE)
}

/// Looks at the run's folder under `sweep_dir`.
pub fn inspect(sweep_dir: &Path, result: &RunResult) -> RunFolder {
    let dir = sweep_dir.join(run_folder(result));
    if !dir.is_dir() {
        return RunFolder::Missing(dir);
    }
    match load::run_summary(&dir) {
        Ok(_) => RunFolder::Ok,
        Err(e) => RunFolder::Broken(e.to_string()),
    }
}

/// Reads `sweep_dir/summary.json`, looks at every run's folder, writes `sweep_dir/report.html`.
pub fn write_sweep_report(sweep_dir: &Path) -> Result<PathBuf, ReportError> {
    let summary = load::sweep_summary(sweep_dir)?;
    let folders: Vec<RunFolder> = summary.results.iter().map(|r| inspect(sweep_dir, r)).collect();
    load::write_report(sweep_dir, &render_sweep(&summary, &folders))
}

/// The sweep report's HTML. `folders[i]` is what was found for `summary.results[i]`; results
/// beyond `folders` count as [`RunFolder::Unchecked`].
pub fn render_sweep(summary: &SweepSummary, folders: &[RunFolder]) -> String {
    let scenarios = scenarios(summary);
    let failed = summary.results.iter().filter(|r| !r.ok).count();
    let body = html! {
        header {
            h1 { "qsim sweep " (badge(failed == 0, if failed == 0 { "ALL AS EXPECTED" } else { "FAILURES" }, None)) }
            dl.facts {
                dt { "seeds" } dd #seeds { (summary.seeds) }
                dt { "shard" } dd #shard { (summary.shard) }
                dt { "scenarios" } dd { (scenarios.len()) }
                dt { "runs" } dd #runs { (summary.results.len()) }
                dt { "not as expected" } dd #failed { (failed) }
            }
        }
        (totals(summary, &scenarios))
        (grid(summary, &scenarios, folders))
        (distributions(summary, &scenarios))
        (probes(summary))
        (problems(summary, folders))
    };
    page(&format!("qsim sweep {} ({} runs)", summary.seeds, summary.results.len()), body)
}

fn folder(folders: &[RunFolder], i: usize) -> &RunFolder {
    static UNCHECKED: RunFolder = RunFolder::Unchecked;
    folders.get(i).unwrap_or(&UNCHECKED)
}

/// Scenario names in first-appearance order, each with the indices of its results sorted by seed.
fn scenarios(summary: &SweepSummary) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in summary.results.iter().enumerate() {
        match out.iter_mut().find(|(s, _)| *s == r.scenario) {
            Some((_, v)) => v.push(i),
            None => out.push((r.scenario.clone(), vec![i])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|&i| summary.results[i].seed);
    }
    out
}

/// The outcomes of the results `idx` with their counts, in first-appearance order: `3 pass, 1 violation`.
fn outcomes(summary: &SweepSummary, idx: &[usize]) -> String {
    let mut counts: Vec<(Outcome, usize)> = Vec::new();
    for &i in idx {
        let o = summary.results[i].outcome;
        match counts.iter_mut().find(|(k, _)| *k == o) {
            Some((_, n)) => *n += 1,
            None => counts.push((o, 1)),
        }
    }
    counts.iter().map(|(o, n)| format!("{n} {}", o.as_str())).collect::<Vec<_>>().join(", ")
}

/// What the results `idx` expect, runs of the same expectation said once: `pass, liveness`.
fn expects(summary: &SweepSummary, idx: &[usize]) -> String {
    let mut expects: Vec<&str> = idx.iter().map(|&i| summary.results[i].expected.as_str()).collect();
    expects.dedup();
    expects.join(", ")
}

fn totals(summary: &SweepSummary, scenarios: &[(String, Vec<usize>)]) -> Markup {
    let all: Vec<usize> = (0..summary.results.len()).collect();
    let rows = scenarios.iter().map(|(s, idx)| (s.as_str(), idx)).chain(std::iter::once(("all", &all)));
    html! {
        section #totals {
            h2 { "Totals" }
            table #totals-table {
                thead {
                    tr {
                        th { "scenario" } th { "expects" } th { "runs" } th { "as expected" }
                        th { "not as expected" } th { "outcomes" }
                    }
                }
                tbody {
                    @for (name, idx) in rows {
                        @let ok = idx.iter().filter(|&&i| summary.results[i].ok).count();
                        tr.(if ok == idx.len() { "pass" } else { "fail" }) data-scenario=(name) {
                            td { @if name == "all" { b { "all" } } @else { (name) } }
                            td { @if name != "all" { (expects(summary, idx)) } }
                            td.num { (idx.len()) }
                            td.num { (ok) }
                            td.num { (idx.len() - ok) }
                            td { (outcomes(summary, idx)) }
                        }
                    }
                }
            }
        }
    }
}

/// The results of one scenario that get a grid cell — every failing one, passing ones up to
/// [`MAX_PASSING_CELLS`] — and how many passing ones were left out.
fn cells(summary: &SweepSummary, idx: &[usize]) -> (Vec<usize>, usize) {
    let mut drawn = Vec::new();
    let (mut passing_drawn, mut passing_left) = (0, 0);
    for &i in idx {
        if summary.results[i].ok {
            if passing_drawn == MAX_PASSING_CELLS {
                passing_left += 1;
                continue;
            }
            passing_drawn += 1;
        }
        drawn.push(i);
    }
    (drawn, passing_left)
}

fn grid(summary: &SweepSummary, scenarios: &[(String, Vec<usize>)], folders: &[RunFolder]) -> Markup {
    html! {
        section #grid {
            h2 { "Scenario × seed" }
            p.note {
                "Green ✓: the run ended as its scenario expects (a planted bug caught counts). Red ✗: it did not. \
                 Dashed outline: the run's folder is missing or broken. Each cell links to the run's report."
            }
            @for (name, idx) in scenarios {
                @let (drawn, passing_left) = cells(summary, idx);
                div.grid-row data-scenario=(name) {
                    h3 { (name) }
                    div.grid {
                        @for i in drawn {
                            @let r = &summary.results[i];
                            @let missing = matches!(folder(folders, i), RunFolder::Missing(_) | RunFolder::Broken(_));
                            a.cell.(if r.ok { "ok" } else { "bad" }).missing[missing]
                                data-scenario=(r.scenario) data-seed=(r.seed) data-outcome=(r.outcome.as_str())
                                href=(run_link(r))
                                title={ "seed " (r.seed) ": " (r.outcome.as_str()) " (expects " (r.expected) ")" } {
                                (r.seed) " " (if r.ok { "✓" } else { "✗" })
                            }
                        }
                    }
                    @if passing_left > 0 {
                        p.note { "… and " (passing_left) " more passing seeds, not drawn." }
                    }
                }
            }
        }
    }
}

fn stats_cells(values_ms: &[u64]) -> [String; 4] {
    let mut v: Vec<f64> = values_ms.iter().map(|&x| x as f64).collect();
    v.sort_by(f64::total_cmp);
    let q = |q: f64| quantile(&v, q).map(|x| duration(x as u64)).unwrap_or_else(|| "—".into());
    [q(0.0), q(0.5), q(0.9), q(1.0)]
}

/// Every probe with the runs that reached it and its hits; the ones never reached named first.
fn probes(summary: &SweepSummary) -> Markup {
    let rows = summary.probe_table();
    let never: Vec<String> = rows.iter().filter(|r| r.runs == 0).map(|r| r.probe.name().to_string()).collect();
    html! {
        section #probes {
            h2 { "Probes" }
            p.note {
                "Named points in the node and the simulator, counted per run: what this sweep exercised. Never \
                 reached: "
                span #probes-never { @if never.is_empty() { "none" } @else { (never.join(", ")) } }
                "."
            }
            table #probe-table {
                thead { tr { th { "probe" } th { "runs" } th { "hits" } } }
                tbody {
                    @for row in &rows {
                        @let name = row.probe.name();
                        tr data-probe=(name) class=[(row.runs == 0).then_some("never")] {
                            td { code { (name) } }
                            td.num { (row.runs) }
                            td.num { (row.hits) }
                        }
                    }
                }
            }
        }
    }
}

/// One scenario's max lags, convergence times and propagation, and how many runs did not
/// converge.
struct Distribution<'a> {
    name: &'a str,
    lags: Vec<u64>,
    conv: Vec<u64>,
    /// Each run's slowest tier's p99 propagation.
    propagation: Vec<u64>,
    never: usize,
}

/// The median and the largest of the runs' propagation p99s, or dashes without any.
fn propagation_cells(values: &[u64]) -> [String; 2] {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    match (quantile(&sorted, 0.5), sorted.last()) {
        (Some(median), Some(&max)) => [duration(median), duration(max)],
        _ => ["–".into(), "–".into()],
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "73 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn distributions(summary: &SweepSummary, scenarios: &[(String, Vec<usize>)]) -> Markup {
    let dists: Vec<Distribution> = scenarios
        .iter()
        .map(|(name, idx)| Distribution {
            name,
            lags: idx.iter().filter_map(|&i| summary.results[i].max_lag_ms).collect(),
            conv: idx.iter().filter_map(|&i| summary.results[i].converged_after_ms).collect(),
            propagation: idx.iter().filter_map(|&i| summary.results[i].propagation_p99_ms).collect(),
            // A run that crashed, hung or never started wrote no summary: it says nothing about
            // convergence, so it is not counted as a run that did not converge.
            never: idx
                .iter()
                .filter(|&&i| summary.results[i].digest.is_some() && summary.results[i].converged_after_ms.is_none())
                .count(),
        })
        .collect();
    html! {
        section #distributions {
            h2 { "Max lag, convergence and propagation per scenario" }
            p.note {
                "Propagation: each run's slowest tier's 99th percentile from the root's commit to a replica's \
                 apply (faults included)."
            }
            table #distribution-table {
                thead {
                    tr {
                        th { "scenario" } th { "max lag: min" } th { "median" } th { "p90" } th { "max" }
                        th { "converged after: min" } th { "median" } th { "p90" } th { "max" }
                        th { "did not converge" }
                        th { "propagation p99: median" } th { "max" }
                    }
                }
                tbody {
                    @for d in &dists {
                        tr data-scenario=(d.name) {
                            td { (d.name) }
                            @for cell in stats_cells(&d.lags).iter().chain(stats_cells(&d.conv).iter()) {
                                td.num { (cell) }
                            }
                            td.num { (d.never) }
                            @for cell in propagation_cells(&d.propagation) {
                                td.num { (cell) }
                            }
                        }
                    }
                }
            }
            @for d in &dists {
                div.scenario-charts data-scenario=(d.name) {
                    h3 { (d.name) }
                    div.small-charts {
                        @let series = [
                            ("max-lag", "max lag (s)", &d.lags, 0),
                            ("convergence", "converged after (s)", &d.conv, 2),
                        ];
                        @for (id, desc, values, color) in series {
                            @if values.is_empty() {
                                p.note.no-data { (desc) ": no values." }
                            } @else {
                                @let secs: Vec<f64> = values.iter().map(|&ms| ms as f64 / 1000.0).collect();
                                figure.chart.small data-chart=(id) data-scenario=(d.name) {
                                    @match chart::histogram_svg(&secs, desc, chart::palette(color)) {
                                        Ok(svg) => { (svg) }
                                        Err(e) => { p.note.chart-error { "Not drawn: " (e) } }
                                    }
                                }
                            }
                        }
                        @if d.never > 0 {
                            p.note { (d.never) " runs did not converge (not in the histogram)." }
                        }
                    }
                }
            }
        }
    }
}

fn problems(summary: &SweepSummary, folders: &[RunFolder]) -> Markup {
    let failing: Vec<usize> = (0..summary.results.len()).filter(|&i| !summary.results[i].ok).collect();
    let caught: Vec<usize> = (0..summary.results.len())
        .filter(|&i| summary.results[i].ok && summary.results[i].outcome != Outcome::Pass)
        .collect();
    let broken: Vec<(usize, String)> = (0..summary.results.len())
        .filter_map(|i| match folder(folders, i) {
            RunFolder::Missing(p) => Some((i, format!("{}: no such folder", p.display()))),
            RunFolder::Broken(e) => Some((i, e.clone())),
            RunFolder::Unchecked | RunFolder::Ok => None,
        })
        .collect();
    html! {
        (groups(summary))
        section #failing {
            h2 { "Runs not as expected" }
            @if failing.is_empty() {
                p.note { "Every run ended as its scenario expects." }
            } @else {
                (problem_table(summary, &failing, "failing-table", true))
            }
        }
        @if !caught.is_empty() {
            section #expected-failures {
                h2 { "Expected failures" }
                p.note { "Runs that failed the way their scenario expects (planted bugs caught, the canary)." }
                (problem_table(summary, &caught, "expected-table", false))
            }
        }
        @if !broken.is_empty() {
            section #broken-runs {
                h2 { "Run folders with problems" }
                ul {
                    @for (i, why) in &broken {
                        @let r = &summary.results[*i];
                        li data-scenario=(r.scenario) data-seed=(r.seed) { (r.scenario) " seed " (r.seed) ": " (why) }
                    }
                }
            }
        }
    }
}

/// The runs not as expected, one row per failure signature: a bug, however many seeds found it.
fn groups(summary: &SweepSummary) -> Markup {
    if summary.groups.is_empty() {
        return html! {};
    }
    let new = summary.groups.iter().filter(|g| !g.known).count();
    html! {
        section #groups {
            h2 { "Failure groups" }
            p.note {
                "Runs not as expected, grouped by signature: the failing checker and the shape of its first \
                 problem, node names, numbers and hashes taken out. " (summary.groups.len()) " group(s), " (new)
                " new (not in the sweep's known-failures file)."
            }
            table #groups-table {
                thead {
                    tr {
                        th { "signature" } th { "outcome" } th { "runs" } th { "scenarios" } th { "first run" }
                        th { "reproduce" } th {}
                    }
                }
                tbody {
                    @for g in &summary.groups {
                        tr.(if g.known { "known" } else { "new" }) {
                            td.signature { code { (g.signature) } }
                            td { (g.outcome.as_str()) }
                            td.num { (g.count) }
                            td { (g.scenarios.join(", ")) }
                            td { (g.first_scenario) " seed " (g.first_seed) }
                            td { pre.reproduce { code { (g.reproduce) } } }
                            td { @if g.known { "known" } @else { strong.bad { "new" } } }
                        }
                    }
                }
            }
        }
    }
}

fn problem_table(summary: &SweepSummary, idx: &[usize], id: &str, reproduce: bool) -> Markup {
    html! {
        table id=(id) {
            thead {
                tr {
                    th { "scenario" } th { "seed" } th { "outcome" } th { "expected" } th { "first problem" }
                    @if reproduce { th { "reproduce" } }
                    th { "report" }
                }
            }
            tbody {
                @for &i in idx.iter().take(MAX_PROBLEM_ROWS) {
                    @let r = &summary.results[i];
                    tr.(if r.ok { "pass" } else { "fail" }) data-scenario=(r.scenario) data-seed=(r.seed) {
                        td { (r.scenario) }
                        td.num { (r.seed) }
                        td { (r.outcome.as_str()) }
                        td { (r.expected) }
                        td.first-problem { (r.first_problem.as_deref().unwrap_or("—")) }
                        @if reproduce {
                            td { pre.reproduce { code { (r.reproduce) } } }
                        }
                        td { a.run-report href=(run_link(r)) { "run report" } }
                    }
                }
            }
        }
        @if idx.len() > MAX_PROBLEM_ROWS {
            p.note { "… and " (idx.len() - MAX_PROBLEM_ROWS) " more, not listed." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(scenario: &str, seed: u64, ok: bool) -> RunResult {
        RunResult {
            scenario: scenario.into(),
            path: PathBuf::from(format!("scenarios/{scenario}.toml")),
            seed,
            outcome: if ok { Outcome::Pass } else { Outcome::Violation },
            expected: "pass".into(),
            ok,
            exit_code: Some(if ok { 0 } else { 1 }),
            digest: None,
            first_problem: (!ok).then(|| format!("seed {seed} broke")),
            reproduce: format!("./qsim run scenarios/{scenario}.toml --seed {seed}"),
            out: PathBuf::from(format!("/elsewhere/{scenario}/seed-{seed}")),
            max_lag_ms: Some(seed * 10),
            converged_after_ms: ok.then_some(seed),
            propagation_p99_ms: Some(seed * 3),
            signature: (!ok).then(|| "sequence: broke".to_string()),
            wall_ms: 1000,
            determinism_checked: false,
            probes: vec![ProbeHits { probe: Probe::FaultKill, hits: seed }],
            engine: Some("memory".into()),
            build: Some("qsim 0.1.0 (0123456789ab)".into()),
        }
    }

    #[test]
    fn huge_sweeps_draw_every_failing_cell_and_count_the_rest() {
        let n = MAX_PASSING_CELLS as u64 + 500;
        let results: Vec<RunResult> = (1..=n).map(|seed| result("swarm", seed, seed % 1000 != 0)).collect();
        let mut summary = SweepSummary {
            seeds: format!("1..{}", n + 1),
            shard: "1/1".into(),
            runs: n,
            failed: 2,
            results,
            groups: Vec::new(),
            night: None,
        };
        summary.regroup(&KnownFailures::default());
        assert_eq!(summary.groups.len(), 1, "one signature");
        assert_eq!((summary.groups[0].count, summary.groups[0].first_seed), (2, 1000));
        let html = render_sweep(&summary, &[]);
        assert_eq!(html.matches("class=\"cell ok").count(), MAX_PASSING_CELLS);
        assert_eq!(html.matches("class=\"cell bad").count(), 2, "seeds 1000 and 2000");
        assert!(html.contains("… and 498 more passing seeds, not drawn."));
        assert!(html.contains("id=\"groups-table\"") && html.contains("<code>sequence: broke</code>"));
        // The probe table: fault_kill in every run (hits 1 + … + n), the rest never reached.
        let kill = summary.probe_table().into_iter().find(|r| r.probe == Probe::FaultKill).unwrap();
        assert_eq!((kill.runs, kill.hits), (n, n * (n + 1) / 2));
        assert!(html.contains("<tr data-probe=\"fault_kill\"><td><code>fault_kill</code></td>"), "reached");
        assert!(html.contains("<tr data-probe=\"snapshot_resumed\" class=\"never\">"), "never reached");
        assert!(html.len() < 2_000_000, "{}", html.len());
    }

    #[test]
    fn links_follow_the_sweep_layout_not_the_absolute_out_path() {
        let r = result("bug gc", 3, false);
        assert_eq!(run_link(&r), "bug%20gc/seed-3/report.html");
        assert_eq!(run_folder(&r), PathBuf::from("bug gc/seed-3"));
    }
}
