//! What a run's summary and trace say, gathered once for the page: the nodes (in topology order,
//! with their tier), each node's source history and counters, fault spans, violations and key
//! usage.
//!
//! Guarantees: every node named by the summary or by any event appears exactly once in
//! [`RunFacts::nodes`] (summary order first, then first appearance in the trace); a fault start is
//! paired with the next end of the same node and kind, and a start without an end lasts to the
//! liveness phase (or to the end of the run); counters come from the node's `node_summary` event
//! when there is one and are otherwise derived from the trace, and [`NodeFacts::summary`] says
//! which.

use std::collections::BTreeMap;

use crate::schema::{Checker, Event, FaultKind, FaultPhase, RunPhase, RunSummary, SourceChange};

/// A node's end-of-run counters, from its `node_summary` event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCounters {
    pub applied: u64,
    pub failovers: u64,
    pub bootstraps: u64,
    pub bogus_requests: u64,
    pub logical_bytes: u64,
    /// `None`: the engine does not measure what it writes.
    pub engine_bytes_written: Option<u64>,
}

/// One upstream connection: at `at_ms`, connected to `source`; `reason` why it left the one before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSwitch {
    pub at_ms: u64,
    pub source: String,
    pub reason: SourceChange,
}

#[derive(Clone, Debug, Default)]
pub struct NodeFacts {
    pub name: String,
    /// The tier's name (`root`, `mid`, ...), `?` when neither the summary nor a node summary says.
    pub tier: String,
    /// Depth in the tree when the summary says (orders tiers top-down).
    pub depth: Option<u32>,
    /// Data center when the summary says (topologies of several data centers).
    pub datacenter: Option<u32>,
    pub summary: Option<NodeCounters>,
    pub sources: Vec<SourceSwitch>,
    pub max_lag_ms: Option<u64>,
    /// The last index the trace shows it applied (or bootstrapped to).
    pub last_applied: Option<u64>,
    pub bootstraps_seen: u64,
    pub faults: u64,
}

/// A fault on one node, from its start to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSpan {
    pub node: String,
    pub kind: FaultKind,
    pub detail: String,
    pub start_ms: u64,
    pub end_ms: u64,
    /// No end event: drawn to the liveness phase.
    pub open_ended: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViolationRow {
    pub at_ms: u64,
    pub checker: Checker,
    pub node: String,
    pub index: u64,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyUsageRow {
    pub prefix: String,
    pub keys: u64,
    pub bytes: u64,
    pub reads: u64,
    pub never_read: u64,
}

#[derive(Clone, Debug, Default)]
pub struct RunFacts {
    pub nodes: Vec<NodeFacts>,
    by_name: BTreeMap<String, usize>,
    pub faults: Vec<FaultSpan>,
    /// Fault end events with no start before them (shown as a note, not drawn).
    pub unmatched_fault_ends: u64,
    /// The end of the time axis: the later of the summary's simulated time and the last event.
    pub end_ms: u64,
    pub liveness_from_ms: Option<u64>,
    pub violations: Vec<ViolationRow>,
    pub key_usage: Vec<KeyUsageRow>,
    pub any_source_changes: bool,
    /// Per summarized tier, the greatest lag any of its nodes showed (`tier_sample` events:
    /// every node of the tier, where the trace keeps some nodes' own samples only).
    pub tier_lag_max_ms: BTreeMap<String, u64>,
}

impl RunFacts {
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    fn node_mut(&mut self, name: &str) -> &mut NodeFacts {
        let i = match self.by_name.get(name) {
            Some(&i) => i,
            None => {
                self.nodes.push(NodeFacts { name: name.to_string(), tier: "?".into(), ..NodeFacts::default() });
                self.by_name.insert(name.to_string(), self.nodes.len() - 1);
                self.nodes.len() - 1
            }
        };
        &mut self.nodes[i]
    }

    /// Tiers top-down (by depth, then first appearance), each with its nodes' indices.
    pub fn tiers(&self) -> Vec<(String, Vec<usize>)> {
        let mut order: Vec<(u32, usize, String)> = Vec::new();
        let mut members: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let entry = members.entry(node.tier.clone()).or_default();
            if entry.is_empty() {
                order.push((node.depth.unwrap_or(u32::MAX), i, node.tier.clone()));
            }
            entry.push(i);
        }
        order.sort();
        order.into_iter().map(|(_, _, tier)| (tier.clone(), members.remove(&tier).unwrap_or_default())).collect()
    }

    #[expect(
        clippy::too_many_lines,
        reason = "130 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    pub fn gather(summary: &RunSummary, events: &[Event]) -> RunFacts {
        let mut facts = RunFacts::default();
        for info in &summary.nodes {
            let node = facts.node_mut(&info.name);
            node.tier = info.tier.clone();
            node.depth = Some(info.depth);
            node.datacenter = info.datacenter;
        }
        let mut liveness_event = None;
        let mut open: Vec<(String, FaultKind, String, u64)> = Vec::new();
        let mut last_ms = 0;
        for event in events {
            last_ms = last_ms.max(event.at_ms());
            match event {
                Event::Applied { node, last, .. } => {
                    let n = facts.node_mut(node);
                    n.last_applied = Some(n.last_applied.unwrap_or(0).max(*last));
                }
                Event::Bootstrapped { node, index, .. } => {
                    let n = facts.node_mut(node);
                    n.bootstraps_seen += 1;
                    n.last_applied = Some(n.last_applied.unwrap_or(0).max(*index));
                }
                Event::Fault { at_ms, node, kind, phase, detail } => {
                    facts.node_mut(node);
                    if *phase == FaultPhase::End {
                        match open.iter().position(|(n, k, _, _)| n == node && k == kind) {
                            Some(i) => {
                                let (node, kind, detail, start_ms) = open.remove(i);
                                facts.faults.push(FaultSpan {
                                    node,
                                    kind,
                                    detail,
                                    start_ms,
                                    end_ms: *at_ms,
                                    open_ended: false,
                                });
                            }
                            None => facts.unmatched_fault_ends += 1,
                        }
                    } else {
                        open.push((node.clone(), *kind, detail.clone(), *at_ms));
                    }
                }
                Event::LagSample { node, lag_ms, applied, .. } => {
                    let n = facts.node_mut(node);
                    n.max_lag_ms = Some(n.max_lag_ms.unwrap_or(0).max(*lag_ms));
                    n.last_applied = Some(n.last_applied.unwrap_or(0).max(*applied));
                }
                Event::TierSample { tier, lag_max_ms, .. } => {
                    let max = facts.tier_lag_max_ms.entry(tier.clone()).or_default();
                    *max = (*max).max(*lag_max_ms);
                }
                Event::Violation { at_ms, checker, node, index, message } => {
                    facts.violations.push(ViolationRow {
                        at_ms: *at_ms,
                        checker: *checker,
                        node: node.clone(),
                        index: *index,
                        message: message.clone(),
                    });
                }
                Event::SourceChanged { at_ms, node, source, reason } => {
                    facts.any_source_changes = true;
                    facts.node_mut(node).sources.push(SourceSwitch {
                        at_ms: *at_ms,
                        source: source.clone(),
                        reason: *reason,
                    });
                }
                Event::Phase { at_ms, phase: RunPhase::Liveness } => liveness_event = Some(*at_ms),
                Event::NodeSummary {
                    node,
                    tier,
                    applied,
                    failovers,
                    bootstraps,
                    bogus_requests,
                    logical_bytes,
                    engine_bytes_written,
                    ..
                } => {
                    let n = facts.node_mut(node);
                    if n.tier == "?" && !tier.is_empty() {
                        n.tier = tier.clone();
                    }
                    n.summary = Some(NodeCounters {
                        applied: *applied,
                        failovers: *failovers,
                        bootstraps: *bootstraps,
                        bogus_requests: *bogus_requests,
                        logical_bytes: *logical_bytes,
                        engine_bytes_written: *engine_bytes_written,
                    });
                }
                Event::KeyUsage { prefix, keys, bytes, reads, never_read, .. } => facts.key_usage.push(KeyUsageRow {
                    prefix: prefix.clone(),
                    keys: *keys,
                    bytes: *bytes,
                    reads: *reads,
                    never_read: *never_read,
                }),
                // Their values are read by the charts; here they only make their node known.
                Event::Cursor { node, .. }
                | Event::ReadSample { node, .. }
                | Event::DiskSample { node, .. }
                | Event::CacheSample { node, .. }
                | Event::MemorySample { node, .. } => {
                    facts.node_mut(node);
                }
                // Writes have no node; kinds added to the schema later are ignored here until the
                // page shows them.
                _ => {}
            }
        }
        facts.end_ms = summary.simulated_ms.max(last_ms).max(1);
        facts.liveness_from_ms = liveness_event.or((summary.liveness_from_ms > 0).then_some(summary.liveness_from_ms));
        let open_end = facts.liveness_from_ms.unwrap_or(facts.end_ms);
        for (node, kind, detail, start_ms) in open {
            facts.faults.push(FaultSpan {
                node,
                kind,
                detail,
                start_ms,
                end_ms: open_end.max(start_ms),
                open_ended: true,
            });
        }
        facts.faults.sort_by(|a, b| (a.start_ms, &a.node).cmp(&(b.start_ms, &b.node)));
        for fault in &facts.faults {
            let i = facts.by_name[&fault.node];
            facts.nodes[i].faults += 1;
        }
        facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: node.into(), kind, phase, detail: String::new() }
    }

    fn summary() -> RunSummary {
        serde_json::from_str(
            r#"{"scenario":"s","path":"s.toml","seed":1,"digest":"d","events":0,"simulated_ms":100000,
            "liveness_from_ms":80000,"writes_acked":0,"pending":[],"violations":[],"reproduce":"r",
            "nodes":[{"name":"root","tier":"root","depth":0},{"name":"e1","tier":"edge","depth":1}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn faults_pair_by_node_and_kind_and_open_ones_last_to_liveness() {
        let events = vec![
            fault(10, "e1", FaultKind::Kill, FaultPhase::Start),
            fault(20, "e1", FaultKind::Pause, FaultPhase::Start),
            fault(30, "e1", FaultKind::Kill, FaultPhase::End),
            fault(40, "x", FaultKind::Partition, FaultPhase::End),
            fault(50, "e2", FaultKind::SlowDisk, FaultPhase::Start),
        ];
        let facts = RunFacts::gather(&summary(), &events);
        let spans: Vec<(&str, &str, u64, u64, bool)> = facts
            .faults
            .iter()
            .map(|f| (f.node.as_str(), f.kind.as_str(), f.start_ms, f.end_ms, f.open_ended))
            .collect();
        assert_eq!(
            spans,
            vec![
                ("e1", "kill", 10, 30, false),
                ("e1", "pause", 20, 80_000, true),
                ("e2", "slow_disk", 50, 80_000, true)
            ]
        );
        assert_eq!(facts.unmatched_fault_ends, 1);
        let names: Vec<&str> = facts.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["root", "e1", "x", "e2"], "summary order, then first appearance");
        assert_eq!(facts.nodes[1].faults, 2);
        assert_eq!(facts.tiers().iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["root", "edge", "?"]);

        let events = [Event::ReadSample {
            at_ms: 1,
            node: "e9".into(),
            reads: 1,
            misses: 0,
            p50_us: 1,
            p99_us: 2,
            max_us: 3,
            errors: 0,
        }];
        let facts = RunFacts::gather(&summary(), &events);
        assert_eq!(facts.node_index("e9"), Some(2), "a node seen only in samples is still a node");
    }
}
