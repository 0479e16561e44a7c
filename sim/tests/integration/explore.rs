//! `qsim explore` through the `qsim` binary (built with `--cfg madsim`): a small budget of a
//! small swarm scenario reports every probe's runs and hits and the probes never reached, its
//! `summary.json` says why each seed ran and reproduces each as an ordinary seed, and the seeds
//! chosen are the same whatever `--jobs`.
#![cfg(madsim)]

use std::collections::BTreeSet;
use std::path::Path;

use qs_reports::schema::Probe;
use qs_sim::explore::{Choice, ExploreSummary, Feature};

use crate::common::qsim_any as qsim;

fn summary(dir: &Path) -> ExploreSummary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("summary.json"))
        .expect("an exploration summary")
}

/// A swarm of five nodes for a minute: a mid tier of two, each edge following both mids, a
/// short retention, related groups on.
const SMALL_SWARM: &str = r#"
[scenario]
name = "small-swarm"
description = "A small swarm for the explore test."
duration = "60s"

[topology]
tiers = [{ name = "mid", count = 2 }, { name = "edge", count = 2, primaries = 1, secondaries = 1 }]

[node]
staleness_failover = "10s"
retention_entries = 20
snapshot_chunk_bytes = "4 KiB"

[[workload]]
kind = "writer"
rate_per_s = 5
keys = 50
value_bytes = { min = 10, max = 100 }

[[workload]]
kind = "reader"
rate_per_s = 5

[swarm]
kinds = ["kill", "pause", "partition", "latency", "sigbus", "bit_rot"]
count_min = 1
count_max = 4
duration_min = "2s"
duration_max = "10s"
writer_modes = true
buggify = true
related = true

[checks]
lag_max = "30s"
converge_within = "60s"
"#;

#[test]
fn explore_reports_every_probes_runs_and_hits_and_the_probes_never_reached_and_chooses_the_same_seeds_at_any_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("small-swarm.toml");
    std::fs::write(&scenario, SMALL_SWARM).unwrap();
    let scenario = scenario.display().to_string();
    let explore = |jobs: &str, out: &Path| {
        qsim(&[
            "explore",
            &scenario,
            "--runs",
            "6",
            "--jobs",
            jobs,
            "--start-seed",
            "3",
            "--out",
            &out.display().to_string(),
        ])
    };
    let out = dir.path().join("two-jobs");
    let (code, output) = explore("2", &out);
    let s = summary(&out);
    assert_eq!(code, if s.failed == 0 { 0 } else { 1 }, "{output}");
    assert_eq!(s.runs, 6, "{output}");
    assert_eq!(s.candidates, "3..259", "16 candidates a run, at least 256");

    // The report: a row per probe of the vocabulary with its runs and hits, and the never reached.
    for row in &s.probes {
        let line = format!("{:<34} {:>5} {:>9}", row.probe.name(), row.runs, row.hits);
        assert!(output.contains(&line), "no row {line:?}:\n{output}");
        let reached = s.results.iter().filter(|r| r.result.probes.iter().any(|h| h.probe == row.probe && h.hits > 0));
        assert_eq!(reached.count() as u64, row.runs, "{:?}", row.probe);
    }
    assert_eq!(s.probes.len(), Probe::ALL.len());
    assert!(s.probes.iter().any(|p| p.runs > 0), "{output}");
    // No writer quota and no memory model: these two are never reached, and named so.
    assert!(s.never_reached.contains(&Probe::QuotaRefused) && s.never_reached.contains(&Probe::FaultOom));
    let never = output.lines().find(|l| l.starts_with("never      reached by none of 6 runs: ")).expect(&output);
    assert!(never.contains("quota_refused") && never.contains("fault_oom"), "{never}");
    let failures = output.lines().filter(|l| l.starts_with("reproduce  ./qsim run ")).count();
    assert_eq!(failures as u64, s.failed, "{output}");

    // Every run an ordinary seed, none twice; the first round in order, then guided or random.
    let seeds: Vec<u64> = s.results.iter().map(|r| r.result.seed).collect();
    assert_eq!(seeds.iter().collect::<BTreeSet<_>>().len(), 6, "{seeds:?}");
    assert_eq!(seeds[..2], [3, 4], "the first round: a quarter of the budget, in seed order");
    for run in &s.results {
        assert_eq!(run.result.reproduce, format!("./qsim run {scenario} --seed {}", run.result.seed));
        assert!(run.features.iter().any(|f| matches!(f, Feature::Fault(_))), "{run:?}");
        assert_eq!(run.choice == Choice::First, run.round == 0, "{run:?}");
    }
    assert!(s.results[2..].iter().all(|r| matches!(r.choice, Choice::Guided { .. } | Choice::Random)));

    // One run at a time: the same seeds, in the same order, with the same outcomes.
    let again = dir.path().join("one-job");
    let (code_again, output_again) = explore("1", &again);
    let t = summary(&again);
    assert_eq!(code_again, code, "{output_again}");
    let chosen = |s: &ExploreSummary| {
        s.results.iter().map(|r| (r.result.seed, r.result.digest.clone(), r.choice.clone())).collect::<Vec<_>>()
    };
    assert_eq!(chosen(&t), chosen(&s));
}

#[test]
fn explore_refuses_a_scenario_that_draws_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out").display().to_string();
    let (code, output) = qsim(&["explore", "scenarios/quickstart.toml", "--runs", "3", "--out", &out]);
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("has no [swarm]"), "{output}");
    let (code, output) = qsim(&["explore", "scenarios/swarm.toml", "--runs", "0", "--out", &out]);
    assert_eq!(code, 2, "{output}");
}
