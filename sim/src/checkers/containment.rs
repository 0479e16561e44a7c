//! Containment: a fault moves only what it must.
//!
//! The seed's cascading disconnect was one fault moving nodes far below it: a node that lost
//! its source dropped its own downstream, whose nodes dropped theirs. The rule, judged on every
//! source change for a reason other than a (re)start:
//!
//! - while some fault on a node X is in effect (active, or ended less than the failover bound
//!   ago: `staleness_failover + heartbeat_interval +` [`super::lag::FAILOVER_MARGIN_MS`]), a
//!   node may change source only if it is X, or X is one of its configured sources (a direct
//!   downstream node of X);
//! - or it moves toward health: it left a stale source (its own choice, not a source dropping or
//!   refusing it) that has lost its path to the root, for one that has a path (see
//!   `Containment::healthy`) — what the `lag` checker demands of a node with a healthy
//!   source, so the two never contradict each other;
//! - anything else is a violation that names the fault and the chain from X down to the node,
//!   with the moves along it in the window.
//!
//! Faults that touch several nodes or the whole network (`split`, `clog_link`, `latency`,
//! `loss`) pause the rule while in effect: they can make any path slow, so any node may have to
//! move. With no fault in effect a move is the `lag` checker's business (flapping), not this one's.

use std::collections::{BTreeMap, VecDeque};

use super::lag::Paths;
use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer, SourceChange};

/// How old a replica's view of its source may be when it moves: a keepalive interval, and a
/// probe of another source (two keepalive intervals at most).
const NODE_VIEW_LAG_MS: u64 = 3_000;

#[derive(Debug)]
struct Move {
    at_ms: u64,
    node: String,
    reason: SourceChange,
}

#[derive(Debug, Default)]
pub struct Containment {
    paths: Paths,
    /// Per node, its faults now active (kind, since).
    active: BTreeMap<String, Vec<(FaultKind, u64)>>,
    /// Per node, its last fault that ended (kind, ended at).
    ended: BTreeMap<String, (FaultKind, u64)>,
    /// Faults on several nodes or the network: how many are active, and when the last ended.
    wide_active: u32,
    wide_ended_ms: Option<u64>,
    /// Recent moves, for naming the chain (older than the window are dropped).
    moves: VecDeque<Move>,
    /// Each node's current source and since when it follows it.
    current: BTreeMap<String, (String, u64)>,
}

impl Containment {
    pub fn new(paths: Paths) -> Containment {
        Containment { paths, ..Containment::default() }
    }

    fn window_ms(&self) -> u64 {
        self.paths.bound_ms
    }

    /// The fault on `node` in effect at `at_ms`, if any: an active one first, else the last to end.
    fn fault_on(&self, node: &str, at_ms: u64) -> Option<FaultKind> {
        if let Some(&(kind, _)) = self.active.get(node).and_then(|a| a.first()) {
            return Some(kind);
        }
        self.ended.get(node).filter(|(_, end)| at_ms.saturating_sub(*end) <= self.window_ms()).map(|(kind, _)| *kind)
    }

    fn active_on(&self, node: &str) -> bool {
        self.active.get(node).is_some_and(|a| !a.is_empty())
    }

    /// Whether `node` has a working path to the root at `at_ms`: along the sources it follows,
    /// no node has an active fault, and every link was made after its upstream node's last
    /// fault ended (if that was within the window) — a link from before it is the one the fault
    /// broke.
    fn healthy(&self, node: &str, at_ms: u64) -> bool {
        self.healthy_since(node, at_ms).is_some()
    }

    /// Since when `node`'s path has been working (0: no link on it was remade after a fault),
    /// or None when it is not (see [`healthy`](Self::healthy)).
    fn healthy_since(&self, node: &str, at_ms: u64) -> Option<u64> {
        let mut node = node.to_string();
        let mut since_ms = 0;
        for _ in 0..=self.paths.sources.len() {
            if self.active_on(&node) {
                return None;
            }
            if !self.paths.sources.contains_key(&node) {
                return Some(since_ms); // the root
            }
            let (source, since) = self.current.get(&node)?;
            if self.active_on(source) {
                return None;
            }
            if let Some((_, end)) =
                self.ended.get(source).filter(|(_, end)| at_ms.saturating_sub(*end) <= self.window_ms())
            {
                if since < end {
                    return None;
                }
                since_ms = since_ms.max(*since);
            }
            node = source.clone();
        }
        None
    }

    fn wide_in_effect(&self, at_ms: u64) -> bool {
        self.wide_active > 0 || self.wide_ended_ms.is_some_and(|end| at_ms.saturating_sub(end) <= self.window_ms())
    }

    /// The chain from a faulted node down to `node` (`[faulted, …, node]`), if `node` is below
    /// one: along the sources the nodes followed when it moved, or else the shortest along
    /// configured sources.
    fn chain_from_fault(&self, node: &str, at_ms: u64) -> Option<Vec<String>> {
        self.followed_chain_from_fault(node, at_ms).or_else(|| self.configured_chain_from_fault(node, at_ms))
    }

    /// The chain up the sources each node follows now, if a faulted node is on it.
    fn followed_chain_from_fault(&self, node: &str, at_ms: u64) -> Option<Vec<String>> {
        let mut chain = vec![node.to_string()];
        while let Some((source, _)) = self.current.get(chain.last().expect("never empty")) {
            if chain.contains(source) {
                return None; // a loop in what the trace said: no chain to name
            }
            chain.push(source.clone());
            if self.fault_on(source, at_ms).is_some() {
                chain.reverse();
                return Some(chain);
            }
        }
        None
    }

    fn configured_chain_from_fault(&self, node: &str, at_ms: u64) -> Option<Vec<String>> {
        let mut queue = VecDeque::from([vec![node.to_string()]]);
        let mut seen = std::collections::BTreeSet::from([node.to_string()]);
        while let Some(path) = queue.pop_front() {
            let last = path.last().expect("paths are never empty");
            for source in self.paths.sources.get(last).into_iter().flatten() {
                if !seen.insert(source.clone()) {
                    continue;
                }
                let mut longer = path.clone();
                longer.push(source.clone());
                if self.fault_on(source, at_ms).is_some() {
                    longer.reverse();
                    return Some(longer);
                }
                queue.push_back(longer);
            }
        }
        None
    }

    fn observe_fault(&mut self, at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase) {
        if kind.touches_several_nodes() || node == "network" {
            match phase {
                FaultPhase::Start => self.wide_active += 1,
                FaultPhase::End => {
                    self.wide_active = self.wide_active.saturating_sub(1);
                    self.wide_ended_ms = Some(at_ms);
                }
            }
            return;
        }
        let active = self.active.entry(node.to_string()).or_default();
        match phase {
            FaultPhase::Start => active.push((kind, at_ms)),
            FaultPhase::End => {
                if let Some(at) = active.iter().position(|(k, _)| *k == kind) {
                    active.remove(at);
                }
                self.ended.insert(node.to_string(), (kind, at_ms));
            }
        }
    }

    fn judge(&self, at_ms: u64, node: &str, to: &str, reason: SourceChange) -> Option<Event> {
        if self.wide_in_effect(at_ms) || self.fault_on(node, at_ms).is_some() {
            return None;
        }
        let sources = self.paths.sources.get(node)?;
        if sources.iter().any(|s| self.fault_on(s, at_ms).is_some()) {
            return None; // directly below the fault
        }
        // What a replica knows of its source is up to a keepalive and a probe old: a source
        // whose path came back within that is still cut off from where the replica stands.
        let cut_off = |left: &str| self.healthy_since(left, at_ms).is_none_or(|since| at_ms - since < NODE_VIEW_LAG_MS);
        let left = self.current.get(node).map(|(source, _)| source.as_str());
        // Only a node's own choice (it left a stale source) is a move toward health; one whose
        // source dropped or refused it was moved by that source — the cascade itself.
        let toward_health = reason == SourceChange::Stale
            && left.is_some_and(cut_off)
            && self.paths.node_at(to).is_some_and(|to| self.healthy(to, at_ms));
        if toward_health {
            return None;
        }
        let in_effect: Vec<String> = self
            .active
            .iter()
            .filter(|(_, a)| !a.is_empty())
            .map(|(n, _)| n.clone())
            .chain(
                self.ended
                    .iter()
                    .filter(|(_, (_, end))| at_ms.saturating_sub(*end) <= self.window_ms())
                    .map(|(n, _)| n.clone()),
            )
            .collect();
        if in_effect.is_empty() {
            return None; // nothing to contain: flapping is the lag checker's
        }
        let message = match self.chain_from_fault(node, at_ms) {
            Some(chain) => {
                let top = &chain[0];
                let kind = self.fault_on(top, at_ms).expect("the chain starts at a faulted node");
                let moves: Vec<String> = self
                    .moves
                    .iter()
                    .filter(|m| chain[1..chain.len() - 1].contains(&m.node))
                    .map(|m| format!("{} ({}) at {} ms", m.node, m.reason, m.at_ms))
                    .collect();
                let moves = if moves.is_empty() { "none".to_string() } else { moves.join(", ") };
                format!(
                    "moved ({reason}) {} hops below the {kind} of {top}: {}; a fault may move only its node and the \
                     nodes directly below it; moves along the chain in the last {} ms: {moves}",
                    chain.len() - 1,
                    chain.join(" → "),
                    self.window_ms()
                )
            }
            None => format!(
                "moved ({reason}) while the only faults in effect were on {}, none of them on its path to the root",
                in_effect.join(", ")
            ),
        };
        Some(Event::Violation { at_ms, checker: Checker::Containment, node: node.to_string(), index: 0, message })
    }
}

impl Observer for Containment {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Fault { at_ms, node, kind, phase, .. } => {
                self.observe_fault(*at_ms, node, *kind, *phase);
                Vec::new()
            }
            Event::SourceChanged { at_ms, node, source, reason } => {
                let found =
                    if *reason == SourceChange::Start { None } else { self.judge(*at_ms, node, source, *reason) };
                if let Some(to) = self.paths.node_at(source) {
                    self.current.insert(node.clone(), (to.to_string(), *at_ms));
                }
                if *reason == SourceChange::Start {
                    return Vec::new();
                }
                let window = self.window_ms();
                while self.moves.front().is_some_and(|m| at_ms.saturating_sub(m.at_ms) > window) {
                    self.moves.pop_front();
                }
                self.moves.push_back(Move { at_ms: *at_ms, node: node.clone(), reason: *reason });
                found.into_iter().collect()
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// root → mid-1, mid-2 → region-1 (mid-1, mid-2) → edge-1 (region-1, region-2).
    fn tree() -> Paths {
        let mut sources = BTreeMap::new();
        sources.insert("mid-1".to_string(), vec!["root".to_string()]);
        sources.insert("mid-2".to_string(), vec!["root".to_string()]);
        sources.insert("region-1".to_string(), vec!["mid-1".to_string(), "mid-2".to_string()]);
        sources.insert("region-2".to_string(), vec!["mid-2".to_string(), "mid-1".to_string()]);
        sources.insert("edge-1".to_string(), vec!["region-1".to_string(), "region-2".to_string()]);
        let names_by_ip = [
            ("10.0.0.1", "root"),
            ("10.0.1.1", "mid-1"),
            ("10.0.1.2", "mid-2"),
            ("10.0.2.1", "region-1"),
            ("10.0.2.2", "region-2"),
            ("10.0.3.1", "edge-1"),
        ]
        .into_iter()
        .map(|(ip, name)| (ip.parse().unwrap(), name.to_string()))
        .collect();
        Paths { sources, bound_ms: 10_000, names_by_ip }
    }

    fn fault(at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: node.into(), kind, phase, detail: String::new() }
    }

    fn moved(at_ms: u64, node: &str, reason: SourceChange) -> Event {
        Event::SourceChanged { at_ms, node: node.into(), source: "10.0.9.9:7000".into(), reason }
    }

    fn violations(events: &[Event]) -> Vec<(String, String)> {
        let mut check = Containment::new(tree());
        events
            .iter()
            .flat_map(|e| check.observe(e))
            .map(|v| match v {
                Event::Violation { node, message, .. } => (node, message),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn the_faulted_node_and_the_nodes_directly_below_it_may_move() {
        let events = [
            fault(1_000, "mid-1", FaultKind::Kill, FaultPhase::Start),
            moved(1_200, "region-1", SourceChange::Disconnected),
            moved(6_000, "mid-1", SourceChange::Start),
            fault(6_000, "mid-1", FaultKind::Kill, FaultPhase::End),
            // Within the window after the fault ended: still the fault's doing.
            moved(15_000, "region-1", SourceChange::Stale),
            // Restarts are never judged.
            moved(15_500, "edge-1", SourceChange::Start),
        ];
        assert!(violations(&events).is_empty());
    }

    #[test]
    fn a_move_two_hops_below_the_fault_is_caught_naming_the_chain() {
        let events = [
            fault(1_000, "mid-1", FaultKind::Partition, FaultPhase::Start),
            moved(6_000, "region-1", SourceChange::Stale),
            moved(6_100, "edge-1", SourceChange::Disconnected),
        ];
        let found = violations(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        let (node, message) = &found[0];
        assert_eq!(node, "edge-1");
        assert!(message.contains("2 hops below the partition of mid-1: mid-1 → region-1 → edge-1"), "{message}");
        assert!(message.contains("region-1 (stale) at 6000 ms"), "{message}");
    }

    /// The chain named is the one the nodes followed (edge-1 under region-2 under mid-1), not
    /// the shortest configured one (through region-1), with the moves along it.
    #[test]
    fn the_chain_named_is_the_followed_one() {
        let follows = |at_ms: u64, node: &str, ip: &str| Event::SourceChanged {
            at_ms,
            node: node.into(),
            source: format!("{ip}:7000"),
            reason: SourceChange::Start,
        };
        let events = [
            follows(0, "region-2", "10.0.1.1"),
            follows(0, "edge-1", "10.0.2.2"),
            fault(1_000, "mid-1", FaultKind::SlowDisk, FaultPhase::Start),
            moved(6_000, "edge-1", SourceChange::Stale),
        ];
        let found = violations(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].1.contains("2 hops below the slow_disk of mid-1: mid-1 → region-2 → edge-1"),
            "{}",
            found[0].1
        );
    }

    #[test]
    fn a_move_off_every_faulted_path_is_caught_and_quiet_times_are_not_judged() {
        // mid-1 paused; edge-1 reaches mid-1 only through region-1 — but say region-2's move is
        // the unexplained one: region-2's sources are mid-2 and mid-1, so it is directly below.
        let events = [
            fault(1_000, "edge-1", FaultKind::SlowDisk, FaultPhase::Start),
            moved(2_000, "region-2", SourceChange::Stale),
        ];
        let found = violations(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].1.contains("only faults in effect were on edge-1"), "{}", found[0].1);
        // No fault in effect: not this checker's business.
        assert!(violations(&[moved(2_000, "edge-1", SourceChange::Stale)]).is_empty());
        // Long after the fault ended: not this fault's doing (the lag checker judges flapping).
        let events = [
            fault(1_000, "mid-1", FaultKind::Kill, FaultPhase::Start),
            fault(2_000, "mid-1", FaultKind::Kill, FaultPhase::End),
            moved(30_000, "edge-1", SourceChange::Stale),
        ];
        assert!(violations(&events).is_empty());
    }

    fn follows(at_ms: u64, node: &str, ip: &str, reason: SourceChange) -> Event {
        Event::SourceChanged { at_ms, node: node.into(), source: format!("{ip}:7000"), reason }
    }

    #[test]
    fn a_move_from_a_cut_off_source_to_one_with_a_path_is_allowed_and_one_that_cannot_help_is_not() {
        let start = [
            follows(0, "mid-1", "10.0.0.1", SourceChange::Start),
            follows(0, "mid-2", "10.0.0.1", SourceChange::Start),
            follows(0, "region-1", "10.0.1.1", SourceChange::Start),
            follows(0, "region-2", "10.0.1.2", SourceChange::Start),
        ];
        // During the root's partition nobody has a path: region-1 moving to mid-2 cannot help.
        let mut during = start.to_vec();
        during.push(fault(1_000, "root", FaultKind::Partition, FaultPhase::Start));
        during.push(follows(20_000, "region-1", "10.0.1.2", SourceChange::Stale));
        let found = violations(&during);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].1.contains("root → mid-1 → region-1"), "{}", found[0].1);
        // Healed: mid-2 is back (a link made after the fault ended), mid-1 not yet; region-1
        // leaving mid-1 for mid-2 is what the lag checker demands of it.
        let mut after = start.to_vec();
        after.push(fault(1_000, "root", FaultKind::Partition, FaultPhase::Start));
        after.push(fault(40_000, "root", FaultKind::Partition, FaultPhase::End));
        after.push(follows(41_000, "mid-2", "10.0.0.1", SourceChange::Disconnected));
        after.push(follows(41_500, "region-1", "10.0.1.2", SourceChange::Stale));
        assert!(violations(&after).is_empty());
        // But not to mid-1's sibling before that sibling is back.
        let mut early = start.to_vec();
        early.push(fault(1_000, "root", FaultKind::Partition, FaultPhase::Start));
        early.push(fault(40_000, "root", FaultKind::Partition, FaultPhase::End));
        early.push(follows(40_500, "region-1", "10.0.1.2", SourceChange::Stale));
        assert_eq!(violations(&early).len(), 1);
    }

    #[test]
    fn faults_on_several_nodes_or_the_network_pause_the_rule() {
        for kind in [FaultKind::Split, FaultKind::ClogLink, FaultKind::Latency, FaultKind::Loss] {
            let target = if kind.is_network_wide() { "network" } else { "mid-1" };
            let events = [
                fault(1_000, target, kind, FaultPhase::Start),
                fault(1_000, "mid-2", FaultKind::Kill, FaultPhase::Start),
                moved(3_000, "edge-1", SourceChange::Stale),
            ];
            assert!(violations(&events).is_empty(), "{kind}");
        }
    }
}
