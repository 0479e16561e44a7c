//! Every refusal the node makes, each shown on real loopback sockets with in-process nodes:
//! wrong database id, self-replication, unsupported version, a client that is not a replica,
//! collected history (an explicit answer, then a fallback to a longer-history source, then a
//! snapshot bootstrap — never a skip), a corrupted entry in the stream, ACL and quota.
// Real sockets and real processes: the tokio build only (`simulated` covers madsim).
#![cfg(not(madsim))]

use std::net::SocketAddr;
use std::time::Duration;

use qs_node::config::NodeConfig;
use qs_node::entry::{DatabaseId, LogEntry, Op};
use qs_node::metrics::Metrics;
use qs_node::node::Node;
use qs_node::replication::protocol::{
    ClientHello, Message, PROTOCOL_VERSION, RefusalReason, Want, read_message, write_message,
};
use qs_node::state::NodeState;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::common;

const DB: &str = "5157534d-0000-0000-0000-0000000000db";
const TOKEN: &str = "waf-producer-token";
const WAIT: Duration = Duration::from_secs(20);

struct Addrs {
    replication: SocketAddr,
    http: SocketAddr,
}

fn config(
    name: &str,
    role: &str,
    keep_entries_min: u64,
    primaries: &[SocketAddr],
    secondaries: &[SocketAddr],
) -> (NodeConfig, Addrs) {
    let addrs = Addrs { replication: common::free_port(), http: common::free_port() };
    let list = |a: &[SocketAddr]| a.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(",");
    let mut text = format!(
        "name = \"{name}-{pid}\"\nrole = \"{role}\"\ndatabase_id = \"{DB}\"\n[storage]\nengine = \"memory\"\n\
         [listen]\nreplication = \"{r}\"\nmemcached = \"{m}\"\nhttp = \"{h}\"\n\
         [retention]\nkeep_entries_min = {keep_entries_min}\ngc_interval = \"50ms\"\n",
        pid = std::process::id(),
        r = addrs.replication,
        m = common::free_port(),
        h = addrs.http,
    );
    if role == "root" {
        text += &format!(
            "[root]\nbatch_window = \"20ms\"\nheartbeat_interval = \"100ms\"\n[[root.producers]]\nname = \"waf\"\n\
             token = \"{TOKEN}\"\nprefixes = [\"waf:\"]\nwrites_per_s = 5\nburst = 3\n"
        );
    } else {
        text += &format!(
            "[replication]\nprimaries = [{}]\nsecondaries = [{}]\nstaleness_failover = \"1s\"\n\
             reconnect_backoff_min = \"20ms\"\nreconnect_backoff_max = \"200ms\"\n",
            list(primaries),
            list(secondaries)
        );
    }
    (NodeConfig::parse(&text, name).unwrap(), addrs)
}

/// Appends `count` entries of writes straight to the root's store, as its committer would.
fn write_entries(root: &NodeState, count: usize) {
    for i in 0..count {
        root.with_store(|store| {
            let ops =
                vec![Op::Set { key: format!("waf:rule-{i}").into_bytes(), value: format!("block {i}").into_bytes() }];
            let entry = store.next_entry(qs_node::clock::unix_ms(), ops).unwrap();
            store.apply(&[entry]).unwrap();
        });
        root.after_apply();
    }
}

fn head(state: &NodeState) -> (u64, qs_node::ChainHash, qs_node::StateDigest) {
    state.with_store(|s| (s.applied_index(), s.chain_hash(), s.state_digest().unwrap()))
}

fn refusals(metrics: &Metrics, reason: RefusalReason) -> u64 {
    metrics.refused_handshakes.get_or_create(&Metrics::label("reason", &format!("{reason:?}"))).get()
}

async fn handshake(addr: SocketAddr, hello: ClientHello) -> Message {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    write_message(&mut stream, &Message::Hello(hello)).await.unwrap();
    read_message(&mut stream).await.unwrap().expect("an answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshakes_are_refused_with_a_reason_and_counted() {
    let (cfg, addrs) = config("hs-root", "root", 1000, &[], &[]);
    let db: DatabaseId = DB.parse().unwrap();
    let root = Node::start(cfg, 0xaaaa).await.unwrap();

    let hello = |client_id, db_id| ClientHello::new(client_id, db_id, 0, Want::Log);
    match handshake(addrs.replication, hello(7, DatabaseId(0xbad))).await {
        Message::Refused { reason: RefusalReason::WrongDatabase, detail } => {
            assert!(detail.contains(&db.to_string()), "{detail}")
        }
        other => panic!("expected a wrong-database refusal, got {other:?}"),
    }
    match handshake(addrs.replication, hello(0xaaaa, db)).await {
        Message::Refused { reason: RefusalReason::SelfReplication, .. } => {}
        other => panic!("expected a self-replication refusal, got {other:?}"),
    }
    let mut future = hello(7, db);
    future.version = PROTOCOL_VERSION + 1;
    match handshake(addrs.replication, future).await {
        Message::Refused { reason: RefusalReason::UnsupportedVersion, .. } => {}
        other => panic!("expected an unsupported-version refusal, got {other:?}"),
    }
    // Not a replica at all: an HTTP request on the replication port.
    let mut stream = TcpStream::connect(addrs.replication).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    match read_message(&mut stream).await.unwrap() {
        Some(Message::Refused { reason: RefusalReason::BadHandshake, detail }) => {
            assert!(detail.contains("not speaking the qsim replication protocol"), "{detail}")
        }
        other => panic!("expected a bad-handshake refusal, got {other:?}"),
    }
    let m = &root.state.metrics;
    for reason in [
        RefusalReason::WrongDatabase,
        RefusalReason::SelfReplication,
        RefusalReason::UnsupportedVersion,
        RefusalReason::BadHandshake,
    ] {
        assert_eq!(refusals(m, reason), 1, "{reason:?}");
    }
    // A good client is welcomed.
    match handshake(addrs.replication, hello(7, db)).await {
        Message::Welcome { db_id, .. } => assert_eq!(db_id, db),
        other => panic!("expected a welcome, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collected_history_is_answered_explicitly_then_found_elsewhere_never_skipped() {
    // A root that keeps 5 entries, and an archive that follows it and keeps everything.
    let (root_cfg, root_addrs) = config("gc-root", "root", 5, &[], &[]);
    let root = Node::start(root_cfg, 1).await.unwrap();
    let (archive_cfg, archive_addrs) = config("gc-archive", "replica", 1_000_000, &[root_addrs.replication], &[]);
    let archive = Node::start(archive_cfg, 2).await.unwrap();
    write_entries(&root.state, 40);
    let target = root.state.with_store(|s| s.applied_index());
    common::eventually("the archive to follow the root", WAIT, || {
        archive.state.with_store(|s| s.applied_index()) >= target
    })
    .await;
    common::eventually("the root to collect its history", WAIT, || {
        root.state.with_store(|s| s.first_retained_index()) > 10
    })
    .await;

    // The explicit answer.
    let db: DatabaseId = DB.parse().unwrap();
    let mut stream = TcpStream::connect(root_addrs.replication).await.unwrap();
    write_message(&mut stream, &Message::Hello(ClientHello::new(99, db, 0, Want::Log))).await.unwrap();
    let _welcome = read_message(&mut stream).await.unwrap();
    match read_message(&mut stream).await.unwrap() {
        Some(Message::OutOfRetention { requested: 1, first_retained }) => assert!(first_retained > 10),
        other => panic!("expected OutOfRetention for entry 1, got {other:?}"),
    }

    // A new edge: the root (primary) lacks the history, the archive (secondary) has it.
    let (edge_cfg, _) = config("gc-edge", "replica", 1000, &[root_addrs.replication], &[archive_addrs.replication]);
    let edge = Node::start(edge_cfg, 3).await.unwrap();
    write_entries(&root.state, 5);
    common::eventually("the edge to converge through the archive", WAIT, || head(&edge.state) == head(&root.state))
        .await;
    assert!(edge.state.metrics.out_of_retention.get() >= 1);
    assert_eq!(edge.state.metrics.bootstraps.get(), 0, "the archive had the history; no snapshot was needed");

    // Another edge with only the root: nobody has the history, so it bootstraps from a snapshot.
    let (lone_cfg, _) = config("gc-lone", "replica", 1000, &[root_addrs.replication], &[]);
    let lone = Node::start(lone_cfg, 4).await.unwrap();
    write_entries(&root.state, 3);
    common::eventually("the lone edge to converge through a snapshot", WAIT, || head(&lone.state) == head(&root.state))
        .await;
    assert_eq!(lone.state.metrics.bootstraps.get(), 1);
    assert!(lone.state.metrics.out_of_retention.get() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_entry_in_the_stream_is_refused_and_the_edge_moves_on() {
    let (root_cfg, root_addrs) = config("bad-root", "root", 1000, &[], &[]);
    let root = Node::start(root_cfg, 11).await.unwrap();
    write_entries(&root.state, 10);

    // A fake source that serves the root's first entries with one byte of entry 3 flipped.
    let liar = TcpListener::bind(("127.0.0.1", common::free_port().port())).await.unwrap();
    let liar_addr = liar.local_addr().unwrap();
    let entries: Vec<LogEntry> = match root
        .state
        .with_store(|s| s.read_log_after(0, qs_node::LogReadLimits { entries_max: 5, bytes_max: 1 << 20 }))
        .unwrap()
    {
        qs_node::LogRead::Entries(e) => e,
        other => panic!("{other:?}"),
    };
    let mut frames: Vec<Vec<u8>> = entries.iter().map(LogEntry::compress).collect();
    let last = frames[2].len() - 1;
    frames[2][last] ^= 0x40;
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = liar.accept().await.unwrap();
            let frames = frames.clone();
            tokio::spawn(async move {
                let Ok(Some(Message::Hello(hello))) = read_message(&mut stream).await else { return };
                let welcome = Message::Welcome {
                    server_id: 0x1a4,
                    db_id: hello.db_id,
                    applied_index: 5,
                    first_retained_index: 1,
                    root_ms: 0,
                };
                let _ = write_message(&mut stream, &welcome).await;
                let _ = write_message(&mut stream, &Message::Entries { entries: frames, root_ms: 0 }).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });

    let (edge_cfg, _) = config("bad-edge", "replica", 1000, &[liar_addr], &[root_addrs.replication]);
    let edge = Node::start(edge_cfg, 12).await.unwrap();
    common::eventually("the edge to converge with the root", WAIT, || head(&edge.state) == head(&root.state)).await;
    assert!(edge.state.metrics.chain_violations.get() >= 1, "the corrupted entry was not counted");
}

fn http(method: &str, addr: SocketAddr, path: &str, token: Option<&str>, body: &str) -> (u16, String, Option<String>) {
    let url = format!("http://{addr}{path}");
    let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
    let mut request = match method {
        "PUT" => agent.put(&url),
        "POST" => agent.post(&url),
        _ => panic!("{method}"),
    };
    if let Some(token) = token {
        request = request.header("authorization", &format!("Bearer {token}"));
    }
    let mut response = request.send(body).unwrap();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
    (response.status().as_u16(), response.body_mut().read_to_string().unwrap(), retry_after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_are_held_to_their_prefixes_and_quotas() {
    let (cfg, addrs) = config("acl-root", "root", 1000, &[], &[]);
    let root = Node::start(cfg, 21).await.unwrap();
    let http_addr = addrs.http;
    let results = tokio::task::spawn_blocking(move || {
        vec![
            http("PUT", http_addr, "/v1/keys/waf:rule-1", None, "x"),
            http("PUT", http_addr, "/v1/keys/waf:rule-1", Some("not-a-token"), "x"),
            http("PUT", http_addr, "/v1/keys/dns:zone-1", Some(TOKEN), "x"),
            http(
                "POST",
                http_addr,
                "/v1/batch",
                Some(TOKEN),
                r#"{"ops":[{"op":"set","key":"waf:a","value":"1"},{"op":"set","key":"dns:b","value":"2"}]}"#,
            ),
            http("POST", http_addr, "/v1/batch", Some(TOKEN), "not json"),
        ]
    })
    .await
    .unwrap();
    let statuses: Vec<u16> = results.iter().map(|r| r.0).collect();
    assert_eq!(statuses, vec![401, 401, 403, 403, 400], "{results:#?}");
    assert!(results[2].1.contains("dns:zone-1") && results[2].1.contains("waf:"), "{}", results[2].1);
    assert_eq!(root.state.metrics.writes_refused.get(), 5, "each refused write request counted once");
    // A read of a key nobody wrote is answered 404, and refuses no write.
    let read = tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let read = agent.get(format!("http://{http_addr}/v1/keys/waf:never"));
        read.header("authorization", &format!("Bearer {TOKEN}")).call().unwrap().status().as_u16()
    })
    .await
    .unwrap();
    assert_eq!(read, 404);
    assert_eq!(root.state.metrics.writes_refused.get(), 5, "a read's 404 is not a refused write");

    // The quota: burst 3, 5 writes/s. Twenty writes back to back. However fast or slow this
    // machine sends them, the node may accept no more than the burst plus what refilled while
    // they were sent, at least the burst, and tells every other one when to retry.
    const WRITES: usize = 20;
    let (quota, elapsed) = tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let quota: Vec<_> =
            (0..WRITES).map(|i| http("PUT", http_addr, &format!("/v1/keys/waf:rule-{i}"), Some(TOKEN), "v")).collect();
        (quota, started.elapsed())
    })
    .await
    .unwrap();
    let accepted: Vec<usize> = (0..WRITES).filter(|&i| quota[i].0 == 200).collect();
    let throttled: Vec<usize> = (0..WRITES).filter(|&i| quota[i].0 == 429).collect();
    assert_eq!(accepted.len() + throttled.len(), WRITES, "only 200 or 429: {quota:#?}");
    let allowed = 3 + (5.0 * elapsed.as_secs_f64()).floor() as usize;
    assert!(
        (3..=allowed).contains(&accepted.len()),
        "{} accepted in {elapsed:?}: the quota allows 3 to {allowed}",
        accepted.len()
    );
    assert_eq!(&accepted[..3], &[0, 1, 2], "the burst goes first");
    if elapsed.as_secs_f64() < (WRITES - 3) as f64 / 5.0 {
        assert!(!throttled.is_empty(), "{WRITES} writes in {elapsed:?} cannot all fit the quota");
    }
    for &i in &throttled {
        assert!(quota[i].1.contains("retry_after_ms"), "{}", quota[i].1);
        assert_eq!(quota[i].2.as_deref(), Some("1"), "Retry-After header");
    }
    // Refused writes reached nothing; accepted ones are durable and readable.
    root.state.with_store(|s| {
        assert_eq!(s.get(b"dns:zone-1").unwrap(), None);
        assert_eq!(s.get(b"waf:a").unwrap(), None, "a batch with one forbidden key is refused whole");
        for i in 0..WRITES {
            let stored = s.get(format!("waf:rule-{i}").as_bytes()).unwrap();
            assert_eq!(stored.is_some(), accepted.contains(&i), "waf:rule-{i}");
        }
    });
    assert_eq!(root.state.metrics.writes_throttled.get(), throttled.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_serves_at_most_its_configured_number_of_bootstraps_at_once() {
    let (cfg, addrs) = config("boot-root", "root", 1000, &[], &[]);
    assert_eq!(cfg.replication.bootstraps_served_max, 2);
    let root = Node::start(cfg, 31).await.unwrap();
    // ~12 MiB of values, so a snapshot cannot fit in the socket buffers of a client that stalls.
    for i in 0..48 {
        root.state.with_store(|store| {
            let value = vec![b'v' ^ (i as u8); 256 << 10];
            let entry = store.next_entry(0, vec![Op::Set { key: format!("waf:big-{i}").into_bytes(), value }]).unwrap();
            store.apply(&[entry]).unwrap();
        });
    }
    let db: DatabaseId = DB.parse().unwrap();
    let snapshot_hello = || ClientHello::new(77, db, 0, Want::Snapshot { resume_chunk: 0, manifest_fingerprint: None });
    // Two clients start bootstraps and stop reading: both transfers stay in progress.
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addrs.replication).await.unwrap();
        write_message(&mut stream, &Message::Hello(snapshot_hello())).await.unwrap();
        assert!(matches!(read_message(&mut stream).await.unwrap(), Some(Message::Welcome { .. })));
        stalled.push(stream);
    }
    // The third is refused, with the reason.
    match handshake(addrs.replication, snapshot_hello()).await {
        Message::Refused { reason: RefusalReason::TooManyBootstraps, detail } => {
            assert!(detail.contains('2'), "{detail}")
        }
        other => panic!("expected TooManyBootstraps, got {other:?}"),
    }
    assert_eq!(refusals(&root.state.metrics, RefusalReason::TooManyBootstraps), 1);
    // When a stalled client goes away, its slot frees up (once the server notices the reset).
    drop(stalled.pop());
    let mut retry = TcpStream::connect(addrs.replication).await.unwrap();
    let started = std::time::Instant::now();
    let accepted = loop {
        assert!(started.elapsed() < WAIT, "no bootstrap slot freed up");
        write_message(&mut retry, &Message::Hello(snapshot_hello())).await.unwrap();
        match read_message(&mut retry).await.unwrap() {
            Some(Message::Welcome { .. }) => break true,
            Some(Message::Refused { reason: RefusalReason::TooManyBootstraps, .. }) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                retry = TcpStream::connect(addrs.replication).await.unwrap();
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_in_one_window_share_an_entry_and_identical_rewrites_are_dropped() {
    let (mut cfg, addrs) = config("window-root", "root", 1000, &[], &[]);
    cfg.root.as_mut().unwrap().batch_window = Duration::from_millis(400);
    let root = Node::start(cfg, 41).await.unwrap();
    let http_addr = addrs.http;
    // Three producers' writes land within one window: one entry, one index for all three.
    let writers: Vec<_> = (1..=3)
        .map(|i| {
            tokio::task::spawn_blocking(move || {
                http("PUT", http_addr, &format!("/v1/keys/waf:w{i}"), Some(TOKEN), "on")
            })
        })
        .collect();
    let mut indexes = Vec::new();
    for writer in writers {
        let (status, body, _) = writer.await.unwrap();
        assert_eq!(status, 200, "{body}");
        indexes.push(serde_json::from_str::<serde_json::Value>(&body).unwrap()["index"].as_u64().unwrap());
    }
    assert!(indexes.windows(2).all(|w| w[0] == w[1]), "writes in one window got indexes {indexes:?}");
    let entry_ops = root.state.with_store(|s| {
        match s.read_log_after(indexes[0] - 1, qs_node::LogReadLimits { entries_max: 1, bytes_max: 1 << 20 }) {
            Ok(qs_node::LogRead::Entries(e)) => e[0].ops.len(),
            other => panic!("{other:?}"),
        }
    });
    assert_eq!(entry_ops, 3, "the window's writes share one entry");

    // Rewriting the value a key already holds is dropped before the log.
    tokio::time::sleep(Duration::from_millis(700)).await; // let the quota refill
    let (status, body, _) =
        tokio::task::spawn_blocking(move || http("PUT", http_addr, "/v1/keys/waf:w1", Some(TOKEN), "on"))
            .await
            .unwrap();
    assert_eq!(status, 200, "{body}");
    let receipt: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(receipt["identical_dropped"], 1, "{body}");
    assert_eq!(root.state.metrics.writes_identical_dropped.get(), 1);
    let log_has_it_once = root.state.with_store(|s| {
        match s.read_log_after(0, qs_node::LogReadLimits { entries_max: 1000, bytes_max: 1 << 20 }) {
            Ok(qs_node::LogRead::Entries(e)) => {
                e.iter().flat_map(|e| &e.ops).filter(|op| op.key() == b"waf:w1").count()
            }
            other => panic!("{other:?}"),
        }
    });
    assert_eq!(log_has_it_once, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newest_only_hello_gets_nothing_the_client_said_it_holds() {
    // A probe's hello names 30 to a root that holds 10: as the root goes on to 40, the probe
    // gets 31 on, never 11..=30 (which its client already has).
    let (root_cfg, root_addrs) = config("newest-root", "root", 1000, &[], &[]);
    let root = Node::start(root_cfg, 21).await.unwrap();
    write_entries(&root.state, 10);
    let db: DatabaseId = DB.parse().unwrap();
    let mut stream = TcpStream::connect(root_addrs.replication).await.unwrap();
    let mut hello = ClientHello::new(98, db, 30, Want::Log);
    hello.newest_only = true;
    write_message(&mut stream, &Message::Hello(hello)).await.unwrap();
    match read_message(&mut stream).await.unwrap() {
        Some(Message::Welcome { applied_index: 10, .. }) => {}
        other => panic!("expected a welcome at 10, got {other:?}"),
    }
    write_entries(&root.state, 30);
    let mut firsts = Vec::new();
    while firsts.is_empty() {
        match tokio::time::timeout(WAIT, read_message(&mut stream)).await.expect("the root streams").unwrap() {
            Some(Message::Entries { entries, .. }) => {
                firsts.extend(entries.iter().map(|e| LogEntry::decompress(e).unwrap().index));
            }
            Some(Message::Keepalive { .. }) => {}
            other => panic!("expected entries or a keepalive, got {other:?}"),
        }
    }
    assert!(firsts.iter().all(|index| *index > 30), "entries the client holds were sent: {firsts:?}");
}
