//! The member's batching and its consensus driven by hand (messages delivered or lost by the
//! test, ticks as calls): properties that hold however slow the machine is.

use super::*;

/// A request of `ops` sets, each of a `value_bytes` value.
fn request(ops: usize, value_bytes: usize) -> WriteRequest {
    let ops: Vec<Op> =
        (0..ops).map(|n| Op::Set { key: format!("k:{n}").into_bytes(), value: vec![b'v'; value_bytes] }).collect();
    let gauge = prometheus_client::metrics::gauge::Gauge::default();
    let queued = super::super::QueuedBytes::new(&gauge, 0);
    WriteRequest { ops, reply: tokio::sync::oneshot::channel().0, _queued: queued }
}

/// At the shipped limit: whole requests, each proposal within PROPOSAL_OPS_BYTES_MAX, and
/// the largest request the HTTP API takes in a proposal of its own.
#[test]
fn a_batch_is_split_into_proposals_of_whole_requests_within_the_limit() {
    let mib = 1 << 20;
    // Requests just under 1 MiB each: four fit one 4 MiB proposal, the fifth opens the next.
    let batch: Vec<WriteRequest> = (0..9).map(|_| request(1, mib - 64)).collect();
    let parts = split_for_proposals(batch);
    let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 9, "every request in one part");
    for part in &parts {
        let bytes: usize = part.iter().flat_map(|r| r.ops.iter()).map(proposal_bytes).sum();
        assert!(bytes <= PROPOSAL_OPS_BYTES_MAX, "a part of {bytes} bytes");
    }
    assert_eq!(sizes, vec![4, 4, 1], "as many whole requests as fit, in order");
    // One request over the limit travels alone (the HTTP body limit keeps real ones below).
    let parts = split_for_proposals(vec![request(1, 10), request(5, mib), request(1, 10)]);
    assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1, 1]);
    // Small requests share one proposal.
    assert_eq!(split_for_proposals((0..1000).map(|_| request(3, 100)).collect()).len(), 1);
}

/// Member 1 of a group of three, on a memory store: what its peers send it and what it
/// sends them is delivered by the test, or not at all (a peer cut off, or a slow one).
#[cfg(not(madsim))]
mod driven {
    use super::*;
    use crate::config::NodeConfig;
    use crate::consensus::{ELECTION_TICKS, Pause};
    use crate::store::{MemDisk, Store, StoreLocation};

    const MEMBER_1: &str = r#"
        name = "member-1"
        role = "root"
        database_id = "2a"
        [storage]
        engine = "memory"
        [listen]
        replication = "127.0.0.1:7001"
        memcached = "127.0.0.1:11001"
        http = "127.0.0.1:8001"
        [root]
        member_id = 1
        [[root.members]]
        id = 1
        replication = "127.0.0.1:7001"
        http = "127.0.0.1:8001"
        [[root.members]]
        id = 2
        replication = "127.0.0.1:7002"
        http = "127.0.0.1:8002"
        [[root.members]]
        id = 3
        replication = "127.0.0.1:7003"
        http = "127.0.0.1:8003"
    "#;

    struct Driven {
        group: Group,
        peers: Vec<Member>,
        /// What member 1 sent each peer, not delivered yet.
        sent: BTreeMap<u64, mpsc::Receiver<super::peers::Queued>>,
        lifecycle: watch::Receiver<Lifecycle>,
    }

    impl Driven {
        /// Member 1 with `heartbeat_interval`, its store empty (its newest entry is
        /// "never", so a heartbeat is due as soon as it leads).
        fn new(heartbeat_interval: Duration) -> Driven {
            let config = NodeConfig::parse(MEMBER_1, "member-1.toml").unwrap();
            let root = config.root.clone().unwrap();
            let store = Store::open(&StoreLocation::Memory(MemDisk::default()), &config.store_options()).unwrap();
            let state = NodeState::new(config, store, 1);
            let voters = vec![1, 2, 3];
            let mut outboxes = BTreeMap::new();
            let mut sent = BTreeMap::new();
            for peer in [2, 3] {
                let (tx, rx) = mpsc::channel(OUTBOX_DEPTH);
                let budget = crate::root::queues::ByteBudget::new(
                    crate::root::queues::OUTBOX_BYTES_MAX,
                    state.raft_queued_bytes.clone(),
                );
                outboxes.insert(peer, (tx, budget));
                sent.insert(peer, rx);
            }
            let root = RootConfig { heartbeat_interval, ..root };
            let (_batches, batches_rx) = mpsc::channel(1);
            let (_reads, reads_rx) = mpsc::channel(1);
            let (_members, members_rx) = mpsc::channel(1);
            let member = Member::new(1, &voters).unwrap();
            let group = Group::new(state, &root, member, 0, outboxes, (batches_rx, reads_rx, members_rx));
            let lifecycle = group.state.lifecycle();
            let peers = [2, 3].iter().map(|&id| Member::new(id, &voters).unwrap()).collect();
            Driven { group, peers, sent, lifecycle }
        }

        /// One tick of member 1 (its peers do not tick: they never campaign).
        async fn tick(&mut self) {
            let output = self.group.tick().unwrap();
            self.group.handle(output, &mut self.lifecycle).await.unwrap();
        }

        /// Delivers every message member 1 sent and every answer, until the group is
        /// quiet.
        async fn deliver(&mut self) {
            loop {
                let mut messages = Vec::new();
                for sent in self.sent.values_mut() {
                    while let Ok((_, bytes, _)) = sent.try_recv() {
                        messages.push(consensus::decode(&bytes).unwrap());
                    }
                }
                if messages.is_empty() {
                    return;
                }
                while let Some(message) = messages.pop() {
                    if message.to == 1 {
                        let output = self.group.member.receive(message).unwrap();
                        self.group.handle(output, &mut self.lifecycle).await.unwrap();
                    } else {
                        let peer = self.peers.iter_mut().find(|p| p.id() == message.to).unwrap();
                        messages.extend(peer.receive(message).unwrap().messages);
                    }
                }
            }
        }

        /// Drops whatever member 1 sent and nobody received: its peers are cut off.
        fn lose(&mut self) {
            for sent in self.sent.values_mut() {
                while sent.try_recv().is_ok() {}
            }
        }

        /// Ticks member 1 until it leads and applied its term's first entry.
        async fn elect(&mut self) {
            for _ in 0..3 * ELECTION_TICKS {
                if self.group.member.leads_with_committed_state(self.group.applied) {
                    return;
                }
                self.tick().await;
                self.deliver().await;
            }
            panic!("member 1 was not elected: {:?}", self.group.member);
        }

        /// The Raft indexes of the heartbeats in member 1's log past `after`.
        fn heartbeats_after(&self, after: u64) -> Vec<u64> {
            let log = self.group.member.own_state().entries;
            log.iter()
                .filter(|(index, _)| *index > after)
                .filter(|(_, bytes)| {
                    let entry: raft::prelude::Entry = prost::Message::decode(bytes.as_slice()).unwrap();
                    !entry.data.is_empty()
                        && matches!(Proposal::decode(&entry.data).unwrap(), Proposal::Heartbeat { .. })
                })
                .map(|(index, _)| *index)
                .collect()
        }
    }

    /// Submits one write of `key` = `value` to member 1 as the run loop would; returns where
    /// its answer comes.
    async fn write(
        driven: &mut Driven,
        key: &str,
        value: &str,
    ) -> tokio::sync::oneshot::Receiver<Result<WriteReceipt, WriteError>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let gauge = prometheus_client::metrics::gauge::Gauge::default();
        let ops = vec![Op::Set { key: key.as_bytes().to_vec(), value: value.as_bytes().to_vec() }];
        let request = WriteRequest { ops, reply, _queued: super::super::super::QueuedBytes::new(&gauge, 0) };
        driven.group.waiting.push_back(vec![request]);
        let output = driven.group.propose_waiting().unwrap();
        driven.group.handle(output, &mut driven.lifecycle).await.unwrap();
        answer
    }

    /// A leader that stops waiting for its proposals while it may still lead (a heal that
    /// finished before its peers elected another) judges no write until what it proposed
    /// before is applied: judged against the store alone, a write setting a key back to
    /// its stored value while an in-flight proposal changes it would be dropped as an
    /// identical rewrite and acknowledged — and lost when the in-flight one commits.
    #[tokio::test]
    async fn a_leader_that_forgot_its_proposals_judges_no_write_before_they_are_applied() {
        let mut driven = Driven::new(Duration::from_secs(3600));
        driven.elect().await;
        let first = write(&mut driven, "k", "a").await;
        driven.deliver().await;
        assert!(first.await.unwrap().is_ok());
        // In flight, not yet committed: it sets k to b.
        let _in_flight = write(&mut driven, "k", "b").await;
        driven.group.pause(Pause::Healing);
        assert!(driven.group.member.is_leader(), "it may still lead");
        // k back to a: against the store alone, an identical rewrite.
        let back = write(&mut driven, "k", "a").await;
        for _ in 0..3 {
            driven.tick().await;
            driven.deliver().await;
        }
        let receipt = back.await.unwrap().expect("the write commits");
        assert_eq!(receipt.identical_dropped, 0, "judged after b was applied: not an identical rewrite");
        let stored = driven.group.state.read_store(|s| s.get(b"k").unwrap());
        assert_eq!(stored.as_deref(), Some(&b"a"[..]), "the acknowledged write is the key's value");
    }

    /// A heartbeat that does not commit (its peers slow, or cut off) is not followed by
    /// another at every tick: at most one is outstanding, and the next is proposed only
    /// once it was applied. Ticks are calls here, not time: the property holds however
    /// slow this machine is.
    #[tokio::test]
    async fn a_leader_has_at_most_one_heartbeat_outstanding() {
        // An hour's interval: due at once (the store holds no entry), and not again in
        // this test unless the interval is measured from the wrong moment.
        let mut driven = Driven::new(Duration::from_secs(3600));
        driven.elect().await;
        let applied = driven.group.applied;
        assert_eq!(driven.heartbeats_after(0), Vec::<u64>::new(), "no heartbeat before the first tick as leader");
        // Cut off: nothing member 1 proposes commits. Fewer ticks than check_quorum takes to
        // depose it, so it leads throughout.
        for _ in 0..ELECTION_TICKS / 2 {
            driven.tick().await;
            driven.lose();
            assert!(driven.group.member.is_leader());
        }
        let outstanding = driven.heartbeats_after(applied);
        assert_eq!(
            outstanding.len(),
            1,
            "a heartbeat proposed while one is uncommitted: heartbeats at {outstanding:?}"
        );
        assert_eq!(driven.group.applied, applied, "nothing committed while cut off");
        // Back in touch: the one heartbeat commits and is applied, as the store's newest
        // entry; the next is an interval after it.
        driven.tick().await;
        driven.deliver().await;
        assert_eq!(driven.group.applied, outstanding[0], "the heartbeat was applied");
        assert_eq!(driven.group.state.read_store(|s| s.applied_index()), 1, "as one (empty) entry");
        for _ in 0..3 {
            driven.tick().await;
            driven.deliver().await;
        }
        assert_eq!(driven.heartbeats_after(outstanding[0]), Vec::<u64>::new(), "not due for an hour");
        // Due at once: the applied heartbeat no longer holds the next back.
        driven.group.heartbeat_interval = Duration::ZERO;
        driven.tick().await;
        driven.tick().await;
        let next = driven.heartbeats_after(outstanding[0]);
        assert_eq!(next.len(), 1, "the next heartbeat, once the first was applied, and one only: {next:?}");
        driven.deliver().await;
        assert_eq!(driven.group.applied, next[0]);
    }

    /// The smallest Raft log settings validation accepts run: a snapshot at every entry
    /// applied, keeping only the snapshot's own entry (whose term raft-rs reads to append
    /// after it), and the leader goes on proposing and committing. So does a keep above the
    /// interval: the log is compacted all the same, and holds more.
    #[tokio::test]
    async fn the_smallest_raft_log_settings_accepted_run() {
        for (snapshot_entries, keep) in [(1, 1), (2, 5)] {
            let mut driven = Driven::new(Duration::ZERO);
            driven.group.snapshot_entries = snapshot_entries;
            driven.group.log_keep_entries = keep;
            driven.elect().await;
            for _ in 0..12 {
                driven.tick().await;
                driven.deliver().await;
            }
            let applied = driven.group.applied;
            assert_eq!(applied, 13, "the term's first entry and a heartbeat a tick");
            let (snapshot, _) = driven.group.member.snapshot().expect("the log was compacted");
            assert!(applied - snapshot < snapshot_entries, "a snapshot every {snapshot_entries}: {snapshot}");
            assert_eq!(driven.group.member.first_index(), snapshot + 1 - keep, "the last {keep} entries kept");
        }
    }

    /// Asks member 1 to confirm a read; returns where the answer comes.
    async fn read(driven: &mut Driven) -> tokio::sync::oneshot::Receiver<Result<(), WriteError>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let output = driven.group.read_requested(reply).unwrap();
        driven.group.handle(output, &mut driven.lifecycle).await.unwrap();
        answer
    }

    /// Members 2 and 3, cut off from member 1, tick until one of them leads, and it commits
    /// one entry with the other; returns the new leader's commit index.
    fn peers_elect_and_commit(driven: &mut Driven) -> u64 {
        let route = |peers: &mut Vec<Member>, mut messages: Vec<raft::prelude::Message>| {
            while let Some(message) = messages.pop() {
                if let Some(peer) = peers.iter_mut().find(|p| p.id() == message.to) {
                    messages.extend(peer.receive(message).unwrap().messages);
                } // to member 1: lost
            }
        };
        for _ in 0..4 * ELECTION_TICKS {
            for n in 0..driven.peers.len() {
                let messages = driven.peers[n].tick().unwrap().messages;
                route(&mut driven.peers, messages);
            }
            if let Some(leader) = driven.peers.iter_mut().find(|p| p.is_leader()) {
                let (_, output) = leader.propose(b"the new leader's write".to_vec()).unwrap();
                route(&mut driven.peers, output.messages);
                let leader = driven.peers.iter().find(|p| p.is_leader()).unwrap();
                return leader.commit_index();
            }
        }
        panic!("members 2 and 3 elected no leader");
    }

    /// A leader confirms a read with a heartbeat round its peers answer.
    #[tokio::test]
    async fn a_leader_confirms_a_read_once_a_majority_answers() {
        let mut driven = Driven::new(Duration::from_secs(3600));
        driven.elect().await;
        let mut answer = read(&mut driven).await;
        assert!(answer.try_recv().is_err(), "not before a majority answered");
        driven.deliver().await;
        assert_eq!(answer.try_recv(), Ok(Ok(())));
    }

    /// The deposed-leader read (#54): member 1 leads, is cut off from its peers (a pause, a
    /// partition its clients do not share), and they elect one of themselves, which commits a
    /// write member 1 never saw. Member 1 still believes it leads — `not_leading` says so, and
    /// before reads were confirmed a `GET` there was answered from its store: stale. Now the
    /// read waits for a majority that never answers, and is refused when member 1 steps down.
    #[tokio::test]
    async fn a_leader_cut_off_from_its_peers_confirms_no_read_and_refuses_it_once_deposed() {
        let mut driven = Driven::new(Duration::from_secs(3600));
        driven.elect().await;
        let new_commit = peers_elect_and_commit(&mut driven);
        assert!(new_commit > driven.group.applied, "the new leader committed what member 1 lacks");
        assert!(driven.group.member.is_leader(), "member 1 has not heard of it");
        assert!(crate::root::not_leading(&driven.group.state).is_none(), "and would serve reads by its view");
        let mut answer = read(&mut driven).await;
        for _ in 0..2 * ELECTION_TICKS {
            driven.lose();
            assert!(answer.try_recv().is_err(), "confirmed by nobody, a read is never answered as read");
            driven.tick().await;
        }
        assert!(!driven.group.member.is_leader(), "check-quorum: member 1 stepped down");
        assert!(matches!(answer.try_recv(), Ok(Err(WriteError::NotLeader { .. }))), "refused once deposed");
        let mut late = read(&mut driven).await;
        assert!(matches!(late.try_recv(), Ok(Err(WriteError::NotLeader { .. }))), "a follower refuses at once");
    }

    /// A confirmation whose heartbeat answers are lost is given up after READ_CONFIRM_TIMEOUT
    /// (its reader gave up then too), and the reads queued behind it go with the next.
    #[tokio::test(start_paused = true)]
    async fn a_confirmation_that_never_comes_is_given_up_and_the_next_batch_goes() {
        let mut driven = Driven::new(Duration::from_secs(3600));
        driven.elect().await;
        let mut lost = read(&mut driven).await;
        driven.lose();
        let mut queued = read(&mut driven).await;
        driven.deliver().await; // nothing to deliver: the second waits behind the first
        assert!(queued.try_recv().is_err());
        tokio::time::advance(READ_CONFIRM_TIMEOUT).await;
        driven.tick().await;
        driven.deliver().await;
        assert!(lost.try_recv().is_err(), "given up: dropped unanswered (the reader timed out)");
        assert_eq!(queued.try_recv(), Ok(Ok(())));
    }
}
