//! The faults of a run as the world plays them: the book of faults under way (what the liveness
//! phase heals, which nodes a fault holds down, which members an operator retired, and whom
//! "leader" named), the faults that wait for their target to be in the middle of something,
//! and what the impostors and the membership operator need of the plan.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::faults::{FaultStep, SimNode};
use crate::plan::Plan;
use crate::scenario::nodes::HTTP_PORT;
use crate::sync::Locked;
use crate::trace::{Event, SharedRecorder};

use super::States;

/// The faults under way, shared by the scheduled faults and the triggered ones: what the
/// liveness phase heals, and which nodes a fault holds down (the sampler takes no lag from them,
/// and an OOM restart leaves them down).
#[derive(Clone)]
pub(super) struct FaultBook {
    pub(super) nodes: Arc<Vec<SimNode>>,
    pub(super) recorder: SharedRecorder,
    pub(super) open: Arc<Mutex<Vec<FaultStep>>>,
    pub(super) down: Arc<Mutex<std::collections::BTreeSet<String>>>,
    /// Each fault on the root group's leader, with the member it found leading.
    pub(super) resolved: Arc<Mutex<Vec<(crate::scenario::Fault, String)>>>,
    /// Root group members an operator removed and stopped for good: no fault acts on them
    /// any more (a kill's end would start one again).
    pub(super) retired: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

/// The root group member that leads now, by the members' role reports: the newest leader of
/// the highest term.
fn leader_now(recorder: &SharedRecorder) -> Option<String> {
    let recorder = recorder.locked();
    let mut best: Option<(u64, &str)> = None;
    for event in recorder.events() {
        if let Event::RaftRole { node, term, role: crate::trace::RaftRole::Leader, .. } = event
            && best.is_none_or(|(t, _)| *term >= t)
        {
            best = Some((*term, node));
        }
    }
    best.map(|(_, node)| node.to_string())
}

impl FaultBook {
    /// `step` with its target named: a fault on the root group's leader acts on the member
    /// that leads when it starts, and its end on that same member.
    pub(super) fn resolve(&self, step: &FaultStep) -> FaultStep {
        if step.fault.target.get_ref() != crate::scenario::LEADER {
            return step.clone();
        }
        let mut resolved = self.resolved.locked();
        let member = match resolved.iter().find(|(fault, _)| *fault == step.fault) {
            Some((_, member)) => member.clone(),
            None => {
                let member = leader_now(&self.recorder).unwrap_or_else(|| crate::trace::ROOT.to_string());
                resolved.push((step.fault.clone(), member.clone()));
                member
            }
        };
        let mut fault = step.fault.clone();
        fault.target = toml::Spanned::new(step.fault.target.span(), member);
        FaultStep { fault, ..step.clone() }
    }

    /// Applies `step` and keeps the book.
    pub(super) fn apply(&self, step: &FaultStep) {
        let step = &self.resolve(step);
        if self.retired.locked().contains(step.fault.target.get_ref()) {
            self.open.locked().retain(|s| s.fault != step.fault);
            return;
        }
        crate::faults::apply(step, &self.nodes, &self.recorder);
        if step.fault.kind.stops_the_node() {
            let mut down = self.down.locked();
            for node in step.fault.group_with_target() {
                if step.start {
                    down.insert(node);
                } else {
                    down.remove(&node);
                }
            }
        }
        let mut open = self.open.locked();
        if step.start {
            open.push(step.clone());
        } else {
            open.retain(|s| s.fault != step.fault);
        }
    }

    /// The operator of the `membership` fault `step` starts: it asks the member the fault
    /// targets, until the safety phase ends (`until`), and retires each member it removed.
    pub(super) fn operator(
        &self,
        step: &FaultStep,
        until: madsim::time::Instant,
    ) -> crate::faults::membership::Operator {
        let fault = self.resolve(step).fault;
        let members = self
            .nodes
            .iter()
            .filter_map(|n| Some((crate::checkers::membership::member_id(&n.name)?, (n.name.clone(), n))))
            .map(|(id, (name, n))| (id, (name, SocketAddr::new(n.ip, HTTP_PORT))))
            .collect();
        let (nodes, recorder, down, retired) =
            (self.nodes.clone(), self.recorder.clone(), self.down.clone(), self.retired.clone());
        let retire = move |name: &str| {
            let Some(node) = nodes.iter().find(|n| n.name == name) else { return };
            retired.locked().insert(name.to_string());
            down.locked().insert(name.to_string());
            crate::faults::process::kill(&node.handle);
            let mut recorder = recorder.locked();
            let at_ms = recorder.now_ms();
            recorder.record(Event::Fault {
                at_ms,
                node: name.to_string(),
                kind: crate::scenario::FaultKind::Membership,
                phase: crate::trace::FaultPhase::Start,
                detail: "removed from the group: stopped for good".into(),
            });
        };
        crate::faults::membership::Operator {
            members,
            target: fault.target.get_ref().clone(),
            add: fault.add.clone(),
            remove: fault.remove.clone(),
            until,
            retire: Box::new(retire),
        }
    }

    /// Ends `started` unless it has ended already (healed when the liveness phase began).
    pub(super) fn end(&self, started: &FaultStep) {
        let started = &self.resolve(started);
        let under_way = self.open.locked().iter().any(|s| s.fault == started.fault);
        if under_way {
            self.apply(&FaultStep { start: false, ..started.clone() });
        }
    }

    /// Ends every fault under way, in the order they started: the liveness phase's heal.
    pub(super) fn heal_all(&self) {
        let open = std::mem::take(&mut *self.open.locked());
        let retired = self.retired.locked().clone();
        for step in open.into_iter().filter(|s| !retired.contains(s.fault.target.get_ref())) {
            crate::faults::apply(&FaultStep { start: false, ..step }, &self.nodes, &self.recorder);
        }
        // A retired member stays down: no supervisor restarts it.
        *self.down.locked() = retired;
    }
}

/// What the run's impostors need of the plan: the root members (id, replication address) by
/// name, the database, and where the run's certificates are.
pub(super) struct ImpostorBase {
    pub(super) members: BTreeMap<String, (u64, SocketAddr)>,
    pub(super) database_id: qs_node::DatabaseId,
    pub(super) scratch: std::path::PathBuf,
    pub(super) tls: bool,
}

impl ImpostorBase {
    /// Empty `members` when the run has no impostor fault.
    pub(super) fn of(plan: &Plan) -> ImpostorBase {
        let any = plan.draws.faults.iter().any(|f| f.kind == crate::scenario::FaultKind::Impostor);
        let members = plan
            .nodes
            .iter()
            .filter(|_| any)
            .filter_map(|p| {
                let id = p.config.root.as_ref()?.member_id?;
                Some((p.config.name.clone(), (id, p.config.listen.replication)))
            })
            .collect();
        let database_id = plan.nodes.first().expect("a plan has a root").config.database_id;
        let tls = plan.nodes.iter().any(|p| p.config.tls.is_some());
        ImpostorBase { members, database_id, scratch: plan.scratch.clone(), tls }
    }

    /// The impostor of `fault` (its target resolved): it claims the lowest-numbered other
    /// member.
    pub(super) fn impostor(
        &self,
        fault: &crate::scenario::Fault,
        states: &States,
        recorder: &SharedRecorder,
    ) -> crate::faults::impostor::Impostor {
        use crate::scenario::Credentials;
        let target = fault.target.get_ref().clone();
        let &(target_id, address) = self.members.get(&target).expect("validated: an impostor targets a member");
        let claimed = self.members.values().map(|&(id, _)| id).filter(|&id| id != target_id).min();
        let credentials = fault.credentials.unwrap_or_default();
        let stem = match credentials {
            Credentials::Stolen => {
                Some(fault.peer.as_ref().expect("validated: a stolen certificate's node").get_ref().clone())
            }
            Credentials::ForeignCa => Some(crate::certificates::IMPOSTOR_FOREIGN_CA.to_string()),
            Credentials::Expired => Some(crate::certificates::IMPOSTOR_EXPIRED.to_string()),
            Credentials::Plaintext => None,
        };
        let tls = stem.filter(|_| self.tls).map(|stem| crate::scenario::nodes::tls_config(&self.scratch, &stem));
        let (states, name) = (states.clone(), target.clone());
        crate::faults::impostor::Impostor {
            target,
            target_id,
            address,
            claimed: claimed.expect("a root group has two members or more"),
            credentials,
            tls,
            database_id: self.database_id,
            recorder: recorder.clone(),
            state: Box::new(move || states.locked().get(&name).and_then(std::sync::Weak::upgrade)),
        }
    }
}

/// A fault that waits for its target to be in the middle of something (`Fault::during`).
pub(super) struct Triggered {
    pub(super) fault: crate::scenario::Fault,
    pub(super) states: States,
    pub(super) book: FaultBook,
}

impl Triggered {
    /// How often the target is looked at: finer than one chunk's transfer.
    const POLL: Duration = Duration::from_millis(1);

    /// From `at` until the safety phase ends, waits for the target to be transferring a
    /// snapshot; then starts the fault and ends it `duration` later, or when the liveness phase
    /// heals every fault, whichever comes first.
    pub(super) async fn run(self, start: madsim::time::Instant, safety: Duration) {
        madsim::time::sleep_until(start + self.fault.at).await;
        let target = self.fault.target.get_ref().clone();
        loop {
            if start.elapsed() >= safety {
                return; // never caught in the act: the fault does not happen
            }
            // Only the target is looked up: this runs every millisecond until the transfer.
            let state = self.states.locked().get(&target).and_then(|s| s.upgrade());
            if state.is_some_and(|s| s.is_transferring()) {
                break;
            }
            madsim::time::sleep(Self::POLL).await;
        }
        let step = FaultStep { at: start.elapsed(), fault: self.fault.clone(), start: true };
        self.book.apply(&step);
        madsim::time::sleep(self.fault.duration).await;
        self.book.end(&step);
    }
}
