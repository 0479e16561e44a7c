//! The regression set: every scenario pinned under `scenarios/regression/` (shrunk from a failing
//! run by `qsim shrink`) runs under its own seed and must end as it says (`expect`) — a fixed
//! bug passes, a planted one keeps being caught by the same checker, with the failure signature
//! its header's `What failed:` line records — and must carry its postmortem.
//!
//! A pinned run keeps its seed, not its schedule: a change to the simulator's scheduling
//! re-draws it, and a planted bug can then be caught by another checker than the one the file
//! was shrunk for. That fails here, naming both signatures; re-shrink it.
#![cfg(madsim)]

use std::path::Path;
use std::process::Command;

use qs_sim::scenario::{Expect, Scenario};

#[test]
fn every_pinned_regression_ends_as_it_says_and_carries_its_postmortem() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("scenarios/regression");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/regression exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no pinned regressions in {}", dir.display());
    let out = tempfile::tempdir().unwrap();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.display();
        assert!(text.starts_with('#'), "{shown}: a pinned regression starts with its postmortem comment");
        assert!(
            !text.contains("(write it here before pinning this file)"),
            "{shown}: the postmortem is still the placeholder `qsim shrink` wrote"
        );
        for part in ["What broke:", "Why:", "Fixed by:"] {
            assert!(text.contains(part), "{shown}: the postmortem lacks `{part}`");
        }
        let pinned_failure = text
            .lines()
            .find_map(|line| line.strip_prefix("# What failed: "))
            .and_then(|rest| rest.rsplit_once(" (exit "))
            .map(|(signature, _)| signature.to_string())
            .unwrap_or_else(|| panic!("{shown}: the header lacks `qsim shrink`'s `# What failed: … (exit N).` line"));
        let scenario = Scenario::load(file).unwrap_or_else(|e| panic!("{e}"));
        let seed = scenario.scenario.seed.unwrap_or_else(|| panic!("{shown}: a pinned regression names its seed"));
        let run_dir = out.path().join(file.file_stem().unwrap());
        let output = Command::new(env!("CARGO_BIN_EXE_qsim"))
            .current_dir(&root)
            .arg("run")
            .arg(file)
            .args(["--no-report", "--out"])
            .arg(&run_dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(&format!("seed       {seed}")),
            "{shown}: run without --seed must use its own: {stdout}"
        );
        assert_eq!(
            output.status.code(),
            Some(i32::from(scenario.scenario.expect.exit_code())),
            "{shown} must end {:?}:\n{stdout}",
            scenario.scenario.expect
        );
        if scenario.scenario.expect != Expect::Pass {
            let summary: qs_reports::schema::RunSummary =
                serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
            assert_eq!(
                summary.signature.as_deref(),
                Some(pinned_failure.as_str()),
                "{shown} must keep failing the way it was shrunk for (its `What failed:` line); a run \
                 caught by another checker no longer guards that one: re-shrink it\n{stdout}"
            );
        }
    }
}
