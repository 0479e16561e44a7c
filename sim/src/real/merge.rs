//! A real run's trace: the nodes' events files and the harness's own events (faults, phases,
//! writes, reads) merged by wall-clock time into the simulator's trace schema, with the lag
//! samples the simulator's sampler would have taken, and judged by the same checkers.
//!
//! Guarantees: an event's `at_ms` is its wall-clock time less the run's start (the nodes and
//! `qsim` read one machine's clock); events at one millisecond keep the nodes' before the
//! harness's (a root applies an entry before its write is acknowledged), each node's in its
//! file's order. Node addresses in events are mapped back to the simulator's (`10.B.T.N`), so
//! the checkers' node names by address are the plan's. A line that does not parse is an error
//! naming the file and line: a node's report must never be silently lost.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;

use qs_node::observe::{EventLine, NodeEvent};

use crate::trace::{Event, FaultKind, FaultPhase, Observer, Recorder};

use super::error::RealError;

/// A node's events, read from its events file.
#[derive(Debug)]
pub struct NodeEvents {
    pub events: Vec<Event>,
    /// Probes reached, with how often.
    pub probes: BTreeMap<crate::trace::Probe, u64>,
}

/// Reads one node's events file; `start_unix_ms` is the run's start.
pub fn read_events_file(path: &Path, start_unix_ms: u64) -> Result<NodeEvents, RealError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        // A node that never started wrote no events.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(RealError::EventsFile { path: path.to_path_buf(), source }),
    };
    let mut out = NodeEvents { events: Vec::new(), probes: BTreeMap::new() };
    for (n, line) in text.lines().enumerate() {
        let line: EventLine = serde_json::from_str(line).map_err(|source| RealError::EventsLine {
            path: path.to_path_buf(),
            line: n + 1,
            source,
        })?;
        let at_ms = line.at_unix_ms.saturating_sub(start_unix_ms);
        if let Some(event) = to_trace(at_ms, line.node, line.event, &mut out.probes) {
            out.events.push(event);
        }
    }
    Ok(out)
}

/// A source address as the trace names it: the simulator's address of the node.
fn simulated(address: SocketAddr) -> SocketAddr {
    SocketAddr::new(super::network::simulated(address.ip()), address.port())
}

/// One node event as a trace event (`trace::node_event`, as the simulator's observer makes
/// it), its addresses the simulator's; a probe is counted instead.
fn to_trace(
    at_ms: u64,
    node: String,
    event: NodeEvent,
    probes: &mut BTreeMap<crate::trace::Probe, u64>,
) -> Option<Event> {
    let event = match event {
        NodeEvent::BootstrapFailed { source, stage, chunks_stored } => {
            NodeEvent::BootstrapFailed { source: simulated(source), stage, chunks_stored }
        }
        NodeEvent::SourceChanged { source, reason } => NodeEvent::SourceChanged { source: simulated(source), reason },
        other => other,
    };
    match crate::trace::node_event(at_ms, node, event) {
        Ok(event) => Some(event),
        Err(probe) => {
            *probes.entry(probe).or_default() += 1;
            None
        }
    }
}

/// Merges the nodes' events with the harness's (both each in time order) and feeds them, with
/// a lag sample per running node every `sample_ms`, to `checkers`; returns the whole trace with
/// the violations they found, closed by the `probes` event: the nodes' `probes` and the faults'.
/// `nodes` are the scenario's node names.
pub fn judge(
    nodes: &[String],
    node_events: Vec<Vec<Event>>,
    harness: Vec<Event>,
    sample_ms: u64,
    probes: &BTreeMap<crate::trace::Probe, u64>,
    checkers: Vec<Box<dyn Observer>>,
) -> Vec<Event> {
    // Stable: at one millisecond, the nodes' (in name order) before the harness's.
    let mut merged: Vec<Event> = node_events.into_iter().flatten().collect();
    merged.extend(harness);
    merged.sort_by_key(Event::at_ms);

    let recorder = Recorder::new(|| 0, checkers);
    let mut recorder = recorder.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for (&probe, &hits) in probes {
        (0..hits).for_each(|_| recorder.reached(probe));
    }
    let mut applied: BTreeMap<String, u64> = BTreeMap::new();
    // Nodes a kill or stop holds down: no lag is taken from them, as in the simulator.
    let mut down: BTreeSet<String> = BTreeSet::new();
    let mut next_sample = sample_ms;
    for event in merged {
        while sample_ms > 0 && event.at_ms() >= next_sample {
            for node in nodes.iter().filter(|n| !down.contains(*n)) {
                let index = applied.get(node).copied().unwrap_or(0);
                let lag_ms = recorder.lag_ms(index, next_sample);
                recorder.record(Event::LagSample { at_ms: next_sample, node: node.clone(), lag_ms, applied: index });
            }
            next_sample += sample_ms;
        }
        match &event {
            Event::Applied { node, last, .. } => {
                applied.insert(node.clone(), *last);
            }
            Event::Bootstrapped { node, index, .. } => {
                applied.insert(node.clone(), *index);
            }
            Event::Fault { node, kind: FaultKind::Kill | FaultKind::Stop, phase, .. } => {
                if *phase == FaultPhase::Start {
                    down.insert(node.clone());
                } else {
                    down.remove(node);
                }
            }
            _ => {}
        }
        recorder.record(event);
    }
    let at_ms = recorder.events().last().map_or(0, Event::at_ms);
    let hits = recorder.probe_hits();
    recorder.record(Event::Probes { at_ms, hits });
    recorder.take_events()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file's lines become trace events at times from the run's start, with the simulator's
    /// addresses; probes are counted; a line that does not parse names its file and line.
    #[test]
    fn events_files_become_trace_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("edge-1.events.jsonl");
        let lines = [
            EventLine {
                at_unix_ms: 1_000_500,
                node: "edge-1".into(),
                event: NodeEvent::SourceChanged {
                    source: "127.1.1.2:7000".parse().unwrap(),
                    reason: crate::trace::SourceChange::Start,
                },
            },
            EventLine {
                at_unix_ms: 1_000_700,
                node: "edge-1".into(),
                event: NodeEvent::Reached(crate::trace::Probe::LeftStaleSource),
            },
        ];
        let text: String = lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
        std::fs::write(&path, &text).unwrap();
        let read = read_events_file(&path, 1_000_000).unwrap();
        assert_eq!(
            read.events,
            [Event::SourceChanged {
                at_ms: 500,
                node: "edge-1".into(),
                source: "10.0.1.2:7000".into(),
                reason: crate::trace::SourceChange::Start
            }]
        );
        assert_eq!(read.probes.get(&crate::trace::Probe::LeftStaleSource), Some(&1));
        std::fs::write(&path, text + "{\"torn\n").unwrap();
        let error = read_events_file(&path, 1_000_000).unwrap_err();
        assert!(matches!(error, RealError::EventsLine { line: 3, .. }), "{error:?}");
        assert!(error.to_string().contains("edge-1.events.jsonl:3: not an event line:"), "{error}");
    }

    /// The merged trace is in time order, with lag samples for running nodes only, and the
    /// checkers' violations in it: a node that applies an index twice is caught.
    #[test]
    fn the_merged_trace_is_judged_and_sampled() {
        let applied = |at_ms, node: &str, first, last| Event::Applied {
            at_ms,
            node: node.into(),
            first,
            last,
            hash: format!("h{last}"),
        };
        let root = vec![applied(100, "root", 1, 1), applied(1_100, "root", 2, 2)];
        let edge = vec![applied(200, "edge-1", 1, 1), applied(1_200, "edge-1", 1, 1)];
        let harness = vec![Event::Fault {
            at_ms: 300,
            node: "edge-1".into(),
            kind: FaultKind::Kill,
            phase: FaultPhase::Start,
            detail: String::new(),
        }];
        let nodes = vec!["root".to_string(), "edge-1".to_string()];
        let probes = [(crate::trace::Probe::LeftStaleSource, 2)].into_iter().collect();
        let checkers: Vec<Box<dyn Observer>> = vec![Box::new(crate::checkers::sequence::Sequence::default())];
        let trace = judge(&nodes, vec![root, edge], harness, 1_000, &probes, checkers);
        assert!(
            matches!(trace.last(), Some(Event::Probes { hits, .. }) if hits.len() == 2),
            "the nodes' probe and the kill's: {:?}",
            trace.last()
        );
        assert!(trace.windows(2).all(|w| w[0].at_ms() <= w[1].at_ms()), "in time order");
        let sampled: Vec<&str> = trace
            .iter()
            .filter_map(|e| match e {
                Event::LagSample { node, .. } => Some(node.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(sampled, ["root"], "edge-1 was down at 1 s");
        assert!(
            trace.iter().any(|e| matches!(e, Event::Violation { node, .. } if node == "edge-1")),
            "the repeated index 1 is a violation"
        );
    }
}
