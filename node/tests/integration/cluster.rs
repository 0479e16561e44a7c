//! A real cluster on loopback: `qs-node` processes — a root, two intermediates and four edges,
//! all on LMDB. Writes go through the root's HTTP API; reads come back through the edges'
//! memcached ports, read with the `memcache` crate (a client this project did not write).
//! Then an intermediate is killed with SIGKILL: its edges must move to their secondary source
//! within the staleness threshold; restarted, the intermediate catches up. Then the other
//! intermediate is frozen with SIGSTOP, which only the staleness threshold can detect (its
//! connections stay open), and its edges must move too. At the end every
//! node has the same applied index, chain hash and state digest, and every acknowledged write
//! reads back from every edge.
// Real sockets and real processes: the tokio build only (tests/simulated.rs covers madsim).
#![cfg(not(madsim))]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "dns-producer-token";
const STALENESS: Duration = Duration::from_secs(2);

struct Ports {
    replication: SocketAddr,
    memcached: SocketAddr,
    http: SocketAddr,
}

impl Ports {
    fn new() -> Ports {
        Ports { replication: common::free_port(), memcached: common::free_port(), http: common::free_port() }
    }
}

struct NodeProcess {
    name: String,
    config: PathBuf,
    ports: Ports,
    child: Option<Child>,
}

impl NodeProcess {
    fn start(&mut self) {
        let log = std::fs::File::create(self.config.with_extension("log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_qs-node"))
            .arg("--config")
            .arg(&self.config)
            .env("QS_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        assert!(Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap().success());
    }

    fn status(&self) -> Option<serde_json::Value> {
        let url = format!("http://{}/v1/status", self.ports.http);
        let mut response = ureq::get(&url).config().timeout_global(Some(Duration::from_secs(2))).build().call().ok()?;
        response.body_mut().read_json().ok()
    }

    fn applied(&self) -> u64 {
        self.status().and_then(|s| s["applied_index"].as_u64()).unwrap_or(0)
    }

    fn metric(&self, name: &str) -> f64 {
        let url = format!("http://{}/metrics", self.ports.http);
        let text = ureq::get(&url).call().unwrap().body_mut().read_to_string().unwrap();
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn write_config(
    dir: &Path,
    name: &str,
    role: &str,
    ports: &Ports,
    primaries: &[SocketAddr],
    secondaries: &[SocketAddr],
) -> PathBuf {
    let list = |addrs: &[SocketAddr]| addrs.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(", ");
    let mut text = format!(
        r#"
name = "{name}"
role = "{role}"
database_id = "5157534d-0000-0000-0000-00000000c0de"

[storage]
engine = "lmdb"
path = "{path}"

[listen]
replication = "{r}"
memcached = "{m}"
http = "{h}"

[retention]
keep_entries_min = 100000
gc_interval = "1s"
"#,
        path = dir.join(name).display(),
        r = ports.replication,
        m = ports.memcached,
        h = ports.http,
    );
    if role == "replica" {
        text += &format!(
            "\n[replication]\nprimaries = [{}]\nsecondaries = [{}]\nstaleness_failover = \"{}ms\"\nreconnect_backoff_min = \"50ms\"\nreconnect_backoff_max = \"500ms\"\n",
            list(primaries),
            list(secondaries),
            STALENESS.as_millis()
        );
    } else {
        text += &format!(
            "\n[root]\nbatch_window = \"50ms\"\nheartbeat_interval = \"200ms\"\n[[root.producers]]\nname = \"dns\"\ntoken = \"{TOKEN}\"\nprefixes = [\"dns:\"]\nwrites_per_s = 100000\nburst = 100000\n"
        );
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn put(root: &NodeProcess, key: &str, value: &str) -> u64 {
    let url = format!("http://{}/v1/keys/{key}", root.ports.http);
    let mut response = ureq::put(&url).header("authorization", &format!("Bearer {TOKEN}")).send(value).unwrap();
    let body: serde_json::Value = response.body_mut().read_json().unwrap();
    body["index"].as_u64().unwrap()
}

/// Writes `dns:zone-<i>` = `<net>.<i>` for each `i`, recording each acknowledged write.
fn write_zones(root: &NodeProcess, range: std::ops::Range<u32>, net: &str, acked: &mut Vec<(String, String)>) {
    for i in range {
        let (key, value) = (format!("dns:zone-{i}"), format!("{net}.{i}"));
        put(root, &key, &value);
        acked.push((key, value));
    }
}

#[test]
fn cluster_survives_the_loss_of_an_intermediate() {
    let dir = tempfile::tempdir().unwrap();
    let node = |name: &str, role: &str, primaries: &[SocketAddr], secondaries: &[SocketAddr]| {
        let ports = Ports::new();
        let config = write_config(dir.path(), name, role, &ports, primaries, secondaries);
        NodeProcess { name: name.to_string(), config, ports, child: None }
    };
    let mut root = node("root", "root", &[], &[]);
    let root_addr = root.ports.replication;
    let mut mid1 = node("mid-1", "replica", &[root_addr], &[]);
    let mut mid2 = node("mid-2", "replica", &[root_addr], &[]);
    let (m1, m2) = (mid1.ports.replication, mid2.ports.replication);
    let mut edges = vec![
        node("edge-1", "replica", &[m1], &[m2]),
        node("edge-2", "replica", &[m1], &[m2]),
        node("edge-3", "replica", &[m2], &[m1]),
        node("edge-4", "replica", &[m2], &[m1]),
    ];
    root.start();
    mid1.start();
    mid2.start();
    for edge in &mut edges {
        edge.start();
    }
    let everyone = |root: &NodeProcess,
                    mid1: &NodeProcess,
                    mid2: &NodeProcess,
                    edges: &[NodeProcess]|
     -> Vec<Option<serde_json::Value>> {
        [root, mid1, mid2].into_iter().chain(edges).map(NodeProcess::status).collect()
    };
    wait_until("every node to serve its status", Duration::from_secs(30), || {
        everyone(&root, &mid1, &mid2, &edges).iter().all(Option::is_some)
    });

    // Writes, each acknowledged once durable on the root.
    let mut acked = Vec::new();
    write_zones(&root, 0..40, "203.0.113", &mut acked);
    let target = root.applied();
    wait_until("every node to reach the root's index", Duration::from_secs(30), || {
        [&mid1, &mid2].into_iter().chain(&edges).all(|n| n.applied() >= target)
    });

    // Reads through memcached, with a client this project did not write.
    for edge in &edges {
        if std::net::TcpStream::connect(edge.ports.memcached).is_err() {
            let log = std::fs::read_to_string(edge.config.with_extension("log")).unwrap_or_default();
            panic!("{} is not listening on {}; its log:\n{log}", edge.name, edge.ports.memcached);
        }
        let client = memcache::Client::connect(format!("memcache://{}?protocol=ascii", edge.ports.memcached)).unwrap();
        for (key, value) in &acked {
            let got: Option<String> = client.get(key).unwrap();
            assert_eq!(got.as_deref(), Some(value.as_str()), "{} key {key}", edge.name);
        }
    }

    // Kill an intermediate; keep writing; its edges must fail over within the staleness bound.
    mid1.kill();
    let killed_at = Instant::now();
    write_zones(&root, 40..60, "198.51.100", &mut acked);
    let target = root.applied();
    wait_until("edges of the dead intermediate to catch up through their secondary", STALENESS * 4, || {
        edges[..2].iter().all(|e| e.applied() >= target)
    });
    eprintln!("edges of mid-1 caught up via mid-2 {:?} after the kill", killed_at.elapsed());
    for edge in &edges[..2] {
        assert!(edge.metric("qs_failovers_total") >= 1.0, "{} recorded no failover", edge.name);
    }

    // The restarted intermediate catches up.
    mid1.start();
    wait_until("the restarted intermediate to catch up", Duration::from_secs(30), || mid1.applied() >= target);

    // Freeze the other intermediate (SIGSTOP): its connections stay open but go silent, so its
    // edges can only notice through the staleness threshold.
    mid2.signal("STOP");
    let frozen_at = Instant::now();
    write_zones(&root, 60..65, "192.0.2", &mut acked);
    let target = root.applied();
    wait_until("edges of the frozen intermediate to fail over on staleness", STALENESS * 4, || {
        edges[2..].iter().all(|e| e.applied() >= target)
    });
    let waited = frozen_at.elapsed();
    eprintln!("edges of mid-2 failed over to mid-1 {waited:?} after it froze (staleness {STALENESS:?})");
    assert!(waited >= STALENESS / 2, "edges moved before the source could have looked stale: {waited:?}");
    mid2.signal("CONT");
    write_zones(&root, 65..75, "192.0.2", &mut acked);
    let target = root.applied();
    wait_until("everyone to converge after the restart", Duration::from_secs(30), || {
        [&mid1, &mid2].into_iter().chain(&edges).all(|n| n.applied() >= target)
    });

    // Heartbeats keep the index moving: sweep until one sweep finds every node at the same index.
    let statuses: Vec<serde_json::Value> = {
        let mut snapshot;
        let start = Instant::now();
        loop {
            snapshot = everyone(&root, &mid1, &mid2, &edges).into_iter().map(Option::unwrap).collect::<Vec<_>>();
            let first = &snapshot[0];
            let same = snapshot
                .iter()
                .all(|s| s["applied_index"] == first["applied_index"] && s["chain_hash"] == first["chain_hash"]);
            if same || start.elapsed() > Duration::from_secs(20) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        snapshot
    };
    for status in &statuses {
        assert_eq!(status["applied_index"], statuses[0]["applied_index"], "{status}");
        assert_eq!(status["chain_hash"], statuses[0]["chain_hash"], "{status}");
        assert_eq!(status["state_digest"], statuses[0]["state_digest"], "{status}");
    }
    for edge in &edges {
        let client = memcache::Client::connect(format!("memcache://{}?protocol=ascii", edge.ports.memcached)).unwrap();
        for (key, value) in &acked {
            let got: Option<String> = client.get(key).unwrap();
            assert_eq!(got.as_deref(), Some(value.as_str()), "{} key {key} after the failover", edge.name);
        }
    }

    // Lose the root itself: no one has an upstream any more, and everyone keeps serving what it
    // has — reads on every edge, and the intermediates keep their edges connected.
    root.kill();
    std::thread::sleep(STALENESS * 2);
    for edge in &edges {
        let client = memcache::Client::connect(format!("memcache://{}?protocol=ascii", edge.ports.memcached)).unwrap();
        let (key, value) = &acked[acked.len() - 1];
        let got: Option<String> = client.get(key).unwrap();
        assert_eq!(got.as_deref(), Some(value.as_str()), "{} stopped serving after the root was lost", edge.name);
        assert!(edge.status().is_some(), "{} stopped answering", edge.name);
    }
}
