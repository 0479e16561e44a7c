//! The run's trace: every event the checkers and reports see, in simulated-time order.
//!
//! Guarantees: events are recorded in the order the simulator produced them, each with its
//! simulated time, and serialized canonically (one JSON object per line, fields in a fixed
//! order), so the same binary, scenario and seed give a byte-identical trace and digest. The
//! digest is BLAKE3 over those lines.
//!
//! Nodes report through the typed seam `qs_node::observe` (applies, bootstraps, source changes,
//! persisted positions); [`RecorderObserver`] turns each report into an [`Event`].

use std::sync::{Arc, Mutex};

use crate::sync::Locked;
use qs_node::observe::{NodeEvent, NodeObserver};

pub use qs_reports::schema::{
    BootstrapStage, Checker, Event, FaultKind, FaultPhase, Probe, ProbeHits, RaftRole, RunPhase, SourceChange,
};

/// Receives each event as it happens (the checkers).
pub trait Observer: Send {
    /// Returns violations this event reveals.
    fn observe(&mut self, event: &Event) -> Vec<Event>;
}

/// The trace being recorded, shared by the layer, the world and the checkers.
#[derive(Default)]
pub struct Recorder {
    events: Vec<Event>,
    observers: Vec<Box<dyn Observer>>,
    clock_ms: Option<Box<dyn Fn() -> u64 + Send>>,
    /// How often each probe was reached (a `BTreeMap`: its order is the trace's).
    probes: std::collections::BTreeMap<Probe, u64>,
    /// The root's commits: the last index of each, and when it was applied — the simulator's
    /// own clock for lag ([`lag_ms`](Self::lag_ms)), never what a node says of itself.
    root_commits: std::collections::BTreeMap<u64, u64>,
    /// The root's newest applied index.
    root_applied: u64,
    /// Each root member's last applied index.
    root_heads: std::collections::BTreeMap<String, u64>,
    /// The nodes whose per-node series the trace does not keep ([`Detail`]). Asked of every
    /// event (ten thousand names in a large tree), never visited: a hash set, FxHash, which no
    /// per-process seed changes.
    omitted_nodes: std::collections::HashSet<String, rustc_hash::FxBuildHasher>,
    /// Events fed to the checkers but not kept, for those nodes.
    omitted: u64,
    /// Each node's largest modelled RSS, kept or not.
    rss_max: std::collections::BTreeMap<String, u64>,
}

/// Which nodes' per-node series a trace keeps. A per-node series is one of the events a node
/// makes steadily, every batch or every sample: [`Event::Applied`], `LagSample`, `Cursor`,
/// `ReadSample`, `DiskSample`, `CacheSample` and `MemorySample`. Every other event (faults,
/// source changes, bootstraps, violations, end-of-run summaries) is always kept.
///
/// A tree's trace keeps the series of at most `nodes_per_tier` nodes of each tier (the first by
/// number), of every root member, and of every node a fault of the run names; a tier with more
/// nodes is summarized each sample by a [`Event::TierSample`] over all of them. So a trace
/// holds at most `(root members + tiers × nodes_per_tier + fault targets)` nodes' series,
/// whatever the tree's size, and is whole (nothing omitted) for a tree with no larger tier.
/// The checkers see every event either way. A run's plan derives it
/// ([`crate::plan::trace_detail`]).
#[derive(Clone, Debug, Default)]
pub struct Detail {
    /// The nodes whose series are left out.
    pub omitted: std::collections::BTreeSet<String>,
    /// Each node's tier, in topology order, when any tier is summarized (else empty): what
    /// the sampler groups its tier samples by.
    pub tiers: Vec<(String, String)>,
}

/// Whether `event` is one of a node's steady series ([`Detail`]), and whose.
fn series_node(event: &Event) -> Option<&str> {
    match event {
        Event::Applied { node, .. }
        | Event::LagSample { node, .. }
        | Event::Cursor { node, .. }
        | Event::ReadSample { node, .. }
        | Event::DiskSample { node, .. }
        | Event::CacheSample { node, .. }
        | Event::MemorySample { node, .. } => Some(node),
        _ => None,
    }
}

/// The node whose commits are the log (its name in every scenario).
pub const ROOT: &str = "root";

/// Whether `node` is the root or a member of a root group (`root-2`, ...; no tier may be named
/// `root`, so no replica's name starts so).
pub fn is_root(node: &str) -> bool {
    node == ROOT
        || node.strip_prefix(ROOT).and_then(|rest| rest.strip_prefix('-')).is_some_and(|id| id.parse::<u32>().is_ok())
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("events", &self.events.len()).finish_non_exhaustive()
    }
}

pub type SharedRecorder = Arc<Mutex<Recorder>>;

impl Recorder {
    pub fn new(clock_ms: impl Fn() -> u64 + Send + 'static, observers: Vec<Box<dyn Observer>>) -> SharedRecorder {
        Arc::new(Mutex::new(Recorder {
            events: Vec::new(),
            observers,
            clock_ms: Some(Box::new(clock_ms)),
            probes: Default::default(),
            root_commits: Default::default(),
            root_applied: 0,
            root_heads: Default::default(),
            omitted_nodes: Default::default(),
            omitted: 0,
            rss_max: Default::default(),
        }))
    }

    /// Keeps no per-node series of `detail`'s omitted nodes from now on (the checkers still
    /// see them).
    pub fn keep_detail(&mut self, detail: &Detail) {
        self.omitted_nodes = detail.omitted.iter().cloned().collect();
    }

    /// Events the checkers saw that the trace does not keep ([`Detail`]).
    pub fn omitted(&self) -> u64 {
        self.omitted
    }

    /// The largest modelled RSS of each node that reported one, kept in the trace or not.
    pub fn rss_max(&self) -> &std::collections::BTreeMap<String, u64> {
        &self.rss_max
    }

    pub fn now_ms(&self) -> u64 {
        self.clock_ms.as_ref().map_or(0, |clock| clock())
    }

    /// Counts one reach of `probe`.
    pub fn reached(&mut self, probe: Probe) {
        *self.probes.entry(probe).or_default() += 1;
    }

    /// Every probe reached so far, with how often, in [`Probe`] order.
    pub fn probe_hits(&self) -> Vec<ProbeHits> {
        self.probes.iter().map(|(&probe, &hits)| ProbeHits { probe, hits }).collect()
    }

    /// Records `event` and feeds it to every observer, recording what they find. A fault
    /// starting counts as reaching its kind's probe.
    pub fn record(&mut self, event: Event) {
        if let Event::Applied { at_ms, node, first, last, .. } = &event
            && is_root(node)
        {
            let previous = self.root_heads.insert(node.clone(), *last).unwrap_or(0);
            if *first <= previous {
                // A root that lost unsynced commits writes those indices again: the newer wins.
                self.root_commits.split_off(first);
                self.root_commits.insert(*last, *at_ms);
                self.root_applied = *last;
            } else if *last > self.root_applied {
                // New indices; a root group member applying what another applied first adds
                // nothing: the entry was committed when the first applied it.
                self.root_commits.insert(*last, *at_ms);
                self.root_applied = *last;
            }
        }
        if let Event::Fault { kind, phase: FaultPhase::Start, .. } = &event
            && let Some(probe) = kind.probe()
        {
            self.reached(probe);
        }
        if let Event::MemorySample { node, rss, .. } = &event {
            let max = self.rss_max.entry(node.clone()).or_default();
            *max = (*max).max(*rss);
        }
        let mut found = Vec::new();
        for observer in &mut self.observers {
            found.extend(observer.observe(&event));
        }
        if series_node(&event).is_some_and(|node| self.omitted_nodes.contains(node)) {
            self.omitted += 1;
        } else {
            self.events.push(event);
        }
        self.events.extend(found);
    }

    /// How far a node that applied up to `applied` lags the root at `now_ms`, by the
    /// simulator's own account: 0 when it holds everything the root committed, else how long
    /// ago the root committed the first entry it lacks. A node's own `lag_ms` is what it
    /// believes; the checkers judge this, so a node that misjudges its lag cannot blind them.
    pub fn lag_ms(&self, applied: u64, now_ms: u64) -> u64 {
        if applied >= self.root_applied {
            return 0;
        }
        let committed = self.root_commits.range(applied + 1..).next().map_or(now_ms, |(_, &at)| at);
        now_ms.saturating_sub(committed)
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Hands over the recorded events, leaving none: the end of a run, where cloning them would
    /// copy the whole trace once more.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    pub fn violations(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| matches!(e, Event::Violation { .. }))
    }
}

/// The canonical trace of `events`: each one's line and a newline, in order — what
/// `trace.jsonl` holds, byte for byte.
pub fn text(events: &[Event]) -> String {
    let mut text = Vec::with_capacity(events.len() * 128);
    for event in events {
        // Into the one buffer: no string per line (`Event::line` makes the same bytes).
        serde_json::to_writer(&mut text, event).expect("events always serialize");
        text.push(b'\n');
    }
    String::from_utf8(text).expect("serde_json writes UTF-8")
}

/// BLAKE3 over a canonical trace ([`text`]).
pub fn digest(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// The nodes' observer under the simulator: each [`NodeEvent`] a node reports becomes a trace
/// event at the current simulated time, fed to every checker.
#[derive(Debug)]
pub struct RecorderObserver(pub SharedRecorder);

impl NodeObserver for RecorderObserver {
    fn observe(&self, node: &str, event: NodeEvent) {
        let mut recorder = self.0.locked();
        let at_ms = recorder.now_ms();
        match node_event(at_ms, node.to_string(), event) {
            Ok(event) => recorder.record(event),
            Err(probe) => recorder.reached(probe),
        }
    }
}

/// A node's report as the trace records it at `at_ms`: an event, or a probe reached (counted,
/// not traced). The one conversion, for the simulator's observer and a real run's events files.
pub fn node_event(at_ms: u64, node: String, event: NodeEvent) -> Result<Event, Probe> {
    Ok(match event {
        NodeEvent::Applied { first, last, hash } => Event::Applied { at_ms, node, first, last, hash },
        NodeEvent::Bootstrapped { index, hash } => Event::Bootstrapped { at_ms, node, index, hash },
        NodeEvent::BootstrapFailed { source, stage, chunks_stored } => {
            Event::BootstrapFailed { at_ms, node, source: source.to_string(), stage, chunks_stored }
        }
        NodeEvent::SourceChanged { source, reason } => {
            Event::SourceChanged { at_ms, node, source: source.to_string(), reason }
        }
        NodeEvent::CursorPersisted { index } => Event::Cursor { at_ms, node, index },
        NodeEvent::RaftRole { term, role, leader } => Event::RaftRole { at_ms, node, term, role, leader },
        NodeEvent::RaftConfiguration { index, voters, outgoing } => {
            Event::RaftConfiguration { at_ms, node, index, voters, outgoing }
        }
        NodeEvent::RaftConfigurationHeld { index, voters, outgoing } => {
            Event::RaftConfigurationHeld { at_ms, node, index, voters, outgoing }
        }
        // Where the store went is a path on this machine (a scratch folder under the
        // simulator): not in the trace, whose every byte is a function of the seed.
        NodeEvent::StoreSetAside { kept: _ } => Event::StoreSetAside { at_ms, node },
        NodeEvent::Reached(reached) => return Err(reached),
        NodeEvent::FaultPoint { point, active } => Event::Fault {
            at_ms,
            node,
            kind: FaultKind::FaultPoint,
            phase: if active { FaultPhase::Start } else { FaultPhase::End },
            detail: point.name().to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text the digest and `trace.jsonl` share is each event's canonical line and a newline,
    /// byte for byte, and the digest is BLAKE3 over exactly that text.
    #[test]
    fn the_canonical_text_is_the_events_lines() {
        let events = vec![
            Event::Applied { at_ms: 1, node: "root".into(), first: 1, last: 3, hash: "ab".into() },
            Event::Fault {
                at_ms: 2,
                node: "mid-1".into(),
                kind: FaultKind::Kill,
                phase: FaultPhase::Start,
                detail: "a \"quoted\" détail\n".into(),
            },
            Event::Phase { at_ms: 3, phase: RunPhase::Liveness },
        ];
        let canonical = text(&events);
        let lines: String = events.iter().map(|event| event.line() + "\n").collect();
        assert_eq!(canonical, lines);
        assert_eq!(canonical.lines().count(), events.len(), "an escaped newline stays inside its line");
        assert_eq!(digest(&canonical), blake3::hash(lines.as_bytes()).to_hex().to_string());
        assert_ne!(digest(&canonical), digest(&canonical[..canonical.len() - 1]), "the digest covers every byte");
        assert_eq!(text(&[]), "");
    }

    /// Lag is measured from the root's commits: nothing missing is 0 however old the newest
    /// entry is; otherwise the age of the first entry the node lacks; a root that wrote indices
    /// again after losing them is judged by the newer commits.
    #[test]
    fn lag_is_the_age_of_the_first_missing_commit() {
        let recorder = Recorder::new(|| 0, Vec::new());
        let mut recorder = recorder.lock().unwrap();
        let applied = |first, last, at_ms| Event::Applied { at_ms, node: ROOT.into(), first, last, hash: "h".into() };
        recorder.record(applied(1, 3, 1_000));
        recorder.record(applied(4, 4, 2_000));
        recorder.record(Event::Applied { at_ms: 2_500, node: "edge-1".into(), first: 1, last: 9, hash: "h".into() });
        assert_eq!(recorder.lag_ms(4, 10_000), 0, "holds every commit");
        assert_eq!(recorder.lag_ms(3, 10_000), 8_000, "lacks index 4, committed at 2 s");
        assert_eq!(recorder.lag_ms(0, 10_000), 9_000, "lacks index 1, committed at 1 s");
        assert_eq!(recorder.lag_ms(2, 10_000), 9_000, "index 3 came in the first commit");
        recorder.record(applied(3, 3, 5_000)); // the root lost 3..=4 and wrote 3 again
        assert_eq!(recorder.lag_ms(2, 10_000), 5_000);
        assert_eq!(recorder.lag_ms(3, 10_000), 0, "the root's newest index is 3 again");
    }
}
