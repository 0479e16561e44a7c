//! `qsim`: the command line of the deterministic simulator.
//!
//! Data (settings, verdicts, the reproduce command) goes to stdout; logs to stderr. Exit codes
//! are fixed: see `qs_sim::exit` and `qsim --help`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use qs_sim::exit;
use qs_sim::scenario::Scenario;

#[derive(Parser, Debug)]
#[command(
    name = "qsim",
    version,
    about = "Deterministic simulation of a replicated configuration store",
    after_help = "Exit codes of run: 0 pass, 1 invariant violation, 2 bad arguments or scenario, 3 liveness \
                  failure (no convergence), 4 the simulation crashed, 5 nondeterminism, 70 built without \
                  --cfg madsim (use ./qsim). A sweep, and a merge of a sharded sweep, exit 0 when every run \
                  ended as its scenario expects, 1 otherwise (2 for shards that do not make one sweep)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one scenario under one seed; print the settings, then each checker's verdict.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// The seed every random choice of the run is drawn from.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where to write the trace and summary (default: runs/<scenario>/seed-<seed>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run the seed again in a second process and fail (exit 5) if the traces differ, naming
        /// the first differing event.
        #[arg(long)]
        check_determinism: bool,
        /// Do not write report.html (sweeps write reports only for the runs that failed).
        #[arg(long)]
        no_report: bool,
        /// Run every node on this engine instead of the scenario's: memory, lmdb or rocksdb.
        #[arg(long)]
        engine: Option<String>,
    },
    /// Rebuild the HTML report of a run folder (or of a sweep folder) from its files.
    Report {
        /// A folder written by `qsim run` (trace.jsonl, summary.json) or `qsim sweep`.
        dir: PathBuf,
    },
    /// Run scenarios × seeds, each seed in its own process, and write summary.json and junit.xml.
    Sweep {
        /// Scenario files.
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// The seeds: A..B (B excluded) or A..=B.
        #[arg(long, value_parser = qs_sim::sweep::parse_seeds)]
        seeds: std::ops::Range<u64>,
        /// Runs at a time (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only shard i of n (i/n), so n machines can split one sweep.
        #[arg(long, default_value = "1/1")]
        shard: qs_sim::sweep::Shard,
        /// Where each run's output, summary.json and junit.xml go.
        #[arg(long, default_value = "runs/sweep")]
        out: PathBuf,
        /// Run every scenario on this engine instead of its own: memory, lmdb or rocksdb.
        #[arg(long)]
        engine: Option<String>,
    },
    /// Merge the folders of a sharded sweep (`qsim sweep --shard i/n`, one per shard) into one:
    /// every run folder, summary.json, junit.xml and report.html over the whole sweep.
    Merge {
        /// The shards' output folders, all n of them.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Where the merged sweep goes.
        #[arg(long, default_value = "runs/merged")]
        out: PathBuf,
    },
    /// Sweep a scenario's cache size (as a share of its store's pages) and key popularity, and
    /// plot the read miss ratio against the 1–2 % rule (a report page).
    Sizing {
        /// A scenario with `[resources]` and a reader.
        scenario: PathBuf,
        /// Cache sizes to try, in percent of the store's used bytes.
        #[arg(long, value_delimiter = ',', default_values_t = qs_sim::sizing::DEFAULT_SHARES)]
        shares: Vec<f64>,
        /// The readers' Zipf exponents to try.
        #[arg(long, value_delimiter = ',', default_values_t = qs_sim::sizing::DEFAULT_SKEWS)]
        skews: Vec<f64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Runs at a time (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Where the runs, sizing.json and report.html go.
        #[arg(long, default_value = "runs/sizing")]
        out: PathBuf,
    },
    /// List the scenarios in a folder and what each reproduces.
    List {
        /// The folder to list.
        #[arg(default_value = "scenarios")]
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::PASS };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::List { dir } => list(&dir),
        Command::Sizing { scenario, shares, skews, seed, jobs, out } => {
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            sizing(&qs_sim::sizing::SizingPlan { scenario, shares, skews, seed, jobs, out })
        }
        Command::Sweep { scenarios, seeds, jobs, shard, out, engine } => {
            sweep(&scenarios, seeds, jobs, shard, &out, engine.as_deref())
        }
        Command::Report { dir } => report(&dir),
        Command::Merge { shards, out } => merge(&shards, &out),
        Command::Run { scenario, seed, out, check_determinism, no_report, engine } => {
            let loaded = match load(&scenario, engine.as_deref()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("qsim: {e}");
                    return ExitCode::from(exit::USAGE);
                }
            };
            run(&loaded, seed, out, check_determinism, !no_report)
        }
    }
}

/// Loads a scenario file and applies the command line's engine, if any.
fn load(path: &Path, engine: Option<&str>) -> Result<Scenario, String> {
    let mut scenario = Scenario::load(path).map_err(|e| e.to_string())?;
    if let Some(engine) = engine {
        scenario.override_engine(engine)?;
    }
    Ok(scenario)
}

fn sizing(plan: &qs_sim::sizing::SizingPlan) -> ExitCode {
    if !cfg!(madsim) {
        eprintln!("qsim: this build cannot run scenarios (built without --cfg madsim); use ./qsim");
        return ExitCode::from(exit::NOT_SIMULATOR);
    }
    let sweep = match qs_sim::sizing::run(plan) {
        Ok(sweep) => sweep,
        Err(e) => {
            eprintln!("qsim sizing: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    println!("scenario   {} seed {}; the store's pages: {}", sweep.scenario, sweep.seed, bytesize::ByteSize(sweep.used_bytes));
    for p in &sweep.points {
        println!(
            "skew {:<5} cache {:>6} % of pages ({}): {:>6.2} % of {} page reads missed",
            p.skew,
            p.share_percent,
            bytesize::ByteSize(p.cache_bytes),
            p.miss_ratio * 100.0,
            p.read_touches
        );
    }
    for (skew, knee) in sweep.knees() {
        match knee {
            Some(k) => println!("knee       skew {skew}: under 1 % misses from {k} % of pages (the rule: 1–2 %)"),
            None => println!("knee       skew {skew}: no share tried gets under 1 % misses"),
        }
    }
    match qs_reports::sizing::write_sizing(&plan.out, &sweep) {
        Ok(path) => println!("report     {}", path.display()),
        Err(e) => {
            eprintln!("qsim sizing: {e}");
            return ExitCode::from(exit::USAGE);
        }
    }
    ExitCode::from(exit::PASS)
}

fn report(dir: &Path) -> ExitCode {
    let written = if dir.join("trace.jsonl").exists() {
        qs_reports::write_run_report(dir)
    } else {
        qs_reports::write_sweep_report(dir)
    };
    match written {
        Ok(path) => {
            println!("report     {}", path.display());
            ExitCode::from(exit::PASS)
        }
        Err(e) => {
            eprintln!("qsim: {e}");
            ExitCode::from(exit::USAGE)
        }
    }
}

fn sweep(
    paths: &[PathBuf],
    seeds: std::ops::Range<u64>,
    jobs: Option<usize>,
    shard: qs_sim::sweep::Shard,
    out: &Path,
    engine: Option<&str>,
) -> ExitCode {
    let mut scenarios = Vec::new();
    for path in paths {
        match load(path, engine) {
            Ok(s) => scenarios.push(s),
            Err(e) => {
                eprintln!("qsim: {e}");
                return ExitCode::from(exit::USAGE);
            }
        }
    }
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
    let results = qs_sim::sweep::sweep(&scenarios, seeds.clone(), shard, jobs, out);
    if let Err(e) = qs_sim::sweep::write_reports(&results, &seeds, shard, out) {
        eprintln!("qsim: writing the sweep reports into {}: {e}", out.display());
    }
    // Run reports for the runs that did not pass (expected failures included), then the page.
    for result in results.iter().filter(|r| r.outcome != "pass") {
        if let Err(e) = qs_reports::write_run_report(&result.out) {
            eprintln!("qsim: report for {} seed {}: {e}", result.scenario, result.seed);
        }
    }
    match qs_reports::write_sweep_report(out) {
        Ok(path) => println!("report     {}", path.display()),
        Err(e) => eprintln!("qsim: writing the sweep report: {e}"),
    }
    for scenario in &scenarios {
        let name = &scenario.run_name();
        let mine: Vec<_> = results.iter().filter(|r| &r.scenario == name).collect();
        let ok = mine.iter().filter(|r| r.ok).count();
        println!("{name:<28} {ok}/{} as expected ({:?})", mine.len(), scenario.scenario.expect);
        for r in mine.iter().filter(|r| !r.ok) {
            println!("  seed {:<8} {:<14} {}", r.seed, r.outcome, r.first_problem.as_deref().unwrap_or(""));
            println!("  {:<13} reproduce: {}", "", r.reproduce);
        }
    }
    let failed = results.iter().filter(|r| !r.ok).count();
    println!(
        "results    {} ({} / junit.xml)",
        if failed == 0 { "all as expected".to_string() } else { format!("{failed} not as expected") },
        out.join("summary.json").display()
    );
    ExitCode::from(if failed == 0 { exit::PASS } else { exit::VIOLATION })
}

fn merge(shards: &[PathBuf], out: &Path) -> ExitCode {
    let merged = match qs_sim::sweep::merge(shards, out) {
        Ok(merged) => merged,
        Err(e) => {
            eprintln!("qsim merge: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    if let Err(e) = qs_reports::write_sweep_report(out) {
        eprintln!("qsim merge: writing the sweep report: {e}");
    }
    println!(
        "merged     {} shards of seeds {}: {} runs, {} not as expected",
        shards.len(),
        merged.seeds,
        merged.runs,
        merged.failed
    );
    for r in merged.results.iter().filter(|r| !r.ok) {
        println!("  {} seed {:<8} {:<14} {}", r.scenario, r.seed, r.outcome, r.first_problem.as_deref().unwrap_or(""));
        println!("  {:<13} reproduce: {}", "", r.reproduce);
    }
    println!("results    {} / junit.xml / report.html", out.join("summary.json").display());
    ExitCode::from(if merged.failed == 0 { exit::PASS } else { exit::VIOLATION })
}

fn list(dir: &Path) -> ExitCode {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect(),
        Err(e) => {
            eprintln!("qsim: {}: {e}", dir.display());
            return ExitCode::from(exit::USAGE);
        }
    };
    paths.sort();
    let mut refused = 0;
    for path in paths {
        match Scenario::load(&path) {
            Ok(s) => println!("{:<28} {}\n{:<28} {}", s.scenario.name, path.display(), "", s.scenario.description),
            Err(e) => {
                refused += 1;
                eprintln!("qsim: {e}");
            }
        }
    }
    ExitCode::from(if refused > 0 { exit::USAGE } else { exit::PASS })
}

#[cfg(not(madsim))]
fn run(_: &Scenario, _: u64, _: Option<PathBuf>, _: bool, _: bool) -> ExitCode {
    eprintln!(
        "qsim: this build has no simulator runtime (it was built without --cfg madsim); run scenarios with ./qsim"
    );
    ExitCode::from(exit::NOT_SIMULATOR)
}

/// Per tier, the sizing formulas against the configuration, then whether the formulas'
/// prediction (undersized: a `cache` or `memory` violation) agrees with what the models found.
#[cfg(madsim)]
fn print_sizing(scenario: &Scenario, sizing: &[qs_reports::schema::SizingRow], verdicts: &[qs_reports::schema::Verdict]) {
    use bytesize::ByteSize;
    let Some(models) = scenario.models() else { return };
    let few = if models.capacity_pages() < qs_sim::resources::CACHE_PAGES_FEW {
        format!("; only {} — too coarse to read much into", models.capacity_pages())
    } else {
        String::new()
    };
    println!(
        "models     {} stands for {} (scale {:.3e}); cache {} = {} model pages of {}{few} ({}); {:?} allocator{}",
        ByteSize(scenario.nominal_bytes()),
        ByteSize((scenario.nominal_bytes() as f64 * models.scale) as u64),
        models.scale,
        models.spec.cache_bytes,
        models.capacity_pages(),
        models.spec.page_bytes,
        models.shape,
        models.spec.allocator,
        if models.spec.byte_sample { ", byte sample" } else { "" },
    );
    for row in sizing {
        let share = if row.used_bytes == 0 { 0.0 } else { 100.0 * row.cache_bytes as f64 / row.used_bytes as f64 };
        let limit = row.memory_limit.map_or_else(|| "no limit".to_string(), |l| ByteSize(l).to_string());
        println!(
            "sizing     {:<8} data {} in {} of pages: cache {} ({share:.2} %) vs 1–2 % = {}–{} {}; memory {limit} vs formula {} {} (modelled RSS up to {})",
            row.tier,
            ByteSize(row.data_bytes),
            ByteSize(row.used_bytes),
            ByteSize(row.cache_bytes),
            ByteSize(row.cache_low),
            ByteSize(row.cache_high),
            if row.cache_undersized { "UNDERSIZED" } else { "ok" },
            ByteSize(row.memory_needed),
            if row.memory_undersized { "UNDERSIZED" } else { "ok" },
            ByteSize(row.rss_max),
        );
    }
    let predicted = sizing.iter().any(|r| {
        (r.cache_undersized && models.spec.miss_ratio_max.is_some()) || r.memory_undersized
    });
    let found = verdicts.iter().any(|v| (v.checker == "cache" || v.checker == "memory") && v.status != "pass");
    let said = |bad: bool| if bad { "a violation" } else { "a pass" };
    let agreement = if predicted == found {
        "agree".to_string()
    } else if found {
        "disagree: the models found what the formulas leave out (allocator overhead, key popularity)".to_string()
    } else {
        "disagree: sized below the formulas, the models still held (skewed reads, a small data set)".to_string()
    };
    println!("formulas   predict {}; the models found {}: {agreement}", said(predicted), said(found));
}

#[cfg(madsim)]
fn run(scenario: &Scenario, seed: u64, out: Option<PathBuf>, check_determinism: bool, write_report: bool) -> ExitCode {
    use qs_sim::trace::Event;

    let names = scenario.node_names();
    println!("scenario   {} ({})", scenario.scenario.name, scenario.path.display());
    println!("           {}", scenario.scenario.description);
    println!("seed       {seed}");
    println!("engine     {}", scenario.scenario.engine.get_ref());
    println!("nodes      {} ({})", names.len(), names.join(", "));
    let topology = &scenario.topology;
    if topology.datacenters > 1 {
        println!(
            "links      {} data centers (root in dc 0, node k of each tier in dc k mod {}); cross-DC replication +{:?} one way",
            topology.datacenters, topology.datacenters, topology.cross_dc_latency
        );
    }
    println!(
        "duration   {:?} safety, then up to {:?} to converge",
        scenario.scenario.duration, scenario.checks.converge_within
    );
    let drawn = scenario.fault.len();
    for (i, f) in scenario.faults_for(seed).iter().enumerate() {
        let origin = if i < drawn { "" } else { "   (swarm: drawn from the seed)" };
        println!("fault      {:?} {} at {:?} for {:?}{origin}", f.kind, f.target.get_ref(), f.at, f.duration);
    }

    let attempt = |seed| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| qs_sim::world::run(scenario, seed)));
    let outcome = match attempt(seed) {
        Ok(outcome) => outcome,
        Err(panic) => {
            let message =
                panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            println!("verdict    CRASH: the simulation panicked: {}", message.unwrap_or_default());
            println!("reproduce  {}", scenario.reproduce(seed));
            return ExitCode::from(exit::CRASH);
        }
    };

    let out = out.unwrap_or_else(|| scenario.out_dir(Path::new("runs"), seed));
    println!();
    println!("simulated  {:?}; {} writes acknowledged", outcome.simulated, outcome.writes_acked);
    println!(
        "trace      {} events, digest {} ({})",
        outcome.events.len(),
        outcome.digest,
        out.join("trace.jsonl").display()
    );
    let verdicts = verdicts(scenario, &outcome);
    for v in &verdicts {
        let text = match (&v.first, v.status.as_str()) {
            (_, "pass") => "pass".to_string(),
            (Some(first), _) if v.checker == "convergence" => format!("FAIL: {first}"),
            (Some(first), _) => format!("FAIL ({} violations); first: {first}", v.violations),
            (None, _) => "FAIL".to_string(),
        };
        println!("{:<10} {text}", v.checker);
    }
    print_sizing(scenario, &outcome.sizing, &verdicts);
    let failed = verdicts.iter().any(|v| v.status != "pass");
    let violated = outcome.violations().next().is_some();
    if let Err(e) = write_outputs(&out, scenario, seed, &outcome, &verdicts) {
        eprintln!("qsim: writing {}: {e}", out.display());
    } else if write_report {
        match qs_reports::write_run_report(&out) {
            Ok(path) => println!("report     {}", path.display()),
            Err(e) => eprintln!("qsim: writing the report: {e}"),
        }
    }
    if failed {
        println!("reproduce  {}", scenario.reproduce(seed));
        return ExitCode::from(if violated { exit::VIOLATION } else { exit::LIVENESS });
    }

    if check_determinism {
        // The second run is a fresh process, as a user reproducing the seed would start: a run
        // must not depend on what an earlier run in the same process initialised (lazy globals
        // that draw randomness once per process would shift the simulator's random stream).
        let second = out.join("determinism-check");
        let status = std::env::current_exe().and_then(|exe| {
            std::process::Command::new(exe)
                .arg("run")
                .args(scenario.run_args(seed))
                .args(["--no-report", "--out"])
                .arg(&second)
                .stdout(std::process::Stdio::null())
                .status()
        });
        let again = match status.and_then(|_| std::fs::read_to_string(second.join("trace.jsonl"))) {
            Ok(text) => text,
            Err(e) => {
                println!("determinism FAIL: the second run produced no trace ({e})");
                return ExitCode::from(exit::NONDETERMINISM);
            }
        };
        let first: Vec<String> = outcome.events.iter().map(Event::line).collect();
        let again: Vec<&str> = again.lines().collect();
        if let Some(at) =
            (0..first.len().max(again.len())).find(|&i| first.get(i).map(String::as_str) != again.get(i).copied())
        {
            println!("determinism FAIL: traces differ at event {at}");
            println!("  first run:  {}", first.get(at).map_or("(ended)", String::as_str));
            println!("  second run: {}", again.get(at).copied().unwrap_or("(ended)"));
            println!("reproduce  {} --check-determinism", scenario.reproduce(seed));
            return ExitCode::from(exit::NONDETERMINISM);
        }
        println!("determinism pass: a second process produced the identical trace");
    }
    println!("verdict    PASS");
    ExitCode::from(exit::PASS)
}

/// Each checker's verdict, in [`qs_sim::checkers::NAMES`] order.
#[cfg(madsim)]
fn verdicts(scenario: &Scenario, outcome: &qs_sim::world::RunOutcome) -> Vec<qs_reports::schema::Verdict> {
    use qs_sim::trace::Event;
    qs_sim::checkers::names(scenario)
        .iter()
        .map(|&checker| {
            let (violations, first) = if checker == "convergence" {
                (outcome.pending.len() as u64, outcome.pending.first().cloned())
            } else {
                let found: Vec<&Event> = outcome
                    .violations()
                    .filter(|e| matches!(e, Event::Violation { checker: c, .. } if c == checker))
                    .collect();
                let first = found.first().map(|e| match e {
                    Event::Violation { at_ms, node, index, message, .. } => {
                        format!("{node} at {at_ms} ms, index {index}: {message}")
                    }
                    _ => unreachable!("filtered to violations"),
                });
                (found.len() as u64, first)
            };
            qs_reports::schema::Verdict {
                checker: checker.to_string(),
                status: if violations == 0 { "pass" } else { "fail" }.to_string(),
                violations,
                first,
            }
        })
        .collect()
}

/// The build that ran a scenario: version and commit, for the report header.
#[cfg(madsim)]
fn build() -> String {
    format!("qsim {} ({})", env!("CARGO_PKG_VERSION"), env!("QSIM_COMMIT"))
}

#[cfg(madsim)]
fn write_outputs(
    out: &Path,
    scenario: &Scenario,
    seed: u64,
    outcome: &qs_sim::world::RunOutcome,
    verdicts: &[qs_reports::schema::Verdict],
) -> std::io::Result<()> {
    use qs_sim::trace::Event;
    /// Violations listed in the summary (the trace has them all).
    const VIOLATIONS_LISTED: usize = 200;
    std::fs::create_dir_all(out)?;
    let mut trace = String::new();
    for event in &outcome.events {
        trace.push_str(&event.line());
        trace.push('\n');
    }
    std::fs::write(out.join("trace.jsonl"), trace)?;
    let failed = verdicts.iter().any(|v| v.status != "pass");
    let summary = qs_reports::schema::RunSummary {
        scenario: scenario.scenario.name.clone(),
        description: scenario.scenario.description.clone(),
        path: scenario.path.clone(),
        seed,
        engine: scenario.scenario.engine.get_ref().to_string(),
        build: build(),
        outcome: match (failed, outcome.violations().next().is_some()) {
            (false, _) => "pass",
            (true, true) => "violation",
            (true, false) => "liveness",
        }
        .to_string(),
        digest: outcome.digest.clone(),
        events: outcome.events.len() as u64,
        simulated_ms: outcome.simulated.as_millis() as u64,
        liveness_from_ms: outcome.liveness_from.as_millis() as u64,
        converged_after_ms: outcome.converged_after.map(|d| d.as_millis() as u64),
        max_lag_ms: outcome
            .events
            .iter()
            .filter_map(|e| match e {
                Event::LagSample { lag_ms, .. } => Some(*lag_ms),
                _ => None,
            })
            .max(),
        lag_max_ms: scenario.checks.lag_max.as_millis() as u64,
        converge_within_ms: scenario.checks.converge_within.as_millis() as u64,
        writes_acked: outcome.writes_acked as u64,
        sample_interval_ms: scenario.checks.sample_interval.as_millis() as u64,
        miss_ratio_max: scenario.resources.as_ref().and_then(|r| r.miss_ratio_max),
        memory_limit_bytes: scenario.resources.as_ref().and_then(|r| r.memory_limit.map(|l| l.as_u64())),
        sizing: outcome.sizing.clone(),
        pending: outcome.pending.clone(),
        violations: outcome.violations().take(VIOLATIONS_LISTED).map(Event::line).collect(),
        verdicts: verdicts.to_vec(),
        nodes: scenario.node_infos(),
        reproduce: scenario.reproduce(seed),
    };
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary).expect("serializes"))
}
