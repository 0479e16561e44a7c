//! Installs: every snapshot a replica installs has a cause the trace shows. A replica that
//! re-bootstraps without one ends in the right state and passes every other checker — having
//! fetched its whole store again for nothing (wasted work the sweep would never see).
//!
//! A snapshot install at node X, which had applied index `a`, is justified when
//! - X's own data was in question: a `bit_rot`, `sigbus` or `disk_error` fault struck X since
//!   its last install (damage to heal, a replaced disk, a store lost to a failed swap); or
//! - some source S of X may no longer have held entry `a + 1`: every node keeps at least the
//!   scenario's `retention_entries` newest entries (`keep_entries_min`), and nothing before the
//!   snapshot it last installed, so S's first retained index is at most
//!   `max(S's last snapshot index, S's applied index − retention) + 1`; S may lack `a + 1` only
//!   when `a` is below that bound.
//!
//! Generous on purpose (the newest applied index known for each source, a fault's cause kept
//! until the next install): it never blames a replica that a correct node's rules send to a
//! snapshot, and still names one that bootstraps while every source holds its next entry.
//!
//! And every bootstrap attempt that fails has a cause: a healthy replica fetching from a healthy
//! source completes its transfer. An attempt of X from source S that fails (`bootstrap_failed`)
//! is justified when, since the attempt began, a fault touched X or S (as target, split group
//! or clogged peer; a fault point firing on either counts), S had restarted from a fault in the
//! last [`SOURCE_RESTART_GRACE_MS`], or S's data was in question (damage it may be serving until
//! it heals by a snapshot of its own). An attempt begins after the replica's last source change,
//! failed attempt, install or restart — the earliest it can have begun, so the window is never
//! too short. A source turning the replica away because it serves the most transfers it will at
//! once (`busy`) is shedding by design and needs no cause. Exports that cancel each other (a tier bootstrapping together from one source, each
//! client's request deleting the export the others read) fail attempts with no fault in sight.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use crate::trace::{BootstrapStage, Checker, Event, FaultKind, FaultPhase, Observer};

/// How long after a fault on a source ends a replica's failed attempt is still put down to it:
/// the source's process restarting, binding its port, reopening its store.
pub const SOURCE_RESTART_GRACE_MS: u64 = 5_000;

#[derive(Debug)]
pub struct Installs {
    retention: u64,
    /// Each replica's sources (node names).
    sources: BTreeMap<String, Vec<String>>,
    /// Per node: the newest applied index seen.
    applied: BTreeMap<String, u64>,
    /// Per node: the index of the last snapshot it installed.
    snapshot_at: BTreeMap<String, u64>,
    /// Nodes whose own data a fault put in question since their last install.
    in_question: BTreeSet<String>,
    /// Node names by address, to name the source of a failed attempt.
    names_by_ip: BTreeMap<IpAddr, String>,
    /// Per node: the faults touching it now, counted by kind (a fault point is only ever a
    /// moment).
    active: BTreeMap<String, BTreeMap<FaultKind, u32>>,
    /// Per node: when a fault touching it last started or ended.
    last_fault_ms: BTreeMap<String, u64>,
    /// Per node: when a fault touching it last ended.
    last_fault_end_ms: BTreeMap<String, u64>,
    /// Per replica: the earliest its current bootstrap attempt can have begun.
    attempt_since_ms: BTreeMap<String, u64>,
}

impl Installs {
    pub fn new(
        retention: u64,
        sources: BTreeMap<String, Vec<String>>,
        names_by_ip: BTreeMap<IpAddr, String>,
    ) -> Installs {
        Installs {
            retention,
            sources,
            applied: BTreeMap::new(),
            snapshot_at: BTreeMap::new(),
            in_question: BTreeSet::new(),
            names_by_ip,
            active: BTreeMap::new(),
            last_fault_ms: BTreeMap::new(),
            last_fault_end_ms: BTreeMap::new(),
            attempt_since_ms: BTreeMap::new(),
        }
    }

    /// The nodes a fault event touches: its target, and the nodes its detail names (a split's
    /// group, a clogged link's peer).
    fn touched(&self, node: &str, detail: &str) -> BTreeSet<String> {
        let mut nodes: BTreeSet<String> = detail
            .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
            .filter(|word| self.names_by_ip.values().any(|name| name == word))
            .map(str::to_string)
            .collect();
        nodes.insert(node.to_string());
        nodes
    }

    /// Why a failed attempt of `node` from `source` at `at_ms` is no surprise, if it is not.
    fn attempt_cause(&self, node: &str, source: &str, at_ms: u64) -> Option<String> {
        let since = self.attempt_since_ms.get(node).copied().unwrap_or(0);
        // A network-wide fault (`latency`, `loss`: a lost SYN is a refused connect under
        // madsim) touches every attempt; it is traced on the target "network".
        for who in [node, source, "network"] {
            if let Some(kind) = self.active.get(who).and_then(|kinds| kinds.keys().next()) {
                return Some(format!("{kind} on {who}"));
            }
            if self.last_fault_ms.get(who).is_some_and(|&t| t > since) {
                return Some(format!("a fault on {who} since the attempt began"));
            }
        }
        if self.last_fault_end_ms.get(source).is_some_and(|&t| t + SOURCE_RESTART_GRACE_MS >= at_ms) {
            return Some(format!("{source} restarting"));
        }
        if self.in_question.contains(source) {
            return Some(format!("{source}'s data in question"));
        }
        None
    }

    /// The highest first retained index `source` may have had.
    fn first_retained_bound(&self, source: &str) -> u64 {
        let applied = self.applied.get(source).copied().unwrap_or(0);
        let snapshot = self.snapshot_at.get(source).copied().unwrap_or(0);
        snapshot.max(applied.saturating_sub(self.retention)) + 1
    }
}

impl Observer for Installs {
    #[expect(
        clippy::too_many_lines,
        reason = "105 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Applied { node, last, .. } => {
                let applied = self.applied.entry(node.clone()).or_default();
                *applied = (*applied).max(*last);
            }
            Event::Fault { at_ms, node, kind, phase, detail } => {
                for who in self.touched(node, detail) {
                    self.last_fault_ms.insert(who.clone(), *at_ms);
                    match phase {
                        FaultPhase::Start if *kind != FaultKind::FaultPoint => {
                            *self.active.entry(who).or_default().entry(*kind).or_default() += 1;
                        }
                        FaultPhase::Start => {}
                        FaultPhase::End => {
                            self.last_fault_end_ms.insert(who.clone(), *at_ms);
                            if let Some(count) = self.active.get_mut(&who).and_then(|kinds| kinds.get_mut(kind)) {
                                *count -= 1;
                            }
                            if let Some(kinds) = self.active.get_mut(&who) {
                                kinds.retain(|_, count| *count > 0);
                            }
                            // Its process starts again now: any attempt of its own begins later.
                            if matches!(
                                kind,
                                FaultKind::Kill
                                    | FaultKind::Stop
                                    | FaultKind::PowerLoss
                                    | FaultKind::Sigbus
                                    | FaultKind::Oom
                            ) {
                                self.attempt_since_ms.insert(who, *at_ms);
                            }
                        }
                    }
                }
                match (kind, phase) {
                    (FaultKind::BitRot | FaultKind::DiskError | FaultKind::Sigbus, FaultPhase::Start) => {
                        self.in_question.insert(node.clone());
                    }
                    // The disk was replaced: the node starts from nothing.
                    (FaultKind::Sigbus, FaultPhase::End) => {
                        self.applied.insert(node.clone(), 0);
                        self.in_question.insert(node.clone());
                    }
                    _ => {}
                }
            }
            Event::SourceChanged { at_ms, node, .. } => {
                self.attempt_since_ms.insert(node.clone(), *at_ms);
            }
            Event::BootstrapFailed { at_ms, node, source, stage, chunks_stored } => {
                // An address no node has gives nothing to judge the attempt by.
                let source = source.parse::<SocketAddr>().ok().and_then(|a| self.names_by_ip.get(&a.ip())).cloned();
                let cause = source.as_deref().map(|source| self.attempt_cause(node, source, *at_ms));
                let since = self.attempt_since_ms.insert(node.clone(), *at_ms).unwrap_or(0);
                // A busy source turning a replica away is shedding by design, not a failure.
                if let (Some(source), Some(None)) = (source, cause)
                    && *stage != BootstrapStage::Busy
                {
                    let message = format!(
                        "a snapshot transfer from {source} failed at its {} stage ({chunks_stored} chunks \
                         stored) with no fault on {node} or {source} since the attempt began (at {since} ms at the \
                         earliest): a healthy replica completes a bootstrap from a healthy source",
                        stage.as_str()
                    );
                    return vec![Event::Violation {
                        at_ms: *at_ms,
                        checker: Checker::Installs,
                        node: node.clone(),
                        index: self.applied.get(node).copied().unwrap_or(0),
                        message,
                    }];
                }
            }
            Event::Bootstrapped { at_ms, node, index, .. } => {
                self.attempt_since_ms.insert(node.clone(), *at_ms);
                let had = self.applied.get(node).copied().unwrap_or(0);
                let justified = self.in_question.remove(node)
                    || self.sources.get(node).is_some_and(|sources| {
                        sources.iter().any(|source| had + 1 < self.first_retained_bound(source))
                    });
                self.applied.insert(node.clone(), *index);
                self.snapshot_at.insert(node.clone(), *index);
                if !justified {
                    let held: Vec<String> = self
                        .sources
                        .get(node)
                        .into_iter()
                        .flatten()
                        .map(|s| format!("{s} retained from {} at most", self.first_retained_bound(s)))
                        .collect();
                    let message = format!(
                        "installed a snapshot at index {index} without cause: it had applied {had}, its sources \
                         held entry {} ({}), and no fault put its own data in question",
                        had + 1,
                        held.join(", ")
                    );
                    return vec![Event::Violation {
                        at_ms: *at_ms,
                        checker: Checker::Installs,
                        node: node.clone(),
                        index: *index,
                        message,
                    }];
                }
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(node: &str, last: u64) -> Event {
        Event::Applied { at_ms: 0, node: node.into(), first: last, last, hash: String::new() }
    }

    fn installed(node: &str, index: u64) -> Event {
        Event::Bootstrapped { at_ms: 0, node: node.into(), index, hash: String::new() }
    }

    fn check() -> Installs {
        let names = ["mid-1", "mid-2", "edge-1"]
            .iter()
            .enumerate()
            .map(|(i, name)| (IpAddr::from([10, 0, 1, i as u8 + 1]), name.to_string()))
            .collect();
        Installs::new(20, [("edge-1".to_string(), vec!["mid-1".to_string(), "mid-2".to_string()])].into(), names)
    }

    #[test]
    fn an_install_while_every_source_holds_the_next_entry_is_a_violation() {
        let mut check = check();
        for event in [applied("mid-1", 100), applied("mid-2", 100), applied("edge-1", 90)] {
            check.observe(&event);
        }
        let found = check.observe(&installed("edge-1", 100));
        assert_eq!(found.len(), 1, "both mids keep 81..=100; edge-1 needed 91");
        let Event::Violation { checker, message, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!(*checker, Checker::Installs);
        assert!(message.contains("held entry 91"), "{message}");
    }

    #[test]
    fn a_source_past_retention_or_restored_from_a_snapshot_justifies_it() {
        let mut check = check();
        for event in [applied("mid-1", 100), applied("edge-1", 70)] {
            check.observe(&event);
        }
        assert!(check.observe(&installed("edge-1", 100)).is_empty(), "mid-1 may have collected 71");
        let mut check = self::check();
        for event in [applied("edge-1", 50), installed("mid-2", 60), applied("mid-1", 60)] {
            check.observe(&event);
        }
        assert!(check.observe(&installed("edge-1", 60)).is_empty(), "mid-2's log starts after 60");
    }

    fn failed(at_ms: u64, source: &str) -> Event {
        Event::BootstrapFailed {
            at_ms,
            node: "edge-1".into(),
            source: source.into(),
            stage: BootstrapStage::Transfer,
            chunks_stored: 3,
        }
    }

    fn fault(at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase, detail: &str) -> Event {
        Event::Fault { at_ms, node: node.into(), kind, phase, detail: detail.into() }
    }

    #[test]
    fn an_attempt_that_fails_with_no_fault_on_the_replica_or_its_source_is_a_violation() {
        let mut check = check();
        // edge-1's own kill ended before the attempt began: its restart is no cause.
        check.observe(&fault(1_000, "edge-1", FaultKind::Kill, FaultPhase::Start, ""));
        check.observe(&fault(20_000, "edge-1", FaultKind::Kill, FaultPhase::End, ""));
        // A fault elsewhere is no cause either.
        check.observe(&fault(20_010, "mid-2", FaultKind::Pause, FaultPhase::Start, ""));
        let found = check.observe(&failed(20_045, "10.0.1.1:7000"));
        assert_eq!(found.len(), 1, "{found:?}");
        let Event::Violation { checker, message, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!(*checker, Checker::Installs);
        assert!(message.contains("from mid-1 failed at its transfer stage (3 chunks stored)"), "{message}");
        assert!(message.contains("since the attempt began (at 20000 ms at the earliest"), "{message}");
    }

    #[test]
    fn a_fault_on_either_end_a_split_naming_one_or_a_source_restarting_justifies_a_failed_attempt() {
        for (events, why) in [
            (vec![fault(10, "mid-1", FaultKind::Partition, FaultPhase::Start, "")], "the source cut off"),
            (vec![fault(10, "edge-1", FaultKind::Loss, FaultPhase::Start, "5.0% lost")], "the replica losing packets"),
            (
                vec![fault(10, "edge-2", FaultKind::Split, FaultPhase::Start, "[edge-2, mid-1] cut off from the rest")],
                "a split",
            ),
            (vec![fault(10, "mid-1", FaultKind::FaultPoint, FaultPhase::Start, "drop_mid_snapshot")], "a fault point"),
            (
                vec![
                    fault(10, "mid-1", FaultKind::Kill, FaultPhase::Start, ""),
                    fault(15, "mid-1", FaultKind::Kill, FaultPhase::End, ""),
                    Event::SourceChanged {
                        at_ms: 20,
                        node: "edge-1".into(),
                        source: "10.0.1.1:7000".into(),
                        reason: crate::trace::SourceChange::Start,
                    },
                ],
                "the source restarting",
            ),
            (vec![fault(10, "mid-1", FaultKind::BitRot, FaultPhase::Start, "")], "the source's damage"),
        ] {
            let mut check = check();
            for event in &events {
                check.observe(event);
            }
            assert!(check.observe(&failed(100, "10.0.1.1:7000")).is_empty(), "{why}");
        }
        let busy = Event::BootstrapFailed {
            at_ms: 100,
            node: "edge-1".into(),
            source: "10.0.1.1:7000".into(),
            stage: BootstrapStage::Busy,
            chunks_stored: 0,
        };
        assert!(check().observe(&busy).is_empty(), "a busy source sheds by design");
    }

    #[test]
    fn damage_a_replaced_disk_or_a_disk_error_justifies_one_install() {
        for kind in [FaultKind::BitRot, FaultKind::DiskError, FaultKind::Sigbus] {
            let mut check = check();
            for event in [applied("mid-1", 100), applied("mid-2", 100), applied("edge-1", 95)] {
                check.observe(&event);
            }
            let fault =
                Event::Fault { at_ms: 0, node: "edge-1".into(), kind, phase: FaultPhase::Start, detail: String::new() };
            check.observe(&fault);
            assert!(check.observe(&installed("edge-1", 100)).is_empty(), "{kind}: its data was in question");
            assert_eq!(check.observe(&installed("edge-1", 100)).len(), 1, "{kind}: one install heals it");
        }
    }
}
