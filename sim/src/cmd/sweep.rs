//! `qsim sweep` (scenarios × seeds, a process per run), `qsim merge` (the shards of one sweep
//! into one) and `qsim nightly` (one shard of the nightly definition every launcher reads).
//!
//! Exit codes: 0 when every run ended as its scenario expects — or, given a known-failures file,
//! when every failure belongs to a known group; 1 otherwise; 2 for bad arguments, a bad
//! definition, or shards that do not make one sweep.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use qs_reports::schema::{KnownFailures, Outcome, SweepSummary};
use qs_sim::exit;
use qs_sim::scenario::Scenario;
use qs_sim::sweep::process::RunSettings;

use super::load;

/// What a sweep runs, however it was asked for.
pub struct SweepPlan {
    pub scenarios: Vec<Scenario>,
    pub seeds: std::ops::Range<u64>,
    pub shard: qs_sim::sweep::Shard,
    pub jobs: Option<usize>,
    pub settings: RunSettings,
    /// The known-failures file, if any: its groups do not fail the sweep.
    pub known: Option<PathBuf>,
    pub out: PathBuf,
}

/// Reads a known-failures file; `None` (and a message) if it cannot be read.
fn known_failures(path: Option<&Path>) -> Option<KnownFailures> {
    match path {
        None => Some(KnownFailures::default()),
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(KnownFailures::parse(&text)),
            Err(e) => {
                eprintln!("qsim: known failures {}: {e}", path.display());
                None
            }
        },
    }
}

/// Loads each scenario file (on `engine`, if given).
pub fn load_all(paths: &[PathBuf], engine: Option<qs_node::EngineKind>) -> Result<Vec<Scenario>, ExitCode> {
    paths
        .iter()
        .map(|path| {
            load(path, engine).map_err(|e| {
                eprintln!("qsim: {e}");
                ExitCode::from(exit::USAGE)
            })
        })
        .collect()
}

pub fn sweep(plan: SweepPlan) -> ExitCode {
    let SweepPlan { scenarios, seeds, shard, jobs, settings, known, out } = plan;
    let Some(known_groups) = known_failures(known.as_deref()) else { return ExitCode::from(exit::USAGE) };
    let runs = qs_sim::sweep::shard_pairs(scenarios.len(), seeds.clone(), shard).len() as u64;
    if runs > qs_sim::sweep::RUNS_MAX {
        eprintln!("qsim: {runs} runs in this shard; at most {}", qs_sim::sweep::RUNS_MAX);
        return ExitCode::from(exit::USAGE);
    }
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    println!(
        "sweep      {} scenarios × seeds {}..{}, shard {}/{}: {runs} runs, {jobs} at a time",
        scenarios.len(),
        seeds.start,
        seeds.end,
        shard.index,
        shard.count
    );
    let budget = match settings.budget {
        Some(budget) => format!("{} each (--run-timeout)", humantime_serde::re::humantime::format_duration(budget)),
        None => format!(
            "from each scenario: {} + {}× its simulated time, at most {}",
            humantime_serde::re::humantime::format_duration(qs_sim::sweep::process::BUDGET_MIN),
            qs_sim::sweep::process::WALL_PER_SIMULATED,
            humantime_serde::re::humantime::format_duration(qs_sim::sweep::process::BUDGET_MAX)
        ),
    };
    println!("budget     {budget}; a run past it is killed and recorded as hang");
    if settings.check_determinism {
        println!(
            "determinism every run that does not pass, and {} % of passing runs, again in a second process",
            qs_sim::sweep::process::DETERMINISM_SAMPLE_PERCENT
        );
    }
    let results = qs_sim::sweep::sweep(&scenarios, seeds.clone(), shard, jobs, &settings, &out);
    let summary = match qs_sim::sweep::write_reports(&results, &seeds, shard, &known_groups, &out) {
        Ok(summary) => summary,
        Err(e) => {
            eprintln!("qsim: writing the sweep reports into {}: {e}", out.display());
            return ExitCode::from(exit::USAGE);
        }
    };
    // Run reports for the runs that did not pass (expected failures included), then the page.
    for result in results.iter().filter(|r| r.outcome != Outcome::Pass) {
        if result.out.join("trace.jsonl").exists()
            && let Err(e) = qs_reports::write_run_report(&result.out)
        {
            eprintln!("qsim: report for {} seed {}: {e}", result.scenario, result.seed);
        }
    }
    match qs_reports::write_sweep_report(&out) {
        Ok(path) => println!("report     {}", path.display()),
        Err(e) => eprintln!("qsim: writing the sweep report: {e}"),
    }
    for scenario in &scenarios {
        let name = &scenario.run_name();
        let mine: Vec<_> = results.iter().filter(|r| &r.scenario == name).collect();
        let ok = mine.iter().filter(|r| r.ok).count();
        println!("{name:<28} {ok}/{} as expected ({:?})", mine.len(), scenario.scenario.expect);
    }
    finish(&summary, known.is_some(), &out)
}

/// Prints the probes, the failure groups and the closing line; the exit code (see the module
/// doc).
fn finish(summary: &SweepSummary, judged_by_groups: bool, out: &Path) -> ExitCode {
    let table = summary.probe_table();
    let reached: Vec<String> = table
        .iter()
        .filter(|r| r.runs > 0)
        .map(|r| format!("{} {}/{}", r.probe.name(), r.runs, summary.runs))
        .collect();
    let never: Vec<String> = table.iter().filter(|r| r.runs == 0).map(|r| r.probe.name().to_string()).collect();
    println!("probes     reached (runs): {}", if reached.is_empty() { "none".into() } else { reached.join(", ") });
    println!("probes     never reached: {}", if never.is_empty() { "none".into() } else { never.join(", ") });
    for g in &summary.groups {
        println!(
            "group      {:>5} × {:<16} {}{}",
            g.count,
            g.outcome,
            g.signature,
            if g.known {
                "  (known)"
            } else if judged_by_groups {
                "  (NEW)"
            } else {
                ""
            }
        );
        println!("{:<10} first: {} seed {}; reproduce: {}", "", g.first_scenario, g.first_seed, g.reproduce);
    }
    let mut propagation: Vec<u64> = summary.results.iter().filter_map(|r| r.propagation_p99_ms).collect();
    propagation.sort_unstable();
    if let (Some(median), Some(max)) = (qs_reports::series::quantile(&propagation, 0.5), propagation.last()) {
        println!(
            "propagated p99 of each run's slowest tier, root commit to replica apply: median {median} ms, max {max} ms \
             ({} runs)",
            propagation.len()
        );
    }
    let new = summary.new_groups().count();
    println!(
        "results    {} runs, {} not as expected in {} group(s){} ({} / junit.xml / report.html)",
        summary.runs,
        summary.failed,
        summary.groups.len(),
        if judged_by_groups { format!(", {new} new") } else { String::new() },
        out.join("summary.json").display()
    );
    let failed = if judged_by_groups { new > 0 } else { summary.failed > 0 };
    ExitCode::from(if failed { exit::VIOLATION } else { exit::PASS })
}

pub fn merge(shards: &[PathBuf], out: &Path, known: Option<&Path>, date: &str) -> ExitCode {
    let Some(known_groups) = known_failures(known) else { return ExitCode::from(exit::USAGE) };
    let merged = match qs_sim::sweep::merge::merge(shards, out, &known_groups, date) {
        Ok(merged) => merged,
        Err(e) => {
            eprintln!("qsim merge: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    if let Err(e) = qs_reports::write_sweep_report(out) {
        eprintln!("qsim merge: writing the sweep report: {e}");
    }
    let night = merged.night.as_ref().map_or(String::new(), |n| format!(", the night of {} at {}", n.date, n.commit()));
    println!(
        "merged     {} shards of seeds {}: {} runs, {} not as expected{night}",
        shards.len(),
        merged.seeds,
        merged.runs,
        merged.failed
    );
    finish(&merged, known.is_some(), out)
}

/// The nightly definition at `definition` (checked against `shard`, if given) and its scenario
/// × engine pairs loaded; a problem is printed and answered with the usage exit code.
fn load_nightly(
    definition: &Path,
    shard: Option<qs_sim::sweep::Shard>,
) -> Result<(qs_sim::sweep::nightly::Nightly, Vec<Scenario>), ExitCode> {
    let usage = |e: &dyn std::fmt::Display| {
        eprintln!("qsim nightly: {e}");
        ExitCode::from(exit::USAGE)
    };
    let nightly = qs_sim::sweep::nightly::Nightly::load(definition).map_err(|e| usage(&e))?;
    if let Some(shard) = shard {
        nightly.check_shard(shard).map_err(|e| usage(&e))?;
    }
    let scenarios = nightly
        .runs
        .iter()
        .map(|(path, engine)| load(path, Some(*engine)).map_err(|e| usage(&e)))
        .collect::<Result<_, _>>()?;
    Ok((nightly, scenarios))
}

/// `qsim nightly --real-commands`: the definition's real-process runs, one `qsim real` argument
/// list a line (tab-separated), for ci/nightly-real.sh; nothing when it has no `[real]`.
pub fn nightly_real_commands(definition: &Path, first_seeds: Option<u64>) -> ExitCode {
    let nightly = match qs_sim::sweep::nightly::Nightly::load(definition) {
        Ok(nightly) => nightly,
        Err(e) => {
            eprintln!("qsim nightly: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    for args in nightly.real.map(|real| real.commands(first_seeds)).unwrap_or_default() {
        println!("{}", args.join("\t"));
    }
    ExitCode::from(exit::PASS)
}

/// `qsim nightly --plan`: what the definition runs and, from a recent night's timings, what a
/// shard costs against the definition's `shard_budget`.
pub fn nightly_plan(definition: &Path, jobs: Option<usize>, timings: Option<&Path>) -> ExitCode {
    let (nightly, scenarios) = match load_nightly(definition, None) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let names: Vec<String> = scenarios.iter().map(Scenario::run_name).collect();
    let seeds = nightly.seeds.end - nightly.seeds.start;
    let jobs = jobs.or(nightly.jobs).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let format = |d: std::time::Duration| {
        humantime_serde::re::humantime::format_duration(std::time::Duration::from_secs(d.as_secs())).to_string()
    };
    println!(
        "plan       {}: {} pairs × seeds {}..{} = {} runs, {} shards of about {} runs, {jobs} at a time",
        definition.display(),
        names.len(),
        nightly.seeds.start,
        nightly.seeds.end,
        names.len() as u64 * seeds,
        nightly.shards,
        (names.len() as u64 * seeds).div_ceil(nightly.shards)
    );
    if let Some(budget) = nightly.shard_budget {
        println!("budget     {} a shard (shard_budget)", format(budget));
    }
    let Some(timings) = timings else {
        println!("estimate   give --timings SUMMARY.json (a recent night's) for each pair's time and a shard's");
        return ExitCode::from(exit::PASS);
    };
    let summary: SweepSummary = match std::fs::read_to_string(timings)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(summary) => summary,
        Err(e) => {
            eprintln!("qsim nightly: timings {}: {e}", timings.display());
            return ExitCode::from(exit::USAGE);
        }
    };
    let plan =
        qs_sim::sweep::nightly::estimate(&names, seeds, nightly.shards, jobs, nightly.shard_budget, &summary.results);
    println!("timings    {} ({} runs)", timings.display(), summary.results.len());
    for pair in &plan.pairs {
        match pair.mean_wall_ms {
            Some(ms) => println!(
                "pair       {:<40} {:>8.2} s a run (mean of {}), {} a night",
                pair.run_name,
                ms as f64 / 1000.0,
                pair.runs_timed,
                format(std::time::Duration::from_millis(ms * seeds))
            ),
            None => println!("pair       {:<40} not timed: charged the mean of the timed pairs", pair.run_name),
        }
    }
    println!("estimate   a shard takes about {} ({jobs} runs at a time)", format(plan.shard_wall));
    if let (Some(budget), Some(fill)) = (nightly.shard_budget, plan.seeds_to_fill) {
        let verdict = if plan.shard_wall > budget { "OVER the budget" } else { "within the budget" };
        println!("budget     {} a shard: {verdict}; {fill} seeds a pair would fill it", format(budget));
    }
    ExitCode::from(exit::PASS)
}

/// One shard of the nightly definition at `definition`.
/// With `first_seeds`, only that many of the definition's seeds (at least one).
pub fn nightly(
    definition: &Path,
    shard: qs_sim::sweep::Shard,
    jobs: Option<usize>,
    first_seeds: Option<u64>,
    out: PathBuf,
) -> ExitCode {
    if first_seeds == Some(0) {
        eprintln!("qsim nightly: --first-seeds must be at least 1");
        return ExitCode::from(exit::USAGE);
    }
    let (nightly, scenarios) = match load_nightly(definition, Some(shard)) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let seeds = match first_seeds {
        Some(n) => nightly.seeds.start..nightly.seeds.end.min(nightly.seeds.start.saturating_add(n)),
        None => nightly.seeds.clone(),
    };
    println!(
        "nightly    {} ({} scenario × engine pairs{})",
        definition.display(),
        scenarios.len(),
        if first_seeds.is_some() {
            format!(", only its first {} seeds", seeds.end - seeds.start)
        } else {
            String::new()
        }
    );
    sweep(SweepPlan {
        scenarios,
        seeds,
        shard,
        jobs: jobs.or(nightly.jobs),
        settings: RunSettings {
            budget: nightly.run_timeout,
            wrapper: Vec::new(),
            check_determinism: nightly.check_determinism,
        },
        known: nightly.known.clone(),
        out,
    })
}
