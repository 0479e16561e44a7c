//! `qsim run --log`: the nodes' own log beside the trace, stamped with simulated time and the
//! node, and a run that is the same event for event with it and without it.
#![cfg(madsim)]

use crate::common::qsim;

/// The seconds stamp a log line starts with (`  90.352s  WARN node{…}`).
fn stamp(line: &str) -> Option<f64> {
    line.split_whitespace().next()?.strip_suffix('s')?.parse().ok()
}

#[test]
fn the_node_log_names_every_node_in_simulated_time_and_changes_nothing_in_the_run() {
    let scenario = "scenarios/raft-leader-disk-down.toml";
    let plain = tempfile::tempdir().unwrap();
    let logged = tempfile::tempdir().unwrap();
    let (code, without) = qsim(&["run", scenario, "--seed", "3", "--no-report"], plain.path());
    assert_eq!(code, 0, "{without}");
    let (code, with) = qsim(&["run", scenario, "--seed", "3", "--no-report", "--log"], logged.path());
    assert_eq!(code, 0, "{with}");
    assert!(with.contains("the nodes' own log"), "{with}");
    // The same run, event for event: the traces, not only their digests.
    let trace = |dir: &std::path::Path| std::fs::read(dir.join("trace.jsonl")).unwrap();
    assert!(trace(plain.path()) == trace(logged.path()), "writing the node log changed the run");

    let log = std::fs::read_to_string(logged.path().join("nodes.log")).unwrap();
    let nodes = with.lines().find_map(|l| l.strip_prefix("nodes")).expect("the nodes line");
    let names = nodes.split_once('(').and_then(|(_, rest)| rest.strip_suffix(')')).expect("the nodes' names");
    for name in names.split(", ") {
        assert!(log.contains(&format!("name=\"{name}\"")), "no line of {name} in the log:\n{log}");
    }
    // Stamped in simulated time: in order, within the run's duration and its convergence.
    let stamps: Vec<f64> = log.lines().filter_map(stamp).collect();
    assert!(!stamps.is_empty(), "no stamped line:\n{log}");
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "stamps out of order:\n{log}");
    assert!(stamps.last().is_some_and(|&last| last <= 180.0), "past the run's 120 s and 60 s to converge");
    // The disk failure the scenario injects is in the failing member's own words.
    assert!(log.contains(" WARN ") || log.contains(" ERROR "), "no warning in a run with a failed disk:\n{log}");
}
