//! Bounded lag: a node with a healthy path to the root stays within `lag_max` of it.
//!
//! Lag is sampled from every running node once a simulated second (the age of its newest
//! applied entry, which root heartbeats keep fresh). Two rules:
//!
//! - **Settled:** with no fault active, the last healed more than `lag_max` ago and the run
//!   past start-up, no node lags by more than `lag_max`.
//! - **During faults, per node** (the promise of staleness failover): a node none of whose own
//!   faults is active or recent, one of whose sources has had a healthy path to the root for
//!   the whole window — that source, and a source of it, up to the root, untouched by any fault,
//!   and where the root is a group, a majority of its members untouched (a group commits
//!   nothing without one). As in `raft`'s member liveness, a member that starts a new life (its
//!   disk replaced, its damaged store set aside) counts toward that majority only once it has
//!   applied what the group had when it lost its state — until then it may not vote — and a
//!   member whose store rotted never counts —
//!   lags by at most `staleness_failover + heartbeat_interval +` [`FAILOVER_MARGIN_MS`]: time to
//!   notice its source went quiet, move to the healthy one, and catch up. The window is that
//!   bound. Faults that touch more than one node (`split`, `clog_link`) and the network-wide
//!   ones (`latency`, `loss`) pause this rule everywhere, as they can make any path slow.
//!   A breach is reported once per episode (until the node is back under the bound).
//!
//! No flapping: in the same settled window a node must not change its source. Nothing broke,
//! so a failover then is a false alarm (a staleness threshold tighter than the heartbeat, a
//! backoff that never settles) that churns connections across the tree.

use std::collections::{BTreeMap, BTreeSet};

use super::FaultQuiet;
use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer, SourceChange};

/// Beyond staleness and a heartbeat, what a node is allowed to fail over and catch up: the
/// reconnect backoff's cap (5 s by default) and a snapshot bootstrap or a burst of entries.
pub const FAILOVER_MARGIN_MS: u64 = 10_000;

/// Who follows whom, for the per-node rule.
#[derive(Clone, Debug, Default)]
pub struct Paths {
    /// Each replica's sources (node names), primaries first.
    pub sources: BTreeMap<String, Vec<String>>,
    /// `staleness_failover + heartbeat_interval + FAILOVER_MARGIN_MS`.
    pub bound_ms: u64,
    /// Node names by host address (a `source_changed` event names its source by address).
    pub names_by_ip: BTreeMap<std::net::IpAddr, String>,
}

impl Paths {
    /// The node a `source_changed` event's `source` (an address, perhaps a relay's port on
    /// the source's host) names.
    pub fn node_at(&self, source: &str) -> Option<&str> {
        let ip = source.parse::<std::net::SocketAddr>().ok()?.ip();
        self.names_by_ip.get(&ip).map(String::as_str)
    }
}

/// Faults on one node, or on several at once.
#[derive(Debug, Default)]
struct NodeFaults {
    /// Active faults by node (a count: two may overlap on one node).
    active: BTreeMap<String, u32>,
    /// When each node's last fault ended.
    ended_ms: BTreeMap<String, u64>,
    /// Active faults that touch several nodes or the whole network, and when the last ended.
    wide_active: u32,
    wide_ended_ms: Option<u64>,
}

impl NodeFaults {
    fn observe(&mut self, event: &Event) {
        let Event::Fault { at_ms, node, kind, phase, .. } = event else { return };
        let wide = kind.touches_several_nodes() || node == "network";
        let start = *phase == FaultPhase::Start;
        if wide {
            if start {
                self.wide_active += 1;
            } else {
                self.wide_active = self.wide_active.saturating_sub(1);
                self.wide_ended_ms = Some(*at_ms);
            }
        } else if start {
            *self.active.entry(node.clone()).or_default() += 1;
        } else {
            let n = self.active.entry(node.clone()).or_default();
            *n = n.saturating_sub(1);
            self.ended_ms.insert(node.clone(), *at_ms);
        }
    }

    /// Whether `node` has been free of faults for the `window_ms` before `at_ms`.
    fn clear(&self, node: &str, at_ms: u64, window_ms: u64) -> bool {
        self.active.get(node).copied().unwrap_or(0) == 0
            && self.ended_ms.get(node).is_none_or(|end| at_ms.saturating_sub(*end) > window_ms)
    }

    fn wide_clear(&self, at_ms: u64, window_ms: u64) -> bool {
        self.wide_active == 0 && self.wide_ended_ms.is_none_or(|end| at_ms.saturating_sub(end) > window_ms)
    }
}

#[derive(Debug)]
pub struct Lag {
    lag_max_ms: u64,
    faults: FaultQuiet,
    paths: Paths,
    node_faults: NodeFaults,
    /// Nodes over the per-node bound now (reported once per episode).
    breaching: BTreeSet<String>,
    /// The tree's roots: the root, or a root group's members (every source that follows none).
    roots: Vec<String>,
    /// Which of a root group's members may count toward its majority.
    standing: Standing,
}

/// A root group's members' standing beyond their faults (see the module doc).
#[derive(Debug, Default)]
struct Standing {
    /// The group's newest applied index, from its members' samples and applies.
    newest: u64,
    /// Per member that lost its state: the group's newest index then, until it applies as far.
    fresh_until: BTreeMap<String, u64>,
    /// Members whose store rotted: never counted (the damage surfaces whenever it is read).
    rotted: BTreeSet<String>,
}

impl Standing {
    fn observe(&mut self, roots: &[String], event: &Event) {
        let member = |node: &String| roots.contains(node);
        match event {
            Event::Fault { node, kind: FaultKind::Sigbus, phase: FaultPhase::End, .. } if member(node) => {
                self.fresh_until.insert(node.clone(), self.newest); // its disk was replaced
            }
            Event::Fault { node, kind: FaultKind::BitRot, phase: FaultPhase::Start, .. } if member(node) => {
                self.rotted.insert(node.clone());
            }
            Event::StoreSetAside { node, .. } if member(node) => {
                self.fresh_until.insert(node.clone(), self.newest);
            }
            Event::Applied { node, last: index, .. }
            | Event::Bootstrapped { node, index, .. }
            | Event::LagSample { node, applied: index, .. }
                if member(node) =>
            {
                self.newest = self.newest.max(*index);
                if self.fresh_until.get(node).is_some_and(|until| index >= until) {
                    self.fresh_until.remove(node);
                }
            }
            _ => {}
        }
    }

    /// Whether `member` may count toward its group's majority, its faults aside.
    fn counts(&self, member: &str) -> bool {
        !self.fresh_until.contains_key(member) && !self.rotted.contains(member)
    }
}

impl Lag {
    pub fn new(lag_max_ms: u64) -> Lag {
        Lag::with_paths(lag_max_ms, Paths::default())
    }

    /// With the topology, so the per-node rule applies during faults.
    pub fn with_paths(lag_max_ms: u64, paths: Paths) -> Lag {
        let roots: BTreeSet<&String> =
            paths.sources.values().flatten().filter(|source| !paths.sources.contains_key(*source)).collect();
        let roots = roots.into_iter().cloned().collect();
        Lag {
            lag_max_ms,
            faults: FaultQuiet::default(),
            paths,
            node_faults: NodeFaults::default(),
            breaching: BTreeSet::new(),
            roots,
            standing: Standing::default(),
        }
    }

    /// Whether a majority of the tree's roots (all of a root of one) has been free of faults
    /// for the window: only then can the root, or the root group, have gone on committing.
    fn roots_clear(&self, at_ms: u64, window_ms: u64) -> bool {
        let group = self.roots.len() > 1;
        let counts =
            |root: &String| self.node_faults.clear(root, at_ms, window_ms) && (!group || self.standing.counts(root));
        let clear = self.roots.iter().filter(|root| counts(root)).count();
        clear * 2 > self.roots.len()
    }

    /// A source of `node` whose path to the root has been untouched by faults for the window.
    fn healthy_source(&self, node: &str, at_ms: u64) -> Option<&str> {
        let window = self.paths.bound_ms;
        let healthy = |start: &str| -> bool {
            // Up the tree along any healthy source, at most one step per tier (no cycles).
            let mut frontier = vec![start.to_string()];
            for _ in 0..=self.paths.sources.len() {
                let mut next = Vec::new();
                for n in &frontier {
                    if !self.node_faults.clear(n, at_ms, window) {
                        continue;
                    }
                    match self.paths.sources.get(n) {
                        None => return self.roots_clear(at_ms, window), // the root, or a member
                        Some(sources) => next.extend(sources.iter().cloned()),
                    }
                }
                if next.is_empty() {
                    return false;
                }
                frontier = next;
            }
            false
        };
        self.paths.sources.get(node)?.iter().find(|s| healthy(s)).map(String::as_str)
    }

    /// No fault active, the last healed over `lag_max` ago, and past start-up.
    fn settled(&self, at_ms: u64) -> bool {
        self.faults.quiet_for_ms(at_ms).is_some_and(|quiet| quiet > self.lag_max_ms)
    }
}

impl Observer for Lag {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        self.node_faults.observe(event);
        self.standing.observe(&self.roots, event);
        if self.faults.observe(event) {
            return Vec::new();
        }
        match event {
            Event::SourceChanged { at_ms, node, source, reason }
                if self.settled(*at_ms) && *reason != SourceChange::Start =>
            {
                let message = format!(
                    "flapping: moved to source {source} ({reason}) with every fault healed for over {} ms",
                    self.lag_max_ms
                );
                vec![Event::Violation { at_ms: *at_ms, checker: Checker::Lag, node: node.clone(), index: 0, message }]
            }
            Event::LagSample { at_ms, node, lag_ms, applied } => {
                let settled = self.settled(*at_ms);
                if settled && *lag_ms > self.lag_max_ms {
                    let message =
                        format!("lag {lag_ms} ms with every fault healed; the bound is {} ms", self.lag_max_ms);
                    return vec![Event::Violation {
                        at_ms: *at_ms,
                        checker: Checker::Lag,
                        node: node.clone(),
                        index: *applied,
                        message,
                    }];
                }
                if settled || self.paths.bound_ms == 0 {
                    return Vec::new();
                }
                let bound = self.paths.bound_ms;
                if *lag_ms <= bound {
                    self.breaching.remove(node);
                    return Vec::new();
                }
                if self.breaching.contains(node)
                    || !self.node_faults.wide_clear(*at_ms, bound)
                    || !self.node_faults.clear(node, *at_ms, bound)
                    || *at_ms <= bound
                {
                    return Vec::new();
                }
                let Some(source) = self.healthy_source(node, *at_ms).map(str::to_string) else { return Vec::new() };
                self.breaching.insert(node.clone());
                let message = format!(
                    "lag {lag_ms} ms while its source {source} had a fault-free path upstream for the last {bound} ms; \
                     the bound during faults is {bound} ms (staleness failover + heartbeat + {FAILOVER_MARGIN_MS} ms)"
                );
                vec![Event::Violation {
                    at_ms: *at_ms,
                    checker: Checker::Lag,
                    node: node.clone(),
                    index: *applied,
                    message,
                }]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::FaultKind;

    fn sample(at_ms: u64, lag_ms: u64) -> Event {
        Event::LagSample { at_ms, node: "edge-1".into(), lag_ms, applied: 1 }
    }

    fn fault(at_ms: u64, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: "mid-1".into(), kind: FaultKind::Kill, phase, detail: String::new() }
    }

    #[test]
    fn blames_lag_only_when_no_fault_explains_it() {
        let mut check = Lag::new(1_000);
        assert!(check.observe(&sample(500, 5_000)).is_empty(), "start-up grace");
        assert_eq!(check.observe(&sample(2_000, 5_000)).len(), 1, "healthy and lagging");
        assert!(check.observe(&fault(3_000, FaultPhase::Start)).is_empty());
        assert!(check.observe(&sample(4_000, 9_000)).is_empty(), "a fault is active");
        assert!(check.observe(&fault(5_000, FaultPhase::End)).is_empty());
        assert!(check.observe(&sample(5_500, 9_000)).is_empty(), "catching up after healing");
        assert_eq!(check.observe(&sample(6_500, 9_000)).len(), 1, "still behind after the grace");
        assert!(check.observe(&sample(7_500, 200)).is_empty());
        let moved = |at_ms, reason: SourceChange| Event::SourceChanged {
            at_ms,
            node: "edge-1".into(),
            source: "10.0.1.2:7000".into(),
            reason,
        };
        assert_eq!(check.observe(&moved(8_000, SourceChange::Stale)).len(), 1, "flapping while healthy");
        assert!(check.observe(&moved(8_000, SourceChange::Start)).is_empty(), "a (re)start is not a flap");
        assert!(check.observe(&fault(9_000, FaultPhase::Start)).is_empty());
        assert!(check.observe(&moved(9_500, SourceChange::Disconnected)).is_empty(), "a fault explains it");
    }

    fn tree() -> Paths {
        let mut sources = BTreeMap::new();
        sources.insert("mid-1".to_string(), vec!["root".to_string()]);
        sources.insert("mid-2".to_string(), vec!["root".to_string()]);
        sources.insert("edge-1".to_string(), vec!["mid-1".to_string(), "mid-2".to_string()]);
        Paths { sources, bound_ms: 5_000, names_by_ip: BTreeMap::new() }
    }

    fn edge(at_ms: u64, lag_ms: u64) -> Event {
        Event::LagSample { at_ms, node: "edge-1".into(), lag_ms, applied: 1 }
    }

    fn on(at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: node.into(), kind, phase, detail: String::new() }
    }

    /// Violations of the per-node rule (the lag bound 60 s keeps the settled rule out of it).
    fn breaches(events: &[Event]) -> Vec<u64> {
        let mut check = Lag::with_paths(60_000, tree());
        events
            .iter()
            .flat_map(|e| check.observe(e))
            .map(|v| match v {
                Event::Violation { at_ms, .. } => at_ms,
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn during_a_fault_a_node_with_a_healthy_source_must_fail_over_within_the_bound() {
        // mid-1 (edge-1's primary) is paused from 10 s to 60 s; mid-2 stays healthy.
        let mut events = vec![on(10_000, "mid-1", FaultKind::Pause, FaultPhase::Start)];
        // A node that fails over: its lag stays under the bound.
        events.extend((11..=59).map(|s| edge(s * 1000, 3_000)));
        assert!(breaches(&events).is_empty());
        // One that never leaves its paused source: caught once, when it passes the bound.
        let mut stuck = vec![on(10_000, "mid-1", FaultKind::Pause, FaultPhase::Start)];
        stuck.extend((11..=59).map(|s| edge(s * 1000, (s - 10) * 1000)));
        assert_eq!(breaches(&stuck), [16_000]);
    }

    #[test]
    fn a_root_group_without_a_clear_majority_commits_nothing_to_lag_behind() {
        // mid-1 follows the three members of a root group; the edge follows mid-1.
        let mut sources = BTreeMap::new();
        let members = ["root", "root-2", "root-3"].map(String::from).to_vec();
        sources.insert("mid-1".to_string(), members);
        sources.insert("edge-1".to_string(), vec!["mid-1".to_string()]);
        let paths = Paths { sources, bound_ms: 5_000, names_by_ip: BTreeMap::new() };
        let breaches_in = |events: &[Event]| {
            let mut lag = Lag::with_paths(60_000, paths.clone());
            events.iter().flat_map(|e| lag.observe(e)).count()
        };
        let growing = (11..=40).map(|s| edge(s * 1000, (s - 10) * 1000));
        // Two members down: root-2 alone is clear, and a group of three commits nothing.
        let mut events = vec![
            on(10_000, "root", FaultKind::Sigbus, FaultPhase::Start),
            on(10_000, "root-3", FaultKind::Kill, FaultPhase::Start),
        ];
        events.extend(growing.clone());
        assert_eq!(breaches_in(&events), 0);
        // One member down: the other two commit, and the edge behind a clear mid-1 must keep up.
        let mut events = vec![on(10_000, "root-3", FaultKind::Kill, FaultPhase::Start)];
        events.extend(growing.clone());
        assert_eq!(breaches_in(&events), 1);
        // root's disk replaced (it starts empty, and votes only once it holds what the group
        // committed) and root-3 killed: root-2 alone counts, long after root's fault ended.
        let sample = |at_ms, node: &str, applied| Event::LagSample { at_ms, node: node.into(), lag_ms: 0, applied };
        let mut events = vec![
            sample(1_000, "root-2", 50),
            on(2_000, "root", FaultKind::Sigbus, FaultPhase::Start),
            on(3_000, "root", FaultKind::Sigbus, FaultPhase::End),
            on(10_000, "root-3", FaultKind::Kill, FaultPhase::Start),
        ];
        events.extend(growing.clone());
        assert_eq!(breaches_in(&events), 0);
        // Once it has applied as far as the group had, it counts again.
        events.insert(4, sample(4_000, "root", 50));
        assert_eq!(breaches_in(&events), 1);
    }

    #[test]
    fn no_blame_when_no_source_has_a_healthy_path_or_the_node_itself_was_hit() {
        let growing = |from: u64| (from + 1..=59).map(move |s| edge(s * 1000, (s - from) * 1000));
        // Both sources faulted: nowhere to go.
        let mut events = vec![
            on(10_000, "mid-1", FaultKind::Pause, FaultPhase::Start),
            on(10_000, "mid-2", FaultKind::Kill, FaultPhase::Start),
        ];
        events.extend(growing(10));
        assert!(breaches(&events).is_empty());
        // The only healthy source's own source (the root) is cut off.
        let mut events = vec![
            on(10_000, "mid-1", FaultKind::Pause, FaultPhase::Start),
            on(10_000, "root", FaultKind::Partition, FaultPhase::Start),
        ];
        events.extend(growing(10));
        assert!(breaches(&events).is_empty());
        // The node itself was killed and came back: it gets the bound to catch up.
        let mut events = vec![
            on(10_000, "edge-1", FaultKind::Kill, FaultPhase::Start),
            on(20_000, "edge-1", FaultKind::Kill, FaultPhase::End),
        ];
        events.extend((21..=25).map(|s| edge(s * 1000, 15_000)));
        assert!(breaches(&events).is_empty());
        // A network-wide fault makes any path slow.
        let mut events = vec![on(10_000, "network", FaultKind::Latency, FaultPhase::Start)];
        events.extend(growing(10));
        assert!(breaches(&events).is_empty());
    }
}
