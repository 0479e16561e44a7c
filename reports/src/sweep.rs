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

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::chart;
use crate::html::{badge, duration, esc, page, url_segment};
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
    let mut body = String::new();
    let failed = summary.results.iter().filter(|r| !r.ok).count();
    let _ = writeln!(
        body,
        "<header><h1>qsim sweep {}</h1><dl class=\"facts\"><dt>seeds</dt><dd id=\"seeds\">{}</dd>\
         <dt>shard</dt><dd id=\"shard\">{}</dd><dt>scenarios</dt><dd>{}</dd><dt>runs</dt><dd id=\"runs\">{}</dd>\
         <dt>not as expected</dt><dd id=\"failed\">{}</dd></dl></header>",
        badge(failed == 0, if failed == 0 { "ALL AS EXPECTED" } else { "FAILURES" }),
        esc(&summary.seeds),
        esc(&summary.shard),
        scenarios.len(),
        summary.results.len(),
        failed
    );
    totals(&mut body, summary, &scenarios);
    grid(&mut body, summary, &scenarios, folders);
    distributions(&mut body, summary, &scenarios);
    probes(&mut body, summary);
    problems(&mut body, summary, folders);
    page(&format!("qsim sweep {} ({} runs)", summary.seeds, summary.results.len()), &body)
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

fn outcomes(summary: &SweepSummary, idx: &[usize]) -> Vec<(Outcome, usize)> {
    let mut out: Vec<(Outcome, usize)> = Vec::new();
    for &i in idx {
        let o = summary.results[i].outcome;
        match out.iter_mut().find(|(k, _)| *k == o) {
            Some((_, n)) => *n += 1,
            None => out.push((o, 1)),
        }
    }
    out
}

fn totals(out: &mut String, summary: &SweepSummary, scenarios: &[(String, Vec<usize>)]) {
    out.push_str("<section id=\"totals\"><h2>Totals</h2><table id=\"totals-table\"><thead><tr><th>scenario</th>\
                  <th>expects</th><th>runs</th><th>as expected</th><th>not as expected</th><th>outcomes</th></tr></thead><tbody>");
    let all: Vec<usize> = (0..summary.results.len()).collect();
    let rows = scenarios.iter().map(|(s, idx)| (s.as_str(), idx)).chain(std::iter::once(("all", &all)));
    for (name, idx) in rows {
        let ok = idx.iter().filter(|&&i| summary.results[i].ok).count();
        let mut expects: Vec<&str> = idx.iter().map(|&i| summary.results[i].expected.as_str()).collect();
        expects.dedup();
        let expects = if name == "all" { String::new() } else { expects.join(", ") };
        let outcome_text: Vec<String> =
            outcomes(summary, idx).iter().map(|(o, n)| format!("{} {}", n, esc(o.as_str()))).collect();
        let _ = write!(
            out,
            "<tr class=\"{}\" data-scenario=\"{}\"><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            if ok == idx.len() { "pass" } else { "fail" },
            esc(name),
            if name == "all" { "<b>all</b>".to_string() } else { esc(name) },
            esc(&expects),
            idx.len(),
            ok,
            idx.len() - ok,
            outcome_text.join(", ")
        );
    }
    out.push_str("</tbody></table></section>\n");
}

fn grid(out: &mut String, summary: &SweepSummary, scenarios: &[(String, Vec<usize>)], folders: &[RunFolder]) {
    out.push_str(
        "<section id=\"grid\"><h2>Scenario × seed</h2><p class=\"note\">Green ✓: the run ended as its scenario \
         expects (a planted bug caught counts). Red ✗: it did not. Dashed outline: the run's folder is missing or \
         broken. Each cell links to the run's report.</p>",
    );
    for (name, idx) in scenarios {
        let _ = write!(
            out,
            "<div class=\"grid-row\" data-scenario=\"{}\"><h3>{}</h3><div class=\"grid\">",
            esc(name),
            esc(name)
        );
        let mut passing_drawn = 0;
        let mut passing_left = 0;
        for &i in idx {
            let r = &summary.results[i];
            if r.ok {
                if passing_drawn == MAX_PASSING_CELLS {
                    passing_left += 1;
                    continue;
                }
                passing_drawn += 1;
            }
            let folder_class = match folder(folders, i) {
                RunFolder::Missing(_) | RunFolder::Broken(_) => " missing",
                RunFolder::Unchecked | RunFolder::Ok => "",
            };
            let _ = write!(
                out,
                "<a class=\"cell {}{folder_class}\" data-scenario=\"{}\" data-seed=\"{}\" data-outcome=\"{}\" \
                 href=\"{}\" title=\"seed {}: {} (expects {})\">{} {}</a>",
                if r.ok { "ok" } else { "bad" },
                esc(&r.scenario),
                r.seed,
                esc(r.outcome.as_str()),
                esc(&run_link(r)),
                r.seed,
                esc(r.outcome.as_str()),
                esc(&r.expected),
                r.seed,
                if r.ok { "✓" } else { "✗" },
            );
        }
        out.push_str("</div>");
        if passing_left > 0 {
            let _ = write!(out, "<p class=\"note\">… and {passing_left} more passing seeds, not drawn.</p>");
        }
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
}

fn stats_cells(values_ms: &[u64]) -> [String; 4] {
    let mut v: Vec<f64> = values_ms.iter().map(|&x| x as f64).collect();
    v.sort_by(f64::total_cmp);
    let q = |q: f64| quantile(&v, q).map(|x| duration(x as u64)).unwrap_or_else(|| "—".into());
    [q(0.0), q(0.5), q(0.9), q(1.0)]
}

/// Every probe with the runs that reached it and its hits; the ones never reached named first.
fn probes(out: &mut String, summary: &SweepSummary) {
    let rows = summary.probe_table();
    let never: Vec<String> = rows.iter().filter(|r| r.runs == 0).map(|r| r.probe.name()).collect();
    let _ = write!(
        out,
        "<section id=\"probes\"><h2>Probes</h2><p class=\"note\">Named points in the node and the simulator, \
         counted per run: what this sweep exercised. Never reached: <span id=\"probes-never\">{}</span>.</p>\
         <table id=\"probe-table\"><thead><tr><th>probe</th><th>runs</th><th>hits</th></tr></thead><tbody>",
        if never.is_empty() { "none".to_string() } else { esc(&never.join(", ")) }
    );
    for row in rows {
        let _ = write!(
            out,
            "<tr data-probe=\"{name}\"{class}><td><code>{name}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            row.runs,
            row.hits,
            name = esc(&row.probe.name()),
            class = if row.runs == 0 { " class=\"never\"" } else { "" }
        );
    }
    out.push_str("</tbody></table></section>\n");
}

fn distributions(out: &mut String, summary: &SweepSummary, scenarios: &[(String, Vec<usize>)]) {
    out.push_str(
        "<section id=\"distributions\"><h2>Max lag and convergence per scenario</h2><table id=\"distribution-table\">\
         <thead><tr><th>scenario</th><th>max lag: min</th><th>median</th><th>p90</th><th>max</th>\
         <th>converged after: min</th><th>median</th><th>p90</th><th>max</th><th>did not converge</th></tr></thead><tbody>",
    );
    let mut charts = String::new();
    for (name, idx) in scenarios {
        let lags: Vec<u64> = idx.iter().filter_map(|&i| summary.results[i].max_lag_ms).collect();
        let conv: Vec<u64> = idx.iter().filter_map(|&i| summary.results[i].converged_after_ms).collect();
        // A run that crashed, hung or never started wrote no summary: it says nothing about
        // convergence, so it is not counted as a run that did not converge.
        let never = idx
            .iter()
            .filter(|&&i| summary.results[i].digest.is_some() && summary.results[i].converged_after_ms.is_none())
            .count();
        let _ = write!(out, "<tr data-scenario=\"{}\"><td>{}</td>", esc(name), esc(name));
        for cell in stats_cells(&lags).iter().chain(stats_cells(&conv).iter()) {
            let _ = write!(out, "<td class=\"num\">{}</td>", esc(cell));
        }
        let _ = write!(out, "<td class=\"num\">{never}</td></tr>");

        let _ = write!(
            charts,
            "<div class=\"scenario-charts\" data-scenario=\"{}\"><h3>{}</h3><div class=\"small-charts\">",
            esc(name),
            esc(name)
        );
        let series: [(&str, &str, &[u64], usize); 2] =
            [("max-lag", "max lag (s)", &lags, 0), ("convergence", "converged after (s)", &conv, 2)];
        for (id, desc, values, color) in series {
            if values.is_empty() {
                let _ = write!(charts, "<p class=\"note no-data\">{}: no values.</p>", esc(desc));
                continue;
            }
            let secs: Vec<f64> = values.iter().map(|&ms| ms as f64 / 1000.0).collect();
            let _ =
                write!(charts, "<figure class=\"chart small\" data-chart=\"{id}\" data-scenario=\"{}\">", esc(name));
            match chart::histogram_svg(&secs, desc, chart::palette(color)) {
                Ok(svg) => charts.push_str(&svg),
                Err(e) => {
                    let _ = write!(charts, "<p class=\"note chart-error\">Not drawn: {}</p>", esc(&e));
                }
            }
            charts.push_str("</figure>");
        }
        if never > 0 {
            let _ = write!(charts, "<p class=\"note\">{never} runs did not converge (not in the histogram).</p>");
        }
        charts.push_str("</div></div>\n");
    }
    out.push_str("</tbody></table>");
    out.push_str(&charts);
    out.push_str("</section>\n");
}

fn problems(out: &mut String, summary: &SweepSummary, folders: &[RunFolder]) {
    groups(out, summary);
    let failing: Vec<usize> = (0..summary.results.len()).filter(|&i| !summary.results[i].ok).collect();
    out.push_str("<section id=\"failing\"><h2>Runs not as expected</h2>");
    if failing.is_empty() {
        out.push_str("<p class=\"note\">Every run ended as its scenario expects.</p>");
    } else {
        problem_table(out, summary, &failing, "failing-table", true);
    }
    out.push_str("</section>\n");

    let caught: Vec<usize> = (0..summary.results.len())
        .filter(|&i| summary.results[i].ok && summary.results[i].outcome != Outcome::Pass)
        .collect();
    if !caught.is_empty() {
        out.push_str(
            "<section id=\"expected-failures\"><h2>Expected failures</h2><p class=\"note\">Runs that failed the way \
             their scenario expects (planted bugs caught, the canary).</p>",
        );
        problem_table(out, summary, &caught, "expected-table", false);
        out.push_str("</section>\n");
    }

    let broken: Vec<(usize, String)> = (0..summary.results.len())
        .filter_map(|i| match folder(folders, i) {
            RunFolder::Missing(p) => Some((i, format!("{}: no such folder", p.display()))),
            RunFolder::Broken(e) => Some((i, e.clone())),
            RunFolder::Unchecked | RunFolder::Ok => None,
        })
        .collect();
    if !broken.is_empty() {
        out.push_str("<section id=\"broken-runs\"><h2>Run folders with problems</h2><ul>");
        for (i, why) in broken {
            let r = &summary.results[i];
            let _ = write!(
                out,
                "<li data-scenario=\"{}\" data-seed=\"{}\">{} seed {}: {}</li>",
                esc(&r.scenario),
                r.seed,
                esc(&r.scenario),
                r.seed,
                esc(&why)
            );
        }
        out.push_str("</ul></section>\n");
    }
}

/// The runs not as expected, one row per failure signature: a bug, however many seeds found it.
fn groups(out: &mut String, summary: &SweepSummary) {
    if summary.groups.is_empty() {
        return;
    }
    let new = summary.groups.iter().filter(|g| !g.known).count();
    let _ = write!(
        out,
        "<section id=\"groups\"><h2>Failure groups</h2><p class=\"note\">Runs not as expected, grouped by \
         signature: the failing checker and the shape of its first problem, node names, numbers and hashes \
         taken out. {} group(s), {new} new (not in the sweep's known-failures file).</p>\
         <table id=\"groups-table\"><thead><tr><th>signature</th><th>outcome</th><th>runs</th><th>scenarios</th>\
         <th>first run</th><th>reproduce</th><th></th></tr></thead><tbody>",
        summary.groups.len()
    );
    for g in &summary.groups {
        let _ = write!(
            out,
            "<tr class=\"{}\"><td class=\"signature\"><code>{}</code></td><td>{}</td><td class=\"num\">{}</td><td>{}</td>\
             <td>{} seed {}</td><td><pre class=\"reproduce\"><code>{}</code></pre></td><td>{}</td></tr>",
            if g.known { "known" } else { "new" },
            esc(&g.signature),
            esc(g.outcome.as_str()),
            g.count,
            esc(&g.scenarios.join(", ")),
            esc(&g.first_scenario),
            g.first_seed,
            esc(&g.reproduce),
            if g.known { "known" } else { "<strong class=\"bad\">new</strong>" },
        );
    }
    out.push_str("</tbody></table></section>\n");
}

fn problem_table(out: &mut String, summary: &SweepSummary, idx: &[usize], id: &str, reproduce: bool) {
    let _ = write!(
        out,
        "<table id=\"{id}\"><thead><tr><th>scenario</th><th>seed</th><th>outcome</th><th>expected</th>\
         <th>first problem</th>{}<th>report</th></tr></thead><tbody>",
        if reproduce { "<th>reproduce</th>" } else { "" }
    );
    for &i in idx.iter().take(MAX_PROBLEM_ROWS) {
        let r = &summary.results[i];
        let _ = write!(
            out,
            "<tr class=\"{}\" data-scenario=\"{}\" data-seed=\"{}\"><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"first-problem\">{}</td>",
            if r.ok { "pass" } else { "fail" },
            esc(&r.scenario),
            r.seed,
            esc(&r.scenario),
            r.seed,
            esc(r.outcome.as_str()),
            esc(&r.expected),
            esc(r.first_problem.as_deref().unwrap_or("—"))
        );
        if reproduce {
            let _ = write!(out, "<td><pre class=\"reproduce\"><code>{}</code></pre></td>", esc(&r.reproduce));
        }
        let _ = write!(out, "<td><a class=\"run-report\" href=\"{}\">run report</a></td></tr>", esc(&run_link(r)));
    }
    out.push_str("</tbody></table>");
    if idx.len() > MAX_PROBLEM_ROWS {
        let _ = write!(out, "<p class=\"note\">… and {} more, not listed.</p>", idx.len() - MAX_PROBLEM_ROWS);
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
            signature: (!ok).then(|| "sequence: broke".to_string()),
            wall_ms: 1000,
            determinism_checked: false,
            probes: vec![ProbeHits { probe: Probe::FaultKill, hits: seed }],
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
