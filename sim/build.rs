//! Records the commit qsim was built from, for the reproduce line, the report header and the
//! nightly's stamp: `<commit>` for a clean checkout, `<commit>+dirty` when tracked files differ
//! from it — a binary built from uncommitted changes must not pass for the commit's own (a night
//! of it would be filed under that commit, and `qsim diff` would call two builds one).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        // Untracked files (runs/, a scratch scenario) are not part of the build.
        // --no-optional-locks: `status` must not refresh the index, which this script watches
        // (it would run again at every build).
        Some(commit) => match git(&["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{commit}+dirty"),
            _ => commit,
        },
        None => "unknown commit".to_string(),
    };
    println!("cargo:rustc-env=QSIM_COMMIT={commit}");
    // Run again on a new commit or checkout (HEAD and its reflog; the index on `git add`), and on
    // any change to the sources that go into the binary, which is what makes a tree dirty. In a
    // git worktree `.git` is a file and these paths do not exist, which cargo takes as changed:
    // the script then runs at every build, which is still right.
    for path in [
        "../.git/HEAD",
        "../.git/logs/HEAD",
        "../.git/index",
        "../Cargo.toml",
        "../Cargo.lock",
        "../node",
        "../sim/src",
        "../reports/src",
        "../vocab/src",
        "../vendor",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
}
