//! The root group's consensus under the simulator (`qs_node::consensus`, the foundation of a
//! Raft root): three members as madsim nodes, each ticking its raft-rs `RawNode` and sending
//! Raft messages as datagrams on the simulated network. Proposals go to whichever member says
//! it leads; the leader is killed mid-run. Checked: at most one leader per term, from the
//! members' typed role events; every member commits the same data at each index; the two
//! survivors elect a new leader in a later term and keep committing; the same seed replays to
//! the same events at the same simulated times, and another seed does not (so the comparison
//! can fail) — raft-rs's election timeouts drawn from the seed (`vendor/raft.patch`).
//!
//! Run: `RUSTFLAGS="--cfg madsim" cargo test -p qs-node --test integration --target-dir target/madsim
//! simulated_raft::` (part of `./ci/test.sh`). In the normal build this module compiles to nothing.
#![cfg(madsim)]

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::net::Endpoint;
use madsim::runtime::{Handle, Runtime};
use qs_node::consensus::{self, Member, MemberEvent, Role};

const PORT: u16 = 7300;
const TAG: u64 = 0x7261_6674; // "raft"

/// A member's event, with its simulated time and the member.
type Event = (Duration, u64, MemberEvent);
type Events = Vec<Event>;

fn address(id: u64) -> SocketAddr {
    SocketAddr::new(IpAddr::from([10, 0, 9, id as u8]), PORT)
}

/// One member's node: ticks, received messages and proposals into its `Member`; its output's
/// messages sent, its events logged with the simulated time.
async fn member_loop(
    id: u64,
    voters: Vec<u64>,
    log: Arc<Mutex<Events>>,
    mut proposals: tokio::sync::mpsc::Receiver<Vec<u8>>,
) {
    let endpoint = Arc::new(Endpoint::bind(address(id)).await.unwrap());
    let mut member = Member::new(id, &voters).unwrap();
    let (inbox_tx, mut inbox) = tokio::sync::mpsc::channel::<Vec<u8>>(1024);
    let receiver = endpoint.clone();
    madsim::task::spawn(async move {
        let mut buf = vec![0u8; 1 << 20];
        while let Ok((len, _)) = receiver.recv_from(TAG, &mut buf).await {
            if inbox_tx.send(buf[..len].to_vec()).await.is_err() {
                return;
            }
        }
    });
    let mut ticker = tokio::time::interval(consensus::TICK);
    loop {
        let out = tokio::select! {
            biased;
            _ = ticker.tick() => member.tick().unwrap(),
            Some(bytes) = inbox.recv() => match consensus::decode(&bytes).map(|m| member.receive(m)) {
                Ok(Ok(out)) => out,
                Ok(Err(e)) => panic!("member {id} could not step a message: {e}"),
                Err(e) => panic!("member {id} got bytes that are not a message: {e}"),
            },
            Some(data) = proposals.recv() => member.propose(data).map(|(_, out)| out).unwrap_or_default(),
        };
        let at = madsim::time::TimeHandle::current().elapsed();
        log.lock().unwrap().extend(out.events.into_iter().map(|e| (at, id, e)));
        for message in out.messages {
            // A lost datagram is a lost message, which Raft tolerates.
            let _ = endpoint.send_to(address(message.to), TAG, &consensus::encode(&message)).await;
        }
    }
}

/// The member that last said it leads, by the events so far.
fn leader(events: &Events) -> Option<u64> {
    let mut roles: BTreeMap<u64, (u64, Role)> = BTreeMap::new();
    for (_, id, event) in events {
        if let MemberEvent::Role { term, role, .. } = event {
            roles.insert(*id, (*term, *role));
        }
    }
    roles.iter().filter(|(_, (_, role))| *role == Role::Leader).max_by_key(|(_, (term, _))| *term).map(|(id, _)| *id)
}

fn run(seed: u64) -> Events {
    std::thread::spawn(move || run_here(seed)).join().unwrap()
}

fn run_here(seed: u64) -> Events {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let log: Arc<Mutex<Events>> = Arc::default();
    runtime.block_on({
        let log = log.clone();
        async move {
            consensus::deterministic_elections();
            let handle = Handle::current();
            let voters = vec![1, 2, 3];
            let mut proposers = BTreeMap::new();
            let mut nodes = BTreeMap::new();
            for &id in &voters {
                let (tx, rx) = tokio::sync::mpsc::channel(64);
                proposers.insert(id, tx);
                let (voters, log) = (voters.clone(), log.clone());
                let node = handle.create_node().name(format!("member-{id}")).ip(address(id).ip()).build();
                node.spawn(member_loop(id, voters, log, rx));
                nodes.insert(id, node.id());
            }
            let mut killed = None;
            for n in 0..100u32 {
                madsim::time::sleep(Duration::from_millis(100)).await;
                let Some(leader) = leader(&log.lock().unwrap()).filter(|l| Some(*l) != killed) else { continue };
                if n == 50 {
                    handle.kill(nodes[&leader]);
                    killed = Some(leader);
                    continue;
                }
                let _ = proposers[&leader].send(format!("w{n}").into_bytes()).await;
            }
            madsim::time::sleep(Duration::from_secs(3)).await;
        }
    });
    std::mem::take(&mut *log.lock().unwrap())
}

#[test]
fn one_leader_per_term_the_same_commits_everywhere_and_a_seed_replays() {
    let events = run(11);
    // At most one leader per term.
    let mut leaders: BTreeMap<u64, u64> = BTreeMap::new();
    for (at, id, event) in &events {
        if let MemberEvent::Role { term, role: Role::Leader, .. } = event
            && let Some(other) = leaders.insert(*term, *id)
        {
            assert_eq!(other, *id, "two leaders in term {term}: {other} and {id} (at {at:?})");
        }
    }
    assert!(leaders.len() >= 2, "no new leader after the first was killed: {leaders:?}");
    // The same data at each index on every member that committed it.
    let mut by_index: BTreeMap<u64, (u64, Vec<u8>)> = BTreeMap::new();
    let mut per_member: BTreeMap<u64, usize> = BTreeMap::new();
    for (_, id, event) in &events {
        if let MemberEvent::Committed { index, data, .. } = event {
            *per_member.entry(*id).or_default() += 1;
            if let Some((first, theirs)) = by_index.insert(*index, (*id, data.clone())) {
                assert_eq!(&theirs, data, "index {index}: member {first} committed other data than member {id}");
            }
        }
    }
    let first_leader = leaders.values().next().copied().unwrap();
    let new_leader = leaders.values().last().copied().unwrap();
    assert_ne!(first_leader, new_leader, "the killed leader led again");
    let after_kill = events
        .iter()
        .filter(|(_, id, e)| *id == new_leader && matches!(e, MemberEvent::Committed { .. }))
        .filter(|(_, _, e)| matches!(e, MemberEvent::Committed { term, .. } if *term > *leaders.keys().next().unwrap()))
        .count();
    assert!(after_kill >= 10, "the new leader committed {after_kill} proposals after the failover");
    eprintln!("seed 11: {} events; leaders by term {leaders:?}; commits per member {per_member:?}", events.len());
    // The same seed replays; another does not.
    if let Some((n, ours, theirs)) = first_difference(&events, &run(11)) {
        panic!("the same seed gave other events, first at event {n}: {ours:?} against {theirs:?}");
    }
    assert!(
        first_difference(&events, &run(12)).is_some(),
        "another seed gave the same events: the comparison cannot fail"
    );
}

/// The first event where two runs part: its position and each run's event there (None past a run's end).
fn first_difference<'a>(a: &'a Events, b: &'a Events) -> Option<(usize, Option<&'a Event>, Option<&'a Event>)> {
    (0..a.len().max(b.len())).find(|&n| a.get(n) != b.get(n)).map(|n| (n, a.get(n), b.get(n)))
}
