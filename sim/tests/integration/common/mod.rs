//! Helpers shared by the simulator's whole-run tests.
#![allow(dead_code)] // the modules use a part each, not necessarily all of it

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root, where the `qsim` binary is run from.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the `qsim` binary from the repository root with `args` alone; its exit code, and its
/// stdout followed by its stderr (for a sweep's or an exploration's progress lines).
pub fn qsim_any(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_qsim")).current_dir(root()).args(args).output().expect("qsim runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), format!("{stdout}\n--- stderr\n{stderr}"))
}

/// Runs the `qsim` binary from the repository root with `args` and `--out out`; its exit code
/// and stdout.
pub fn qsim(args: &[&str], out: &Path) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_qsim"))
        .current_dir(root())
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("qsim runs");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A run's verdict from `checker`, read from the `summary.json` the run wrote into `out`.
pub fn verdict(out: &Path, checker: qs_reports::schema::Checker) -> qs_reports::schema::Verdict {
    let text = std::fs::read_to_string(out.join("summary.json")).expect("the run wrote its summary");
    let summary: qs_reports::schema::RunSummary = serde_json::from_str(&text).expect("a run summary");
    summary.verdicts.into_iter().find(|v| v.checker == checker).unwrap_or_else(|| panic!("no {checker} verdict"))
}

/// Whether `checker` failed the run in `out`, its first problem naming every one of `words`.
pub fn failed_naming(out: &Path, checker: qs_reports::schema::Checker, words: &[&str]) -> bool {
    let v = verdict(out, checker);
    let first = v.first.unwrap_or_default();
    v.status == qs_reports::schema::VerdictStatus::Fail && words.iter().all(|w| first.contains(w))
}

/// Whether `checker` passed the run in `out`.
pub fn passed(out: &Path, checker: qs_reports::schema::Checker) -> bool {
    verdict(out, checker).status == qs_reports::schema::VerdictStatus::Pass
}

/// How often the run in `out` reached `probe` (0 when never).
pub fn probe_hits(out: &Path, probe: qs_reports::schema::Probe) -> u64 {
    let text = std::fs::read_to_string(out.join("summary.json")).expect("the run wrote its summary");
    let summary: qs_reports::schema::RunSummary = serde_json::from_str(&text).expect("a run summary");
    summary.probes.iter().find(|h| h.probe == probe).map_or(0, |h| h.hits)
}
