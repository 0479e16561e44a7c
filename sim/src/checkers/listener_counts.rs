//! The connection counters an operator reads on `/metrics`, per listener —
//! `qs_connections_accepted_total`, `qs_connections_refused_total` (of which
//! `qs_connections_refused_per_peer_total`), `qs_connections_shed_total` and
//! `qs_connections_open` — against the simulator's own count of the connections that listener's
//! socket handed the node (`accept` returned them; madsim counts it, see
//! `vendor/madsim`'s `NetSim::tcp_accepted`). Part of the `contract` checker ("what a node tells
//! its operator is true"), judged at the end of a simulated run for every node's current process
//! (a restart resets both counts). Rules true of any correct node, whatever its caps:
//!
//! - **Every connection is decided once, and counted.** A connection the socket handed over is
//!   admitted (`accepted`), refused at once (`refused`), or waits for the place of a connection
//!   shed for it — and a waiting one is counted `accepted` or `refused` when its wait ends. One
//!   newcomer waits per shed connection, and that connection holds its place (it is open) until
//!   its task ends, so `accepted + refused ≤ handed over ≤ accepted + refused + min(shed, open)`.
//! - **Shedding starts only at the cap.** A listener sheds only when `max` connections hold
//!   every place; a connection that found a place free took one, so the first `max` connections
//!   of a process never shed: `shed ≤ handed over − max`.
//! - **The parts add up.** Refusals at an address's share are refusals:
//!   `refused_per_peer ≤ refused`; and no more than `max` connections are open.

/// One listener of one process: what its socket handed over, its cap, and its counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerCounts {
    /// Connections the listener's socket handed the node since the process started (the
    /// simulator's count).
    pub handed_over: u64,
    /// `connections.<listener>.max`, as configured.
    pub max: u64,
    pub accepted: u64,
    pub refused: u64,
    pub refused_per_peer: u64,
    pub shed: u64,
    pub open: i64,
}

/// The first rule `counts` (listener `listener`) breaks, as a message; None if it keeps them all.
pub fn judge(listener: &str, c: &ListenerCounts) -> Option<String> {
    let decided = c.accepted + c.refused;
    let counters = format!(
        "qs_connections_accepted_total {} + qs_connections_refused_total {} = {decided}",
        c.accepted, c.refused
    );
    if decided > c.handed_over {
        return Some(format!(
            "the {listener} listener counts {counters} connections decided, but its socket handed it only {} \
             (a connection counted twice, or one counted that never came)",
            c.handed_over
        ));
    }
    let undecided = c.handed_over - decided;
    let may_wait = c.shed.min(u64::try_from(c.open).unwrap_or(0));
    if undecided > may_wait {
        return Some(format!(
            "the {listener} listener's socket handed it {} connections, but it counts {counters} decided: {undecided} \
             neither admitted nor refused, where only a newcomer waiting for a shed connection's place may be, one \
             per shed connection still open (qs_connections_shed_total {}, qs_connections_open {})",
            c.handed_over, c.shed, c.open
        ));
    }
    if c.shed > c.handed_over.saturating_sub(c.max) {
        return Some(format!(
            "the {listener} listener counts qs_connections_shed_total {} with a cap of {} and {} connections \
             handed over: a listener sheds only at its cap, so never for its first {} connections",
            c.shed, c.max, c.handed_over, c.max
        ));
    }
    if c.refused_per_peer > c.refused {
        return Some(format!(
            "the {listener} listener counts qs_connections_refused_per_peer_total {} above \
             qs_connections_refused_total {}, of which they are a part",
            c.refused_per_peer, c.refused
        ));
    }
    if c.open < 0 || c.open as u64 > c.max {
        return Some(format!("the {listener} listener reports qs_connections_open {} with a cap of {}", c.open, c.max));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener capped at 4 that was handed 10 connections: 6 admitted in free places and in
    /// shed ones' places, 3 refused, one still waiting for the place of one of 2 shed.
    fn busy() -> ListenerCounts {
        ListenerCounts { handed_over: 10, max: 4, accepted: 6, refused: 3, refused_per_peer: 1, shed: 2, open: 4 }
    }

    #[test]
    fn counts_that_add_up_pass_waiting_newcomers_included() {
        assert_eq!(judge("replication", &busy()), None);
        let settled = ListenerCounts { handed_over: 9, ..busy() };
        assert_eq!(judge("replication", &settled), None, "nobody waiting");
        assert_eq!(judge("http", &ListenerCounts::default()), None, "a listener nobody reached");
        let under_cap = ListenerCounts { handed_over: 3, max: 4, accepted: 3, open: 2, ..Default::default() };
        assert_eq!(judge("http", &under_cap), None);
    }

    #[test]
    fn a_connection_counted_twice_or_never_is_named() {
        let twice = ListenerCounts { accepted: 8, ..busy() };
        let found = judge("replication", &twice).unwrap();
        assert!(found.starts_with("the replication listener counts qs_connections_accepted_total 8"), "{found}");
        assert!(found.contains("handed it only 10"), "{found}");
        // Newcomers admitted in shed connections' places, not counted: more undecided than
        // could be waiting, though fewer than were shed.
        let uncounted = ListenerCounts { accepted: 4, shed: 2, open: 1, ..busy() };
        let found = judge("replication", &uncounted).unwrap();
        assert!(found.contains("decided: 3 neither admitted nor refused"), "{found}");
        assert!(found.contains("(qs_connections_shed_total 2, qs_connections_open 1)"), "{found}");
    }

    #[test]
    fn a_shed_below_the_cap_and_parts_over_their_whole_are_named() {
        let early = ListenerCounts { handed_over: 5, accepted: 3, refused: 0, refused_per_peer: 0, shed: 2, ..busy() };
        let found = judge("memcached", &early).unwrap();
        assert!(found.contains("qs_connections_shed_total 2 with a cap of 4 and 5 connections"), "{found}");
        let parts = ListenerCounts { refused_per_peer: 4, ..busy() };
        assert!(judge("http", &parts).unwrap().contains("qs_connections_refused_per_peer_total 4 above"));
        let over = ListenerCounts { open: 5, ..busy() };
        assert!(judge("http", &over).unwrap().contains("qs_connections_open 5 with a cap of 4"));
    }
}
