//! Sweeps that survive anything, and the nightly definition, through the `qsim` binary (built
//! with `--cfg madsim`): a hanging run and a crashing run are recorded while the sweep finishes,
//! failures group by signature and a known-failures file decides what is new, a run whose
//! second process writes another trace is `nondeterministic`, and the nightly definition cut
//! into shards — each shard its own process — merges into exactly the unsharded sweep.
#![cfg(madsim)]

use std::path::{Path, PathBuf};
use std::process::Command;

use qs_reports::schema::{Outcome, SweepSummary};

use crate::common::{qsim_any as qsim, root};

fn summary(dir: &Path) -> SweepSummary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("summary.json")).expect("a sweep summary")
}

/// A wrapper script: `$1` is what it does to which seed (a bash `case` body over `$seed`, and
/// `$second` is 1 in a determinism re-run), then it execs the run.
fn wrapper(dir: &Path, cases: &str) -> String {
    let path = dir.join("wrapper.sh");
    std::fs::write(
        &path,
        format!(
            "#!/usr/bin/env bash\nseed=\"\"; prev=\"\"; second=0\nfor a in \"$@\"; do\n  [ \"$prev\" = \"--seed\" ] && seed=$a\n  \
             case \"$a\" in *determinism-check) second=1;; esac\n  prev=$a\ndone\ncase \"$seed\" in\n{cases}\nesac\nexec \"$@\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn what_a_killed_run_left_in_its_scratch_folder_is_removed_by_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    // Seed 2 writes into the scratch folder it was given, as a run's nodes do, and is killed
    // before it can clean up; seed 1 runs.
    let wrapper = wrapper(
        dir.path(),
        "  2) mkdir -p \"$QSIM_SCRATCH_DIR/qsim-run-killed/store\" && echo data > \"$QSIM_SCRATCH_DIR/qsim-run-killed/store/data.mdb\" && kill -KILL $$ ;;",
    );
    let out = dir.path().join("sweep");
    let output = Command::new(env!("CARGO_BIN_EXE_qsim"))
        .current_dir(root())
        .env("QSIM_SCRATCH_DIR", &scratch)
        .args([
            "sweep",
            "scenarios/quickstart.toml",
            "--seeds",
            "1..=2",
            "--jobs",
            "1",
            "--run-wrapper",
            &wrapper,
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("qsim runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let s = summary(&out);
    let outcome = |seed: u64| s.results.iter().find(|r| r.seed == seed).map(|r| r.outcome);
    assert_eq!((outcome(1), outcome(2)), (Some(Outcome::Pass), Some(Outcome::Crash)), "{stdout}");
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "the sweep left scratch files behind: {left:?}");
}

#[test]
fn a_hanging_and_a_crashing_run_are_recorded_while_the_sweep_finishes_and_group_by_signature() {
    let dir = tempfile::tempdir().unwrap();
    // Seed 2 never ends; seeds 3 and 5 die of SIGSEGV; the others run (the canary fails as it
    // is expected to).
    let wrapper = wrapper(dir.path(), "  2) exec sleep 600 ;;\n  3|5) exec bash -c 'kill -SEGV $$' ;;");
    let out = dir.path().join("sweep");
    let started = std::time::Instant::now();
    let (code, stdout) = qsim(&[
        "sweep",
        "scenarios/canary-liveness.toml",
        "--seeds",
        "1..=6",
        "--jobs",
        "2",
        "--run-timeout",
        "20s",
        "--run-wrapper",
        &wrapper,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(started.elapsed() < std::time::Duration::from_secs(300), "the hang was not cut at its budget");
    let s = summary(&out);
    let outcome = |seed: u64| s.results.iter().find(|r| r.seed == seed).map(|r| r.outcome);
    assert_eq!(s.runs, 6, "every run is recorded: {stdout}");
    assert_eq!(outcome(2), Some(Outcome::Hang));
    assert_eq!((outcome(3), outcome(5)), (Some(Outcome::Crash), Some(Outcome::Crash)));
    for seed in [1, 4, 6] {
        assert_eq!(outcome(seed), Some(Outcome::Liveness), "seed {seed}");
    }
    let hang = s.results.iter().find(|r| r.seed == 2).unwrap();
    assert!(hang.reproduce.ends_with("--seed 2") && hang.wall_ms >= 20_000, "{hang:?}");
    assert!(hang.out.join("stdout.txt").is_file(), "a killed run keeps what it wrote");
    // Two groups: the two crashes are one bug, the hang another.
    let groups: Vec<(&str, u64, u64)> =
        s.groups.iter().map(|g| (g.signature.as_str(), g.count, g.first_seed)).collect();
    assert_eq!(groups, [("crash: killed by SIGSEGV", 2, 3), ("hang", 1, 2)], "{stdout}");
    assert!(stdout.contains("group") && stdout.contains("crash: killed by SIGSEGV"), "{stdout}");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<failure").count(), 3, "{junit}");
    assert!(junit.contains("signature: hang"), "{junit}");

    // Both groups known: the sweep passes; one known, the other new: it fails, naming it.
    let known = dir.path().join("known.txt");
    std::fs::write(&known, "# known\ncrash: killed by SIGSEGV\nhang\n").unwrap();
    let merged = dir.path().join("merged");
    let (code, stdout) =
        qsim(&["merge", out.to_str().unwrap(), "--out", merged.to_str().unwrap(), "--known", known.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("0 new"), "{stdout}");
    std::fs::write(&known, "hang\n").unwrap();
    let (code, stdout) =
        qsim(&["merge", out.to_str().unwrap(), "--out", merged.to_str().unwrap(), "--known", known.to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("1 new") && stdout.contains("(NEW)"), "{stdout}");
    let report = std::fs::read_to_string(merged.join("report.html")).unwrap();
    assert!(
        report.contains("id=\"groups-table\"") && report.contains("crash: killed by SIGSEGV"),
        "no groups in the report"
    );
}

#[test]
fn a_run_whose_second_process_writes_another_trace_is_nondeterministic() {
    let dir = tempfile::tempdir().unwrap();
    // The determinism re-run of seed 1 secretly runs seed 9: another trace. Seed 1 fails as
    // the canary does, so it is re-run whatever the sample.
    let wrapper = wrapper(
        dir.path(),
        "  1) if [ $second = 1 ]; then args=(); for a in \"$@\"; do [ \"$a\" = 1 ] && a=9; args+=(\"$a\"); done; exec \"${args[@]}\"; fi ;;",
    );
    let out = dir.path().join("sweep");
    let (code, stdout) = qsim(&[
        "sweep",
        "scenarios/canary-liveness.toml",
        "--seeds",
        "1..=2",
        "--check-determinism",
        "--run-wrapper",
        &wrapper,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stdout}");
    let s = summary(&out);
    let first = &s.results[0];
    assert_eq!(first.outcome, Outcome::Nondeterministic, "{first:?}");
    assert!(first.determinism_checked && !first.ok);
    assert!(first.first_problem.as_deref().unwrap_or("").contains("traces differ at event"), "{first:?}");
    assert!(first.reproduce.ends_with("--check-determinism"), "{first:?}");
    // Seed 2 failed as expected and was re-run too: the same trace, so still as expected.
    assert!(s.results[1].determinism_checked && s.results[1].ok, "{:?}", s.results[1]);
    assert_eq!(s.groups.len(), 1);
    assert_eq!(s.groups[0].signature, "nondeterministic");
}

#[test]
fn the_nightly_definition_cut_into_shards_merges_into_the_unsharded_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let definition = dir.path().join("nightly.toml");
    std::fs::write(
        &definition,
        r#"
seeds = "1..=4"
shards = 3
jobs = 1
check_determinism = false
[[sweep]]
scenarios = ["scenarios/quickstart.toml"]
engines = ["memory", "lmdb"]
[[sweep]]
scenarios = ["scenarios/canary-liveness.toml"]
engines = ["memory"]
"#,
    )
    .unwrap();
    let definition = definition.to_str().unwrap();
    // The three shards as three processes at once, as three machines would run them.
    let shards: Vec<PathBuf> = (1..=3).map(|i| dir.path().join(format!("shard-{i}"))).collect();
    let children: Vec<std::process::Child> = shards
        .iter()
        .enumerate()
        .map(|(i, out)| {
            Command::new(env!("CARGO_BIN_EXE_qsim"))
                .current_dir(root())
                .args(["nightly", definition, "--shard", &format!("{}/3", i + 1), "--out"])
                .arg(out)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert_eq!(child.wait().unwrap().code(), Some(0), "every run of a shard ends as expected");
    }
    let merged = dir.path().join("merged");
    let mut args = vec!["merge"];
    args.extend(shards.iter().map(|s| s.to_str().unwrap()));
    args.extend(["--out", merged.to_str().unwrap()]);
    let (code, stdout) = qsim(&args);
    assert_eq!(code, 0, "{stdout}");
    let whole = dir.path().join("whole");
    let (code, stdout) = qsim(&["nightly", definition, "--out", whole.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    let (merged, whole) = (summary(&merged), summary(&whole));
    assert_eq!((merged.runs, merged.failed), (whole.runs, whole.failed));
    assert_eq!(merged.runs, 12, "3 pairs × 4 seeds");
    let key = |s: &SweepSummary| -> Vec<(String, u64, Outcome, Option<String>)> {
        s.results.iter().map(|r| (r.scenario.clone(), r.seed, r.outcome, r.digest.clone())).collect()
    };
    assert_eq!(key(&merged), key(&whole), "the shards ran other runs than the whole sweep");
    assert!(merged.results.iter().any(|r| r.scenario == "quickstart-lmdb"), "engines name the runs");

    // A launcher cut into another number of shards is refused before anything runs.
    let (code, stdout) =
        qsim(&["nightly", definition, "--shard", "1/2", "--out", dir.path().join("x").to_str().unwrap()]);
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("field `shards`") && stdout.contains("3 shards"), "{stdout}");
    // The shipped definition loads (every scenario, engine and the known-failures file), and
    // is refused only for the shard count it is asked for here.
    let (code, stdout) =
        qsim(&["nightly", "ci/nightly.toml", "--shard", "1/999", "--out", dir.path().join("y").to_str().unwrap()]);
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("ci/nightly.toml: field `shards`"), "{stdout}");
}
