//! A real cluster on loopback: `qs-node` processes — a root, two intermediates and four edges,
//! all on LMDB. Writes go through the root's HTTP API; reads come back through the edges'
//! memcached ports, read with the `memcache` crate (a client this project did not write).
//! Then an intermediate is killed with SIGKILL: its edges must move to their secondary source
//! within the staleness threshold; restarted, the intermediate catches up. Then the other
//! intermediate is frozen with SIGSTOP, which only the staleness threshold can detect (its
//! connections stay open), and its edges must move too. At the end every
//! node has the same applied index, chain hash and state digest, and every acknowledged write
//! reads back from every edge.
// Real sockets and real processes: the tokio build only (`simulated` covers madsim).
#![cfg(not(madsim))]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::process::{NodeProcess, Ports, Role, TOKEN, write_config};
use qs_node::status::Status;

const STALENESS: Duration = Duration::from_secs(2);
/// The nodes' log level.
const ENV: &[(&str, &str)] = &[("QS_LOG", "info")];

fn applied(node: &NodeProcess) -> u64 {
    node.status().map_or(0, |s| s.applied_index)
}

fn metric(node: &NodeProcess, name: &str) -> f64 {
    let url = format!("http://{}/metrics", node.ports.http);
    let text = ureq::get(&url).call().unwrap().body_mut().read_to_string().unwrap();
    common::process::sample(&text, name).unwrap_or(0.0)
}

/// A node's configuration: every node keeps 100 000 entries of history; a replica has its
/// `secondaries` and the staleness threshold.
fn write_node_config(dir: &Path, name: &str, ports: Ports, role: Role<'_>, secondaries: &[SocketAddr]) -> PathBuf {
    let mut extra = String::from("[retention]\nkeep_entries_min = 100000\ngc_interval = \"1s\"\n");
    if let Role::Replica { .. } = role {
        let list = secondaries.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(", ");
        extra +=
            &format!("[replication]\nsecondaries = [{list}]\nstaleness_failover = \"{}ms\"\n", STALENESS.as_millis());
    }
    write_config(dir, name, ports, role, &extra)
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
#[expect(
    clippy::too_many_lines,
    reason = "117 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn cluster_survives_the_loss_of_an_intermediate() {
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str, role: Role<'_>, secondaries: &[SocketAddr]| {
        let ports = Ports::new();
        (write_node_config(dir.path(), name, ports, role, secondaries), ports)
    };
    let start = |(config, ports): &(PathBuf, Ports)| NodeProcess::start(config, *ports, &[], ENV);
    let root = config("root", Role::Root { batch_window: "50ms" }, &[]);
    let root_addr = [root.1.replication];
    let mid1 = config("mid-1", Role::Replica { primaries: &root_addr }, &[]);
    let mid2 = config("mid-2", Role::Replica { primaries: &root_addr }, &[]);
    let (m1, m2) = ([mid1.1.replication], [mid2.1.replication]);
    let edges = [
        config("edge-1", Role::Replica { primaries: &m1 }, &m2),
        config("edge-2", Role::Replica { primaries: &m1 }, &m2),
        config("edge-3", Role::Replica { primaries: &m2 }, &m1),
        config("edge-4", Role::Replica { primaries: &m2 }, &m1),
    ];
    let mut root = start(&root);
    let mut mid1 = start(&mid1);
    let mid2 = start(&mid2);
    let edges: Vec<NodeProcess> = edges.iter().map(start).collect();
    let everyone =
        |root: &NodeProcess, mid1: &NodeProcess, mid2: &NodeProcess, edges: &[NodeProcess]| -> Vec<Option<Status>> {
            [root, mid1, mid2].into_iter().chain(edges).map(NodeProcess::status).collect()
        };
    common::eventually_blocking("every node to serve its status", Duration::from_secs(30), || {
        everyone(&root, &mid1, &mid2, &edges).iter().all(Option::is_some)
    });

    // Writes, each acknowledged once durable on the root.
    let mut acked = Vec::new();
    write_zones(&root, 0..40, "203.0.113", &mut acked);
    let target = applied(&root);
    common::eventually_blocking("every node to reach the root's index", Duration::from_secs(30), || {
        [&mid1, &mid2].into_iter().chain(&edges).all(|n| applied(n) >= target)
    });

    // Reads through memcached, with a client this project did not write.
    for edge in &edges {
        if std::net::TcpStream::connect(edge.ports.memcached).is_err() {
            panic!("{} is not listening on {}; its log:\n{}", edge.name(), edge.ports.memcached, edge.log_text());
        }
        let client = memcache::Client::connect(format!("memcache://{}?protocol=ascii", edge.ports.memcached)).unwrap();
        for (key, value) in &acked {
            let got: Option<String> = client.get(key).unwrap();
            assert_eq!(got.as_deref(), Some(value.as_str()), "{} key {key}", edge.name());
        }
    }

    // Kill an intermediate; keep writing; its edges must fail over within the staleness bound.
    mid1.kill();
    let killed_at = Instant::now();
    write_zones(&root, 40..60, "198.51.100", &mut acked);
    let target = applied(&root);
    common::eventually_blocking(
        "edges of the dead intermediate to catch up through their secondary",
        STALENESS * 4,
        || edges[..2].iter().all(|e| applied(e) >= target),
    );
    eprintln!("edges of mid-1 caught up via mid-2 {:?} after the kill", killed_at.elapsed());
    for edge in &edges[..2] {
        assert!(metric(edge, "qs_failovers_total") >= 1.0, "{} recorded no failover", edge.name());
    }

    // The restarted intermediate catches up.
    mid1 = start(&(mid1.config.clone(), mid1.ports));
    common::eventually_blocking("the restarted intermediate to catch up", Duration::from_secs(30), || {
        applied(&mid1) >= target
    });

    // Freeze the other intermediate (SIGSTOP): its connections stay open but go silent, so its
    // edges can only notice through the staleness threshold.
    mid2.signal("STOP");
    let frozen_at = Instant::now();
    write_zones(&root, 60..65, "192.0.2", &mut acked);
    let target = applied(&root);
    common::eventually_blocking("edges of the frozen intermediate to fail over on staleness", STALENESS * 4, || {
        edges[2..].iter().all(|e| applied(e) >= target)
    });
    let waited = frozen_at.elapsed();
    eprintln!("edges of mid-2 failed over to mid-1 {waited:?} after it froze (staleness {STALENESS:?})");
    assert!(waited >= STALENESS / 2, "edges moved before the source could have looked stale: {waited:?}");
    mid2.signal("CONT");
    write_zones(&root, 65..75, "192.0.2", &mut acked);
    let target = applied(&root);
    common::eventually_blocking("everyone to converge after the restart", Duration::from_secs(30), || {
        [&mid1, &mid2].into_iter().chain(&edges).all(|n| applied(n) >= target)
    });

    // Heartbeats keep the index moving: sweep until one sweep finds every node at the same index.
    let statuses: Vec<Status> = {
        let mut snapshot;
        let start = Instant::now();
        loop {
            snapshot = everyone(&root, &mid1, &mid2, &edges).into_iter().map(Option::unwrap).collect::<Vec<_>>();
            let first = &snapshot[0];
            let same =
                snapshot.iter().all(|s| s.applied_index == first.applied_index && s.chain_hash == first.chain_hash);
            if same || start.elapsed() > Duration::from_secs(20) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        snapshot
    };
    for status in &statuses {
        assert_eq!(status.applied_index, statuses[0].applied_index, "{status:?}");
        assert_eq!(status.chain_hash, statuses[0].chain_hash, "{status:?}");
        assert_eq!(status.state_digest, statuses[0].state_digest, "{status:?}");
    }
    for edge in &edges {
        let client = memcache::Client::connect(format!("memcache://{}?protocol=ascii", edge.ports.memcached)).unwrap();
        for (key, value) in &acked {
            let got: Option<String> = client.get(key).unwrap();
            assert_eq!(got.as_deref(), Some(value.as_str()), "{} key {key} after the failover", edge.name());
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
        assert_eq!(got.as_deref(), Some(value.as_str()), "{} stopped serving after the root was lost", edge.name());
        assert!(edge.status().is_some(), "{} stopped answering", edge.name());
    }
}
