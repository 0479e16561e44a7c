//! (`--cfg madsim`) A seed gives one trace however many runs share the machine: runs started
//! together, and a run after others were killed and left their files behind.
//!
//! The bug these guard against: each run made its scratch directory inside the simulation, where
//! tempfile's names come out the same in every run (its generator is seeded from the simulated
//! clock and the thread id). With the first three names taken — three other runs alive at once,
//! or left behind by killed runs — tempfile reseeds from `getrandom`, which madsim answers from
//! the run's own random stream: one extra draw, and every later choice of the run differed.
#![cfg(madsim)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Concurrent runs of one seed: more than the three names it took to go wrong, and more than
/// the cores of a small machine, so they also compete for the CPU.
const RUNS: usize = 6;

/// `qsim run scenarios/quickstart.toml --seed 1 --no-report`, with `tmp` as its temporary and
/// scratch directory (shared by the runs of one test, private to the test) and `out` as its
/// folder.
fn start(tmp: &Path, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_qsim"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .env("TMPDIR", tmp)
        .env("QSIM_SCRATCH_DIR", tmp)
        .args(["run", "scenarios/quickstart.toml", "--seed", "1", "--engine", "memory", "--no-report", "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("qsim starts")
}

/// The trace digest a finished run printed.
fn digest(child: Child) -> String {
    let output = child.wait_with_output().expect("qsim runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("trace"))
        .and_then(|l| l.split("digest ").nth(1))
        .map(|d| d.split_whitespace().next().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("no digest in {stdout}"))
}

fn folders(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    all.sort();
    all
}

#[test]
fn one_seed_run_many_times_at_once_gives_one_trace() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let children: Vec<Child> = (0..RUNS).map(|i| start(&tmp, &dir.path().join(format!("run-{i}")))).collect();
    let digests: Vec<String> = children.into_iter().map(digest).collect();
    assert!(
        digests.iter().all(|d| *d == digests[0]),
        "{RUNS} concurrent runs of one seed gave different traces: {digests:#?}"
    );
    assert!(folders(&tmp).is_empty(), "a run left files in its temporary directory: {:?}", folders(&tmp));
}

#[test]
fn files_left_by_killed_runs_do_not_change_a_later_run() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    let used = dir.path().join("used");
    std::fs::create_dir(&clean).unwrap();
    std::fs::create_dir(&used).unwrap();
    let alone = digest(start(&clean, &dir.path().join("alone")));
    // Three runs killed (as a sweep's timeout or a user's ^C would) once they have made their
    // scratch directory, which stays behind.
    for i in 0..3 {
        let before = folders(&used).len();
        let mut child = start(&used, &dir.path().join(format!("killed-{i}")));
        let deadline = Instant::now() + Duration::from_secs(120);
        while folders(&used).len() == before {
            assert!(child.try_wait().unwrap().is_none(), "the run ended before it made its scratch directory");
            assert!(Instant::now() < deadline, "no scratch directory after 120 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert_eq!(folders(&used).len(), 3, "each killed run leaves its scratch directory");
    let after = digest(start(&used, &dir.path().join("after")));
    assert_eq!(after, alone, "the same seed gave another trace beside the files of killed runs");
}
