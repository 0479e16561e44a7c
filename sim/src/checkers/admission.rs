//! Who may speak for a root group member, from the impostors' `admission` events — two rules
//! true of any correct node:
//!
//! - **nobody not entitled is admitted**: a peer that did not prove it is the member it claims
//!   (its certificate does not name that member's address, does not chain to the CA, has
//!   expired, or it sent no certificate at all) is never welcomed to a Raft link;
//! - **every refusal is counted**: the member's own counters (`qs_refused_handshakes_total`,
//!   or `qs_tls_handshake_failures_total` on the server side) grow with each one, so an
//!   operator sees that someone tried. An attempt that never reached the member (it was down,
//!   or the network dropped the connection) counts nothing and is not judged.

use crate::trace::{Checker, Event, Observer};

#[derive(Debug, Default)]
pub struct Admission;

impl Observer for Admission {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        let Event::Admission { at_ms, node, claimed, credentials, admitted, counted, detail } = event else {
            return Vec::new();
        };
        let message = if *admitted {
            format!("{node} took a Raft link from a peer claiming to be member {claimed} with {credentials}: {detail}")
        } else if !counted && reached(detail) {
            format!(
                "{node} refused a peer claiming to be member {claimed} with {credentials} but counted no refusal \
                 ({detail})"
            )
        } else {
            return Vec::new();
        };
        vec![Event::Violation {
            at_ms: *at_ms,
            checker: Checker::Admission,
            node: node.clone(),
            index: *claimed,
            message,
        }]
    }
}

/// Whether the refusal came from the member (an answer, or a handshake it broke off), not from
/// a connection that never reached it.
fn reached(detail: &str) -> bool {
    !detail.starts_with("could not connect")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(admitted: bool, counted: bool, detail: &str) -> Event {
        Event::Admission {
            at_ms: 31_000,
            node: "root".into(),
            claimed: 2,
            credentials: "a replica's certificate".into(),
            admitted,
            counted,
            detail: detail.into(),
        }
    }

    #[test]
    fn an_admitted_impostor_or_an_uncounted_refusal_is_a_violation() {
        let mut checker = Admission;
        let found = checker.observe(&attempt(true, false, "welcomed as member 2"));
        let [Event::Violation { checker: Checker::Admission, node, index, message, .. }] = found.as_slice() else {
            panic!("{found:?}")
        };
        assert_eq!((node.as_str(), *index), ("root", 2));
        assert!(message.contains("took a Raft link"), "{message}");
        assert_eq!(checker.observe(&attempt(false, false, "refused (not that member): ...")).len(), 1);
        assert!(checker.observe(&attempt(false, true, "refused (not that member): ...")).is_empty());
        assert!(checker.observe(&attempt(false, false, "could not connect: refused")).is_empty());
    }
}
