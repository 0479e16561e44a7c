//! Whole runs of the `qsim` binary (built with `--cfg madsim`): scenarios × seeds pass and are
//! deterministic across processes; the canary fails the way it says it must; bad scenarios are
//! refused with exit 2.
#![cfg(madsim)]

use std::path::Path;
use std::process::Command;

fn qsim(args: &[&str], out: &Path) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(env!("CARGO_BIN_EXE_qsim"))
        .current_dir(&root)
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("qsim runs");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned())
}

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
    assert!(stdout.contains("convergence FAIL") && stdout.contains("edge-1"), "{stdout}");
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
    assert!(stdout.contains("sequence   FAIL") && stdout.contains("edge-1"), "{stdout}");
}

#[test]
fn a_crash_with_the_legacy_rts_cursor_replays_and_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = qsim(&["run", "scenarios/bug-replay.toml", "--seed", "1"], dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("sequence   FAIL") && stdout.contains("edge-1"), "{stdout}");
}

#[test]
fn a_deep_tree_rides_out_root_flaps_unless_replicas_stop_serving_downstream() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = qsim(&["run", "scenarios/cascade.toml", "--seed", "1"], &dir.path().join("fixed"));
    assert_eq!(code, 0, "{stdout}");
    let (code, stdout) = qsim(&["run", "scenarios/bug-cascade.toml", "--seed", "1"], &dir.path().join("bug"));
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("lag        FAIL") && stdout.contains("with every fault healed"), "{stdout}");
}
