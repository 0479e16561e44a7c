//! The unchanged node inside the deterministic simulator (`--cfg madsim`): a root and two edges
//! as madsim nodes with their own addresses, replicating over simulated TCP under one seed.
//! The edge's source is killed mid-run and it must fail over; the whole run is repeated with
//! the same seed and must produce the same sequence of node events (every apply, source change
//! and persisted position, with its simulated time) and end in the same state, byte for byte;
//! another seed must not (so the comparison can fail).
//!
//! Run: `RUSTFLAGS="--cfg madsim" cargo test -p qs-node --test integration --target-dir target/madsim
//! simulated::` (part of `./ci/test.sh`). In the normal build this module compiles to nothing.
#![cfg(madsim)]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use madsim::runtime::{Handle, Runtime};
use qs_node::config::NodeConfig;
use qs_node::entry::Op;
use qs_node::node::{Node, SimHooks};
use qs_node::observe::{NodeEvent, NodeObserver};
use qs_node::state::NodeState;
use qs_node::store::{MemDisk, StoreLocation};

const DB: &str = "5157534d-0000-0000-0000-00000000515d";

fn addr(ip: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(ip, port)
}

fn config(name: &str, ip: IpAddr, primaries: &[SocketAddr]) -> NodeConfig {
    let list = |a: &[SocketAddr]| a.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(",");
    let mut text = format!(
        "name = \"{name}\"\nrole = \"{role}\"\ndatabase_id = \"{DB}\"\n[storage]\nengine = \"memory\"\n\
         [listen]\nreplication = \"{r}\"\nmemcached = \"{m}\"\nhttp = \"{h}\"\n",
        role = if primaries.is_empty() { "root" } else { "replica" },
        r = addr(ip, 7000),
        m = addr(ip, 11211),
        h = addr(ip, 8000),
    );
    if primaries.is_empty() {
        text += "[root]\nbatch_window = \"500ms\"\nheartbeat_interval = \"1s\"\n";
    } else {
        text += &format!("[replication]\nprimaries = [{}]\nstaleness_failover = \"5s\"\n", list(primaries));
    }
    NodeConfig::parse(&text, name).unwrap()
}

/// What a run ends with on each node: applied index, chain hash, state digest.
type Heads = Vec<(u64, String, String)>;

/// Every node event of a run, with its node and simulated time.
#[derive(Debug, Default)]
struct EventLog(std::sync::Mutex<Vec<(Duration, String, NodeEvent)>>);

impl NodeObserver for EventLog {
    fn observe(&self, node: &str, event: NodeEvent) {
        let at = madsim::time::TimeHandle::current().elapsed();
        self.0.lock().unwrap().push((at, node.to_string(), event));
    }
}

/// Starts a node on a fresh memory disk, reporting to `log`.
async fn start_logged(config: NodeConfig, node_id: u128, log: &std::sync::Arc<EventLog>) -> Node {
    let observer: std::sync::Arc<dyn NodeObserver> = log.clone();
    let hooks = SimHooks { observer: Some(observer), ..SimHooks::default() };
    Node::start_simulated(config, &StoreLocation::Memory(MemDisk::default()), node_id, hooks).await.unwrap()
}

fn head(state: &NodeState) -> (u64, String, String) {
    state.with_store(|s| (s.applied_index(), s.chain_hash().to_hex(), s.state_digest().unwrap().to_string()))
}

/// One run under `seed`, on a thread of its own (per-thread state the standard library seeds
/// once would otherwise carry from one run to the next): its final heads and its events.
fn run(seed: u64) -> (Heads, Vec<(Duration, String, NodeEvent)>) {
    std::thread::spawn(move || run_here(seed)).join().unwrap()
}

fn run_here(seed: u64) -> (Heads, Vec<(Duration, String, NodeEvent)>) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let log = std::sync::Arc::new(EventLog::default());
    let heads = runtime.block_on(async {
        let handle = Handle::current();
        let start = madsim::time::Instant::now();
        let ips: Vec<IpAddr> = (1..=4).map(|i| format!("10.0.0.{i}").parse().unwrap()).collect();
        let root_config = config("root", ips[0], &[]);
        let mid_config = config("mid", ips[1], &[addr(ips[0], 7000)]);
        // The edge follows the mid first, then the root directly.
        let edge_config = config("edge", ips[2], &[addr(ips[1], 7000), addr(ips[0], 7000)]);

        let (root_tx, root_rx) = tokio::sync::oneshot::channel();
        let root_log = log.clone();
        handle.create_node().name("root").ip(ips[0]).build().spawn(async move {
            let node = start_logged(root_config, 1, &root_log).await;
            let _ = root_tx.send(node.state.clone());
            std::future::pending::<()>().await;
        });
        let root = root_rx.await.unwrap();
        let mid_node = handle.create_node().name("mid").ip(ips[1]).build();
        let mid_log = log.clone();
        mid_node.spawn(async move {
            let _node = start_logged(mid_config, 2, &mid_log).await;
            std::future::pending::<()>().await;
        });
        let (edge_tx, edge_rx) = tokio::sync::oneshot::channel();
        let edge_log = log.clone();
        handle.create_node().name("edge").ip(ips[2]).build().spawn(async move {
            let node = start_logged(edge_config, 3, &edge_log).await;
            let _ = edge_tx.send(node.state.clone());
            std::future::pending::<()>().await;
        });
        let edge = edge_rx.await.unwrap();

        // Writes at the root for a while, with the mid killed half way through.
        for i in 0..40u32 {
            if i == 20 {
                handle.kill(mid_node.id());
            }
            root.with_store(|store| {
                let ops =
                    vec![Op::Set { key: format!("dns:zone-{}", i % 7).into_bytes(), value: i.to_le_bytes().to_vec() }];
                let entry = store.next_entry(qs_node::clock::unix_ms(), ops).unwrap();
                store.apply(&[entry]).unwrap();
            });
            root.after_apply();
            madsim::time::sleep(Duration::from_millis(250)).await;
        }
        // Quiet period: the edge must reach the root's head through its second source.
        let deadline = madsim::time::Instant::now() + Duration::from_secs(60);
        while head(&edge).1 != head(&root).1 || head(&edge).0 < 40 {
            assert!(
                madsim::time::Instant::now() < deadline,
                "edge did not converge: {:?} vs {:?}",
                head(&edge),
                head(&root)
            );
            madsim::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(edge.metrics.failovers.get() >= 1, "the edge never left its dead source");
        eprintln!(
            "seed {seed}: simulated {:?}; root {:?}; edge failovers {}, entries applied {}",
            madsim::time::Instant::now().duration_since(start),
            head(&root),
            edge.metrics.failovers.get(),
            edge.metrics.entries_applied.get()
        );
        vec![head(&root), head(&edge)]
    });
    let events = std::mem::take(&mut *log.0.lock().unwrap());
    (heads, events)
}

#[test]
fn the_node_replicates_and_fails_over_inside_the_simulator() {
    let (heads, events) = run(7);
    assert_eq!(heads[0], heads[1]);
    // The edge followed the mid, then (the mid killed) the root.
    let moves: Vec<&NodeEvent> = events
        .iter()
        .filter(|(_, node, e)| node == "edge" && matches!(e, NodeEvent::SourceChanged { .. }))
        .map(|(_, _, e)| e)
        .collect();
    assert!(moves.len() >= 2, "{moves:?}");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let (first, second) = (run(42), run(42));
    assert_eq!(first.0, second.0, "final heads");
    assert!(first.1.len() >= 40, "the replicas report at least an apply per write: {}", first.1.len());
    if let Some(at) = (0..first.1.len().max(second.1.len())).find(|&i| first.1.get(i) != second.1.get(i)) {
        panic!("the event sequences differ at event {at}: {:?} vs {:?}", first.1.get(at), second.1.get(at));
    }
    // The comparison can fail: another seed times the same writes differently.
    assert_ne!(first.1, run(43).1, "two seeds gave the same event sequence");
}

/// When the node closed each kind of slow client, in simulated time after it connected.
#[derive(Debug, PartialEq, Eq)]
struct Closed {
    http_half_request: Duration,
    memcached_silent: Duration,
    replication_silent: Duration,
    /// Whether a connection past the memcached cap (2) was served in place of the connection
    /// unanswered longest, which was closed, while the other kept being served.
    memcached_at_cap_shed_the_oldest: bool,
}

/// A root with short deadlines and a memcached cap of 2, and a client host whose slow clients
/// wait for the node to close them, on simulated time.
#[expect(
    clippy::too_many_lines,
    reason = "78 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn slow_clients(seed: u64) -> Closed {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let handle = Handle::current();
        let (root_ip, client_ip): (IpAddr, IpAddr) = ("10.0.1.1".parse().unwrap(), "10.0.1.2".parse().unwrap());
        let mut root_config = config("root", root_ip, &[]);
        root_config.connections.http.header_read_timeout = Duration::from_secs(3);
        root_config.connections.memcached.idle_timeout = Duration::from_secs(7);
        root_config.connections.memcached.max = 2;
        // The client host may fill the listener (its share is the whole cap).
        root_config.connections.memcached.max_per_peer = Some(2);
        root_config.connections.replication.idle_timeout = Duration::from_secs(5);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        handle.create_node().name("root").ip(root_ip).build().spawn(async move {
            let _node = Node::start(root_config, 1).await.unwrap();
            let _ = ready_tx.send(());
            std::future::pending::<()>().await;
        });
        ready_rx.await.unwrap();
        let client = handle.create_node().name("client").ip(client_ip).build();
        client
            .spawn(async move {
                /// Sends `half` and waits for the node to end the connection; how long that took.
                async fn closed_after(addr: SocketAddr, half: &[u8]) -> Duration {
                    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let opened = madsim::time::Instant::now();
                    stream.write_all(half).await.unwrap();
                    stream.flush().await.unwrap();
                    let mut rest = Vec::new();
                    let _ = stream.read_to_end(&mut rest).await;
                    opened.elapsed()
                }
                let (http, memcached, replication) = tokio::join!(
                    closed_after(addr(root_ip, 8000), b"PUT /v1/keys/dns:x HTTP/1.1\r\nhost: root\r\n"),
                    closed_after(addr(root_ip, 11211), b""),
                    closed_after(addr(root_ip, 7000), b"QSR"),
                );
                /// Asks `version`; whether the node answered it (the whole reply line read).
                async fn answers(stream: &mut tokio::net::TcpStream) -> bool {
                    if stream.write_all(b"version\r\n").await.is_err() || stream.flush().await.is_err() {
                        return false;
                    }
                    let mut reply = Vec::new();
                    let mut byte = [0u8; 1];
                    while !reply.ends_with(b"\r\n") {
                        match stream.read(&mut byte).await {
                            Ok(1) => reply.push(byte[0]),
                            _ => return false,
                        }
                    }
                    reply.starts_with(b"VERSION ")
                }
                // Two served memcached connections fill the cap, the first answered first; a
                // third, from another host (this one holds its share), is served in place of the
                // first, which is closed.
                let mut held = Vec::new();
                for _ in 0..2 {
                    let mut stream = tokio::net::TcpStream::connect(addr(root_ip, 11211)).await.unwrap();
                    assert!(answers(&mut stream).await);
                    held.push(stream);
                    madsim::time::sleep(Duration::from_millis(10)).await;
                }
                let other_host =
                    Handle::current().create_node().name("client-2").ip("10.0.1.3".parse().unwrap()).build();
                let (newcomer_served, _newcomer) = other_host
                    .spawn(async move {
                        let mut stream = tokio::net::TcpStream::connect(addr(root_ip, 11211)).await.unwrap();
                        (answers(&mut stream).await, stream)
                    })
                    .await
                    .unwrap();
                let mut rest = Vec::new();
                let first_closed = matches!(held[0].read_to_end(&mut rest).await, Ok(0) | Err(_));
                let second_served = answers(&mut held[1]).await;
                Closed {
                    http_half_request: http,
                    memcached_silent: memcached,
                    replication_silent: replication,
                    memcached_at_cap_shed_the_oldest: newcomer_served && first_closed && second_served,
                }
            })
            .await
            .unwrap()
    })
}

#[test]
fn slow_clients_are_timed_out_on_simulated_time() {
    let closed = slow_clients(11);
    eprintln!("{closed:?}");
    // Each closed at its deadline, plus at most a few simulated network hops (1–10 ms each).
    let near = |took: Duration, deadline: Duration| took >= deadline && took < deadline + Duration::from_millis(100);
    assert!(near(closed.http_half_request, Duration::from_secs(3)), "{closed:?}");
    assert!(near(closed.memcached_silent, Duration::from_secs(7)), "{closed:?}");
    assert!(near(closed.replication_silent, Duration::from_secs(5)), "{closed:?}");
    assert!(closed.memcached_at_cap_shed_the_oldest, "{closed:?}");
    // The same seed, the same instants.
    assert_eq!(slow_clients(11), closed);
}

/// A source that welcomes every client at index 10 and then sends only keepalives — saying it
/// is recovering its own path, which the staleness rules wait on — never an entry. Returns the
/// simulated time of each connection it accepted.
async fn stalled_source(listener: tokio::net::TcpListener, accepted: std::sync::Arc<std::sync::Mutex<Vec<Duration>>>) {
    use qs_node::replication::protocol::{Message, UpstreamStatus, read_message, write_message};
    loop {
        let (mut stream, _) = listener.accept().await.unwrap();
        accepted.lock().unwrap().push(madsim::time::TimeHandle::current().elapsed());
        tokio::spawn(async move {
            let Ok(Some(Message::Hello(hello))) = read_message(&mut stream).await else { return };
            let welcome = Message::Welcome {
                server_id: 99,
                db_id: hello.db_id,
                applied_index: 10,
                first_retained_index: 1,
                root_ms: 0,
            };
            if write_message(&mut stream, &welcome).await.is_err() {
                return;
            }
            loop {
                madsim::time::sleep(Duration::from_secs(1)).await;
                let upstream = UpstreamStatus::Recovering { hops: 1 };
                let keepalive = Message::Keepalive { applied_index: 10, upstream, root_ms: 0 };
                if write_message(&mut stream, &keepalive).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// A replica whose only source holds entries it lacks and sends none — only keepalives saying
/// it is recovering — leaves that connection after `replication.staleness_failover` at its
/// shipped default (30 s) and connects again, instead of waiting on it for ever.
#[test]
fn a_stalled_source_is_left_at_the_default_deadline() {
    let runtime = Runtime::with_seed_and_config(5, madsim::Config::default());
    let accepted = runtime.block_on(async {
        let handle = Handle::current();
        let (source_ip, edge_ip): (IpAddr, IpAddr) = ("10.0.2.1".parse().unwrap(), "10.0.2.2".parse().unwrap());
        let accepted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let source_accepted = accepted.clone();
        handle.create_node().name("source").ip(source_ip).build().spawn(async move {
            let listener = tokio::net::TcpListener::bind(addr(source_ip, 7000)).await.unwrap();
            let _ = ready_tx.send(());
            stalled_source(listener, source_accepted).await;
        });
        ready_rx.await.unwrap();
        let text = format!(
            "name = \"edge\"\nrole = \"replica\"\ndatabase_id = \"{DB}\"\n[storage]\nengine = \"memory\"\n\
             [listen]\nreplication = \"{}\"\nmemcached = \"{}\"\nhttp = \"{}\"\n[replication]\nprimaries = [\"{}\"]\n",
            addr(edge_ip, 7000),
            addr(edge_ip, 11211),
            addr(edge_ip, 8000),
            addr(source_ip, 7000)
        );
        let config = NodeConfig::parse(&text, "edge").unwrap();
        assert_eq!(config.replication.staleness_failover, Duration::from_secs(30), "the shipped default");
        let log = std::sync::Arc::new(EventLog::default());
        handle.create_node().name("edge").ip(edge_ip).build().spawn(async move {
            let _node = start_logged(config, 3, &log).await;
            std::future::pending::<()>().await;
        });
        madsim::time::sleep(Duration::from_secs(75)).await;
        accepted.lock().unwrap().clone()
    });
    assert!(accepted.len() >= 2, "the replica never left the stalled source: connections at {accepted:?}");
    let stayed = accepted[1] - accepted[0];
    // The deadline, then at most a keepalive interval to notice and a reconnect backoff.
    assert!(
        stayed >= Duration::from_secs(30) && stayed <= Duration::from_secs(30 + 1 + 5),
        "stayed {stayed:?} with the stalled source (connections at {accepted:?})"
    );
}

/// A source that takes every connection and never says a word (partitioned one way, a host
/// that holds the port but not the process). Returns the simulated time of each connection.
async fn silent_source(listener: tokio::net::TcpListener, accepted: std::sync::Arc<std::sync::Mutex<Vec<Duration>>>) {
    let mut held = Vec::new();
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        accepted.lock().unwrap().push(madsim::time::TimeHandle::current().elapsed());
        held.push(stream);
    }
}

/// A replica whose primary takes its connection and never welcomes it tries its secondary after
/// `WELCOME_WITHIN` (5 s), at the shipped `staleness_failover` (30 s) — not after 30 s, every
/// round of its source list.
#[test]
fn a_source_that_never_welcomes_is_left_after_the_welcome_deadline() {
    use qs_node::replication::protocol::WELCOME_WITHIN;
    assert_eq!(WELCOME_WITHIN, Duration::from_secs(5));
    let runtime = Runtime::with_seed_and_config(6, madsim::Config::default());
    let (silent, stalled) = runtime.block_on(async {
        let handle = Handle::current();
        let (silent_ip, stalled_ip, edge_ip): (IpAddr, IpAddr, IpAddr) =
            ("10.0.2.1".parse().unwrap(), "10.0.2.3".parse().unwrap(), "10.0.2.2".parse().unwrap());
        let (silent, stalled) = (std::sync::Arc::default(), std::sync::Arc::default());
        for (name, ip, accepted) in [("silent", silent_ip, &silent), ("stalled", stalled_ip, &stalled)] {
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            let accepted: std::sync::Arc<std::sync::Mutex<Vec<Duration>>> = std::sync::Arc::clone(accepted);
            handle.create_node().name(name).ip(ip).build().spawn(async move {
                let listener = tokio::net::TcpListener::bind(addr(ip, 7000)).await.unwrap();
                let _ = ready_tx.send(());
                if name == "silent" {
                    silent_source(listener, accepted).await
                } else {
                    stalled_source(listener, accepted).await
                }
            });
            ready_rx.await.unwrap();
        }
        let text = format!(
            "name = \"edge\"\nrole = \"replica\"\ndatabase_id = \"{DB}\"\n[storage]\nengine = \"memory\"\n\
             [listen]\nreplication = \"{}\"\nmemcached = \"{}\"\nhttp = \"{}\"\n[replication]\nprimaries = [\"{}\"]\n\
             secondaries = [\"{}\"]\n",
            addr(edge_ip, 7000),
            addr(edge_ip, 11211),
            addr(edge_ip, 8000),
            addr(silent_ip, 7000),
            addr(stalled_ip, 7000)
        );
        let config = NodeConfig::parse(&text, "edge").unwrap();
        assert_eq!(config.replication.staleness_failover, Duration::from_secs(30), "the shipped default");
        let log = std::sync::Arc::new(EventLog::default());
        handle.create_node().name("edge").ip(edge_ip).build().spawn(async move {
            let _node = start_logged(config, 4, &log).await;
            std::future::pending::<()>().await;
        });
        madsim::time::sleep(Duration::from_secs(20)).await;
        let (silent, stalled) = (silent.lock().unwrap().clone(), stalled.lock().unwrap().clone());
        (silent, stalled)
    });
    assert!(!silent.is_empty() && !stalled.is_empty(), "the primary at {silent:?}, the secondary at {stalled:?}");
    let waited = stalled[0] - silent[0];
    // The deadline, then at most a keepalive interval to notice and the first reconnect backoff.
    assert!(
        waited >= WELCOME_WITHIN && waited <= WELCOME_WITHIN + Duration::from_secs(2),
        "tried the secondary {waited:?} after the silent primary (primary at {silent:?}, secondary at {stalled:?})"
    );
}
