//! What ships is what a user builds: the `qs-node` this test binary runs is built as `cargo build`
//! and `cargo test` at the workspace root build it (and as `cargo install --path node` does, with
//! no flag of its own), and it carries none of the simulator's harness. The harness — the planted
//! bugs of `[legacy]`, the memory engine's injectors, `store::rot` — compiles only with
//! `--cfg madsim` or `--cfg qsim_harness`, compiler flags no dependency can turn on (a cargo
//! feature would be unified across the workspace's packages, so a root build would carry it).

// A harness build is exactly the one that has them.
#![cfg(not(any(madsim, qsim_harness)))]

use std::process::Command;

use crate::common::process::{Ports, Role, storage, write_config};

/// A configuration that turns a planted bug on is refused at start, naming the file, the
/// section and why — and nothing is opened or served.
#[test]
fn the_binary_refuses_a_planted_bug() {
    let dir = tempfile::tempdir().unwrap();
    let extra = storage("lmdb", "") + "[root]\nheartbeat_interval = \"1s\"\n[legacy]\napply_without_gap_check = true\n";
    let config = write_config(dir.path(), "root", Ports::new(), Role::Root { batch_window: "5ms" }, &extra);
    let output = Command::new(env!("CARGO_BIN_EXE_qs-node")).arg("--config").arg(&config).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let file = config.display().to_string();
    assert!(
        stderr.contains(&file) && stderr.contains("field `legacy`") && stderr.contains("planted bug"),
        "expected {file}, the legacy field and why in: {stderr}"
    );
    let store = dir.path().join("root");
    assert!(!store.exists(), "a refused configuration opened its store at {}", store.display());
}

/// The harness's methods are not in the binary at all: not present and unused, absent. Their
/// symbols are searched for as the compiler names them (each identifier after its length, in
/// Rust's legacy and v0 manglings alike); the crate's name and the store's type, in every
/// symbol of theirs, stand as the proof that the binary's symbols are there to be read.
#[test]
fn the_binary_has_no_harness_method() {
    let binary = std::fs::read(env!("CARGO_BIN_EXE_qs-node")).expect("the qs-node binary reads");
    // Searched as text with the standard library's own (optimised) search: a debug test binary
    // searching 150 MB byte by byte takes a minute.
    let text = String::from_utf8_lossy(&binary);
    let named = |identifier: &str| text.contains(&format!("{}{identifier}", identifier.len()));
    assert!(named("qs_node"), "the binary has no qs_node symbol: stripped? this test cannot see its symbols");
    assert!(named("Store"), "no symbol of the store's type: this test's search cannot see methods");
    let harness = [
        "apply_without_gap_check",
        "apply_before_commit",
        "snapshot_first_configuration",
        "without_pre_vote_or_check_quorum",
        "corrupt_value",
        "power_loss",
        "rot_files",
    ];
    let found: Vec<&str> = harness.into_iter().filter(|identifier| named(identifier)).collect();
    assert!(found.is_empty(), "the shipped binary carries the harness's {found:?}");
}
