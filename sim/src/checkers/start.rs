//! Start: every node's process starts, unless a fault on its disk explains why it cannot.
//!
//! A node that cannot open its store after a crash, a restart, a replaced disk or an installed
//! snapshot is down for good in production: its supervisor restarts it into the same error.
//! The only starts allowed to fail are those during a `disk_error` fault on the node (its disk
//! refuses the open); the supervisor then starts it again 1–10 s later, and it must start once
//! the disk answers. Each other failure is a violation naming the node and its error.

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer};

#[derive(Debug, Default)]
pub struct Start {
    /// Nodes whose disk answers I/O errors now.
    failing_disks: super::ActiveFaults<String>,
}

impl Observer for Start {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Fault { node, kind: FaultKind::DiskError, phase, .. } => {
                self.failing_disks.follow(node.clone(), *phase == FaultPhase::Start);
            }
            Event::StartFailed { at_ms, node, reason } if !self.failing_disks.contains(node) => {
                return vec![Event::Violation {
                    at_ms: *at_ms,
                    checker: Checker::Start,
                    node: node.clone(),
                    index: 0,
                    message: format!("failed to start with a healthy disk: {reason}"),
                }];
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(at_ms: u64) -> Event {
        Event::StartFailed { at_ms, node: "edge-1".into(), reason: "opening the store: damaged".into() }
    }

    fn disk_error(at_ms: u64, phase: FaultPhase) -> Event {
        Event::Fault { at_ms, node: "edge-1".into(), kind: FaultKind::DiskError, phase, detail: String::new() }
    }

    #[test]
    fn a_start_that_fails_on_a_healthy_disk_is_a_violation() {
        let mut check = Start::default();
        let found = check.observe(&failed(1_000));
        assert_eq!(found.len(), 1);
        let Event::Violation { checker, node, message, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!((*checker, node.as_str()), (Checker::Start, "edge-1"));
        assert!(message.contains("opening the store: damaged"), "{message}");
    }

    #[test]
    fn a_failing_disk_excuses_a_failed_start_while_it_lasts() {
        let mut check = Start::default();
        check.observe(&disk_error(500, FaultPhase::Start));
        assert!(check.observe(&failed(1_000)).is_empty(), "the disk refused the open");
        check.observe(&disk_error(2_000, FaultPhase::End));
        assert_eq!(check.observe(&failed(3_000)).len(), 1, "the disk answers again: the node must start");
    }
}
