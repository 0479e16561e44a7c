//! `qsim sweep`: many scenarios × seeds, each run in its own `qsim run` process.
//!
//! Guarantees:
//! - **One process per run.** A seed's result never depends on which runs came before it in
//!   the same process (lazily-initialised globals would shift the simulator's random stream),
//!   and a run that panics, aborts or is killed is recorded as a crash without stopping the
//!   sweep.
//! - **Shardable.** `--shard i/n` keeps every n-th (scenario, seed) pair starting at the i-th, so
//!   a CI matrix or a Kubernetes indexed Job can split one sweep over n machines; the pairs of the
//!   n shards are disjoint and together are the whole sweep.
//! - **Judged against expectations.** A run passes when it ends the way its scenario says it
//!   must (`expect`): canaries and planted bugs pass by failing.
//! - **Written down.** `summary.json` and `junit.xml` in the output folder list every run, and
//!   for each failure its first violation and the command that reproduces it.
//! - **Mergeable.** [`merge`] joins the n shards' folders into one, and refuses (naming what is
//!   wrong) shards of different sweeps, a shard given twice, a run found in two shards, or a
//!   missing shard: a merged sweep is the whole sweep or nothing.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::exit;
use crate::scenario::Scenario;

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

fn outcome_name(code: Option<i32>) -> &'static str {
    match code.and_then(|c| u8::try_from(c).ok()) {
        Some(exit::PASS) => "pass",
        Some(exit::VIOLATION) => "violation",
        Some(exit::LIVENESS) => "liveness",
        Some(exit::NONDETERMINISM) => "nondeterminism",
        Some(exit::USAGE) | Some(exit::NOT_SIMULATOR) => "error",
        _ => "crash", // exit 4, a signal, or anything unexpected
    }
}

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
    let exe = std::env::current_exe().expect("the path of this qsim");
    let queue = Arc::new(Mutex::new(pairs));
    let results: Arc<Mutex<Vec<RunResult>>> = Arc::default();
    let failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                    let Some((i, seed)) = next else { return };
                    let result = run_one(&exe, &scenarios[i], seed, out);
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
                    results.lock().unwrap_or_else(|p| p.into_inner()).push(result);
                    progress.inc(1);
                }
            });
        }
    });
    progress.finish();
    let mut results =
        Arc::try_unwrap(results).map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner())).unwrap_or_default();
    results.sort_by(|a, b| (&a.scenario, a.seed).cmp(&(&b.scenario, b.seed)));
    results
}

fn run_one(exe: &Path, scenario: &Scenario, seed: u64, out: &Path) -> RunResult {
    let dir = scenario.out_dir(out, seed);
    let reproduce = scenario.reproduce(seed);
    let _ = std::fs::create_dir_all(&dir);
    let output =
        Command::new(exe).arg("run").args(scenario.run_args(seed)).args(["--no-report", "--out"]).arg(&dir).output();
    let (code, stdout) = match output {
        Ok(output) => {
            let _ = std::fs::write(dir.join("stdout.txt"), &output.stdout);
            let _ = std::fs::write(dir.join("stderr.txt"), &output.stderr);
            (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
        }
        Err(e) => (None, format!("could not start qsim: {e}")),
    };
    let summary: Option<qs_reports::schema::RunSummary> =
        std::fs::read(dir.join("summary.json")).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let first_problem = summary
        .as_ref()
        .and_then(|s| {
            s.verdicts
                .iter()
                .find(|v| v.status != "pass")
                .and_then(|v| v.first.clone().map(|f| format!("{}: {f}", v.checker)))
        })
        .or_else(|| stdout.lines().find(|l| l.contains("CRASH") || l.contains("FAIL")).map(str::to_string));
    let outcome = outcome_name(code);
    let expected = scenario.scenario.expect;
    RunResult {
        scenario: scenario.run_name(),
        path: scenario.path.clone(),
        seed,
        outcome: outcome.to_string(),
        expected: serde_json::to_value(expected).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        ok: code == Some(i32::from(expected.exit_code())),
        exit_code: code,
        digest: summary.as_ref().map(|s| s.digest.clone()),
        max_lag_ms: summary.as_ref().and_then(|s| s.max_lag_ms),
        converged_after_ms: summary.as_ref().and_then(|s| s.converged_after_ms),
        first_problem,
        reproduce,
        out: dir,
    }
}

/// Writes `summary.json` and `junit.xml` into `out`.
pub fn write_reports(
    results: &[RunResult],
    seeds: &std::ops::Range<u64>,
    shard: Shard,
    out: &Path,
) -> std::io::Result<()> {
    let summary = SweepSummary {
        seeds: format!("{}..{}", seeds.start, seeds.end),
        shard: format!("{}/{}", shard.index, shard.count),
        runs: results.len() as u64,
        failed: results.iter().filter(|r| !r.ok).count() as u64,
        results: results.to_vec(),
    };
    write_summary(&summary, out)
}

/// Writes `summary.json` and `junit.xml` of `summary` into `out`.
fn write_summary(summary: &SweepSummary, out: &Path) -> std::io::Result<()> {
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
                    "{}\nreproduce: {}",
                    result.first_problem.as_deref().unwrap_or("no detail"),
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

/// Why shard folders could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{0}")]
    Shard(#[from] qs_reports::ReportError),
    #[error("{dir}: shard {shard:?} is not i/n")]
    BadShard { dir: String, shard: String },
    #[error(
        "{dir} is a shard of the sweep over seeds {found} (/{found_count}); {first} is one over seeds {expected} (/{expected_count})"
    )]
    OtherSweep { dir: String, found: String, found_count: u64, first: String, expected: String, expected_count: u64 },
    #[error("{dir} and {other} are both shard {shard}")]
    ShardTwice { dir: String, other: String, shard: String },
    #[error("shard {missing} of {count} is missing (given: {given}); a merged sweep must hold every shard")]
    ShardMissing { missing: String, count: u64, given: String },
    #[error("{scenario} seed {seed} is in two shards; were they cut from different scenario lists?")]
    RunTwice { scenario: String, seed: u64 },
    #[error("copying {from} to {to}: {source}")]
    Copy { from: String, to: String, source: std::io::Error },
    #[error("writing into {dir}: {source}")]
    Write { dir: String, source: std::io::Error },
}

/// Joins the folders of the n shards of one sweep into `out`: every run folder copied (hard
/// links where the file system allows), `summary.json` and `junit.xml` over every run in
/// (scenario, seed) order. The shard folders are left as they were. Returns the merged summary.
pub fn merge(shards: &[std::path::PathBuf], out: &Path) -> Result<SweepSummary, MergeError> {
    let mut loaded: Vec<(String, Shard, SweepSummary)> = Vec::new();
    for dir in shards {
        let shown = dir.display().to_string();
        let summary = qs_reports::load::sweep_summary(dir)?;
        let shard: Shard = summary
            .shard
            .parse()
            .map_err(|_| MergeError::BadShard { dir: shown.clone(), shard: summary.shard.clone() })?;
        if let Some((first, first_shard, first_summary)) = loaded.first()
            && (first_summary.seeds != summary.seeds || first_shard.count != shard.count)
        {
            return Err(MergeError::OtherSweep {
                dir: shown,
                found: summary.seeds.clone(),
                found_count: shard.count,
                first: first.clone(),
                expected: first_summary.seeds.clone(),
                expected_count: first_shard.count,
            });
        }
        if let Some((other, _, _)) = loaded.iter().find(|(_, s, _)| s.index == shard.index) {
            return Err(MergeError::ShardTwice {
                dir: shown,
                other: other.clone(),
                shard: format!("{}/{}", shard.index, shard.count),
            });
        }
        loaded.push((shown, shard, summary));
    }
    let count = loaded.first().map_or(0, |(_, s, _)| s.count);
    let missing: Vec<String> =
        (1..=count).filter(|i| !loaded.iter().any(|(_, s, _)| s.index == *i)).map(|i| i.to_string()).collect();
    if !missing.is_empty() {
        let mut given: Vec<u64> = loaded.iter().map(|(_, s, _)| s.index).collect();
        given.sort_unstable();
        let given = given.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        return Err(MergeError::ShardMissing { missing: missing.join(", "), count, given });
    }
    let mut results = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for ((_, _, summary), dir) in loaded.iter().zip(shards) {
        for result in &summary.results {
            if !seen.insert((result.scenario.clone(), result.seed)) {
                return Err(MergeError::RunTwice { scenario: result.scenario.clone(), seed: result.seed });
            }
            let folder = qs_reports::sweep::run_folder(result);
            let (from, to) = (dir.join(&folder), out.join(&folder));
            if from.is_dir() {
                copy_tree(&from, &to).map_err(|source| MergeError::Copy {
                    from: from.display().to_string(),
                    to: to.display().to_string(),
                    source,
                })?;
            }
            results.push(RunResult { out: to, ..result.clone() });
        }
    }
    results.sort_by(|a, b| (&a.scenario, a.seed).cmp(&(&b.scenario, b.seed)));
    let merged = SweepSummary {
        seeds: loaded[0].2.seeds.clone(),
        shard: format!("{count} shards merged"),
        runs: results.len() as u64,
        failed: results.iter().filter(|r| !r.ok).count() as u64,
        results,
    };
    write_summary(&merged, out).map_err(|source| MergeError::Write { dir: out.display().to_string(), source })?;
    Ok(merged)
}

/// Copies the files of `from` (a run folder: files and one level of folders) into `to`,
/// hard-linking where it can.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let mut entries: Vec<_> = std::fs::read_dir(from)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            let _ = std::fs::remove_file(&target);
            if std::fs::hard_link(&source, &target).is_err() {
                std::fs::copy(&source, &target)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard_folder(root: &Path, name: &str, seeds: &str, shard: &str, runs: &[(&str, u64)]) -> std::path::PathBuf {
        let dir = root.join(name);
        let results = runs
            .iter()
            .map(|(scenario, seed)| RunResult {
                scenario: scenario.to_string(),
                path: format!("scenarios/{scenario}.toml").into(),
                seed: *seed,
                outcome: "pass".into(),
                expected: "pass".into(),
                ok: true,
                exit_code: Some(0),
                digest: None,
                first_problem: None,
                reproduce: format!("./qsim run scenarios/{scenario}.toml --seed {seed}"),
                out: dir.join(scenario).join(format!("seed-{seed}")),
                max_lag_ms: None,
                converged_after_ms: None,
            })
            .collect::<Vec<_>>();
        let summary =
            SweepSummary { seeds: seeds.into(), shard: shard.into(), runs: results.len() as u64, failed: 0, results };
        write_summary(&summary, &dir).unwrap();
        dir
    }

    #[test]
    fn merging_refuses_shards_that_do_not_make_one_sweep() {
        let root = tempfile::tempdir().unwrap();
        let a = shard_folder(root.path(), "a", "1..3", "1/2", &[("q", 1)]);
        let b = shard_folder(root.path(), "b", "1..3", "2/2", &[("q", 2)]);
        let other = shard_folder(root.path(), "other", "5..9", "2/2", &[("q", 6)]);
        let doubled = shard_folder(root.path(), "doubled", "1..3", "2/2", &[("q", 1)]);
        let out = root.path().join("merged");
        let merged = merge(&[b.clone(), a.clone()], &out).expect("two halves");
        assert_eq!(merged.results.iter().map(|r| r.seed).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(merged.results[0].out, out.join("q").join("seed-1"));
        let err = merge(&[a.clone(), other], &out).unwrap_err().to_string();
        assert!(err.contains("5..9") && err.contains("1..3"), "{err}");
        let err = merge(std::slice::from_ref(&b), &out).unwrap_err().to_string();
        assert!(err.contains("shard 1 of 2 is missing"), "{err}");
        let err = merge(&[a, doubled], &out).unwrap_err().to_string();
        assert!(err.contains("q seed 1 is in two shards"), "{err}");
    }

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
