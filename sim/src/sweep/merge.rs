//! `qsim merge`: the n shards of one sweep joined into one folder.
//!
//! Guarantees: a merged sweep is the whole sweep or nothing — shards of different sweeps, a
//! shard given twice, a run found in two shards, or a missing shard are refused, naming what is
//! wrong; the shard folders are left as they were; the failure groups are recomputed over every
//! run, so a group split across shards is counted once.

use std::path::Path;

use super::{Shard, write_summary};
use qs_reports::schema::{KnownFailures, RunResult, SweepSummary};

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
pub fn merge(shards: &[std::path::PathBuf], out: &Path, known: &KnownFailures) -> Result<SweepSummary, MergeError> {
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
    let mut merged = SweepSummary {
        seeds: loaded[0].2.seeds.clone(),
        shard: format!("{count} shards merged"),
        runs: results.len() as u64,
        failed: results.iter().filter(|r| !r.ok).count() as u64,
        results,
        groups: Vec::new(),
    };
    merged.regroup(known);
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
    use qs_reports::schema::Outcome;

    fn shard_folder(root: &Path, name: &str, seeds: &str, shard: &str, runs: &[(&str, u64)]) -> std::path::PathBuf {
        let dir = root.join(name);
        let results = runs
            .iter()
            .map(|(scenario, seed)| RunResult {
                scenario: scenario.to_string(),
                path: format!("scenarios/{scenario}.toml").into(),
                seed: *seed,
                outcome: Outcome::Pass,
                expected: "pass".into(),
                ok: true,
                exit_code: Some(0),
                digest: None,
                first_problem: None,
                reproduce: format!("./qsim run scenarios/{scenario}.toml --seed {seed}"),
                out: dir.join(scenario).join(format!("seed-{seed}")),
                max_lag_ms: None,
                converged_after_ms: None,
                signature: None,
                wall_ms: 0,
                determinism_checked: false,
                probes: Vec::new(),
            })
            .collect::<Vec<_>>();
        let summary = SweepSummary {
            seeds: seeds.into(),
            shard: shard.into(),
            runs: results.len() as u64,
            failed: 0,
            results,
            groups: Vec::new(),
        };
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
        let merged = merge(&[b.clone(), a.clone()], &out, &KnownFailures::default()).expect("two halves");
        assert_eq!(merged.results.iter().map(|r| r.seed).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(merged.results[0].out, out.join("q").join("seed-1"));
        let err = merge(&[a.clone(), other], &out, &KnownFailures::default()).unwrap_err().to_string();
        assert!(err.contains("5..9") && err.contains("1..3"), "{err}");
        let err = merge(std::slice::from_ref(&b), &out, &KnownFailures::default()).unwrap_err().to_string();
        assert!(err.contains("shard 1 of 2 is missing"), "{err}");
        let err = merge(&[a, doubled], &out, &KnownFailures::default()).unwrap_err().to_string();
        assert!(err.contains("q seed 1 is in two shards"), "{err}");
    }
}
