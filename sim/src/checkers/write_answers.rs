//! Every write is answered: a rule of the `contract` verdict, true of any correct root.
//!
//! A write request that gets no answer at all within the writer's patience (`WRITE_TIMEOUT`,
//! 10 s) is a violation unless a fault that can hold an answer back was active, or ended less
//! than [`SETTLE_MS`] before the request was sent. A correct root answers every write — done,
//! refused, or "outcome unknown" — within that time whatever its state: a member that cannot
//! take writes (restarting after a disk failure, healing a damaged store, catching up to a
//! snapshot) refuses them at once, a leader cut from its majority steps down within an
//! election timeout and answers what it held "unknown", a disk that fails a commit fails it
//! with an error. A root that holds a write behind work that may last as long as a fault does
//! is what this catches: a member that pauses and keeps saying it leads.
//!
//! Faults that may hold an answer back are every kind but three: a disk answering I/O errors
//! (it answers at once), bit rot (found when read, answered by a heal) and an impostor (a peer
//! the members refuse). A process stopped, paused, killed or without power, a network cut or
//! slowed, a slow disk or a stalled commit, a membership change — any of them, on any node,
//! excuses every write in flight: the rule is coarse where the timing is the node's to choose,
//! and exact where it is not.
//!
//! Fed two ways: as an [`Observer`] it follows the trace's faults; the writers ask it
//! ([`WriteAnswers::unanswered`]) when a request gives up waiting, and record what it returns.
//! Simulated runs only: on real processes a busy machine may delay any answer.

use std::sync::{Arc, Mutex};

use crate::sync::Locked;
use crate::trace::{Event, FaultKind, FaultPhase, Observer};

/// How long after the last fault that may hold an answer back ended a root is given before the
/// rule applies again: a leader elected ([`ELECT_WITHIN_MS`](super::leadership::ELECT_WITHIN_MS)).
pub const SETTLE_MS: u64 = super::leadership::ELECT_WITHIN_MS;

#[derive(Debug, Default)]
struct State {
    /// Faults that may hold an answer back, now active (a count: several may overlap).
    active: u32,
    /// When the last of them ended (None: none has).
    last_ended_ms: Option<u64>,
}

/// The faults a write may wait on, shared by the trace's observers and the writers.
#[derive(Clone, Debug, Default)]
pub struct WriteAnswers(Arc<Mutex<State>>);

impl WriteAnswers {
    /// Whether a fault of `kind` may hold a correct root's answer back (see the module doc).
    pub fn may_hold_answers(kind: FaultKind) -> bool {
        !matches!(kind, FaultKind::DiskError | FaultKind::BitRot | FaultKind::Impostor)
    }

    /// A write request sent to `root` at `sent_ms` got no answer by `now_ms`, when its writer
    /// gave up: the violation's message, or None when a fault excuses it.
    pub fn unanswered(&self, root: &str, sent_ms: u64, now_ms: u64) -> Option<String> {
        let state = self.0.locked();
        let excused = state.active > 0 || state.last_ended_ms.is_some_and(|ended| ended + SETTLE_MS > sent_ms);
        (!excused).then(|| {
            let quiet = state.last_ended_ms.map_or_else(
                || "no fault that can delay an answer happened in the run before".to_string(),
                |ended| format!("the last fault that can delay an answer ended at {ended} ms"),
            );
            format!(
                "a write request sent to {root} at {sent_ms} ms had no answer by {now_ms} ms, {} s later; {quiet}, \
                 and a correct root answers every write (done, refused, or outcome unknown) within that",
                (now_ms - sent_ms) / 1000
            )
        })
    }
}

impl Observer for WriteAnswers {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        if let Event::Fault { at_ms, kind, phase, .. } = event
            && WriteAnswers::may_hold_answers(*kind)
        {
            let mut state = self.0.locked();
            match phase {
                FaultPhase::Start => state.active += 1,
                FaultPhase::End => {
                    state.active = state.active.saturating_sub(1);
                    state.last_ended_ms = Some(*at_ms);
                }
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(at_ms: u64, kind: FaultKind, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: "root".into(), kind, phase, detail: String::new() }
    }

    #[test]
    fn a_write_unanswered_in_a_quiet_run_is_a_violation() {
        let answers = WriteAnswers::default();
        let found = answers.unanswered("root-2", 30_000, 40_000).expect("nothing excuses it");
        assert!(found.contains("sent to root-2 at 30000 ms had no answer by 40000 ms, 10 s later"), "{found}");
    }

    #[test]
    fn a_fault_that_can_hold_answers_excuses_them_while_active_and_for_the_settle_time_after() {
        let mut answers = WriteAnswers::default();
        answers.observe(&fault(20_000, FaultKind::Partition, FaultPhase::Start));
        assert_eq!(answers.unanswered("root", 21_000, 31_000), None, "active");
        answers.observe(&fault(25_000, FaultKind::Partition, FaultPhase::End));
        assert_eq!(answers.unanswered("root", 26_000, 36_000), None, "sent while it was active");
        assert_eq!(answers.unanswered("root", 34_999, 44_999), None, "sent within the settle time");
        assert!(answers.unanswered("root", 35_000, 45_000).is_some(), "sent once the settle time passed");
    }

    #[test]
    fn overlapping_faults_excuse_until_the_last_ends() {
        let mut answers = WriteAnswers::default();
        answers.observe(&fault(1_000, FaultKind::Kill, FaultPhase::Start));
        answers.observe(&fault(2_000, FaultKind::SlowDisk, FaultPhase::Start));
        answers.observe(&fault(3_000, FaultKind::Kill, FaultPhase::End));
        assert_eq!(answers.unanswered("root", 60_000, 70_000), None, "the slow disk is still slow");
        answers.observe(&fault(61_000, FaultKind::SlowDisk, FaultPhase::End));
        assert!(answers.unanswered("root", 71_000, 81_000).is_some());
    }

    #[test]
    fn disk_errors_bit_rot_and_impostors_excuse_nothing() {
        let mut answers = WriteAnswers::default();
        for kind in [FaultKind::DiskError, FaultKind::BitRot, FaultKind::Impostor] {
            answers.observe(&fault(1_000, kind, FaultPhase::Start));
        }
        assert!(answers.unanswered("root", 2_000, 12_000).is_some(), "a disk error is answered at once");
    }
}
