//! The `scale` story on a tree a test can afford (200 nodes, `qs_sim::scenario::resize`): it
//! passes, with every fault's probes reached, and its trace and report stay bounded as a tree of
//! ten thousand needs — some nodes of each large tier keep their own series, every tier has a
//! summary over all its nodes each sample, and the report draws those summaries and lists tiers,
//! not every node. Twice, to compare the event sequences: the trace is the run's, seed for seed.
#![cfg(madsim)]

use std::collections::{BTreeMap, BTreeSet};

use qs_reports::schema::{Event, RunSummary};
use qs_sim::scenario::resize;

use crate::common::{qsim, root};

const NODES: usize = 200;

#[test]
fn a_large_tree_runs_with_a_bounded_trace_and_a_report_by_tier() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("scenarios/scale.toml")).unwrap();
    let scenario = dir.path().join("scale-200.toml");
    std::fs::write(&scenario, resize::resized(&text, NODES).unwrap()).unwrap();
    let scenario = scenario.to_str().unwrap();
    let (code, stdout) = qsim(&["run", scenario, "--seed", "1"], &dir.path().join("a"));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("nodes      200 (per tier: root 1, top 2, main 2, pop 18, edge 177)"), "{stdout}");
    assert!(stdout.contains("more per-node samples and applies seen by the checkers"), "{stdout}");

    let trace = std::fs::read_to_string(dir.path().join("a/trace.jsonl")).unwrap();
    let events: Vec<Event> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let summary: RunSummary =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("a/summary.json")).unwrap()).unwrap();
    assert!(summary.events_omitted > 0);
    // The nodes whose own lag samples the trace keeps: at most 32 of each tier, and the faults'.
    let tier_of: BTreeMap<&str, &str> = summary.nodes.iter().map(|n| (n.name.as_str(), n.tier.as_str())).collect();
    let sampled: BTreeSet<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::LagSample { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    let mut per_tier: BTreeMap<&str, usize> = BTreeMap::new();
    for node in &sampled {
        *per_tier.entry(tier_of[node]).or_default() += 1;
    }
    let faulted = 1 + 10.min(resize::tiers_for(NODES)[2]); // top-1 and the pops that follow main-2
    assert!(per_tier.values().all(|&n| n <= 32 + faulted), "{per_tier:?}");
    assert_eq!(per_tier["edge"], 32, "{per_tier:?}");
    assert!(sampled.contains("pop-2"), "a fault's node keeps its series");
    // Each tier is summarized every sample, over all its running nodes.
    let edge_summaries: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::TierSample { tier, nodes, .. } if tier == "edge" => Some(*nodes),
            _ => None,
        })
        .collect();
    assert!(edge_summaries.len() >= 60, "one edge summary a sample: {}", edge_summaries.len());
    assert!(edge_summaries.iter().all(|&n| n <= 177) && edge_summaries.contains(&177));

    let report = std::fs::read_to_string(dir.path().join("a/report.html")).unwrap();
    assert!(report.contains("edge (all 177 nodes): median, band min–max"), "the lag chart draws the summaries");
    assert!(report.contains("one row per tier"), "the node table lists tiers");
    assert!(report.len() < 2_000_000, "report of {} bytes", report.len());

    // The same seed again: the same event sequence, line for line.
    let (code, _) = qsim(&["run", scenario, "--seed", "1", "--no-report"], &dir.path().join("b"));
    assert_eq!(code, 0);
    let again = std::fs::read_to_string(dir.path().join("b/trace.jsonl")).unwrap();
    let first_difference = trace.lines().zip(again.lines()).position(|(a, b)| a != b);
    assert_eq!(first_difference, None, "the traces part at that line");
    assert_eq!(trace.lines().count(), again.lines().count());
}
