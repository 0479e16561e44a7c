//! Fetch: a replica fetches each log entry once — never an entry it has already applied.
//!
//! A source sends the entries after the index its client asks from, and a client asks from the
//! index it has applied, so an entry at or below a replica's applied index reaching it again is
//! work wasted by one of the two: a client that resumes from an old cursor, a source that
//! starts over, a transfer that replays what was delivered. Such a run can end with every
//! node's state right and pass every other checker, only slower. The bound holds for any
//! correct node whatever the faults: an entry received but not applied before its connection
//! broke is fetched again legitimately, and is above the applied index when it is.
//!
//! What is measured is the simulator's, not the node's: madsim hands every chunk of bytes a
//! TCP stream's reader takes (`NetSim::set_tcp_read_hook`, the carried patch) to
//! [`FetchJudge::read`], which frames the replication stream itself (the node's own codec:
//! length, type, payload) and reads the first index of each `Entries` frame. The applied index
//! is the node's trace (`applied`, `bootstrapped`; the `sequence` and `chain` checkers judge
//! those): its latest, so a node that lost data (a power loss without syncing) fetching it
//! again is not blamed twice.
//!
//! Per replica the judge also counts the bytes it read from its sources and the entries they
//! carried ([`FetchJudge::totals`]); one violation per connection names the first re-fetch.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use qs_node::replication::protocol::{FrameType, Message};

use crate::trace::{Checker, Event, Observer};

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

/// One replication stream as its reader sees it.
#[derive(Debug, Default)]
struct Stream {
    /// Bytes of a frame not yet complete.
    pending: Vec<u8>,
    /// The stream's re-fetch was reported (one violation a connection).
    reported: bool,
    /// The stream carried something that is not the replication protocol: not judged.
    foreign: bool,
}

/// The judge (see the module doc), shared by the checker and madsim's read hook.
#[derive(Debug, Default)]
pub struct FetchJudge {
    names_by_ip: BTreeMap<IpAddr, String>,
    /// The ports that serve replication: every node's replication port, and the relays'.
    serving: BTreeSet<u16>,
    streams: BTreeMap<(SocketAddr, SocketAddr), Stream>,
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

    /// `bytes` read at `at_ms` by the stream `local` ← `peer`: a violation when they complete a
    /// frame of entries the reading replica had applied (the first such on the stream).
    pub fn read(&mut self, at_ms: u64, local: SocketAddr, peer: SocketAddr, bytes: &[u8]) -> Option<Event> {
        // A client's stream to a source; a relay's hop on its own host is the source's business.
        if !self.serving.contains(&peer.port()) || self.serving.contains(&local.port()) || local.ip() == peer.ip() {
            return None;
        }
        let node = self.names_by_ip.get(&local.ip())?.clone();
        let source = self.names_by_ip.get(&peer.ip()).cloned().unwrap_or_else(|| peer.to_string());
        self.totals.entry(node.clone()).or_default().bytes += bytes.len() as u64;
        let stream = self.streams.entry((local, peer)).or_default();
        if stream.foreign {
            return None;
        }
        stream.pending.extend_from_slice(bytes);
        let mut violation = None;
        loop {
            let Some(length) = stream.pending.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            else {
                break;
            };
            if length == 0 || length > FRAME_BYTES_SANE {
                stream.foreign = true;
                stream.pending = Vec::new();
                break;
            }
            if stream.pending.len() < 4 + length {
                break;
            }
            let frame: Vec<u8> = stream.pending.drain(..4 + length).collect();
            if frame[4] != FrameType::Entries as u8 {
                continue;
            }
            let Ok(Message::Entries { entries }) = Message::decode_frame(frame[4], &frame[5..]) else { continue };
            let Some(first) = entries.first().and_then(|e| qs_node::StoredEntry::check(e.clone()).ok()) else {
                continue;
            };
            let (first, count) = (first.index(), entries.len() as u64);
            let last = first + count.saturating_sub(1);
            let applied = self.applied.get(&node).copied().unwrap_or(0);
            let totals = self.totals.entry(node.clone()).or_default();
            totals.entries += count;
            if first > applied {
                continue;
            }
            totals.refetched += last.min(applied) - first + 1;
            if !stream.reported && violation.is_none() {
                stream.reported = true;
                violation = Some(Event::Violation {
                    at_ms,
                    checker: Checker::Fetch,
                    node: node.clone(),
                    index: first,
                    message: format!(
                        "{node} read entries {first}..={last} from {source} after applying {applied}: a replica \
                         fetches each entry once (a source sends what follows the index its client asks from, and \
                         a client asks from what it applied)"
                    ),
                });
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
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qs_node::entry::{ChainHash, DatabaseId, LogEntry};

    const MID: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, 1));
    const EDGE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 2, 1));

    fn judge() -> Fetch {
        let names = [(MID, "mid-1".to_string()), (EDGE, "edge-1".to_string())].into_iter().collect();
        Fetch::new(FetchJudge::new(names, [7000].into_iter().collect()))
    }

    /// An `Entries` frame carrying entries `first..first + count` of one chain.
    fn frame(first: u64, count: u64) -> Vec<u8> {
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

    fn applied(fetch: &mut Fetch, node: &str, last: u64) {
        let event = Event::Applied { at_ms: 5, node: node.into(), first: 1, last, hash: "h".into() };
        assert!(fetch.observe(&event).is_empty());
    }

    #[test]
    fn entries_above_the_applied_index_pass_and_a_refetch_is_named_once_per_connection() {
        let mut fetch = judge();
        let (edge, mid) = (SocketAddr::new(EDGE, 40_001), SocketAddr::new(MID, 7000));
        applied(&mut fetch, "edge-1", 4);
        // Split across reads, as TCP delivers it.
        let bytes = frame(5, 3);
        assert!(fetch.lock().read(9, edge, mid, &bytes[..7]).is_none());
        assert!(fetch.lock().read(9, edge, mid, &bytes[7..]).is_none());
        applied(&mut fetch, "edge-1", 7);
        let Some(Event::Violation { checker, node, index, message, .. }) =
            fetch.lock().read(9, edge, mid, &frame(6, 4))
        else {
            panic!("entries 6..=7 again, after applying 7, are a re-fetch");
        };
        assert_eq!((checker, node.as_str(), index), (Checker::Fetch, "edge-1", 6));
        assert!(message.contains("read entries 6..=9 from mid-1 after applying 7"), "{message}");
        assert!(fetch.lock().read(9, edge, mid, &frame(2, 1)).is_none(), "one violation a connection");
        let totals = fetch.lock().totals()["edge-1"];
        assert_eq!((totals.entries, totals.refetched), (3 + 4 + 1, 2 + 1));
        // A new connection is judged afresh.
        assert!(fetch.lock().read(9, SocketAddr::new(EDGE, 40_002), mid, &frame(1, 1)).is_some());
    }

    #[test]
    fn a_node_that_lost_data_fetches_it_again_unblamed_and_other_traffic_is_not_judged() {
        let mut fetch = judge();
        let (edge, mid) = (SocketAddr::new(EDGE, 40_001), SocketAddr::new(MID, 7000));
        applied(&mut fetch, "edge-1", 9);
        let event = Event::Bootstrapped { at_ms: 6, node: "edge-1".into(), index: 3, hash: "h".into() };
        fetch.observe(&event);
        assert!(fetch.lock().read(9, edge, mid, &frame(4, 2)).is_none(), "after a snapshot at 3, 4 is new");
        // The source reading its client's frames, and a memcached answer, are not fetches.
        assert!(fetch.lock().read(9, mid, edge, &frame(1, 1)).is_none());
        assert!(fetch.lock().read(9, edge, SocketAddr::new(MID, 11211), &frame(1, 1)).is_none());
        // Bytes that are not the protocol: the stream is left alone.
        assert!(fetch.lock().read(9, SocketAddr::new(EDGE, 40_003), mid, &[0xff; 64]).is_none());
        assert!(fetch.lock().read(9, SocketAddr::new(EDGE, 40_003), mid, &frame(1, 1)).is_none());
    }
}
