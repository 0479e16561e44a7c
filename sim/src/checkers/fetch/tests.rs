//! The fetch judge's rules, fed bytes as TCP delivers them.
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
    Message::Entries { entries, root_ms: 0 }.encode()
}

fn hello(last_index: u64, newest_only: bool) -> Vec<u8> {
    let mut hello = ClientHello::new(1, DatabaseId(7), last_index, Want::Log);
    hello.newest_only = newest_only;
    Message::Hello(hello).encode()
}

fn welcome() -> Vec<u8> {
    Message::Welcome { server_id: 2, db_id: DatabaseId(7), applied_index: 200, first_retained_index: 1, root_ms: 0 }
        .encode()
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
fn an_entry_a_reopened_store_reports_while_the_hello_is_out_is_not_blamed() {
    let mut fetch = judge();
    applied(&mut fetch, "edge-1", 140);
    let edge = replica(40_001);
    assert!(fetch.lock().read(9, SOURCE, edge, &hello(140, false)).is_none());
    // A commit whose outcome was unknown had landed: the reopened store says 141.
    applied(&mut fetch, "edge-1", 141);
    assert!(fetch.lock().read(9, edge, SOURCE, &welcome()).is_none());
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
    assert_eq!(fetch.lock().totals()["edge-1"].entries_again, 10);
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

mod snapshots {
    use super::*;
    use qs_node::store::snapshot::{SnapshotChunk, SnapshotFile, SnapshotManifest};

    /// A manifest of one file of `chunks` chunks of 4 bytes, at applied index `index`.
    fn manifest(index: u64, chunks: u64) -> SnapshotManifest {
        SnapshotManifest {
            format: 1,
            engine: qs_node::EngineKind::Memory,
            db_id: DatabaseId(7),
            applied_index: index,
            chain_hash: ChainHash::GENESIS,
            chunk_bytes: 4,
            files: vec![SnapshotFile { name: "dump".into(), len: 4 * chunks, crc32c: 0 }],
        }
    }

    fn manifest_frame(manifest: &SnapshotManifest) -> Vec<u8> {
        Message::SnapshotManifest { manifest_json: serde_json::to_vec(manifest).unwrap() }.encode()
    }

    fn chunk(number: u64) -> Vec<u8> {
        let bytes = vec![number as u8; 4];
        let crc32c = crc32c::crc32c(&bytes);
        Message::SnapshotChunk(SnapshotChunk { number, file: 0, offset: 4 * number, bytes, crc32c }).encode()
    }

    fn snapshot_hello(resume_chunk: u64, manifest: Option<&SnapshotManifest>) -> Vec<u8> {
        let want = Want::Snapshot { resume_chunk, manifest_fingerprint: manifest.map(|m| m.fingerprint()) };
        Message::Hello(ClientHello::new(1, DatabaseId(7), 0, want)).encode()
    }

    /// The replica asks `hello`, then reads the welcome, the manifest and `chunks` on a new
    /// connection from `port`; the first violation, if any.
    fn transfer(fetch: &mut Fetch, port: u16, hello: Vec<u8>, m: &SnapshotManifest, chunks: &[u64]) -> Option<Event> {
        let edge = replica(port);
        let mut judge = fetch.lock();
        assert!(judge.read(9, SOURCE, edge, &hello).is_none());
        let mut first = judge.read(9, edge, SOURCE, &welcome());
        first = first.or(judge.read(9, edge, SOURCE, &manifest_frame(m)));
        for &n in chunks {
            first = first.or(judge.read(9, edge, SOURCE, &chunk(n)));
        }
        first
    }

    fn fault(fetch: &mut Fetch, kind: FaultKind, phase: FaultPhase) {
        fetch.observe(&Event::Fault { at_ms: 8, node: "edge-1".into(), kind, phase, detail: String::new() });
    }

    #[test]
    fn a_broken_transfer_resumed_from_what_was_stored_passes() {
        let mut fetch = judge();
        let m = manifest(50, 10);
        assert!(transfer(&mut fetch, 40_001, snapshot_hello(0, None), &m, &[0, 1, 2, 3]).is_none());
        // The connection broke; the replica resumes at 4, from another port, and finishes.
        assert!(transfer(&mut fetch, 40_002, snapshot_hello(4, Some(&m)), &m, &[4, 5, 6, 7, 8, 9]).is_none());
        assert!(fetch.lock().read(9, replica(40_002), SOURCE, &Message::SnapshotDone.encode()).is_none());
        let totals = fetch.lock().totals()["edge-1"];
        assert_eq!((totals.chunks, totals.chunks_again), (10, 0));
        // A later bootstrap (the store lost again) starts a new transfer rightly.
        assert!(transfer(&mut fetch, 40_003, snapshot_hello(0, None), &manifest(90, 3), &[0, 1, 2]).is_none());
    }

    #[test]
    fn a_replica_that_starts_over_while_holding_chunks_is_named() {
        let mut fetch = judge();
        let m = manifest(50, 10);
        assert!(transfer(&mut fetch, 40_001, snapshot_hello(0, None), &m, &[0, 1, 2]).is_none());
        let said = message(transfer(&mut fetch, 40_002, snapshot_hello(0, None), &m, &[0, 1]));
        assert!(
            said.contains("edge-1 asked mid-1 for a snapshot from a new transfer while it held chunks 0..3"),
            "{said}"
        );
        assert_eq!(fetch.lock().totals()["edge-1"].chunks_again, 2);
        // Resuming the right manifest from too early a chunk is named too.
        let said = message(transfer(&mut fetch, 40_003, snapshot_hello(1, Some(&m)), &m, &[]));
        assert!(said.contains("from chunk 1 on while it held chunks 0..3"), "{said}");
    }

    #[test]
    fn a_source_that_sends_chunks_below_the_resume_chunk_is_named() {
        let mut fetch = judge();
        let m = manifest(50, 10);
        assert!(transfer(&mut fetch, 40_001, snapshot_hello(0, None), &m, &[0, 1, 2, 3]).is_none());
        let said = message(transfer(&mut fetch, 40_002, snapshot_hello(4, Some(&m)), &m, &[0, 1, 2, 3, 4]));
        assert!(
            said.contains(
                "mid-1 sent edge-1 snapshot chunk 0 on a connection whose hello asked to resume from chunk 4"
            ),
            "{said}"
        );
        // A source serving another snapshot starts it from 0, rightly.
        let newer = manifest(60, 5);
        assert!(transfer(&mut fetch, 40_003, snapshot_hello(5, Some(&m)), &newer, &[0, 1]).is_none());
    }

    #[test]
    fn a_kill_loses_no_stored_chunk_and_a_failing_disk_may_lose_the_last() {
        let mut fetch = judge();
        let m = manifest(50, 10);
        assert!(transfer(&mut fetch, 40_001, snapshot_hello(0, None), &m, &[0, 1]).is_none());
        // A chunk read is a chunk stored: a kill explains no new start.
        fault(&mut fetch, FaultKind::Kill, FaultPhase::Start);
        let said = message(transfer(&mut fetch, 40_002, snapshot_hello(0, None), &m, &[0]));
        assert!(said.contains("from a new transfer while it held chunks 0..2"), "{said}");
        // A chunk read while the disk answers errors may be missing: asking for it again is right,
        // asking for the one before it is not.
        let mut fetch = judge();
        assert!(transfer(&mut fetch, 40_001, snapshot_hello(0, None), &m, &[0, 1]).is_none());
        fault(&mut fetch, FaultKind::DiskError, FaultPhase::Start);
        assert!(fetch.lock().read(9, replica(40_001), SOURCE, &chunk(2)).is_none());
        fault(&mut fetch, FaultKind::DiskError, FaultPhase::End);
        assert!(transfer(&mut fetch, 40_002, snapshot_hello(2, Some(&m)), &m, &[2, 3]).is_none());
        let said = message(transfer(&mut fetch, 40_003, snapshot_hello(3, Some(&m)), &m, &[]));
        assert!(said.contains("from chunk 3 on while it held chunks 0..4"), "{said}");
        // A damaged chunk is not stored: asking for it again is right.
        let mut fetch = judge();
        assert!(transfer(&mut fetch, 40_001, snapshot_hello(0, None), &m, &[0, 1]).is_none());
        let mut damaged = chunk(2);
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert!(fetch.lock().read(9, replica(40_001), SOURCE, &damaged).is_none());
        assert!(transfer(&mut fetch, 40_002, snapshot_hello(2, Some(&m)), &m, &[2]).is_none());
        // A new disk holds nothing.
        fault(&mut fetch, FaultKind::Sigbus, FaultPhase::Start);
        fault(&mut fetch, FaultKind::Sigbus, FaultPhase::End);
        assert!(transfer(&mut fetch, 40_003, snapshot_hello(0, None), &m, &[0]).is_none());
    }

    #[test]
    fn a_snapshot_behind_the_store_is_discarded_and_not_resumed() {
        let mut fetch = judge();
        applied(&mut fetch, "edge-1", 70);
        assert!(transfer(&mut fetch, 40_001, snapshot_hello(0, None), &manifest(50, 10), &[]).is_none());
        assert!(transfer(&mut fetch, 40_002, snapshot_hello(0, None), &manifest(80, 4), &[0, 1, 2, 3]).is_none());
    }
}

#[test]
fn a_judge_that_read_nothing_of_a_replica_that_holds_entries_says_it_was_blind() {
    let mut fetch = judge();
    applied(&mut fetch, "root", 9);
    applied(&mut fetch, "mid-1", 9);
    // The root reads from no source; a replica that holds entries read them from one.
    match fetch.lock().blind(100) {
        Some(Event::Violation { checker: Checker::Fetch, node, index: 9, message, .. }) if node == "mid-1" => {
            assert!(message.contains("mid-1 holds entries up to 9 yet no byte"), "{message}")
        }
        other => panic!("expected mid-1 named blind, got {other:?}"),
    }
    // Once its reads reach the judge, it is not blind.
    let mut fetch = judge();
    applied(&mut fetch, "edge-1", 4);
    let edge = replica(40_002);
    assert!(fetch.lock().read(10, SOURCE, edge, &hello(4, false)).is_none());
    assert!(fetch.lock().read(11, edge, SOURCE, &welcome()).is_none());
    assert!(fetch.lock().read(12, edge, SOURCE, &entries(5, 3)).is_none());
    assert!(fetch.lock().blind(100).is_none(), "a judge that read edge-1's stream called itself blind");
}

#[test]
fn the_checked_first_entries_are_forgotten_whole_past_their_bound_and_still_answer_right() {
    let mut checked = Checked::default();
    let mut prev = ChainHash::GENESIS;
    for index in 1..=CHECKED_ENTRIES_MAX as u64 + 1 {
        let entry = LogEntry::seal(index, DatabaseId(7), index, prev, Vec::new()).expect("an entry");
        prev = entry.hash;
        let bytes = entry.compress();
        assert_eq!(checked.index(&bytes), Some(index));
        assert_eq!(checked.index(&bytes), Some(index), "answered again from what was checked");
        assert!(checked.0.len() <= CHECKED_ENTRIES_MAX, "{} entries kept", checked.0.len());
        let mut damaged = bytes;
        *damaged.last_mut().expect("bytes") ^= 1;
        assert_eq!(checked.index(&damaged), None, "damaged bytes are never taken for checked ones");
    }
    assert_eq!(checked.0.len(), 1, "cleared at the bound, then the newest kept");
}
