//! Fetch: a replica fetches each log entry once.
//!
//! Two halves, each true of any correct node whatever the faults:
//! - **the client asks from what it applied**: a replica's hello for the log (not a probe's
//!   newest-only hello) names as its last index at least the index the replica has applied when
//!   it reads the source's first answer — judged then, not when the source reads the hello: a
//!   source paused with the hello unread answers long after, to a client that gave up and moved
//!   on (and then reads nothing). A client resuming from an old cursor fetches again what it has.
//! - **the source sends what follows**: every `Entries` frame on a connection carries only
//!   entries after the index its hello named — for a newest-only hello too (the client says what
//!   it holds; a source behind it sends nothing it named). A source that starts over, or streams
//!   a catch-up burst to a probe that already holds it, fetches work for nothing.
//!
//! An entry received but not applied before its connection broke is asked for again rightly:
//! it is above the applied index at the next hello. A run with such waste can end with every
//! node's state right and pass every other checker, only slower; this one names it.
//!
//! What is measured is the simulator's, not the node's: madsim hands every chunk of bytes a
//! TCP stream's reader takes (`NetSim::set_tcp_read_hook`, the carried patch) to
//! [`FetchJudge::read`], which frames the replication protocol itself (the node's own codec:
//! length, type, payload) in both directions of every connection to a source — the hello as the
//! source (or a relay in front of it) reads it, the entries as the replica reads them. The
//! applied index is the node's trace (`applied`, `bootstrapped`; the `sequence` and `chain`
//! checkers judge those), its latest; the end of a `sigbus` fault (the disk replaced by an
//! empty one) sets it to 0.
//!
//! Per replica the judge also counts the bytes it read from its sources and the entries they
//! carried ([`FetchJudge::totals`]); one violation per connection names the first waste.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use qs_node::replication::protocol::{FrameType, Message, Want};

use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer};

/// What one replica read from its sources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fetched {
    /// Bytes read on replication streams (frames of every kind).
    pub bytes: u64,
    /// Log entries those frames carried.
    pub entries: u64,
    /// Of those, entries at or below the replica's applied index when they arrived.
    pub refetched: u64,
}

/// Bytes of one direction of a connection, framed as they arrive.
#[derive(Debug, Default)]
struct Framer {
    /// Bytes of a frame not yet complete.
    pending: Vec<u8>,
    /// The direction carried something that is not the replication protocol: not judged.
    foreign: bool,
}

impl Framer {
    /// Appends `bytes` and returns the complete frames (type byte, payload) they finish.
    fn push(&mut self, bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        if self.foreign {
            return Vec::new();
        }
        self.pending.extend_from_slice(bytes);
        let mut frames = Vec::new();
        while let Some(head) = self.pending.get(..4) {
            let length = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            if length == 0 || length > FRAME_BYTES_SANE {
                self.foreign = true;
                self.pending = Vec::new();
                break;
            }
            if self.pending.len() < 4 + length {
                break;
            }
            let frame: Vec<u8> = self.pending.drain(..4 + length).skip(4).collect();
            frames.push((frame[0], frame[1..].to_vec()));
        }
        frames
    }
}

/// One connection from a replica to a source (or a relay in front of it).
#[derive(Debug, Default)]
struct Connection {
    to_source: Framer,
    to_replica: Framer,
    /// The hello's last index and whether it asked for the newest entries only.
    hello: Option<(u64, bool)>,
    /// A hello for the log from a main stream (not a probe), not yet judged: its last index.
    hello_to_judge: Option<u64>,
    /// The connection's waste was reported (one violation a connection).
    reported: bool,
}

/// The judge (see the module doc), shared by the checker and madsim's read hook.
#[derive(Debug, Default)]
pub struct FetchJudge {
    names_by_ip: BTreeMap<IpAddr, String>,
    /// The ports that serve replication: every node's replication port, and the relays'.
    serving: BTreeSet<u16>,
    /// By (the replica's address, the source's).
    connections: BTreeMap<(SocketAddr, SocketAddr), Connection>,
    /// Each node's latest applied index, from its trace.
    applied: BTreeMap<String, u64>,
    totals: BTreeMap<String, Fetched>,
}

/// Frames longer than this are not the replication protocol's (its own limit is far lower).
const FRAME_BYTES_SANE: usize = 256 << 20;

impl FetchJudge {
    /// `names_by_ip`: the nodes; `serving`: the ports a source serves replication on.
    pub fn new(names_by_ip: BTreeMap<IpAddr, String>, serving: BTreeSet<u16>) -> FetchJudge {
        FetchJudge { names_by_ip, serving, ..FetchJudge::default() }
    }

    /// `bytes` read at `at_ms` by the stream `local` ← `peer`: a violation when they complete
    /// the first answer to a hello that asked for entries the replica has, or a frame of entries
    /// its hello did not ask for (the first such on the connection).
    pub fn read(&mut self, at_ms: u64, local: SocketAddr, peer: SocketAddr, bytes: &[u8]) -> Option<Event> {
        // A relay's hop on its own host is the source's business.
        if local.ip() == peer.ip() {
            return None;
        }
        let (replica, source, to_replica) =
            match (self.serving.contains(&local.port()), self.serving.contains(&peer.port())) {
                (false, true) => (local, peer, true),
                (true, false) => (peer, local, false),
                _ => return None,
            };
        let node = self.names_by_ip.get(&replica.ip())?.clone();
        let source_name = self.names_by_ip.get(&source.ip()).cloned().unwrap_or_else(|| source.to_string());
        if to_replica {
            self.totals.entry(node.clone()).or_default().bytes += bytes.len() as u64;
        }
        let applied = self.applied.get(&node).copied().unwrap_or(0);
        let connection = self.connections.entry((replica, source)).or_default();
        let framer = if to_replica { &mut connection.to_replica } else { &mut connection.to_source };
        let mut violation = None;
        for (frame_type, payload) in framer.push(bytes) {
            // The hello as the source reads it, judged at the replica's first read of an answer
            // (any frame); entries as the replica reads them. Nothing else is decoded.
            let judged = [FrameType::Hello as u8, FrameType::Entries as u8];
            let message =
                if judged.contains(&frame_type) { Message::decode_frame(frame_type, &payload).ok() } else { None };
            if let Some(Message::Hello(hello)) = &message
                && !to_replica
            {
                connection.hello = Some((hello.last_index, hello.newest_only));
                let main_stream = matches!(hello.want, Want::Log) && !hello.newest_only;
                connection.hello_to_judge = main_stream.then_some(hello.last_index);
                continue;
            }
            let asked_after = if to_replica { connection.hello_to_judge.take() } else { None };
            if let Some(asked_after) = asked_after
                && asked_after < applied
                && !connection.reported
            {
                connection.reported = true;
                let message = format!(
                    "{node} asked {source_name} for the log after {asked_after} while it had applied {applied}: a \
                     replica asks from what it applied, so it fetches each entry once"
                );
                let index = asked_after + 1;
                violation =
                    Some(Event::Violation { at_ms, checker: Checker::Fetch, node: node.clone(), index, message });
            }
            let problem = match message {
                Some(Message::Entries { entries }) if to_replica => {
                    let Some(first) = entries.first().and_then(|e| qs_node::StoredEntry::check(e.clone()).ok()) else {
                        continue;
                    };
                    let (first, count) = (first.index(), entries.len() as u64);
                    let last = first + count.saturating_sub(1);
                    let totals = self.totals.entry(node.clone()).or_default();
                    totals.entries += count;
                    if first <= applied {
                        totals.refetched += last.min(applied) - first + 1;
                    }
                    match connection.hello {
                        Some((asked_after, newest_only)) if first <= asked_after => Some((
                            first,
                            format!(
                                "{source_name} sent {node} entries {first}..={last} on a connection whose hello asked \
                                 for entries after {asked_after}{}: a source sends what follows the index its client \
                                 names, so a replica fetches each entry once",
                                if newest_only { " (newest only)" } else { "" }
                            ),
                        )),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some((index, message)) = problem
                && !connection.reported
            {
                connection.reported = true;
                violation =
                    Some(Event::Violation { at_ms, checker: Checker::Fetch, node: node.clone(), index, message });
            }
        }
        violation
    }

    /// Per replica, what it read from its sources so far.
    pub fn totals(&self) -> &BTreeMap<String, Fetched> {
        &self.totals
    }
}

/// The checker: the judge, fed the trace (applied indexes) here and the bytes by
/// madsim's read hook (see `world`).
#[derive(Clone, Debug, Default)]
pub struct Fetch(pub Arc<Mutex<FetchJudge>>);

impl Fetch {
    pub fn new(judge: FetchJudge) -> Fetch {
        Fetch(Arc::new(Mutex::new(judge)))
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, FetchJudge> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Observer for Fetch {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Applied { node, last, .. } => {
                self.lock().applied.insert(node.clone(), *last);
            }
            Event::Bootstrapped { node, index, .. } => {
                self.lock().applied.insert(node.clone(), *index);
            }
            // The end of a `sigbus` fault replaces the node's disk with an empty one: it fetches
            // everything again, rightly.
            Event::Fault { node, kind: FaultKind::Sigbus, phase: FaultPhase::End, .. } => {
                self.lock().applied.insert(node.clone(), 0);
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qs_node::entry::{ChainHash, DatabaseId, LogEntry};
    use qs_node::replication::protocol::ClientHello;

    const MID: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, 1));
    const EDGE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 2, 1));

    fn judge() -> Fetch {
        let names = [(MID, "mid-1".to_string()), (EDGE, "edge-1".to_string())].into_iter().collect();
        Fetch::new(FetchJudge::new(names, [7000].into_iter().collect()))
    }

    /// An `Entries` frame carrying entries `first..first + count` of one chain.
    fn entries(first: u64, count: u64) -> Vec<u8> {
        let mut prev = ChainHash::GENESIS;
        let mut entries = Vec::new();
        for index in 1..first + count {
            let entry = LogEntry::seal(index, DatabaseId(7), index * 1_000, prev, Vec::new()).expect("an entry");
            prev = entry.hash;
            if index >= first {
                entries.push(entry.compress());
            }
        }
        Message::Entries { entries }.encode()
    }

    fn hello(last_index: u64, newest_only: bool) -> Vec<u8> {
        let mut hello = ClientHello::new(1, DatabaseId(7), last_index, Want::Log);
        hello.newest_only = newest_only;
        Message::Hello(hello).encode()
    }

    fn welcome() -> Vec<u8> {
        Message::Welcome { server_id: 2, db_id: DatabaseId(7), applied_index: 200, first_retained_index: 1 }.encode()
    }

    fn applied(fetch: &mut Fetch, node: &str, last: u64) {
        let event = Event::Applied { at_ms: 5, node: node.into(), first: 1, last, hash: "h".into() };
        assert!(fetch.observe(&event).is_empty());
    }

    const SOURCE: SocketAddr = SocketAddr::new(MID, 7000);

    fn replica(port: u16) -> SocketAddr {
        SocketAddr::new(EDGE, port)
    }

    fn message(event: Option<Event>) -> String {
        match event {
            Some(Event::Violation { checker: Checker::Fetch, node, message, .. }) if node == "edge-1" => message,
            other => panic!("expected a fetch violation at edge-1, got {other:?}"),
        }
    }

    #[test]
    fn a_stream_from_the_applied_index_passes_split_as_tcp_delivers_it() {
        let mut fetch = judge();
        applied(&mut fetch, "edge-1", 4);
        let edge = replica(40_001);
        // The source reads the hello; the replica reads the entries, in pieces.
        assert!(fetch.lock().read(9, SOURCE, edge, &hello(4, false)).is_none());
        let bytes = entries(5, 3);
        assert!(fetch.lock().read(9, edge, SOURCE, &bytes[..7]).is_none());
        assert!(fetch.lock().read(9, edge, SOURCE, &bytes[7..]).is_none());
        applied(&mut fetch, "edge-1", 7);
        assert!(fetch.lock().read(9, edge, SOURCE, &entries(8, 2)).is_none());
        assert_eq!(fetch.lock().totals()["edge-1"].entries, 5);
    }

    #[test]
    fn a_client_asking_from_an_old_cursor_is_named() {
        let mut fetch = judge();
        applied(&mut fetch, "edge-1", 49);
        let edge = replica(40_001);
        assert!(fetch.lock().read(9, SOURCE, edge, &hello(0, false)).is_none(), "judged when the answer is read");
        let message = message(fetch.lock().read(9, edge, SOURCE, &welcome()));
        assert!(message.contains("edge-1 asked mid-1 for the log after 0 while it had applied 49"), "{message}");
        // One violation a connection; a new one is judged afresh.
        assert!(fetch.lock().read(9, edge, SOURCE, &entries(1, 3)).is_none());
        assert!(fetch.lock().read(9, SOURCE, replica(40_002), &hello(10, false)).is_none());
        assert!(fetch.lock().read(9, replica(40_002), SOURCE, &welcome()).is_some());
        // A probe's newest-only hello may name less than the replica applied meanwhile.
        assert!(fetch.lock().read(9, SOURCE, replica(40_003), &hello(10, true)).is_none());
        assert!(fetch.lock().read(9, replica(40_003), SOURCE, &welcome()).is_none());
    }

    #[test]
    fn a_hello_a_paused_source_reads_late_is_judged_by_when_the_replica_hears_back() {
        let mut fetch = judge();
        applied(&mut fetch, "edge-1", 100);
        let edge = replica(40_001);
        // Sent at 100; the source, paused, reads it after the replica moved on and applied 166.
        applied(&mut fetch, "edge-1", 166);
        assert!(fetch.lock().read(9, SOURCE, edge, &hello(100, false)).is_none());
        // The replica gave up on that connection and never reads it: nothing to blame.
        assert!(fetch.lock().read(9, SOURCE, replica(40_002), &hello(166, false)).is_none());
        assert!(fetch.lock().read(9, replica(40_002), SOURCE, &welcome()).is_none());
    }

    #[test]
    fn a_source_sending_what_the_hello_did_not_ask_for_is_named() {
        let mut fetch = judge();
        applied(&mut fetch, "edge-1", 30);
        let edge = replica(40_001);
        assert!(fetch.lock().read(9, SOURCE, edge, &hello(30, true)).is_none());
        let message = message(fetch.lock().read(9, edge, SOURCE, &entries(21, 15)));
        assert!(
            message.contains(
                "mid-1 sent edge-1 entries 21..=35 on a connection whose hello asked for entries after 30 (newest only)"
            ),
            "{message}"
        );
        assert_eq!(fetch.lock().totals()["edge-1"].refetched, 10);
    }

    #[test]
    fn a_node_that_lost_data_fetches_it_again_unblamed_and_other_traffic_is_not_judged() {
        let mut fetch = judge();
        applied(&mut fetch, "edge-1", 9);
        let event = Event::Bootstrapped { at_ms: 6, node: "edge-1".into(), index: 3, hash: "h".into() };
        fetch.observe(&event);
        assert!(fetch.lock().read(9, SOURCE, replica(40_001), &hello(3, false)).is_none());
        assert!(fetch.lock().read(9, replica(40_001), SOURCE, &welcome()).is_none(), "after a snapshot at 3");
        let replaced = Event::Fault {
            at_ms: 7,
            node: "edge-1".into(),
            kind: FaultKind::Sigbus,
            phase: FaultPhase::End,
            detail: "disk replaced".into(),
        };
        fetch.observe(&replaced);
        assert!(fetch.lock().read(9, SOURCE, replica(40_002), &hello(0, false)).is_none());
        assert!(fetch.lock().read(9, replica(40_002), SOURCE, &welcome()).is_none(), "a new disk is empty");
        // Memcached, and bytes that are not the protocol: not judged.
        let memcached = SocketAddr::new(MID, 11211);
        assert!(fetch.lock().read(9, replica(40_004), memcached, &entries(1, 1)).is_none());
        assert!(fetch.lock().read(9, SOURCE, replica(40_003), &[0xff; 64]).is_none());
        assert!(fetch.lock().read(9, SOURCE, replica(40_003), &hello(0, false)).is_none());
    }
}
