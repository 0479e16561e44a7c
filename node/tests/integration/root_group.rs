//! A root group of three `qs-node` processes on loopback (LMDB), under a write load from
//! producers that write to whichever member they last heard leads and follow the 307 a
//! member that does not lead answers. The leader is killed with SIGKILL in the middle of the
//! load: the two others elect a new leader and take writes again; the killed member restarts
//! and catches up. At the end every acknowledged write reads back from every member, and the
//! three hold the same applied index, chain hash and state digest.
// Real sockets and real processes: the tokio build only.
#![cfg(not(madsim))]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::process::{MemcachedConnection, NodeProcess, Ports, Role, TOKEN, write_config};

pub(crate) const ENV: &[(&str, &str)] = &[("QS_LOG", "info")];

pub(crate) fn members_toml(ports: &[Ports]) -> String {
    let mut text = String::new();
    for (n, p) in ports.iter().enumerate() {
        text +=
            &format!("[[root.members]]\nid = {}\nreplication = \"{}\"\nhttp = \"{}\"\n", n + 1, p.replication, p.http);
    }
    text
}

fn member_config(dir: &Path, id: usize, ports: &[Ports]) -> PathBuf {
    let extra = format!("[root]\nmember_id = {id}\n{}", members_toml(ports));
    write_config(dir, &format!("member-{id}"), ports[id - 1], Role::Root { batch_window: "20ms" }, &extra)
}

/// The member that says it leads, by its `/status`, if one does.
pub(crate) fn leader(members: &[Option<NodeProcess>]) -> Option<usize> {
    members.iter().position(|m| m.as_ref().and_then(NodeProcess::status).is_some_and(|s| s.leads()))
}

/// What one write attempt came to.
pub(crate) enum Outcome {
    Acknowledged,
    /// Redirected to another member, or none leads now: try again there, or shortly.
    Elsewhere(Option<SocketAddr>),
    /// The member could not be reached, or answered that the outcome is unknown.
    Failed,
}

/// A producer's HTTP client: redirects are answers to look at, not to follow.
fn producer() -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into()
}

pub(crate) fn put(http: SocketAddr, key: &str, value: &str) -> Outcome {
    let agent = producer();
    let url = format!("http://{http}/v1/keys/{key}");
    let Ok(response) = agent.put(&url).header("authorization", &format!("Bearer {TOKEN}")).send(value) else {
        return Outcome::Failed;
    };
    match response.status().as_u16() {
        200 => Outcome::Acknowledged,
        307 => {
            let location = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let leader = location.strip_prefix("http://").and_then(|rest| rest.split('/').next()?.parse().ok());
            assert!(leader.is_some(), "a 307 without a usable Location: {location:?}");
            Outcome::Elsewhere(leader)
        }
        503 => Outcome::Elsewhere(None),
        _ => Outcome::Failed,
    }
}

/// A producer's `GET` of `key` from `http`, redirects not followed: the status, the body, and
/// the `Location` of a redirect.
fn get(http: SocketAddr, key: &str) -> (u16, String, Option<String>) {
    let agent = producer();
    let url = format!("http://{http}/v1/keys/{key}");
    let mut response = agent.get(&url).header("authorization", &format!("Bearer {TOKEN}")).call().unwrap();
    let location = response.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
    (response.status().as_u16(), response.body_mut().read_to_string().unwrap_or_default(), location)
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "119 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn the_group_keeps_every_acknowledged_write_when_its_leader_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<Ports> = (0..3).map(|_| Ports::new()).collect();
    let configs: Vec<PathBuf> = (1..=3).map(|id| member_config(dir.path(), id, &ports)).collect();
    let start = |n: usize| NodeProcess::start(&configs[n], ports[n], &[], ENV);
    let mut members: Vec<Option<NodeProcess>> = (0..3).map(|n| Some(start(n))).collect();
    for member in members.iter_mut().flatten() {
        member.wait_serving(Duration::from_secs(30));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let first_leader = loop {
        if let Some(leader) = leader(&members) {
            break leader;
        }
        assert!(Instant::now() < deadline, "no member became leader within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    };

    // Writes, each until acknowledged; the leader is killed after the 100th acknowledgement.
    let mut acknowledged: BTreeMap<String, String> = BTreeMap::new();
    let mut target = ports[0].http;
    let mut killed = None;
    let mut redirects = 0;
    let started = Instant::now();
    for n in 0..300 {
        let (key, value) = (format!("dns:w{n:04}"), format!("v{n}"));
        loop {
            if started.elapsed() > Duration::from_secs(20) {
                let logs: Vec<String> =
                    members.iter().flatten().map(|m| format!("{}:\n{}", m.name(), m.log_text())).collect();
                panic!("the writes stalled; {} acknowledged. Logs:\n{}", acknowledged.len(), logs.join("\n"));
            }
            match put(target, &key, &value) {
                Outcome::Acknowledged => break,
                Outcome::Elsewhere(Some(leader)) => {
                    redirects += 1;
                    target = leader;
                }
                Outcome::Elsewhere(None) | Outcome::Failed => {
                    // Another member, round robin, after a breath.
                    std::thread::sleep(Duration::from_millis(50));
                    let next = (ports.iter().position(|p| p.http == target).unwrap() + 1) % 3;
                    target = ports[next].http;
                }
            }
        }
        acknowledged.insert(key, value);
        if n == 100 {
            let mut leader = members[first_leader].take().unwrap();
            leader.kill();
            killed = Some(first_leader);
        }
    }
    assert!(redirects > 0, "no write was ever redirected: the producer never met a follower");
    let killed = killed.unwrap();
    let new_leader = leader(&members).expect("a leader among the survivors");
    assert_ne!(new_leader, killed);

    // The killed member restarts from its disk and catches up.
    members[killed] = Some(start(killed));
    members[killed].as_mut().unwrap().wait_serving(Duration::from_secs(30));
    let heads = |members: &[Option<NodeProcess>]| -> Vec<(u64, String, String)> {
        members
            .iter()
            .flatten()
            .map(|m| {
                m.status().map_or_else(Default::default, |s| {
                    (s.applied_index, s.chain_hash.to_string(), s.state_digest.to_string())
                })
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    // Heartbeats move the head while this looks: equal heads, read twice in a row, suffice.
    loop {
        let now = heads(&members);
        if now.iter().all(|h| h.0 == now[0].0 && h.1 == now[0].1 && h.2 == now[0].2) {
            break;
        }
        assert!(Instant::now() < deadline, "the members did not converge: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // What each member holds, read from its own store (its memcached port serves it, leader or
    // not).
    for (n, member) in members.iter().flatten().enumerate() {
        let mut memcached = MemcachedConnection::open(member.ports.memcached);
        for (key, value) in &acknowledged {
            assert_eq!(memcached.get(key).as_deref(), Some(value.as_bytes()), "member {} lost {key}", n + 1);
        }
    }
    // A producer's GET is read-your-write: the leader answers it from its store; a member that
    // does not lead (and may not have applied what the leader acknowledged) sends it there.
    let leading = leader(&members).expect("a leader once converged");
    let (key, value) = acknowledged.iter().next_back().expect("writes were acknowledged");
    for (n, member) in members.iter().enumerate() {
        let member = member.as_ref().expect("every member runs");
        let (status, body, location) = get(member.ports.http, key);
        if n == leading {
            assert_eq!((status, body.as_str()), (200, value.as_str()), "the leader answers a GET");
        } else {
            let to_leader = format!("http://{}/v1/keys/{key}", members[leading].as_ref().unwrap().ports.http);
            assert_eq!((status, location.as_deref()), (307, Some(to_leader.as_str())), "member {} redirects", n + 1);
        }
    }
    // `qs-node inspect` beside the live member shows its Raft state.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_qs-node"))
        .args(["inspect", "--config"])
        .arg(&configs[0])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "inspect failed: {report}{}", String::from_utf8_lossy(&output.stderr));
    let field = |name: &str| -> u64 {
        let line = report
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name}: {report}"));
        line[name.len()..].trim().split("..").last().unwrap().parse().unwrap()
    };
    assert!(field("raft_term") >= 2, "a leader was killed: a second term at least\n{report}");
    assert!(field("raft_applied") > 300 && field("raft_log") >= field("raft_applied"), "{report}");
    eprintln!(
        "leader {} killed after write 100; member {} led after; {} writes acknowledged, {redirects} redirects, in {:?}",
        first_leader + 1,
        new_leader + 1,
        acknowledged.len(),
        started.elapsed()
    );
}

/// A member's replication listener at its cap sheds the connection unanswered longest for each
/// newcomer — but never a peer member's Raft link, which only ever receives and so would always
/// be the one: newcomers arriving one after another cost idle clients their places, and the
/// group none of its links. Every connection shed is one of the idle clients (`shed_total` equals
/// the idle clients closed), so no Raft link was cut and re-dialled.
#[test]
fn a_full_listener_sheds_idle_clients_never_a_members_raft_link() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<Ports> = (0..3).map(|_| Ports::new()).collect();
    // Four places: the two peers' Raft links (from 127.0.0.1, its per-address share of two) and
    // two more.
    let caps = "[connections.replication]\nmax = 4\nidle_timeout = \"10m\"\n";
    let configs: Vec<PathBuf> = (1..=3)
        .map(|id| {
            let extra = format!("{caps}[root]\nmember_id = {id}\n{}", members_toml(&ports));
            write_config(
                dir.path(),
                &format!("member-{id}"),
                ports[id - 1],
                Role::Root { batch_window: "20ms" },
                &extra,
            )
        })
        .collect();
    let members: Vec<Option<NodeProcess>> =
        (0..3).map(|n| Some(NodeProcess::start(&configs[n], ports[n], &[], ENV))).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while leader(&members).is_none() {
        assert!(Instant::now() < deadline, "no member became leader within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let member = &ports[0];
    let metric = |name: &str| -> f64 {
        let text = members[0].as_ref().unwrap().metrics().expect("metrics");
        let series = format!("{name}{{listener=\"replication\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0.0, |v| v.trim().parse().unwrap())
    };
    let settled = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "{what} within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    settled("both peers' Raft links open", &|| metric("qs_connections_open") >= 2.0);
    // Idle clients, each from its own address, each with half a hello: one after another.
    let mut idle = Vec::new();
    for n in 0..6u8 {
        let from = std::net::IpAddr::from([127, 0, 0, 60 + n]);
        let mut stream = crate::common::process::connect_from(from, member.replication).unwrap();
        stream.write_all(b"QSR").unwrap();
        idle.push(stream);
        // Admitted (in a place, or in one a shed connection handed over) before the next.
        let admitted = n as f64 + 1.0;
        settled("the newcomer admitted", &|| {
            metric("qs_connections_open") + metric("qs_connections_shed_total") >= admitted
        });
    }
    let shed = metric("qs_connections_shed_total");
    assert!(shed >= 4.0, "six newcomers at a listener with two free places: at least four shed, {shed} were");
    let mut closed = 0;
    for stream in &mut idle {
        stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let mut byte = [0u8; 1];
        let is_closed = match stream.read(&mut byte) {
            Ok(n) => n == 0,
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        };
        closed += usize::from(is_closed);
    }
    assert_eq!(closed as f64, shed, "{shed} connections shed, {closed} of them idle clients: the rest were Raft links");
}
