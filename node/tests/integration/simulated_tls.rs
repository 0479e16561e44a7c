//! Mutual TLS inside the simulator, at the shipped reload interval: a root that trusts one CA
//! and an edge certified by another are started; the edge is refused until the root's CA file
//! gains the edge's CA, and then follows within `tls::RELOAD_INTERVAL_DEFAULT` and one
//! reconnect. The same seed run twice gives the same events at the same simulated times, the
//! handshakes between them included.
//!
//! Run: `RUSTFLAGS="--cfg madsim" cargo test -p qs-node --test integration --target-dir target/madsim
//! simulated_tls::` (part of `./ci/test.sh`). In the normal build this module compiles to nothing.
#![cfg(madsim)]

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::{Handle, Runtime};
use qs_node::config::NodeConfig;
use qs_node::entry::Op;
use qs_node::node::{Node, SimHooks};
use qs_node::observe::{NodeEvent, NodeObserver};
use qs_node::store::{MemDisk, StoreLocation};
use qs_node::tls::RELOAD_INTERVAL_DEFAULT;
use qs_node::tls::issue::{KeySource, Validity, new_ca, node_certificate};

const DB: &str = "5157534d-0000-0000-0000-00000000715d";

fn validity() -> Validity {
    Validity::years(2000, 2100)
}

/// Writes CA `a` (the root's certificate and a CA file of `a` alone), CA `b` (the edge's
/// certificate) and `both.pem`, into `dir`. Keys from fixed seeds: the files are the same for
/// every run.
fn issue(dir: &Path, root_ip: IpAddr, edge_ip: IpAddr) {
    let a = new_ca("ca a", validity(), KeySource::Ed25519Seed([1; 32])).unwrap();
    let b = new_ca("ca b", validity(), KeySource::Ed25519Seed([2; 32])).unwrap();
    node_certificate(&a, "root", &[root_ip], &[], validity(), KeySource::Ed25519Seed([3; 32]))
        .unwrap()
        .write(dir, "root")
        .unwrap();
    node_certificate(&b, "edge", &[edge_ip], &[], validity(), KeySource::Ed25519Seed([4; 32]))
        .unwrap()
        .write(dir, "edge")
        .unwrap();
    std::fs::write(dir.join("a.pem"), &a.certificate_pem).unwrap();
    std::fs::write(dir.join("both.pem"), format!("{}{}", a.certificate_pem, b.certificate_pem)).unwrap();
}

fn config(name: &str, ip: IpAddr, primaries: &[SocketAddr], dir: &Path, ca: &Path) -> NodeConfig {
    let list = primaries.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(",");
    let mut text = format!(
        "name = \"{name}\"\nrole = \"{role}\"\ndatabase_id = \"{DB}\"\n[storage]\nengine = \"memory\"\n\
         [listen]\nreplication = \"{ip}:7000\"\nmemcached = \"{ip}:11211\"\nhttp = \"{ip}:8000\"\n\
         [tls]\ncertificate = \"{cert}\"\nkey = \"{key}\"\nca = \"{ca}\"\n",
        role = if primaries.is_empty() { "root" } else { "replica" },
        cert = dir.join(format!("{name}.pem")).display(),
        key = dir.join(format!("{name}.key")).display(),
        ca = ca.display(),
    );
    if primaries.is_empty() {
        text += "[root]\nbatch_window = \"200ms\"\nheartbeat_interval = \"1s\"\n";
    } else {
        text += &format!("[replication]\nprimaries = [{list}]\n");
    }
    NodeConfig::parse(&text, name).unwrap()
}

type Events = Vec<(Duration, String, String)>;

#[derive(Debug, Default)]
struct EventLog(Mutex<Events>);

impl NodeObserver for EventLog {
    fn observe(&self, node: &str, event: NodeEvent) {
        let at = madsim::time::TimeHandle::current().elapsed();
        self.0.lock().unwrap().push((at, node.to_string(), format!("{event:?}")));
    }
}

/// One run: the simulated time from the CA file's rewrite to the edge's catching up, and the
/// events.
fn run(seed: u64, dir: PathBuf) -> (Duration, Events) {
    std::thread::spawn(move || run_here(seed, &dir)).join().unwrap()
}

fn run_here(seed: u64, dir: &Path) -> (Duration, Events) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let log = Arc::new(EventLog::default());
    let root_ip: IpAddr = "10.0.0.1".parse().unwrap();
    let edge_ip: IpAddr = "10.0.0.2".parse().unwrap();
    let trusted = dir.join("trusted.pem");
    std::fs::copy(dir.join("a.pem"), &trusted).unwrap();
    let root_config = config("root", root_ip, &[], dir, &trusted);
    let edge_config = config("edge", edge_ip, &[SocketAddr::new(root_ip, 7000)], dir, &dir.join("both.pem"));
    let took = runtime.block_on(async {
        let handle = Handle::current();
        let start = |config: NodeConfig, ip: IpAddr, id: u128| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let log: Arc<dyn NodeObserver> = log.clone();
            handle.create_node().name(config.name.clone()).ip(ip).build().spawn(async move {
                let hooks = SimHooks { observer: Some(log), ..SimHooks::default() };
                let node =
                    Node::start_simulated(config, &StoreLocation::Memory(MemDisk::default()), id, hooks).await.unwrap();
                let _ = tx.send(node.state.clone());
                std::future::pending::<()>().await;
            });
            rx
        };
        let root = start(root_config, root_ip, 1).await.unwrap();
        let edge = start(edge_config, edge_ip, 2).await.unwrap();
        for i in 0..10u32 {
            root.with_store(|store| {
                let ops = vec![Op::Set { key: format!("dns:{i}").into_bytes(), value: i.to_le_bytes().to_vec() }];
                let entry = store.next_entry(qs_node::clock::unix_ms(), ops).unwrap();
                store.apply(&[entry]).unwrap();
            });
            root.after_apply();
            madsim::time::sleep(Duration::from_millis(500)).await;
        }
        let refused = |state: &qs_node::state::NodeState| {
            let labels = [("listener", "replication"), ("side", "server"), ("reason", "unknown_issuer")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .to_vec();
            state.metrics.tls_handshake_failures.get_or_create(&labels).get()
        };
        assert!(refused(&root) >= 1, "the root never refused the edge's certificate from another CA");
        assert_eq!(edge.with_store(|s| s.applied_index()), 0, "the edge got entries with an untrusted certificate");

        // The operator adds the edge's CA to the root's CA file.
        std::fs::write(&trusted, std::fs::read(dir.join("both.pem")).unwrap()).unwrap();
        let rotated = madsim::time::Instant::now();
        let head = root.with_store(|s| s.applied_index());
        // The shipped interval, the replica's longest reconnect backoff, and a second of slack.
        let patience = RELOAD_INTERVAL_DEFAULT + Duration::from_secs(5) + Duration::from_secs(1);
        while edge.with_store(|s| s.applied_index()) < head {
            assert!(
                rotated.elapsed() < patience,
                "the edge did not follow within {patience:?} of the CA file's change"
            );
            madsim::time::sleep(Duration::from_millis(100)).await;
        }
        rotated.elapsed()
    });
    let events = std::mem::take(&mut *log.0.lock().unwrap());
    (took, events)
}

#[test]
fn a_rotated_ca_file_is_picked_up_at_the_default_interval_and_replays_from_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), "10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let (took, first) = run(7, dir.path().to_path_buf());
    eprintln!("seed 7: the edge followed {took:?} (simulated) after the CA file changed; {} events", first.len());
    assert!(
        took > Duration::ZERO && took <= RELOAD_INTERVAL_DEFAULT + Duration::from_secs(6),
        "the edge followed {took:?} after the rotation"
    );
    assert!(first.iter().any(|(_, node, _)| node == "edge"), "the edge reported nothing: {first:?}");
    let (again, second) = run(7, dir.path().to_path_buf());
    assert_eq!(took, again, "the same seed took another time to pick the rotation up");
    assert_eq!(first, second, "the same seed gave other events");
}

#[test]
fn a_peer_that_stalls_in_the_handshake_is_cut_at_the_shipped_hello_deadline() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), "10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let dir = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let runtime = Runtime::with_seed_and_config(3, madsim::Config::default());
        let root_ip: IpAddr = "10.0.0.1".parse().unwrap();
        let root_config = config("root", root_ip, &[], &dir, &dir.join("a.pem"));
        // The shipped default: the replication port's hello deadline bounds the handshake too.
        let deadline = root_config.connections.replication.idle_timeout;
        assert_eq!(deadline, Duration::from_secs(30), "the shipped connections.replication.idle_timeout");
        runtime.block_on(async move {
            let handle = Handle::current();
            let (tx, rx) = tokio::sync::oneshot::channel();
            handle.create_node().name("root").ip(root_ip).build().spawn(async move {
                let node = Node::start_simulated(
                    root_config,
                    &StoreLocation::Memory(MemDisk::default()),
                    1,
                    SimHooks::default(),
                )
                .await
                .unwrap();
                let _ = tx.send(node.state.clone());
                std::future::pending::<()>().await;
            });
            let root = rx.await.unwrap();
            let client = handle.create_node().name("silent").ip("10.0.0.9".parse().unwrap()).build();
            let cut_after = client
                .spawn(async move {
                    use tokio::io::AsyncReadExt;
                    let mut stream = tokio::net::TcpStream::connect(SocketAddr::new(root_ip, 7000)).await.unwrap();
                    let opened = madsim::time::Instant::now();
                    // Nothing sent: no ClientHello. The server must close, not wait for ever.
                    let mut buf = [0u8; 64];
                    let waited = deadline + Duration::from_secs(5);
                    let _ = tokio::time::timeout(waited, stream.read(&mut buf)).await;
                    opened.elapsed()
                })
                .await
                .unwrap();
            assert!(
                cut_after >= deadline && cut_after < deadline + Duration::from_secs(1),
                "a silent peer was cut after {cut_after:?}, not at the {deadline:?} deadline"
            );
            let labels = [("listener", "replication"), ("side", "server"), ("reason", "timed_out")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .to_vec();
            assert_eq!(root.metrics.tls_handshake_failures.get_or_create(&labels).get(), 1);
        });
    })
    .join()
    .unwrap();
}
