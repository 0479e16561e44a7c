//! `qsim`: the command line of the deterministic simulator.
//!
//! Data (settings, verdicts, the reproduce command) goes to stdout; logs to stderr. Exit codes
//! are fixed: see `qs_sim::exit` and `qsim --help`.

mod cmd;

/// mimalloc rather than the system allocator: a simulated run allocates and frees for every entry
/// every replica applies, and glibc's malloc and free were a fifth of a reference run's profile.
/// Only where memory comes from changes, never what the run does: nothing in a run depends on an
/// address.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use qs_sim::exit;
use qs_sim::sweep::process::RunSettings;

#[derive(Parser, Debug)]
#[command(
    name = "qsim",
    version,
    about = "Deterministic simulation of a replicated configuration store",
    after_help = "Exit codes of run: 0 pass, 1 invariant violation, 2 bad arguments or scenario, 3 liveness \
                  failure (no convergence), 4 the simulation crashed, 5 nondeterminism, 70 built without \
                  --cfg madsim (use ./qsim). A sweep, a nightly shard and a merge of a sharded sweep exit 0 when \
                  every run ended as its scenario expects (with --known: when every failure group is known), \
                  1 otherwise, 2 for bad arguments or shards that do not make one sweep; explore likewise. \
                  diff exits 0 for identical traces, 1 for different, 2 for unreadable input; history 0 when \
                  its page is written, 2 for nights it cannot read."
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
        /// The seed every random choice of the run is drawn from (default: the scenario's
        /// `seed`, else 1).
        #[arg(long)]
        seed: Option<u64>,
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
        #[arg(long, value_parser = qs_sim::scenario::parse_engine)]
        engine: Option<qs_node::EngineKind>,
        /// Write the nodes' own log to nodes.log in the run folder: each line stamped with the
        /// simulated time and its node, filtered by RUST_LOG (info when unset, e.g.
        /// RUST_LOG=info,qs_node::replication=debug). The run and its digest do not change.
        #[arg(long)]
        log: bool,
    },
    /// Run a scenario on real qs-node processes instead of the simulator: real engines on disk,
    /// real sockets in a network namespace of the run's own, its faults on the wall clock where a
    /// real equivalent exists; judged by the same checkers (not deterministic: no digest). Use
    /// ./qsim real, which builds this qsim (without --cfg madsim) and qs-node first.
    Real {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// The seed the workload and drawn faults come from (default: the scenario's `seed`, else 1).
        #[arg(long, conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Several seeds one after another, as a range: 1..=20 (or 1..21).
        #[arg(long, value_parser = qs_sim::sweep::parse_seeds)]
        seeds: Option<std::ops::Range<u64>>,
        /// Where to write the trace, summary and report (default: runs/real/<scenario>/seed-<seed>;
        /// with --seeds, one seed-<n> folder each inside it).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The qs-node binary (default: $QSIM_NODE_BIN, else the qs-node beside this qsim).
        #[arg(long)]
        node_bin: Option<PathBuf>,
        /// Run without the faults this machine cannot inject (each named on a SKIPPED line)
        /// instead of refusing the scenario.
        #[arg(long)]
        skip_unsupported: bool,
        /// Make the nodes' folders (stores, configurations, logs, events files) in this new or
        /// empty folder and keep them (by default they are in a scratch folder, removed at the end).
        #[arg(long)]
        keep: Option<PathBuf>,
        /// Do not write report.html.
        #[arg(long)]
        no_report: bool,
        /// Run every node on this engine instead of the scenario's: lmdb or rocksdb (memory, the
        /// simulator's, becomes lmdb: a real store must outlive its process).
        #[arg(long, value_parser = qs_sim::scenario::parse_engine)]
        engine: Option<qs_node::EngineKind>,
    },
    /// Rebuild the HTML report of a run folder (or of a sweep folder) from its files.
    Report {
        /// A folder written by `qsim run` (trace.jsonl, summary.json) or `qsim sweep`.
        dir: PathBuf,
    },
    /// Two runs side by side: the first event where their traces part (with context), what
    /// differs in what produced them, their verdicts; with --html, a page with both fault
    /// timelines and lag charts on one time axis. Exit 0 when the traces are identical, 1 when
    /// they differ.
    Diff {
        /// Run A: a run folder (trace.jsonl, summary.json) or a trace file.
        a: PathBuf,
        /// Run B, the same.
        b: PathBuf,
        /// Events of context shown around the divergence.
        #[arg(long, default_value_t = qs_reports::diff::CONTEXT_DEFAULT)]
        context: usize,
        /// Write the side-by-side page here (HTML).
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// Read a folder of nights (each a subfolder with the summary.json `qsim merge` stamped) as
    /// one story: failure groups new, back or gone (first and last seen, runs per night), pass
    /// rate and wall time per scenario × engine, probes reached per night, the nights' commits.
    /// Prints what changed; writes index.html and history.json.
    History {
        /// The folder of nights.
        nights: PathBuf,
        /// Where index.html and history.json go.
        #[arg(long, default_value = "runs/history")]
        out: PathBuf,
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
        #[arg(long, value_parser = qs_sim::scenario::parse_engine)]
        engine: Option<qs_node::EngineKind>,
        #[command(flatten)]
        runs: RunOptions,
        /// A known-failures file (one signature a line): failures in its groups do not fail the
        /// sweep; any other group does.
        #[arg(long)]
        known: Option<PathBuf>,
    },
    /// Spend a budget of runs of a swarm scenario on the seeds whose drawn fault mixes go with
    /// the probes reached least so far (a first round in seed order, then rounds guided by probe
    /// rarity, a quarter of the picks random); report every probe's runs and hits, the probes
    /// never reached, and each failure's reproduce command.
    Explore {
        /// A scenario file with `[swarm]`.
        scenario: PathBuf,
        /// The budget: how many runs.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=qs_sim::explore::RUNS_MAX))]
        runs: u64,
        /// The first candidate seed (candidates: 16 per run of the budget, at least 256).
        #[arg(long, default_value_t = 1)]
        start_seed: u64,
        /// Runs at a time (default: the number of cores); never changes which seeds run.
        #[arg(long)]
        jobs: Option<usize>,
        /// Where each run's output and summary.json go.
        #[arg(long, default_value = "runs/explore")]
        out: PathBuf,
        /// Run on this engine instead of the scenario's: memory, lmdb or rocksdb.
        #[arg(long, value_parser = qs_sim::scenario::parse_engine)]
        engine: Option<qs_node::EngineKind>,
        #[command(flatten)]
        runs_options: RunOptions,
    },
    /// Run one shard of a nightly definition (which scenarios on which engines, seeds, shards,
    /// known failures; see `ci/nightly.toml`): the sweep every launcher runs.
    Nightly {
        /// The definition file.
        #[arg(default_value = "ci/nightly.toml")]
        definition: PathBuf,
        /// Which shard (i/n); n must be the definition's `shards`, or 1 for the whole sweep.
        #[arg(long, default_value = "1/1")]
        shard: qs_sim::sweep::Shard,
        /// Runs at a time (default: the definition's `jobs`, else the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Where each run's output, summary.json, junit.xml and report.html go.
        #[arg(long, default_value = "runs/nightly")]
        out: PathBuf,
        /// Run only the first N of the definition's seeds (every pair, every shard as asked):
        /// the test command's smoke run of the real definition.
        #[arg(long)]
        first_seeds: Option<u64>,
        /// Run nothing: print the plan (pairs, seeds, runs a shard) and, with --timings, each
        /// pair's mean wall time, a shard's estimated time against `shard_budget`, and the
        /// seeds that would fill the budget.
        #[arg(long)]
        plan: bool,
        /// A recent night's summary.json (a shard's or the merge's): the timings --plan uses.
        #[arg(long, requires = "plan")]
        timings: Option<PathBuf>,
        /// Run nothing: print the definition's real-process runs (`[real]`), one `qsim real`
        /// argument list a line, for ci/nightly-real.sh (with --first-seeds, that many seeds each).
        #[arg(long, conflicts_with = "plan")]
        real_commands: bool,
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
        /// A known-failures file: exit 1 only if some failure group is not in it.
        #[arg(long)]
        known: Option<PathBuf>,
        /// The night this sweep is, `YYYY-MM-DD` (default: today, UTC): `qsim history` orders
        /// nights by it.
        #[arg(long, value_parser = qs_sim::sweep::merge::night_date)]
        date: Option<String>,
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
    /// Shrink a failing run to the smallest scenario that fails the same way (same exit code,
    /// same failure signature): its drawn faults made explicit, then fewer and shorter faults,
    /// fewer nodes and tiers, fewer writes, a shorter run — each candidate in its own process.
    /// Writes the result under scenarios/regression/, ready to pin.
    Shrink {
        /// A run folder (written by `qsim run` or a sweep) or a scenario file.
        target: PathBuf,
        /// The seed (default: the run folder's; for a scenario file, its `seed`, else 1).
        #[arg(long)]
        seed: Option<u64>,
        /// Run on this engine instead of the scenario's: memory, lmdb or rocksdb.
        #[arg(long, value_parser = qs_sim::scenario::parse_engine)]
        engine: Option<qs_node::EngineKind>,
        /// Most candidate runs.
        #[arg(long, default_value_t = 150)]
        max_steps: usize,
        /// Each candidate's wall-clock budget (default: from its scenario).
        #[arg(long, value_parser = humantime_serde::re::humantime::parse_duration)]
        run_timeout: Option<Duration>,
        /// Where the shrunk scenario goes (default: scenarios/regression/<name>-seed-<seed>.toml).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List the scenarios in a folder and what each reproduces.
    List {
        /// The folder to list.
        #[arg(default_value = "scenarios")]
        dir: PathBuf,
    },
}

/// How a sweep runs each of its runs.
#[derive(clap::Args, Debug)]
struct RunOptions {
    /// Every run's wall-clock budget (e.g. 20m); past it the run is killed and recorded as hang.
    /// Default: 60 s + 2 × the scenario's simulated duration and convergence bound, at most 1 h.
    #[arg(long, value_parser = humantime_serde::re::humantime::parse_duration)]
    run_timeout: Option<Duration>,
    /// Start each run under this command (its words split on spaces), e.g. "nice -n 10" or
    /// "prlimit --as=8000000000"; it must exec the run, so that killing it kills the run.
    #[arg(long)]
    run_wrapper: Option<String>,
    /// Run every run that does not pass, and 5 % of the passing ones, again in a second process;
    /// a differing trace makes the run nondeterministic.
    #[arg(long)]
    check_determinism: bool,
}

impl RunOptions {
    fn settings(self) -> Result<RunSettings, String> {
        if self.run_timeout.is_some_and(|t| t.is_zero()) {
            return Err("--run-timeout must be above zero".into());
        }
        let wrapper: Vec<String> =
            self.run_wrapper.unwrap_or_default().split_whitespace().map(str::to_string).collect();
        Ok(RunSettings { budget: self.run_timeout, wrapper, check_determinism: self.check_determinism })
    }
}

/// mimalloc 3's `mi_option_purge_delay`: its position in `mi_option_e` (`mimalloc.h`; the
/// binding names the options only up to 14, `eager_commit_delay`, and this is the one after it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc 3's default purge delay, in ms of real time: reading it from option 15 confirms that
/// option 15 is the purge delay in the mimalloc this binary links.
const MI_DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 1000;

/// Keeps the pages a run frees instead of returning them to the OS after mimalloc's purge delay:
/// a run allocates and frees at a steady rate, so purged pages were faulted in and zeroed again
/// at once. The reference world cut to 1 write/s, ABBA: median 0.528 → 0.501 s; the full
/// reference world 2.76 → 2.68 s (docs/performance.md). A run's memory stays at its peak until
/// it exits. Like the allocator itself, this changes where memory comes from, never what a run
/// does. `MIMALLOC_PURGE_DELAY` in the environment wins.
fn keep_freed_pages() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_get` and `mi_option_set` read and store a value in mimalloc's option
    // table; mimalloc documents both as callable at any time, from any thread.
    #[allow(unsafe_code)]
    let current = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    // Debug builds only: a mimalloc whose option 15 means something else is left as it is (the
    // `if` below), a slower run rather than a refused one.
    debug_assert_eq!(current, MI_DEFAULT_PURGE_DELAY_MS, "mimalloc option 15 is not the purge delay here");
    if current == MI_DEFAULT_PURGE_DELAY_MS {
        // SAFETY: as above.
        #[allow(unsafe_code)]
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "85 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn main() -> ExitCode {
    keep_freed_pages();
    qs_sim::scratch::remove_on_interrupt();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::PASS };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::List { dir } => cmd::tools::list(&dir),
        Command::Sizing { scenario, shares, skews, seed, jobs, out } => {
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            cmd::tools::sizing(&qs_sim::sizing::SizingPlan { scenario, shares, skews, seed, jobs, out })
        }
        Command::Sweep { scenarios, seeds, jobs, shard, out, engine, runs, known } => {
            let settings = match runs.settings() {
                Ok(settings) => settings,
                Err(e) => {
                    eprintln!("qsim sweep: {e}");
                    return ExitCode::from(exit::USAGE);
                }
            };
            let scenarios = match cmd::sweep::load_all(&scenarios, engine) {
                Ok(scenarios) => scenarios,
                Err(code) => return code,
            };
            cmd::sweep::sweep(cmd::sweep::SweepPlan { scenarios, seeds, shard, jobs, settings, known, out })
        }
        Command::Nightly { definition, real_commands: true, first_seeds, .. } => {
            cmd::sweep::nightly_real_commands(&definition, first_seeds)
        }
        Command::Nightly { definition, plan: true, jobs, timings, .. } => {
            cmd::sweep::nightly_plan(&definition, jobs, timings.as_deref())
        }
        Command::Nightly { definition, shard, jobs, out, first_seeds, .. } => {
            cmd::sweep::nightly(&definition, shard, jobs, first_seeds, out)
        }
        Command::Explore { scenario, runs, start_seed, jobs, out, engine, runs_options } => {
            let settings = match runs_options.settings() {
                Ok(settings) => settings,
                Err(e) => {
                    eprintln!("qsim explore: {e}");
                    return ExitCode::from(exit::USAGE);
                }
            };
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let plan = qs_sim::explore::ExplorePlan { runs, start_seed, jobs, settings, out };
            cmd::explore::explore(&scenario, engine, &plan)
        }
        Command::Report { dir } => cmd::tools::report(&dir),
        Command::History { nights, out } => cmd::history::history(&nights, &out),
        Command::Diff { a, b, context, html } => cmd::diff::diff(&cmd::diff::DiffArgs { a, b, context, html }),
        Command::Shrink { target, seed, engine, max_steps, run_timeout, out } => {
            cmd::shrink::shrink(cmd::shrink::ShrinkArgs { target, seed, engine, max_steps, run_timeout, out })
        }
        Command::Merge { shards, out, known, date } => {
            let date = date.unwrap_or_else(qs_sim::sweep::merge::today);
            cmd::sweep::merge(&shards, &out, known.as_deref(), &date)
        }
        Command::Real { scenario, seed, seeds, out, node_bin, skip_unsupported, keep, no_report, engine } => {
            let loaded = match cmd::load(&scenario, engine) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("qsim: {e}");
                    return ExitCode::from(exit::USAGE);
                }
            };
            let seeds = seeds.map_or_else(|| vec![seed.or(loaded.scenario.seed).unwrap_or(1)], |range| range.collect());
            let args = cmd::real::Args { seeds, out, node_bin, skip_unsupported, keep, write_report: !no_report };
            cmd::real::real(loaded, args)
        }
        Command::Run { scenario, seed, out, check_determinism, no_report, engine, log } => {
            let loaded = match cmd::load(&scenario, engine) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("qsim: {e}");
                    return ExitCode::from(exit::USAGE);
                }
            };
            let seed = seed.or(loaded.scenario.seed).unwrap_or(1);
            cmd::run::run(&loaded, seed, out, cmd::run::Options { check_determinism, write_report: !no_report, log })
        }
    }
}
