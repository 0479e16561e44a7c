//! An operator replaces a root group member on real processes: members 1–3 vote, member 4
//! stands by (in every roster, `standby = true`). Under writes, `qs-node members --add 4
//! --remove 3`, asked of a member that may not lead, reaches the leader and returns once the
//! group left joint consensus; member 3 is then stopped for good, and the group of 1, 2 and 4
//! goes on taking writes, member 4 holding everything the others do.
// Real sockets and real processes: the tokio build only.
#![cfg(not(madsim))]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::process::{NodeProcess, Ports, Role, write_config};
use crate::root_group::{ENV, Outcome, leader, put};

const OPERATOR_TOKEN: &str = "operator-token-0123456789";

fn config(dir: &Path, id: usize, ports: &[Ports]) -> PathBuf {
    let mut extra = format!("[root]\nmember_id = {id}\noperator_token = \"{OPERATOR_TOKEN}\"\n");
    for (n, p) in ports.iter().enumerate() {
        let standby = if n == 3 { "standby = true\n" } else { "" };
        extra += &format!(
            "[[root.members]]\nid = {}\nreplication = \"{}\"\nhttp = \"{}\"\n{standby}",
            n + 1,
            p.replication,
            p.http
        );
    }
    write_config(dir, &format!("member-{id}"), ports[id - 1], Role::Root { batch_window: "20ms" }, &extra)
}

/// `qs-node members` against `http`, with the operator token unless `token` is None.
fn members_command(http: SocketAddr, args: &[&str], token: Option<&str>) -> (i32, serde_json::Value, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_qs-node"));
    command.args(["members", "--node", &format!("http://{http}")]).args(args);
    match token {
        Some(token) => command.env("QS_OPERATOR_TOKEN", token),
        None => command.env_remove("QS_OPERATOR_TOKEN"),
    };
    let output = command.output().unwrap();
    let body = serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    (output.status.code().unwrap_or(-1), body, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Writes `keys` until each is acknowledged, following redirects among `http`.
fn write_all(http: &[SocketAddr], keys: std::ops::Range<usize>) {
    let mut target = http[0];
    let started = Instant::now();
    for n in keys {
        loop {
            assert!(started.elapsed() < Duration::from_secs(60), "writes stalled at dns:m{n:04}");
            match put(target, &format!("dns:m{n:04}"), &format!("v{n}")) {
                Outcome::Acknowledged => break,
                Outcome::Elsewhere(Some(leader)) => target = leader,
                Outcome::Elsewhere(None) | Outcome::Failed => {
                    std::thread::sleep(Duration::from_millis(50));
                    target = http[(http.iter().position(|h| *h == target).unwrap_or(0) + 1) % http.len()];
                }
            }
        }
    }
}

#[test]
fn an_operator_replaces_a_member_through_joint_consensus() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<Ports> = (0..4).map(|_| Ports::new()).collect();
    let configs: Vec<PathBuf> = (1..=4).map(|id| config(dir.path(), id, &ports)).collect();
    let mut members: Vec<Option<NodeProcess>> =
        (0..4).map(|n| Some(NodeProcess::start(&configs[n], ports[n], &[], ENV))).collect();
    for member in members.iter_mut().flatten() {
        member.wait_serving(Duration::from_secs(30));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while leader(&members[..3]).is_none() {
        assert!(Instant::now() < deadline, "no member became leader within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let http: Vec<SocketAddr> = ports.iter().map(|p| p.http).collect();
    write_all(&http[..3], 0..50);

    // The configuration as a member shows it; a change without the token is refused before
    // anything is asked, and with a wrong one by the member.
    let (code, shown, stderr) = members_command(http[3], &[], None);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(shown["voters"], serde_json::json!([1, 2, 3]), "{shown}");
    assert_eq!(shown["roster"][3]["standby"], true, "{shown}");
    let (code, _, stderr) = members_command(http[0], &["--add", "4"], None);
    assert_eq!(code, 2, "{stderr}");
    let (code, body, _) = members_command(http[0], &["--add", "4"], Some("not-the-operator-token"));
    assert_eq!(code, 1);
    assert!(body["error"].as_str().unwrap_or_default().contains("not the operator token"), "{body}");
    let (code, body, _) = members_command(http[0], &["--add", "9"], Some(OPERATOR_TOKEN));
    assert_eq!(code, 1);
    assert!(body["error"].as_str().unwrap_or_default().contains("not in [[root.members]]"), "{body}");

    // Asked of a follower: redirected to the leader, answered once made.
    let leading = leader(&members[..3]).unwrap();
    let follower = (leading + 1) % 3;
    let (code, made, stderr) = members_command(http[follower], &["--add", "4", "--remove", "3"], Some(OPERATOR_TOKEN));
    if code != 0 && made["error"].as_str().is_some_and(|e| e.contains("leads and is to be removed")) {
        // Member 3 led: it handed its leadership on; asked again, the new leader makes it.
        std::thread::sleep(Duration::from_secs(2));
        let (code, again, stderr) =
            members_command(http[follower], &["--add", "4", "--remove", "3"], Some(OPERATOR_TOKEN));
        assert_eq!(code, 0, "{again} {stderr}");
        assert_eq!(again["voters"], serde_json::json!([1, 2, 4]), "{again}");
    } else {
        assert_eq!(code, 0, "{made} {stderr}");
        assert_eq!(made["voters"], serde_json::json!([1, 2, 4]), "{made}");
        assert_eq!(made["outgoing"], serde_json::json!([]), "answered once the group left joint: {made}");
    }

    // Member 3 goes; the group of 1, 2 and 4 takes writes, and member 4 holds what they do.
    members[2].take().unwrap().kill();
    let live = [http[0], http[1], http[3]];
    write_all(&live, 50..120);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let heads: Vec<(u64, String)> = [0, 1, 3]
            .iter()
            .map(|&n| {
                let s = members[n].as_ref().unwrap().status();
                s.map_or((0, String::new()), |s| (s.applied_index, s.state_digest.to_string()))
            })
            .collect();
        if heads.iter().all(|h| *h == heads[0]) && heads[0].0 > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "members 1, 2 and 4 did not converge: {heads:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = members[3].as_ref().unwrap().status().unwrap();
    let voters = status.raft.as_ref().and_then(|raft| raft.configuration.as_ref()).map(|c| c.voters.clone());
    assert_eq!(voters, Some(vec![1, 2, 4]), "{status:?}");
}
