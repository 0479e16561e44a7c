//! Records the commit qsim was built from, for the reproduce line and the report header.

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=QSIM_COMMIT={commit}");
    // A new commit or checkout appends to HEAD's reflog.
    println!("cargo:rerun-if-changed=../.git/logs/HEAD");
    println!("cargo:rerun-if-changed=../.git/HEAD");
}
