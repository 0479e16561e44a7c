//! `qsim merge`: the n shards of one sweep joined into one folder.
//!
//! Guarantees: a merged sweep is the whole sweep or nothing — shards of different sweeps, a
//! shard given twice, a run found in two shards, a missing shard, or runs of two builds are
//! refused, naming what is wrong; the shard folders are left as they were; the failure groups are
//! recomputed over every run, so a group split across shards is counted once.
//!
//! The merged summary is stamped as a night ([`Night`]): its date and the one build its runs ran
//! on, which `qsim history` orders and labels nights by. A run's engine and build come from its
//! shard's result, or, for a shard written before results carried them, from the run's own
//! `summary.json`.

use std::path::Path;

use super::{Shard, write_summary};
use qs_reports::schema::{KnownFailures, Night, RunResult, SweepSummary};

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
    #[error(
        "{first_run} ran on {first} and {other_run} on {other}: one night's runs are one build's (were the shards built from different commits?)"
    )]
    TwoBuilds { first: String, first_run: String, other: String, other_run: String },
}

/// A night's date: `YYYY-MM-DD`, a real day of the calendar, else what is wrong.
pub fn night_date(text: &str) -> Result<String, String> {
    let shaped = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    if shaped && humantime::parse_rfc3339(&format!("{text}T00:00:00Z")).is_ok() {
        Ok(text.to_string())
    } else {
        Err(format!("date {text:?} is not a day written YYYY-MM-DD"))
    }
}

/// Today's date in UTC, `YYYY-MM-DD`: a merge's night when none is given. (Wall-clock time is
/// fine here: a merge runs outside every simulation, and only labels the night.)
pub fn today() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10].to_string()
}

/// Joins the folders of the n shards of one sweep into `out`: every run folder copied (hard
/// links where the file system allows), `summary.json` and `junit.xml` over every run in
/// (scenario, seed) order, stamped as the night of `date` (`YYYY-MM-DD`, see [`night_date`]).
/// The shard folders are left as they were. Returns the merged summary.
#[expect(
    clippy::too_many_lines,
    reason = "98 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn merge(
    shards: &[std::path::PathBuf],
    out: &Path,
    known: &KnownFailures,
    date: &str,
) -> Result<SweepSummary, MergeError> {
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
            let mut result = RunResult { out: to, ..result.clone() };
            if result.engine.is_none() || result.build.is_none() {
                // A shard from before results carried them: the run's own summary says.
                if let Some(summary) = super::process::read_summary(&result.out) {
                    result.engine.get_or_insert(summary.engine);
                    result.build.get_or_insert(summary.build);
                }
            }
            results.push(result);
        }
    }
    results.sort_by(|a, b| (&a.scenario, a.seed).cmp(&(&b.scenario, b.seed)));
    let mut build: Option<&RunResult> = None;
    for result in results.iter().filter(|r| r.build.is_some()) {
        match build {
            Some(first) if first.build != result.build => {
                let run = |r: &RunResult| format!("{} seed {}", r.scenario, r.seed);
                return Err(MergeError::TwoBuilds {
                    first: first.build.clone().unwrap_or_default(),
                    first_run: run(first),
                    other: result.build.clone().unwrap_or_default(),
                    other_run: run(result),
                });
            }
            Some(_) => {}
            None => build = Some(result),
        }
    }
    let night = Night {
        date: date.to_string(),
        build: build.and_then(|r| r.build.clone()),
        merged_at: Some(humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()),
    };
    let mut merged = SweepSummary {
        seeds: loaded[0].2.seeds.clone(),
        shard: format!("{count} shards merged"),
        runs: results.len() as u64,
        failed: results.iter().filter(|r| !r.ok).count() as u64,
        results,
        groups: Vec::new(),
        night: Some(night),
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
        built_shard(root, name, seeds, shard, runs, "qsim 0.1.0 (0123456789ab)")
    }

    fn built_shard(
        root: &Path,
        name: &str,
        seeds: &str,
        shard: &str,
        runs: &[(&str, u64)],
        build: &str,
    ) -> std::path::PathBuf {
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
                propagation_p99_ms: None,
                signature: None,
                wall_ms: 0,
                determinism_checked: false,
                probes: Vec::new(),
                engine: Some("memory".into()),
                build: Some(build.into()),
            })
            .collect::<Vec<_>>();
        let summary = SweepSummary {
            seeds: seeds.into(),
            shard: shard.into(),
            runs: results.len() as u64,
            failed: 0,
            results,
            groups: Vec::new(),
            night: None,
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
        let merged = merge(&[b.clone(), a.clone()], &out, &KnownFailures::default(), "2026-11-26").expect("two halves");
        assert_eq!(merged.results.iter().map(|r| r.seed).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(merged.results[0].out, out.join("q").join("seed-1"));
        let err = merge(&[a.clone(), other], &out, &KnownFailures::default(), "2026-11-26").unwrap_err().to_string();
        assert!(err.contains("5..9") && err.contains("1..3"), "{err}");
        let err =
            merge(std::slice::from_ref(&b), &out, &KnownFailures::default(), "2026-11-26").unwrap_err().to_string();
        assert!(err.contains("shard 1 of 2 is missing"), "{err}");
        let err = merge(&[a, doubled], &out, &KnownFailures::default(), "2026-11-26").unwrap_err().to_string();
        assert!(err.contains("q seed 1 is in two shards"), "{err}");
    }

    #[test]
    fn a_merged_sweep_is_stamped_as_a_night_of_one_build() {
        let root = tempfile::tempdir().unwrap();
        let a = shard_folder(root.path(), "a", "1..3", "1/2", &[("q", 1)]);
        let b = shard_folder(root.path(), "b", "1..3", "2/2", &[("q", 2)]);
        let out = root.path().join("merged");
        let merged = merge(&[a.clone(), b], &out, &KnownFailures::default(), "2026-11-26").unwrap();
        let night = merged.night.as_ref().expect("stamped");
        assert_eq!((night.date.as_str(), night.commit()), ("2026-11-26", "0123456789ab"));
        let reread = qs_reports::load::sweep_summary(&out).unwrap();
        assert_eq!(reread.night, merged.night, "the stamp is in summary.json");

        let other = built_shard(root.path(), "other", "1..3", "2/2", &[("q", 2)], "qsim 0.1.0 (ba9876543210)");
        let err = merge(&[a, other], &out, &KnownFailures::default(), "2026-11-26").unwrap_err().to_string();
        assert!(err.contains("0123456789ab") && err.contains("ba9876543210") && err.contains("q seed 2"), "{err}");
    }

    #[test]
    fn a_night_date_is_a_day_of_the_calendar() {
        assert_eq!(night_date("2026-02-28").unwrap(), "2026-02-28");
        for bad in ["2026-02-30", "2026-13-01", "26-11-26", "2026-11-26T00:00:00Z", "yesterday", ""] {
            let err = night_date(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")) && err.contains("YYYY-MM-DD"), "{err}");
        }
        assert!(night_date(&today()).is_ok(), "{}", today());
    }
}
