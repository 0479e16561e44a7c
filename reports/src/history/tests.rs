use std::path::PathBuf;

use super::*;
use crate::schema::{KnownFailures, ProbeHits, RunResult};

/// A run of `scenario` on `engine`: as expected unless `failure` names its signature.
fn run(scenario: &str, engine: &str, seed: u64, failure: Option<&str>, wall_ms: u64, probes: &[Probe]) -> RunResult {
    RunResult {
        scenario: scenario.into(),
        path: PathBuf::from(format!("scenarios/{scenario}.toml")),
        seed,
        outcome: if failure.is_some() { Outcome::Violation } else { Outcome::Pass },
        expected: "pass".into(),
        ok: failure.is_none(),
        exit_code: Some(i32::from(failure.is_some())),
        digest: None,
        first_problem: failure.map(str::to_string),
        reproduce: format!("./qsim run scenarios/{scenario}.toml --seed {seed} --engine {engine}"),
        out: PathBuf::from(format!("{scenario}/seed-{seed}")),
        max_lag_ms: None,
        converged_after_ms: None,
        propagation_p99_ms: None,
        signature: failure.map(str::to_string),
        wall_ms,
        determinism_checked: false,
        probes: probes.iter().map(|&probe| ProbeHits { probe, hits: 3 }).collect(),
        engine: Some(engine.into()),
        build: Some("qsim 0.1.0 (0123456789ab)".into()),
    }
}

fn night(folder: &str, date: &str, commit: &str, results: Vec<RunResult>) -> NightInput {
    let mut summary = SweepSummary {
        seeds: "1..5".into(),
        shard: "2 shards merged".into(),
        runs: results.len() as u64,
        failed: results.iter().filter(|r| !r.ok).count() as u64,
        results,
        groups: Vec::new(),
        night: Some(Night { date: date.into(), build: Some(format!("qsim 0.1.0 ({commit})")), merged_at: None }),
    };
    summary.regroup(&KnownFailures::default());
    NightInput { folder: folder.into(), night: summary.night.clone().unwrap(), summary }
}

const LAG: &str = "lag: <node> more than # s behind";
const CHAIN: &str = "chain: <node> hash differs at #";

/// Four nights: `LAG` fails on nights 1 and 3 and 4 (gone on night 2, then back); `CHAIN` only on
/// night 4; swarm on LMDB twice as slow on night 4; a probe reached until night 3.
fn four_nights() -> Vec<NightInput> {
    let quiet = |seed| run("swarm", "lmdb", seed, None, 1000, &[Probe::FaultKill]);
    vec![
        night(
            "01",
            "2026-11-20",
            "aaaa",
            vec![quiet(1), run("swarm", "lmdb", 2, Some(LAG), 1000, &[Probe::FaultKill, Probe::FaultPartition])],
        ),
        night(
            "02",
            "2026-11-21",
            "bbbb",
            vec![quiet(1), run("swarm", "lmdb", 2, None, 1000, &[Probe::FaultPartition])],
        ),
        night(
            "03",
            "2026-11-22",
            "cccc",
            vec![run("swarm", "lmdb", 1, Some(LAG), 1100, &[Probe::FaultPartition]), quiet(2)],
        ),
        night(
            "04",
            "2026-11-23",
            "dddd",
            vec![
                run("swarm", "lmdb", 1, Some(LAG), 2000, &[]),
                run("swarm", "lmdb", 2, Some(CHAIN), 2200, &[]),
                run("quickstart", "memory", 1, None, 10, &[Probe::FaultKill]),
            ],
        ),
    ]
}

#[test]
fn a_group_that_appears_disappears_and_returns_is_returned_with_its_first_and_last_nights() {
    let history = History::of(&four_nights());
    let lag = history.groups.iter().find(|g| g.signature == LAG).expect("LAG seen");
    assert_eq!(lag.runs, vec![1, 0, 1, 1]);
    assert_eq!((lag.first_seen, lag.last_seen, lag.status), (0, 3, GroupStatus::Returned));
    let chain = history.groups.iter().find(|g| g.signature == CHAIN).expect("CHAIN seen");
    assert_eq!((chain.first_seen, chain.status), (3, GroupStatus::New));
    assert_eq!(history.groups[0].signature, CHAIN, "new groups first");
    assert_eq!(history.nights.iter().map(|n| n.first_seen_groups).collect::<Vec<_>>(), vec![1, 0, 0, 1]);
    assert_eq!(history.nights[3].commit, "dddd");

    // The same nights cut before the return: gone since night 2; through night 3: returned.
    let two = History::of(&four_nights()[..2]);
    assert_eq!(two.groups[0].status, GroupStatus::Gone);
    assert!(
        two.headlines().iter().any(|l| l.starts_with("gone") && l.contains("2026-11-21 at bbbb")),
        "{:?}",
        two.headlines()
    );
    let three = History::of(&four_nights()[..3]);
    assert_eq!(three.groups[0].status, GroupStatus::Returned);
    // Failing on every night since it was first seen: ongoing.
    let mut steady = four_nights();
    steady.remove(1);
    assert_eq!(History::of(&steady).groups.iter().find(|g| g.signature == LAG).unwrap().status, GroupStatus::Ongoing);
}

#[test]
fn pairs_report_pass_rate_and_a_slower_latest_night_and_probes_no_longer_reached() {
    let history = History::of(&four_nights());
    let swarm = history.pairs.iter().find(|p| p.scenario == "swarm" && p.engine == "lmdb").unwrap();
    assert_eq!(swarm.nights[3], Some(PairNight { runs: 2, passed: 0, mean_wall_ms: 2100 }));
    assert_eq!(swarm.nights[0], Some(PairNight { runs: 2, passed: 1, mean_wall_ms: 1000 }));
    // Earlier means 1000, 1000, 1050: median 1000; latest 2100.
    assert!((swarm.wall_ratio.unwrap() - 2.1).abs() < 1e-9, "{:?}", swarm.wall_ratio);
    assert!(swarm.slower());
    let quickstart = history.pairs.iter().find(|p| p.scenario == "quickstart").unwrap();
    assert_eq!((quickstart.nights[0], quickstart.wall_ratio), (None, None), "first run on the latest night");

    let status = |probe| history.probes.iter().find(|p| p.probe == probe).unwrap().status();
    assert_eq!(status(Probe::FaultPartition), ProbeStatus::Stopped);
    assert_eq!(status(Probe::FaultKill), ProbeStatus::Reached);
    assert_eq!(history.probes.len(), Probe::ALL.len());

    let headlines = history.headlines();
    for expected in [
        "new        violation (1 runs): chain",
        "returned   violation",
        "slower     swarm on lmdb: 2.1x",
        "passes less swarm on lmdb: 0/2",
        "unreached  probe fault_partition",
    ] {
        assert!(headlines.iter().any(|l| l.starts_with(expected)), "{expected:?} not in {headlines:#?}");
    }
    assert!(
        !headlines.iter().any(|l| l.contains("quickstart")),
        "quickstart neither slower nor failing: {headlines:#?}"
    );
}

#[test]
fn nights_load_in_stamp_order_whatever_the_folders_are_called_and_unstamped_summaries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let write = |folder: &str, summary: &SweepSummary| {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        std::fs::write(dir.path().join(folder).join("summary.json"), serde_json::to_string(summary).unwrap()).unwrap();
    };
    let nights = four_nights();
    // Folder names sort against the dates: the stamp decides. One night is kept gzipped.
    for (folder, n) in ["z", "y", "x"].iter().zip(&nights) {
        write(folder, &n.summary);
    }
    std::fs::create_dir_all(dir.path().join("w")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.path().join("w").join("summary.json.gz")).unwrap(),
        flate2::Compression::default(),
    );
    std::io::Write::write_all(&mut gz, serde_json::to_string(&nights[3].summary).unwrap().as_bytes()).unwrap();
    gz.finish().unwrap();
    std::fs::create_dir_all(dir.path().join("page")).unwrap();
    let (loaded, skipped) = load_nights(dir.path()).unwrap();
    assert_eq!(loaded.iter().map(|n| n.folder.as_str()).collect::<Vec<_>>(), vec!["z", "y", "x", "w"]);
    assert_eq!(loaded[3].summary, nights[3].summary, "the gzipped night reads back whole");
    assert_eq!(skipped, vec!["page".to_string()]);

    let mut unstamped = nights[0].summary.clone();
    unstamped.night = None;
    write("v", &unstamped);
    let err = load_nights(dir.path()).unwrap_err().to_string();
    assert!(err.contains("v/summary.json") && err.contains("qsim merge --date"), "{err}");

    std::fs::write(dir.path().join("v").join("summary.json"), "{\"seeds\": ").unwrap();
    let err = load_nights(dir.path()).unwrap_err().to_string();
    assert!(err.contains("v/summary.json") && err.contains("line 1"), "{err}");

    std::fs::remove_dir_all(dir.path().join("v")).unwrap();
    std::fs::write(dir.path().join("w").join("summary.json.gz"), b"not gzip").unwrap();
    let err = load_nights(dir.path()).unwrap_err().to_string();
    assert!(err.contains("w/summary.json.gz"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    let err = load_nights(empty.path()).unwrap_err().to_string();
    assert!(err.contains("no nights"), "{err}");
}

#[test]
fn the_page_shows_every_night_group_pair_and_probe_escaped() {
    let mut nights = four_nights();
    nights[3].summary.results[1].signature = Some("<script>alert(1)</script>".into());
    nights[3].summary.regroup(&KnownFailures::default());
    let history = History::of(&nights);
    let html = page::render_history(&history);
    assert!(!html.contains("<script>"), "a signature is text, never markup");
    assert!(html.contains("&lt;script&gt;"));
    assert!(html.contains("data-status=\"returned\"") && html.contains("data-status=\"new\""));
    assert!(html.contains("data-slower=\"true\"") && html.contains("data-status=\"stopped\""));
    assert!(html.contains("id=\"chart-failed\"") && html.contains("<svg"), "the charts are drawn");
    let dir = tempfile::tempdir().unwrap();
    let path = write_history(&history, dir.path()).unwrap();
    assert_eq!(path, dir.path().join("index.html"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("history.json")).unwrap()).unwrap();
    assert_eq!(json["nights"].as_array().unwrap().len(), 4);
    assert_eq!(json["groups"][1]["status"], "returned");
}

#[test]
fn two_nights_of_one_date_are_ordered_by_when_they_were_merged() {
    let dir = tempfile::tempdir().unwrap();
    let nights = four_nights();
    // "a" and "b" on one date, "a" merged later: "b" comes first.
    for (folder, i, at) in [("a", 0, "2026-11-20T23:00:00Z"), ("b", 1, "2026-11-20T01:00:00Z")] {
        let mut summary = nights[i].summary.clone();
        let night = summary.night.as_mut().unwrap();
        night.date = "2026-11-20".into();
        night.merged_at = Some(at.into());
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        std::fs::write(dir.path().join(folder).join("summary.json"), serde_json::to_string(&summary).unwrap()).unwrap();
    }
    let (loaded, _) = load_nights(dir.path()).unwrap();
    assert_eq!(loaded.iter().map(|n| n.folder.as_str()).collect::<Vec<_>>(), vec!["b", "a"]);
}
