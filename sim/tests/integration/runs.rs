//! Whole runs of the `qsim` binary (built with `--cfg madsim`): scenarios × seeds pass and are
//! deterministic across processes, on the memory engine, LMDB and RocksDB; every fault family passes
//! on the fixed node; every planted bug is caught by the checker it should be; the canary fails
//! the way it says it must; bad scenarios are refused with exit 2; the HTML reports of real runs
//! and of a sweep hold what they promise.
#![cfg(madsim)]

use std::path::Path;
use std::process::Command;

use qs_reports::schema::Checker;

use crate::common::{failed_naming, passed, qsim};

fn digest(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("trace"))
        .and_then(|l| l.split("digest ").nth(1))
        .unwrap_or("")
        .to_string()
}

#[test]
fn scenarios_pass_and_every_seed_is_deterministic_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    for seed in ["1", "2"] {
        let (code, stdout) =
            qsim(&["run", "scenarios/quickstart.toml", "--seed", seed, "--check-determinism"], dir.path());
        assert_eq!(code, 0, "{stdout}");
        assert!(stdout.contains("determinism pass"), "{stdout}");
        assert!(!digest(&stdout).is_empty(), "{stdout}");
    }
    // Swarm: the faults are drawn from the seed, and the run is still one function of it.
    let (code, stdout) = qsim(&["run", "scenarios/swarm.toml", "--seed", "5", "--check-determinism"], dir.path());
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("(swarm: drawn from the seed)") && stdout.contains("determinism pass"), "{stdout}");
    let (_, one) = qsim(&["run", "scenarios/quickstart.toml", "--seed", "1"], dir.path());
    let (_, two) = qsim(&["run", "scenarios/quickstart.toml", "--seed", "2"], dir.path());
    assert_ne!(digest(&one), digest(&two), "different seeds should make different runs");
}

#[test]
fn the_canary_fails_with_a_liveness_failure_and_a_reproduce_command() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = qsim(&["run", "scenarios/canary-liveness.toml", "--seed", "1"], dir.path());
    assert_eq!(code, 3, "{stdout}");
    assert!(failed_naming(dir.path(), Checker::Convergence, &["edge-1"]), "{stdout}");
    assert!(stdout.contains("reproduce  ./qsim run scenarios/canary-liveness.toml --seed 1"), "{stdout}");
}

#[test]
fn a_bad_scenario_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[scenario]\nname = \"x\"\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_qsim")).args(["run"]).arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("bad.toml"));
    // An engine that is not one: refused by the command line, before anything loads or runs,
    // naming the value, the flag and the engines there are.
    for command in ["run", "sweep", "shrink"] {
        let mut args = vec![command, "scenarios/quickstart.toml", "--engine", "leveldb"];
        if command == "sweep" {
            args.extend(["--seeds", "1..2"]);
        }
        let output =
            Command::new(env!("CARGO_BIN_EXE_qsim")).args(&args).arg("--out").arg(dir.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        for part in ["leveldb", "--engine", "memory, lmdb, rocksdb"] {
            assert!(stderr.contains(part), "{command}: no {part:?} in {stderr}");
        }
    }
}

#[test]
fn a_sweep_judges_runs_against_expectations_and_writes_junit() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sweep = |shard: &str, out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_qsim"))
            .current_dir(&root)
            .args(["sweep", "scenarios/quickstart.toml", "scenarios/canary-liveness.toml", "--seeds", "1..3"])
            .args(["--jobs", "2", "--shard", shard, "--out"])
            .arg(out)
            .output()
            .unwrap()
    };
    let whole = sweep("1/1", &dir.path().join("whole"));
    let stdout = String::from_utf8_lossy(&whole.stdout);
    assert_eq!(whole.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("canary-liveness") && stdout.contains("2/2 as expected"), "{stdout}");
    let junit = std::fs::read_to_string(dir.path().join("whole/junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase").count(), 4, "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");
    // Half the runs on shard 2 of 2.
    let half = sweep("2/2", &dir.path().join("half"));
    assert!(String::from_utf8_lossy(&half.stdout).contains(": 2 runs"), "{}", String::from_utf8_lossy(&half.stdout));
    // The two halves merge into the whole; a missing or doubled shard is refused.
    let first = sweep("1/2", &dir.path().join("first"));
    assert_eq!(first.status.code(), Some(0));
    let (first, half) = (dir.path().join("first"), dir.path().join("half"));
    let (code, stdout) = qsim(&["merge", first.to_str().unwrap(), half.to_str().unwrap()], &dir.path().join("merged"));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("4 runs, 0 not as expected"), "{stdout}");
    let merged = std::fs::read_to_string(dir.path().join("merged/junit.xml")).unwrap();
    assert_eq!(merged.matches("<testcase").count(), 4, "{merged}");
    let report = std::fs::read_to_string(dir.path().join("merged/report.html")).unwrap();
    assert!(report.contains("canary-liveness/seed-1/report.html"), "the merged report lost the run links");
    assert!(dir.path().join("merged/quickstart/seed-2/trace.jsonl").is_file(), "run folders were not merged");
    let (code, _) = qsim(&["merge", half.to_str().unwrap()], &dir.path().join("partial"));
    assert_eq!(code, 2, "a merge without shard 1 of 2 must be refused");
    let (code, _) = qsim(&["merge", half.to_str().unwrap(), half.to_str().unwrap()], &dir.path().join("twice"));
    assert_eq!(code, 2, "a shard given twice must be refused");
}

#[test]
fn a_collected_log_is_bootstrapped_over_by_the_fixed_node_and_skipped_by_the_planted_bug() {
    let dir = tempfile::tempdir().unwrap();
    // Fixed: out of retention, then a snapshot bootstrap; every checker passes.
    let (code, stdout) = qsim(&["run", "scenarios/gc-gap.toml", "--seed", "1"], &dir.path().join("fixed"));
    assert_eq!(code, 0, "{stdout}");
    let trace = std::fs::read_to_string(dir.path().join("fixed/trace.jsonl")).unwrap();
    assert!(
        trace.contains(r#""event":"bootstrapped","#) && trace.contains(r#""node":"edge-1""#),
        "no bootstrap in the trace"
    );
    // Planted bug (serve nearest + no gap check): the sequence checker catches the skip.
    let (code, stdout) = qsim(&["run", "scenarios/bug-gc-skip.toml", "--seed", "1"], &dir.path().join("bug"));
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(&dir.path().join("bug"), Checker::Sequence, &["edge-1"]), "{stdout}");
}

#[test]
fn a_crash_with_the_legacy_rts_cursor_replays_and_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = qsim(&["run", "scenarios/bug-replay.toml", "--seed", "1"], dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(dir.path(), Checker::Sequence, &["edge-1"]), "{stdout}");
}

#[test]
fn a_deep_tree_rides_out_root_flaps_unless_replicas_stop_serving_downstream() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = qsim(&["run", "scenarios/cascade.toml", "--seed", "1"], &dir.path().join("fixed"));
    assert_eq!(code, 0, "{stdout}");
    // The tree goes dark layer by layer: one partition of the root moves nodes many hops below
    // it, which containment sees on every seed.
    let (code, stdout) = qsim(&["run", "scenarios/bug-cascade.toml", "--seed", "1"], &dir.path().join("bug"));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        failed_naming(&dir.path().join("bug"), Checker::Containment, &["hops below the partition of root"]),
        "{stdout}"
    );
    // Whether the uncapped, unjittered backoffs then keep a layer dark past the per-node lag
    // bound depends on how the layers' retries fall against the heal, so lag catches the slow
    // recovery on some seeds, not all (at c388634: seeds 3, 4 and 6 of 1-6): nodes whose
    // sources had a healthy path to the root stay stale. Seed 3 is one. (A change to the
    // simulator's scheduling, to the node's connection set-up or to its staleness rules
    // re-draws every seed's run; docs/scenarios.md's planted-bug table gives the rates.)
    let (code, stdout) = qsim(&["run", "scenarios/bug-cascade.toml", "--seed", "3"], &dir.path().join("slow"));
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(&dir.path().join("slow"), Checker::Lag, &["fault-free path upstream"]), "{stdout}");
}

#[test]
fn a_replica_that_drops_its_downstream_while_it_reconnects_is_caught_by_containment_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bug");
    let (code, stdout) = qsim(&["run", "scenarios/bug-drop-downstream.toml", "--seed", "1", "--no-report"], &out);
    assert_eq!(code, 1, "{stdout}");
    // With the capped, jittered backoff the tree recovers within every lag bound: only the
    // containment check sees one fault on the root move nodes far below it.
    assert!(passed(&out, Checker::Lag), "{stdout}");
    assert!(failed_naming(&out, Checker::Containment, &["hops below the partition of root", "root → t1-"]), "{stdout}");
}

fn trace(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("trace.jsonl")).expect("a trace")
}

/// `at_ms` of the first trace line containing every one of `needles`.
fn first_at_ms(trace: &str, needles: &[&str]) -> Option<u64> {
    let line = trace.lines().find(|line| needles.iter().all(|needle| line.contains(needle)))?;
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    event["at_ms"].as_u64()
}

#[test]
fn a_triggered_fault_still_under_way_when_the_safety_phase_ends_is_healed_with_the_others() {
    // interrupted-bootstrap's partition fires about 65 s in, in the middle of a transfer, and
    // lasts 15 s: with a 70 s safety phase it is under way when the liveness phase begins.
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scenarios/interrupted-bootstrap.toml")).unwrap();
    assert!(text.contains("duration = \"150s\""), "the scenario's safety phase changed: update this test");
    let scenario = dir.path().join("short.toml");
    std::fs::write(&scenario, text.replacen("duration = \"150s\"", "duration = \"70s\"", 1)).unwrap();
    let out = dir.path().join("run");
    let (code, stdout) = qsim(&["run", scenario.to_str().unwrap(), "--seed", "1", "--no-report"], &out);
    assert_eq!(code, 0, "{stdout}");
    let trace = trace(&out);
    let started = first_at_ms(&trace, &[r#""kind":"partition""#, r#""phase":"start""#]).expect("the partition fired");
    let liveness = first_at_ms(&trace, &[r#""phase":"liveness""#]).expect("a liveness phase");
    let ended = first_at_ms(&trace, &[r#""kind":"partition""#, r#""phase":"end""#]).expect("the partition ended");
    assert!(
        started < liveness && started + 15_000 > liveness,
        "the partition must straddle the phase change: {started} {liveness}"
    );
    assert!(ended <= liveness, "the partition ended at {ended} ms, after the liveness phase began at {liveness} ms");
}

#[test]
fn every_fault_family_passes_on_the_fixed_node() {
    let dir = tempfile::tempdir().unwrap();
    // (scenario, what its trace must show happened)
    let cases: [(&str, &[&str]); 5] = [
        ("slow-ssd", &[r#""kind":"slow_disk""#, r#""event":"disk_sample""#, r#""reason":"stale""#]),
        ("sigbus", &[r#""kind":"sigbus""#, r#""detail":"disk replaced""#, r#""event":"bootstrapped""#]),
        (
            "partitions",
            &[r#""kind":"partition_in""#, r#""kind":"partition_out""#, r#""kind":"split""#, r#""kind":"clog_link""#],
        ),
        ("slow-network", &[r#""kind":"latency""#, r#""kind":"loss""#]),
        ("processes", &[r#""kind":"pause""#, r#""kind":"kill""#, r#""node":"root","kind":"kill""#]),
    ];
    for (name, shows) in cases {
        let out = dir.path().join(name);
        let (code, stdout) = qsim(&["run", &format!("scenarios/{name}.toml"), "--seed", "1", "--no-report"], &out);
        assert_eq!(code, 0, "{name}: {stdout}");
        let trace = trace(&out);
        for needle in shows {
            assert!(trace.contains(needle), "{name}: the trace never shows {needle}");
        }
        // The readers read, and the reads checker judged them.
        assert!(trace.contains(r#""event":"read_sample""#), "{name}: no reads");
        assert!(passed(&out, Checker::Reads), "{name}: {stdout}");
        assert!(passed(&out, Checker::Containment), "{name}: {stdout}");
    }
}

#[test]
fn same_seed_same_trace_on_memory_and_on_lmdb() {
    let dir = tempfile::tempdir().unwrap();
    for (scenario, seed) in [
        ("scenarios/quickstart-lmdb.toml", "1"),
        ("scenarios/quickstart-lmdb.toml", "2"),
        ("scenarios/sigbus.toml", "1"),
        ("scenarios/partitions.toml", "2"),
    ] {
        let out = dir.path().join(format!("{}-{seed}", scenario.replace('/', "_")));
        let (code, stdout) = qsim(&["run", scenario, "--seed", seed, "--check-determinism", "--no-report"], &out);
        assert_eq!(code, 0, "{scenario} seed {seed}: {stdout}");
        assert!(stdout.contains("determinism pass"), "{stdout}");
    }
    // LMDB really ran: each node's environment is a directory of its own under the run's scratch
    // folder, and the end-of-run totals count the engine's bytes written.
    let lmdb = trace(&dir.path().join("scenarios_quickstart-lmdb.toml-1"));
    assert!(lmdb.contains(r#""event":"node_summary","#), "no node totals");
    assert!(!lmdb.contains(r#""engine_bytes_written":0"#), "an LMDB node wrote nothing");
}

/// The simulator runs LMDB with `MDB_WRITEMAP` unless a scenario sets `[node] lmdb_write_map =
/// false`. It is the same run either way: the trace is equal in every event, the bytes each
/// node's engine wrote included (LMDB counts them itself, with or without the flag), and the
/// mapped run stays deterministic.
#[test]
fn lmdb_write_map_changes_nothing_the_simulator_observes() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scenarios/quickstart-lmdb.toml")).unwrap();
    assert!(!text.contains("lmdb_write_map"), "the scenario leaves the simulator's default");
    let scenario = dir.path().join("pwrite.toml");
    std::fs::write(&scenario, text.replacen("[node]\n", "[node]\nlmdb_write_map = false\n", 1)).unwrap();
    let mapped = dir.path().join("mapped");
    let (code, stdout) =
        qsim(&["run", "scenarios/quickstart-lmdb.toml", "--seed", "1", "--check-determinism", "--no-report"], &mapped);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("engine     lmdb, MDB_WRITEMAP") && stdout.contains("determinism pass"), "{stdout}");
    let written = dir.path().join("pwrite");
    let (code, stdout) = qsim(&["run", scenario.to_str().unwrap(), "--seed", "1", "--no-report"], &written);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("lmdb_write_map = false"), "the run says which write path: {stdout}");
    let (mapped, written) = (trace(&mapped), trace(&written));
    assert_eq!(mapped.matches(r#""engine_bytes_written":"#).count(), 7, "every node measured with the flag");
    assert!(!mapped.contains(r#""engine_bytes_written":0}"#), "an LMDB node counted nothing written");
    assert_eq!(mapped, written, "the same run, bytes written included");
}

/// The first `node_summary` of `node` in a trace: (logical bytes, engine bytes written).
fn written_by(trace: &str, node: &str) -> (u64, u64) {
    let line = trace
        .lines()
        .find(|l| l.contains(r#""event":"node_summary""#) && l.contains(&format!(r#""node":"{node}""#)))
        .unwrap_or_else(|| panic!("no node_summary for {node}"));
    let summary: serde_json::Value = serde_json::from_str(line).expect("a json line");
    (summary["logical_bytes"].as_u64().unwrap(), summary["engine_bytes_written"].as_u64().unwrap())
}

#[test]
fn same_seed_same_trace_on_rocksdb_with_flushes_and_compactions_running() {
    let dir = tempfile::tempdir().unwrap();
    for (args, seed) in [
        (&["scenarios/rocksdb.toml"][..], "1"),
        (&["scenarios/rocksdb.toml"][..], "2"),
        (&["scenarios/swarm.toml", "--engine", "rocksdb"][..], "3"),
        // Starts that fail on a refusing disk: the node's error names its files, and the run's
        // folder must not reach the trace (it did, and the trace differed in every process).
        (&["scenarios/disk-errors.toml", "--engine", "rocksdb"][..], "1"),
    ] {
        let out = dir.path().join(format!("{}-{seed}", args[0].replace('/', "_")));
        let mut argv = vec!["run"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--seed", seed, "--check-determinism", "--no-report"]);
        let (code, stdout) = qsim(&argv, &out);
        assert_eq!(code, 0, "{args:?} seed {seed}: {stdout}");
        assert!(stdout.contains("engine     rocksdb") && stdout.contains("determinism pass"), "{stdout}");
    }
    // RocksDB did its background work: beyond its write-ahead log (about the logical bytes),
    // flushes and compactions wrote the data again. And the replaced disk bootstrapped.
    let trace = trace(&dir.path().join("scenarios_rocksdb.toml-1"));
    let (logical, engine) = written_by(&trace, "root");
    assert!(logical > 0 && engine > 2 * logical, "root: {engine} engine bytes for {logical} logical bytes");
    let edge3 = trace.lines().find(|l| l.contains(r#""event":"node_summary""#) && l.contains(r#""node":"edge-3""#));
    assert!(edge3.is_some_and(|l| l.contains(r#""bootstraps":1"#)), "edge-3 did not bootstrap: {edge3:?}");
    // An override is carried into the output folder and the reproduce command.
    let (code, stdout) = qsim(
        &["run", "scenarios/canary-liveness.toml", "--engine", "rocksdb", "--seed", "1", "--no-report"],
        &dir.path().join("canary"),
    );
    assert_eq!(code, 3, "{stdout}");
    assert!(
        stdout.contains("reproduce  ./qsim run scenarios/canary-liveness.toml --seed 1 --engine rocksdb"),
        "{stdout}"
    );
    // And into a sweep: its own row, folders, reports and reproduce lines.
    let sweep = dir.path().join("sweep");
    let (code, stdout) =
        qsim(&["sweep", "scenarios/canary-liveness.toml", "--engine", "rocksdb", "--seeds", "1..3"], &sweep);
    assert_eq!(code, 0, "{stdout}");
    let report = std::fs::read_to_string(sweep.join("report.html")).expect("a sweep report");
    assert!(report.contains("canary-liveness-rocksdb/seed-2/report.html"), "no link to the run's report");
    assert!(sweep.join("canary-liveness-rocksdb/seed-2/report.html").is_file(), "the run's report is missing");
    let junit = std::fs::read_to_string(sweep.join("junit.xml")).expect("junit");
    assert!(junit.contains("canary-liveness-rocksdb"), "{junit}");
}

/// Per node, the mean milliseconds between the root applying an index and the node applying
/// it, over the indexes the root applied before `until_ms`.
fn apply_delay_ms(trace: &str, until_ms: u64) -> std::collections::BTreeMap<String, f64> {
    let mut applied: std::collections::BTreeMap<String, std::collections::BTreeMap<u64, u64>> = Default::default();
    for line in trace.lines().filter(|l| l.contains(r#""event":"applied""#)) {
        let e: serde_json::Value = serde_json::from_str(line).expect("a json line");
        let at = e["at_ms"].as_u64().unwrap();
        if at < until_ms {
            let node = applied.entry(e["node"].as_str().unwrap().to_string()).or_default();
            for index in e["first"].as_u64().unwrap()..=e["last"].as_u64().unwrap() {
                node.insert(index, at);
            }
        }
    }
    let root = applied.get("root").cloned().expect("the root applied");
    applied
        .into_iter()
        .map(|(node, at)| {
            let delays: Vec<f64> =
                at.iter().filter_map(|(i, t)| root.get(i).map(|r| t.saturating_sub(*r) as f64)).collect();
            (node, delays.iter().sum::<f64>() / delays.len().max(1) as f64)
        })
        .collect()
}

#[test]
fn links_between_data_centers_carry_their_latency_and_the_cluster_survives_a_split_dc() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("datacenters");
    let (code, stdout) =
        qsim(&["run", "scenarios/datacenters.toml", "--seed", "1", "--check-determinism", "--no-report"], &out);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("3 data centers") && stdout.contains("determinism pass"), "{stdout}");
    let trace = trace(&out);
    // Before any fault: mid-1 shares dc 0 with the root; mid-2 and mid-3 replicate from it over
    // the 40 ms long-haul link, so each index reaches them at least 35 ms later on average.
    let delay = apply_delay_ms(&trace, 25_000);
    assert!(delay["mid-1"] < 20.0, "{delay:?}");
    for far in ["mid-2", "mid-3"] {
        assert!(delay[far] > delay["mid-1"] + 35.0, "{far} is not behind a long-haul link: {delay:?}");
    }
    // The edges of dc 1 failed over across the long-haul link while their intermediate was down.
    assert!(trace.contains(r#""node":"edge-2","source":"10.0.1.3:20005""#), "edge-2 never used its relayed secondary");
    assert!(trace.contains(r#""kind":"split""#), "no split");
    // The summary places each node for the report: node k of a tier in dc k mod 3.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let dc = |name: &str| {
        summary["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name).map(|n| n["datacenter"].as_u64())
    };
    assert_eq!((dc("root"), dc("mid-2"), dc("edge-6")), (Some(Some(0)), Some(Some(1)), Some(Some(2))));
}

#[test]
fn the_cursor_running_ahead_of_the_data_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = qsim(&["run", "scenarios/bug-cursor.toml", "--seed", "1", "--no-report"], dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(dir.path(), Checker::Cursor, &["persisted resume position"]), "{stdout}");
}

#[test]
fn a_replica_that_never_leaves_its_paused_source_is_caught_during_the_fault_and_the_fixed_node_fails_over() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) =
        qsim(&["run", "scenarios/bug-stale-source.toml", "--seed", "1", "--no-report"], &dir.path().join("bug"));
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(&dir.path().join("bug"), Checker::Lag, &["edge-1", "fault-free path upstream"]), "{stdout}");
    // The same story on the fixed node: edge-1 moves to mid-2 within the bound.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scenarios/bug-stale-source.toml")).unwrap();
    let fixed = text.split("[legacy]").next().unwrap().replace("expect = \"violation\"", "expect = \"pass\"");
    let path = dir.path().join("fixed.toml");
    std::fs::write(&path, fixed).unwrap();
    let (code, stdout) =
        qsim(&["run", path.to_str().unwrap(), "--seed", "1", "--no-report"], &dir.path().join("fixed"));
    assert_eq!(code, 0, "{stdout}");
}

fn select<'a>(doc: &'a scraper::Html, css: &str) -> Vec<scraper::ElementRef<'a>> {
    doc.select(&scraper::Selector::parse(css).expect("a valid selector")).collect()
}

fn text_of(doc: &scraper::Html, css: &str) -> String {
    select(doc, css).first().map(|e| e.text().collect::<String>()).unwrap_or_default()
}

/// Every `figure[data-chart]` named holds an SVG that draws something.
fn assert_charts(doc: &scraper::Html, charts: &[&str], what: &str) {
    for id in charts {
        let figure = select(doc, &format!("figure[data-chart=\"{id}\"]"));
        assert_eq!(figure.len(), 1, "{what}: no {id} chart");
        let drawn = figure[0]
            .select(&scraper::Selector::parse("svg polyline, svg path, svg rect, svg circle").unwrap())
            .count();
        assert!(drawn > 2, "{what}: the {id} chart draws nothing");
    }
}

#[test]
fn reports_of_a_pass_a_planted_bug_a_slow_ssd_failover_and_a_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let report = |scenario: &str, expect: i32| {
        let out = dir.path().join(scenario);
        let (code, stdout) = qsim(&["run", &format!("scenarios/{scenario}.toml"), "--seed", "1"], &out);
        assert_eq!(code, expect, "{stdout}");
        assert!(stdout.contains(&format!("report     {}", out.join("report.html").display())), "{stdout}");
        scraper::Html::parse_document(&std::fs::read_to_string(out.join("report.html")).unwrap())
    };

    let pass = report("quickstart", 0);
    assert_eq!(text_of(&pass, "#scenario"), "quickstart");
    assert_eq!(text_of(&pass, "#reproduce code"), "./qsim run scenarios/quickstart.toml --seed 1");
    assert!(text_of(&pass, "#build").starts_with("qsim "), "the build is named");
    for checker in ["sequence", "chain", "lag", "cursor", "reads", "convergence"] {
        assert_eq!(select(&pass, &format!("#verdicts tr[data-checker=\"{checker}\"].pass")).len(), 1, "{checker}");
    }
    assert!(select(&pass, "#first-violation").is_empty());
    assert_charts(&pass, &["faults", "applied", "lag", "write_rate", "read_p99", "sources"], "quickstart");
    assert_eq!(select(&pass, "table.nodes tbody tr").len(), 7);
    assert!(!select(&pass, "table.key-usage tbody tr").is_empty(), "key usage by prefix");
    assert!(!select(&pass, "table.write-amp tbody tr").is_empty(), "write amplification");

    let bug = report("bug-gc-skip", 1);
    assert_eq!(select(&bug, "#verdicts tr[data-checker=\"sequence\"].fail").len(), 1);
    let first = text_of(&bug, "#first-violation");
    assert!(first.contains("edge-1") && first.contains("expected the next batch"), "{first}");
    assert!(!select(&bug, "table.violations tbody tr").is_empty());

    let slow = report("slow-ssd", 0);
    assert_charts(&slow, &["faults", "lag", "disk_p99", "sources"], "slow-ssd");
    assert!(text_of(&slow, "figure[data-chart=\"faults\"]").contains("slow_disk"), "the slow disk on the timeline");

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sweep_dir = dir.path().join("sweep");
    let output = Command::new(env!("CARGO_BIN_EXE_qsim"))
        .current_dir(&root)
        .args(["sweep", "scenarios/quickstart.toml", "scenarios/bug-replay.toml", "--seeds", "1..3", "--out"])
        .arg(&sweep_dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stdout));
    let sweep = scraper::Html::parse_document(&std::fs::read_to_string(sweep_dir.join("report.html")).unwrap());
    assert_eq!(select(&sweep, "#grid a.cell").len(), 4, "one cell per scenario and seed");
    // The planted bug's runs failed as expected: their run reports exist and the cells link there.
    for seed in [1, 2] {
        let link = format!("bug-replay/seed-{seed}/report.html");
        assert!(sweep_dir.join(&link).exists(), "no run report at {link}");
        assert_eq!(select(&sweep, &format!("#grid a.cell[href=\"{link}\"]")).len(), 1, "no link to {link}");
    }
    assert!(text_of(&sweep, "#totals").contains("bug-replay"));
}

#[test]
fn breaking_it_harder_every_new_fault_and_writer_mode_reaches_its_probe_and_the_fixed_node_holds() {
    use crate::common::probe_hits;
    use qs_reports::schema::Probe;
    let dir = tempfile::tempdir().unwrap();
    // (scenario, the probes its run must reach)
    let cases: [(&str, &[Probe]); 7] = [
        (
            "writer-modes",
            &[
                Probe::RepeatedKeyInOneRequest,
                Probe::DeleteCommitted,
                Probe::IdenticalRewriteDropped,
                Probe::QuotaRefused,
                Probe::PrefixRefused,
            ],
        ),
        ("power-loss", &[Probe::FaultPowerLoss]),
        ("bit-rot", &[Probe::FaultBitRot, Probe::ChecksumFailed, Probe::SnapshotInstalled]),
        ("bit-rot-lmdb", &[Probe::FaultBitRot, Probe::ChecksumFailed, Probe::SnapshotInstalled]),
        ("bit-rot-rocksdb", &[Probe::FaultBitRot, Probe::ChecksumFailed, Probe::SnapshotInstalled]),
        ("interrupted-bootstrap", &[Probe::SnapshotResumed, Probe::SnapshotInstalled]),
        ("fault-points", &[Probe::FaultPointSlowCommit]),
    ];
    for (name, probes) in cases {
        let out = dir.path().join(name);
        let (code, stdout) = qsim(&["run", &format!("scenarios/{name}.toml"), "--seed", "1", "--no-report"], &out);
        assert_eq!(code, 0, "{name}: {stdout}");
        for probe in probes {
            assert!(probe_hits(&out, *probe) > 0, "{name} never reached {}: {stdout}", probe.name());
        }
    }
    // Damaged values never reach a reader: the reads checker, which fails on any value no
    // writer sent, passed the bit-rot run, and the damaged nodes re-bootstrapped.
    for (name, damaged) in [
        ("bit-rot", "stored values damaged"),
        ("bit-rot-lmdb", "stored values damaged (data.mdb)"),
        ("bit-rot-rocksdb", "kv table files had a data block damaged"),
    ] {
        let healed = trace(&dir.path().join(name));
        assert!(healed.contains(damaged) && !healed.contains(" 0 of "), "{name}: nothing was damaged");
        assert!(healed.contains(r#""reason":"damaged""#), "{name}: no node healed");
    }
    // Acknowledging before the sync loses acknowledged writes at a power loss: caught.
    let out = dir.path().join("bug-no-sync");
    let (code, stdout) = qsim(&["run", "scenarios/bug-no-sync.toml", "--seed", "1", "--no-report"], &out);
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(&out, Checker::Reads, &["landed at or before index"]), "{stdout}");
    assert!(trace(&out).contains("unsynced commits"), "the root lost nothing");
}

#[test]
fn an_interrupted_run_removes_its_scratch_folder_and_dies_of_the_signal() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    // quickstart on LMDB, ten simulated hours: still running whenever the signal comes.
    let quickstart =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/quickstart.toml"))
            .unwrap()
            .replacen("duration = \"2m\"", "duration = \"10h\"", 1)
            .replacen("engine = \"memory\"", "engine = \"lmdb\"", 1);
    assert!(quickstart.contains("10h") && quickstart.contains("lmdb"), "quickstart's header changed");
    let scenario = dir.path().join("long.toml");
    std::fs::write(&scenario, quickstart).unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_qsim"))
        .env("QSIM_SCRATCH_DIR", &scratch)
        .arg("run")
        .arg(&scenario)
        .args(["--seed", "1", "--no-report", "--out"])
        .arg(dir.path().join("out"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("qsim starts");
    // Wait until a node's store is on disk in the run's scratch folder.
    let has_store = || {
        std::fs::read_dir(&scratch)
            .unwrap()
            .flatten()
            .any(|run| std::fs::read_dir(run.path()).is_ok_and(|mut nodes| nodes.next().is_some()))
    };
    let waited = std::time::Instant::now();
    while !has_store() {
        assert!(run.try_wait().unwrap().is_none(), "the run ended before it was interrupted");
        assert!(waited.elapsed() < std::time::Duration::from_secs(300), "no store appeared in {}", scratch.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let sent = Command::new("kill").args(["-INT", &run.id().to_string()]).status().expect("kill runs");
    assert!(sent.success());
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.signal(), Some(2), "qsim must die of the SIGINT it got; {stderr}");
    assert!(stderr.contains("interrupted; removed 1 scratch folder"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "the interrupted run left its scratch behind: {left:?}");
}

/// Each replica's log entries as the `fetch` checker counted them, from a run's summary.
fn fetched_entries(out: &Path) -> std::collections::BTreeMap<String, u64> {
    let summary: qs_reports::schema::RunSummary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    summary.fetched.into_iter().map(|row| (row.node, row.fetched.entries)).collect()
}

#[test]
fn the_fetch_checker_reads_every_replica_over_tls_as_from_the_plaintext_wire() {
    // Three data centers: replicas behind relays too, whose sources see the relay as their peer.
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scenarios/datacenters.toml")).unwrap();
    assert!(!text.contains("tls ="), "the scenario leaves the simulator's default");
    let plaintext = dir.path().join("plaintext.toml");
    std::fs::write(&plaintext, text.replacen("[node]\n", "[node]\ntls = false\n", 1)).unwrap();
    let (tls_out, plain_out) = (dir.path().join("tls"), dir.path().join("plain"));
    let (code, stdout) = qsim(&["run", "scenarios/datacenters.toml", "--seed", "1", "--no-report"], &tls_out);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("tls        mutual TLS on replication"), "{stdout}");
    let (code, stdout) = qsim(&["run", plaintext.to_str().unwrap(), "--seed", "1", "--no-report"], &plain_out);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("tls        off"), "{stdout}");
    let (over_tls, in_plaintext) = (fetched_entries(&tls_out), fetched_entries(&plain_out));
    assert_eq!(over_tls.keys().collect::<Vec<_>>(), in_plaintext.keys().collect::<Vec<_>>(), "the same replicas");
    for (node, &entries) in &over_tls {
        let plain = in_plaintext[node];
        // Two runs of one seed drawn apart by the handshakes: about the same entries each.
        assert!(entries > 0 && plain > 0, "{node}: {entries} entries over TLS, {plain} in plaintext");
        assert!(entries.abs_diff(plain) * 10 <= plain, "{node}: {entries} entries over TLS, {plain} in plaintext");
    }
}
