//! Helpers shared by the simulator's whole-run tests.
#![allow(dead_code)] // each test file uses its own subset

use std::path::Path;
use std::process::Command;

/// Runs the `qsim` binary from the repository root with `args` and `--out out`; its exit code
/// and stdout.
pub fn qsim(args: &[&str], out: &Path) -> (i32, String) {
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
