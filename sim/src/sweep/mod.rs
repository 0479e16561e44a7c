//! `qsim sweep`: many scenarios × seeds, each run in its own `qsim run` process.
//!
//! Guarantees:
//! - **One process per run.** A seed's result never depends on which runs came before it in
//!   the same process (lazily-initialised globals would shift the simulator's random stream),
//!   and a run that panics, aborts, runs out of memory, is killed, or passes its wall-clock
//!   budget (`hang`) is recorded without stopping the sweep ([`process`]).
//! - **Checked for determinism** when asked: every run that did not pass and a 5 % sample of
//!   the passing ones run again in a second process; a differing trace is `nondeterministic`.
//! - **Shardable.** `--shard i/n` keeps every n-th (scenario, seed) pair starting at the i-th, so
//!   a CI matrix or a Kubernetes indexed Job can split one sweep over n machines; the pairs of the
//!   n shards are disjoint and together are the whole sweep.
//! - **Judged against expectations.** A run passes when it ends the way its scenario says it
//!   must (`expect`): canaries and planted bugs pass by failing.
//! - **Grouped.** Runs not as expected are grouped by failure [`signature`], each group with its
//!   count, first run and reproduce line; a known-failures file marks the groups that are not new.
//! - **Written down.** `summary.json` and `junit.xml` in the output folder list every run, and
//!   for each failure its first problem, signature and the command that reproduces it.
//! - **Mergeable.** [`merge::merge`] joins the n shards' folders into one.
//!
//! Files: this one (shards, the run queue, the summary and JUnit), `process.rs` (one run in its
//! process: budget, classification, determinism re-run), `signature.rs`, `merge.rs`,
//! `nightly.rs` (the nightly definition every launcher reads).

pub mod merge;
pub mod nightly;
pub mod process;
pub mod signature;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::scenario::Scenario;
use crate::sync::Locked;
use process::RunSettings;
use qs_reports::schema::KnownFailures;

/// Most runs one sweep may hold (scenarios × seeds after sharding).
pub const RUNS_MAX: u64 = 10_000_000;

/// Which part of the sweep this invocation runs: shard `index` (1-based) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parsed = s.split_once('/').and_then(|(i, n)| Some((i.parse::<u64>().ok()?, n.parse::<u64>().ok()?)));
        match parsed {
            Some((index, count)) if count >= 1 && (1..=count).contains(&index) => Ok(Shard { index, count }),
            _ => Err(format!("shard {s:?} must be i/n with 1 <= i <= n, e.g. 2/8")),
        }
    }
}

/// A seed range `A..B` (B excluded) or `A..=B`.
pub fn parse_seeds(s: &str) -> Result<std::ops::Range<u64>, String> {
    let bad = || format!("seeds {s:?} must be A..B (B excluded) or A..=B, e.g. 1..1000");
    if let Some((a, b)) = s.split_once("..=") {
        let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        return if a <= b { Ok(a..b + 1) } else { Err(bad()) };
    }
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a < b { Ok(a..b) } else { Err(bad()) }
}

pub use qs_reports::schema::{RunResult, SweepSummary};

/// The (scenario index, seed) pairs of `shard`: every `count`-th pair of the whole sweep
/// (scenario-major), starting at the `index`-th.
pub fn shard_pairs(scenarios: usize, seeds: std::ops::Range<u64>, shard: Shard) -> Vec<(usize, u64)> {
    let mut pairs = Vec::new();
    let mut position: u64 = 0;
    for scenario in 0..scenarios {
        for seed in seeds.clone() {
            if position % shard.count == shard.index - 1 {
                pairs.push((scenario, seed));
            }
            position += 1;
        }
    }
    pairs
}

/// Runs every (scenario, seed) pair of this shard with `jobs` runs at a time.
pub fn sweep(
    scenarios: &[Scenario],
    seeds: std::ops::Range<u64>,
    shard: Shard,
    jobs: usize,
    settings: &RunSettings,
    out: &Path,
) -> Vec<RunResult> {
    let pairs: VecDeque<(usize, u64)> = shard_pairs(scenarios.len(), seeds, shard).into();
    let total = pairs.len() as u64;
    let progress = indicatif::ProgressBar::new(total).with_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs, {msg} (eta {eta})")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    progress.set_message("0 failed");
    // indicatif draws nothing when stderr is not a terminal (a CI log, a pod's log): there,
    // a plain line at every tenth of the runs and at least once a minute.
    let plain = (!std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| Mutex::new(PlainProgress::new(total)));
    let exe = std::env::current_exe().expect("the path of this qsim");
    let queue = Arc::new(Mutex::new(pairs));
    let results: Arc<Mutex<Vec<RunResult>>> = Arc::default();
    let failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let next = queue.locked().pop_front();
                    let Some((i, seed)) = next else { return };
                    let result = process::run_one(&exe, settings, &scenarios[i], seed, out);
                    if !result.ok {
                        let n = failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        progress.set_message(format!("{n} failed"));
                        progress.suspend(|| {
                            eprintln!(
                                "qsim sweep: {} seed {}: {} ({}) — {}",
                                result.scenario,
                                seed,
                                result.outcome,
                                result.first_problem.as_deref().unwrap_or("see its output"),
                                result.reproduce
                            )
                        });
                    }
                    results.locked().push(result);
                    progress.inc(1);
                    if let Some(plain) = &plain {
                        let failed = failed.load(std::sync::atomic::Ordering::Relaxed);
                        plain.locked().done_one(failed);
                    }
                }
            });
        }
    });
    progress.finish();
    let mut results = Arc::try_unwrap(results).map(crate::sync::into_inner).unwrap_or_default();
    results.sort_by(|a, b| (&a.scenario, a.seed).cmp(&(&b.scenario, b.seed)));
    results
}

/// Progress as plain lines, for logs: at every tenth of the runs and at least once a minute.
struct PlainProgress {
    total: u64,
    done: u64,
    started: std::time::Instant,
    last_line: std::time::Instant,
}

impl PlainProgress {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(60);

    fn new(total: u64) -> PlainProgress {
        let now = std::time::Instant::now();
        PlainProgress { total, done: 0, started: now, last_line: now }
    }

    fn done_one(&mut self, failed: u64) {
        self.done += 1;
        let tenth = (self.total / 10).max(1);
        if self.done.is_multiple_of(tenth) || self.done == self.total || self.last_line.elapsed() >= Self::EVERY {
            self.last_line = std::time::Instant::now();
            let elapsed = self.started.elapsed();
            let eta = elapsed.mul_f64((self.total - self.done) as f64 / self.done as f64);
            eprintln!(
                "qsim sweep: {}/{} runs, {failed} not as expected, {} elapsed, about {} to go",
                self.done,
                self.total,
                humantime_serde::re::humantime::format_duration(std::time::Duration::from_secs(elapsed.as_secs())),
                humantime_serde::re::humantime::format_duration(std::time::Duration::from_secs(eta.as_secs()))
            );
        }
    }
}

/// Writes `summary.json` and `junit.xml` into `out`.
/// Failure groups are marked known by `known`. Returns the summary written.
pub fn write_reports(
    results: &[RunResult],
    seeds: &std::ops::Range<u64>,
    shard: Shard,
    known: &KnownFailures,
    out: &Path,
) -> std::io::Result<SweepSummary> {
    let mut summary = SweepSummary {
        seeds: format!("{}..{}", seeds.start, seeds.end),
        shard: format!("{}/{}", shard.index, shard.count),
        runs: results.len() as u64,
        failed: results.iter().filter(|r| !r.ok).count() as u64,
        results: results.to_vec(),
        groups: Vec::new(),
        night: None,
    };
    summary.regroup(known);
    write_summary(&summary, out)?;
    Ok(summary)
}

/// Writes `summary.json` and `junit.xml` of `summary` into `out`.
pub(crate) fn write_summary(summary: &SweepSummary, out: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let results = &summary.results;
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(summary).expect("serializes"))?;

    let mut report = quick_junit::Report::new("qsim sweep");
    let mut names: Vec<&str> = results.iter().map(|r| r.scenario.as_str()).collect();
    names.dedup();
    for name in names {
        let mut suite = quick_junit::TestSuite::new(name);
        for result in results.iter().filter(|r| r.scenario == name) {
            let status = if result.ok {
                quick_junit::TestCaseStatus::success()
            } else {
                let mut status = quick_junit::TestCaseStatus::non_success(quick_junit::NonSuccessKind::Failure);
                status.set_message(format!("{} (expected {})", result.outcome, result.expected));
                status.set_description(format!(
                    "{}\nsignature: {}\nreproduce: {}",
                    result.first_problem.as_deref().unwrap_or("no detail"),
                    result.signature.as_deref().unwrap_or(result.outcome.as_str()),
                    result.reproduce
                ));
                status
            };
            suite.add_test_case(quick_junit::TestCase::new(format!("seed {}", result.seed), status));
        }
        report.add_test_suite(suite);
    }
    let xml = report.to_string().map_err(std::io::Error::other)?;
    std::fs::write(out.join("junit.xml"), xml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seed_ranges_and_shards() {
        assert_eq!(parse_seeds("1..4").unwrap(), 1..4);
        assert_eq!(parse_seeds("1..=4").unwrap(), 1..5);
        assert!(parse_seeds("4..1").is_err());
        assert!(parse_seeds("x").is_err());
        assert_eq!("2/8".parse::<Shard>().unwrap(), Shard { index: 2, count: 8 });
        assert!("0/8".parse::<Shard>().is_err());
        assert!("9/8".parse::<Shard>().is_err());
    }

    #[test]
    fn shards_are_disjoint_and_together_cover_the_sweep() {
        let whole = shard_pairs(3, 10..17, Shard { index: 1, count: 1 });
        assert_eq!(whole.len(), 21);
        let mut union: Vec<(usize, u64)> =
            (1..=4).flat_map(|i| shard_pairs(3, 10..17, Shard { index: i, count: 4 })).collect();
        union.sort_unstable();
        assert_eq!(union, whole, "shards overlap or miss pairs");
    }
}
