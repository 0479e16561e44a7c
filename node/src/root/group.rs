//! A root group member's write path: the batches the committer gathers become Raft proposals,
//! and every member applies each committed proposal to its store as the same log entries.
//!
//! Guarantees:
//! - **A write is acknowledged only once a majority committed it** and this member applied
//!   it: the leader answers a request when the proposal holding it comes out committed, in its
//!   own term, and is in the store.
//! - **Every member's log is the same, entry for entry.** A proposal carries its operations
//!   and the leader's timestamp; applying it is a function of the proposal and the store's head
//!   ([`batch::pack`]), so members that applied the same proposals hold the same entries,
//!   indexes and chain hashes. The Raft index is committed with the entries
//!   (`Store::apply_raft`): a restart neither re-applies nor skips a proposal.
//! - **Identical rewrites are judged against committed state.** Only a leader that applied
//!   everything committed before its term judges writes, against its store and its own
//!   proposals still in flight (which commit before anything it proposes later, or not at all).
//! - **Only the leader takes writes.** A member that does not lead answers
//!   [`WriteError::NotLeader`] with the leader's HTTP address when it knows one (the HTTP API
//!   redirects there), rather than forwarding: the member a producer asked could not tell it
//!   what became of a forwarded write.
//! - **No answer is a guess.** A proposal this member stopped leading before it applied is
//!   answered "outcome unknown" (it may still commit under the next leader); one whose index
//!   came out holding another leader's entry is answered "not applied".
//! - Heartbeats: the leader proposes an empty entry when nothing was written for the heartbeat
//!   interval, so replicas can measure their lag as below a root of one. **At most one
//!   heartbeat is outstanding**: the next is proposed once this member applied the last one
//!   (or stopped waiting for it: it stopped leading, or its store was restarted, caught up or
//!   healed), an interval after the later of the newest applied entry and the last heartbeat
//!   proposed. A heartbeat slow to commit (a slow disk, slow peers) is not followed by another
//!   at every tick, each an empty entry every replica down the tree would log.
//!
//! - **The Raft log is bounded.** Every `raft_snapshot_entries` applied entries a member
//!   snapshots at the entry it just applied (Raft's metadata and its store's head: the store is
//!   the snapshot's data) and drops its log but the last `raft_log_keep_entries`. A member sent
//!   a snapshot catches its store up to it (`catch_up`) before it applies anything later.
//!
//! - **Quotas are the group's, not a member's.** Each proposal carries the leader's quota ledger
//!   (what the buckets held after its writes took their tokens); every member adopts it as it
//!   applies it, and commits it with the entries. A leader takes writes only once it applied
//!   its term's first entry (`RaftView::serving`), so its buckets already hold its
//!   predecessor's last committed ledger.
//! - Under the simulator, each persist of Raft state is charged to the member's disk before the
//!   messages that vouch for it leave.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::batch::{self, Judged};
use super::catch_up::{self, Target};
use super::peers::{self, send_to_peer};
use super::proposal::Proposal;
use super::{WriteError, WriteReceipt, WriteRequest};
use crate::config::RootConfig;
use crate::connections::{Lifecycle, reached};
use crate::consensus::{self, Member, MemberEvent, Output, ProposeError, Role, StorePoint};
use crate::entry::{LogEntry, Op};
use crate::state::{DiskOp, NodeState};
use disk::restore;
pub use membership::MembershipRefused;
pub(crate) use membership::{MembershipReply, MembershipRequest};
use reads::Reads;
pub(crate) use reads::{READ_CONFIRM_TIMEOUT, ReadReply};

/// Messages queued for one peer before more are dropped (Raft resends what matters).
const OUTBOX_DEPTH: usize = 1024;
/// Inbound Raft messages queued before more are dropped.
pub(crate) const INBOX_DEPTH: usize = 4096;

/// Reads waiting to be handed to the consensus before readers wait for room.
const READ_QUEUE_DEPTH: usize = 1024;
/// Membership changes waiting to be handed to the consensus (one is made at a time).
const MEMBERSHIP_QUEUE_DEPTH: usize = 8;

/// Where a member's consensus takes its work.
pub(super) struct Channels {
    /// The committer's batches.
    pub batches: mpsc::Sender<Vec<WriteRequest>>,
    /// Reads to confirm (see [`reads`]).
    pub reads: mpsc::Sender<ReadReply>,
    /// Operators' membership changes (see [`membership`]).
    pub members: mpsc::Sender<MembershipRequest>,
}

/// Starts member `me` of the root group: its consensus, restored from the store, and a task
/// per peer carrying its messages. Returns where the committer sends its batches and readers
/// their reads.
pub(super) fn start(
    state: Arc<NodeState>,
    root: &RootConfig,
) -> Result<(Channels, tokio::task::JoinHandle<()>), consensus::MemberError> {
    let me = root.member_id.expect("a group member's configuration names its id (validated)");
    let voters = root.first_voters();
    #[cfg(madsim)]
    consensus::deterministic_elections();
    let (member, applied) = restore(&state, me, &voters)?;
    let (inbox_tx, inbox) = mpsc::channel(INBOX_DEPTH);
    let inbox_budget = super::queues::ByteBudget::new(super::queues::INBOX_BYTES_MAX, state.raft_queued_bytes.clone());
    state.raft_inbox.set((inbox_tx, inbox_budget)).expect("one consensus per node");
    let mut outboxes = BTreeMap::new();
    for peer in root.members.iter().filter(|m| m.id != me) {
        let (tx, rx) = mpsc::channel(OUTBOX_DEPTH);
        let budget = super::queues::ByteBudget::new(super::queues::OUTBOX_BYTES_MAX, state.raft_queued_bytes.clone());
        outboxes.insert(peer.id, (tx, budget));
        tokio::spawn(send_to_peer(state.clone(), me, peer.id, peer.replication, rx));
    }
    let (batches_tx, batches) = mpsc::channel(16);
    let (reads_tx, read_requests) = mpsc::channel(READ_QUEUE_DEPTH);
    let (members_tx, membership_requests) = mpsc::channel(MEMBERSHIP_QUEUE_DEPTH);
    let group = Group::new(state, root, member, applied, outboxes, (batches, read_requests, membership_requests));
    let channels = Channels { batches: batches_tx, reads: reads_tx, members: members_tx };
    Ok((channels, tokio::spawn(group.run(inbox))))
}

/// How long a member whose disk failed waits before it reopens its store and tries again.
const RECOVER_AFTER: Duration = Duration::from_secs(1);

/// Requests proposed at one Raft index, waiting for it to come out committed.
struct InFlight {
    term: u64,
    requests: Vec<WriteRequest>,
    judged: Judged,
}

impl Drop for InFlight {
    /// Answers whatever is still unanswered "outcome unknown": the proposal may commit under
    /// another leader after this member stopped waiting for it (it stepped down, or stopped).
    fn drop(&mut self) {
        for request in self.requests.drain(..) {
            let why = "this member stopped leading before the write committed; it may still commit";
            let _ = request.reply.send(Err(WriteError::Unknown(why.into())));
        }
    }
}

struct Group {
    state: Arc<NodeState>,
    me: u64,
    /// The group's first voters (`RootConfig::first_voters`): what a restart starts from.
    voters: Vec<u64>,
    /// Every member `[[root.members]]` names: the ids a membership change may add.
    roster: Vec<u64>,
    member: Member,
    /// The last Raft index this member applied.
    applied: u64,
    leaders_http: BTreeMap<u64, SocketAddr>,
    heartbeat_interval: Duration,
    /// Entries applied between two snapshots (`root.raft_snapshot_entries`).
    snapshot_entries: u64,
    /// Entries a compaction keeps before its snapshot (`root.raft_log_keep_entries`).
    log_keep_entries: u64,
    /// The other members' replication addresses: where a store behind a snapshot catches up.
    peers: catch_up::Peers,
    /// By Raft index: what this member proposed as leader and has not applied.
    in_flight: BTreeMap<u64, InFlight>,
    /// By key: the value its newest in-flight proposal leaves (None: deleted), and that
    /// proposal's index.
    ahead: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>,
    /// The Raft index of the heartbeat this member proposed as leader and has not applied: no
    /// other is proposed while it is outstanding. Cleared wherever `in_flight` is (this member
    /// stopped leading, or stopped waiting for what it proposed).
    heartbeat: Option<u64>,
    /// The last index this member had proposed when it stopped waiting for its proposals
    /// while it may still lead (a heal, say): they may still commit, and `ahead` no longer
    /// says what they leave, so it judges no write until it applied this far (0: no fence).
    fence: u64,
    /// When this member last proposed a heartbeat (monotonic; None: never).
    heartbeat_proposed: Option<tokio::time::Instant>,
    /// Batches that came while this member leads but has not applied its term's first entry.
    waiting: VecDeque<Vec<WriteRequest>>,
    outboxes: BTreeMap<u64, peers::Outbox>,
    /// The committer's batches.
    batches: mpsc::Receiver<Vec<WriteRequest>>,
    /// Reads to confirm, and those being confirmed.
    read_requests: mpsc::Receiver<ReadReply>,
    reads: Reads,
    /// Operators' membership changes.
    membership_requests: mpsc::Receiver<MembershipRequest>,
    /// The change this member proposed as leader and has not made yet: its index, and where
    /// its requester waits.
    membership: Option<(u64, MembershipReply)>,
}

impl Group {
    /// Member `root.member_id` as `member` (its consensus, `applied` its store's Raft index),
    /// sending to its peers through `outboxes`; nothing proposed or waiting yet.
    fn new(
        state: Arc<NodeState>,
        root: &RootConfig,
        member: Member,
        applied: u64,
        outboxes: BTreeMap<u64, peers::Outbox>,
        (batches, read_requests, membership_requests): (
            mpsc::Receiver<Vec<WriteRequest>>,
            mpsc::Receiver<ReadReply>,
            mpsc::Receiver<MembershipRequest>,
        ),
    ) -> Group {
        let me = member.id();
        Group {
            applied,
            me,
            voters: root.first_voters(),
            roster: root.members.iter().map(|m| m.id).collect(),
            state,
            member,
            leaders_http: root.members.iter().map(|m| (m.id, m.http)).collect(),
            heartbeat_interval: root.heartbeat_interval,
            snapshot_entries: root.raft_snapshot_entries,
            log_keep_entries: root.raft_log_keep_entries,
            peers: catch_up::Peers::new(root.members.iter().filter(|m| m.id != me).map(|m| m.replication).collect()),
            in_flight: BTreeMap::new(),
            ahead: BTreeMap::new(),
            heartbeat: None,
            fence: 0,
            heartbeat_proposed: None,
            waiting: VecDeque::new(),
            outboxes,
            batches,
            read_requests,
            reads: Reads::default(),
            membership_requests,
            membership: None,
        }
    }

    /// The member's life: every message, batch and tick stepped through its consensus, until the
    /// node drains. A failure never ends it: the member pauses (it takes no writes, and says
    /// so), restarts from its store — healed from a peer's copy when the store or its Raft state
    /// is damaged or forked — and goes on.
    async fn run(mut self, mut inbox: mpsc::Receiver<super::RaftInbound>) {
        let mut lifecycle = self.state.lifecycle();
        let started = match self.catch_up_to_snapshot(None, &mut lifecycle).await {
            Ok(caught_up) => caught_up,
            Err(e) => self.carry_on(Err(e), &mut lifecycle).await,
        };
        if !started {
            return self.refuse_waiting(); // draining
        }
        let mut ticker = tokio::time::interval(consensus::TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stepped = tokio::select! {
                // Fixed poll order: select!'s default random order draws from a process-wide
                // seed, which would make runs differ under one simulator seed.
                biased;
                // Draining: a draining member's peers can no longer reach it, so nothing in
                // flight would commit through it; every request is answered now (see InFlight).
                () = reached(&mut lifecycle, Lifecycle::Draining) => break,
                Some((from, bytes, _held)) = inbox.recv() => match consensus::decode(&bytes) {
                    Ok(message) if message.from == from && message.to == self.me => self.member.receive(message),
                    Ok(message) if message.from == from => {
                        // Meant for another member id at this address (a member that rejoined
                        // under a new id after its disk was replaced): never stepped as ours.
                        tracing::warn!(from, to = message.to, me = self.me, "a Raft message for another member: dropped");
                        continue;
                    }
                    Ok(message) => {
                        tracing::warn!(from, claimed = message.from, "a Raft message whose sender is not the member that sent it: dropped");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(from, error = %e, "a Raft frame that is not a Raft message: dropped");
                        continue;
                    }
                },
                Some(batch) = self.batches.recv() => {
                    self.waiting.push_back(batch);
                    self.propose_waiting()
                }
                Some(reply) = self.read_requests.recv() => self.read_requested(reply),
                Some(request) = self.membership_requests.recv() => self.membership_requested(request),
                _ = ticker.tick() => {
                    if self.state.is_damaged() {
                        match self.heal(&mut lifecycle).await {
                            Ok(true) => self.tick(),
                            Ok(false) => break,
                            Err(e) => Err(e),
                        }
                    } else {
                        self.tick()
                    }
                }
            };
            let handled = match stepped {
                Ok(output) => self.handle(output, &mut lifecycle).await,
                Err(e) => Err(e),
            };
            if !self.carry_on(handled, &mut lifecycle).await {
                break;
            }
        }
        self.refuse_waiting();
    }

    /// Answers the batches never proposed "shutting down, not applied" (as they drop).
    fn refuse_waiting(&mut self) {
        self.waiting.clear();
    }

    /// After applying: snapshots and compacts the Raft log once `snapshot_entries` were applied
    /// since the last snapshot.
    fn compact_if_due(&mut self) -> Result<(), consensus::MemberError> {
        let last_snapshot = self.member.snapshot().map_or(0, |(index, _)| index);
        if self.applied < last_snapshot + self.snapshot_entries {
            return Ok(());
        }
        let (log_index, hash, quotas) =
            self.state.read_store(|store| (store.applied_index(), store.chain_hash(), store.quota_ledger()));
        // The ledger committed with the entries up to here travels in the snapshot: a member
        // that catches its store up to it from a peer's log never applies the proposals that
        // carried it (see `Member::snapshot_quotas`).
        let quotas = quotas.map_err(consensus::MemberError::disk(consensus::DiskStep::ReadQuotaLedger))?;
        self.member.compact(
            self.applied,
            StorePoint { log_index, hash },
            quotas.as_deref().unwrap_or_default(),
            self.log_keep_entries,
        )?;
        self.state.probe(crate::observe::Probe::RaftLogCompacted);
        tracing::debug!(node = %self.state.config.name, raft_index = self.applied, log_index, "the root group member snapshotted and compacted its Raft log");
        Ok(())
    }

    fn tick(&mut self) -> Result<Output, consensus::MemberError> {
        let mut output = self.member.tick()?;
        if let Some(index) = self.heartbeat {
            assert!(index > self.applied, "the heartbeat at {index} was applied ({}) but is outstanding", self.applied);
        }
        // Idle since the newest entry applied or the last heartbeat proposed, whichever is
        // later (a heartbeat this member stopped waiting for — it stopped leading — holds the
        // next back for an interval too), by the monotonic clock: a wall clock that steps back
        // must not silence the group.
        let since_proposed = self.heartbeat_proposed.map_or(Duration::MAX, |at| at.elapsed());
        let idle = self.state.since_applied().min(since_proposed);
        if self.in_flight.is_empty()
            && self.heartbeat.is_none()
            && self.member.leads_with_committed_state(self.applied)
            && idle >= self.heartbeat_interval
        {
            let proposal = Proposal::Heartbeat { timestamp_ms: self.state.root_now_ms() };
            match self.member.propose(proposal.encode()) {
                Ok((index, more)) => {
                    self.heartbeat = Some(index);
                    self.heartbeat_proposed = Some(tokio::time::Instant::now());
                    merge(&mut output, more);
                }
                Err(ProposeError::Stopped(e)) => return Err(e),
                Err(e) => tracing::debug!(error = %e, "heartbeat not proposed"),
            }
        }
        merge(&mut output, self.expire_reads()?);
        self.propose_waiting().map(|more| {
            merge(&mut output, more);
            output
        })
    }

    /// Proposes the waiting batches if this member may, or refuses them if it does not lead.
    fn propose_waiting(&mut self) -> Result<Output, consensus::MemberError> {
        let mut output = Output::default();
        if !self.member.is_leader() {
            let leader = self.leader_http();
            for batch in self.waiting.drain(..) {
                for request in batch {
                    let _ = request.reply.send(Err(WriteError::NotLeader { leader }));
                }
            }
            return Ok(output);
        }
        if !self.may_judge() {
            return Ok(output); // once the term's first entry (and any fence) is applied
        }
        while let Some(batch) = self.waiting.pop_front() {
            for part in split_for_proposals(batch) {
                merge(&mut output, self.propose(part)?);
            }
        }
        Ok(output)
    }

    /// Whether this member may judge writes against its store now: it leads, applied its
    /// term's first entry, and applied whatever it proposed before it last stopped waiting
    /// for its proposals (the fence).
    fn may_judge(&self) -> bool {
        self.member.leads_with_committed_state(self.applied) && self.applied >= self.fence
    }

    /// The HTTP address of the leader this member knows, if any.
    fn leader_http(&self) -> Option<SocketAddr> {
        self.member.leader().and_then(|id| self.leaders_http.get(&id).copied())
    }

    /// Judges `batch` against the committed state and what is in flight, and proposes what
    /// is left.
    fn propose(&mut self, batch: Vec<WriteRequest>) -> Result<Output, consensus::MemberError> {
        let requests: Vec<&[Op]> = batch.iter().map(|r| r.ops.as_slice()).collect();
        let ahead = |key: &[u8]| self.ahead.get(key).map(|(_, value)| value.as_deref());
        let judged = self.state.read_store(|store| batch::judge(&self.state, store, &requests, ahead));
        // Proposed even when every operation was an identical rewrite (no entry comes of it):
        // the tokens the requests took travel in its quota ledger, and count only once a
        // majority holds them.
        let now = self.state.root_now_ms();
        let proposal =
            Proposal::Writes { timestamp_ms: now, ops: judged.kept.clone(), quotas: self.state.quotas.ledger(now) };
        match self.member.propose(proposal.encode()) {
            Ok((index, output)) => {
                for op in &judged.kept {
                    self.ahead.insert(op.key().to_vec(), (index, op.value().map(<[u8]>::to_vec)));
                }
                let mut requests = batch;
                if self.state.config.planted().raft_acknowledge_before_commit {
                    // PLANTED BUG: answered now, at the index the write would get if it commits.
                    let head = self.state.read_store(|store| store.applied_index()) + 1;
                    for (request, identical_dropped) in requests.drain(..).zip(judged.dropped.iter().copied()) {
                        let _ = request.reply.send(Ok(WriteReceipt { index: head, identical_dropped }));
                    }
                }
                self.in_flight.insert(index, InFlight { term: self.member.term(), requests, judged });
                Ok(output)
            }
            Err(ProposeError::Stopped(e)) => {
                // The persist of the proposal failed, and a failed commit may have reached the
                // disk: the member restarts from its store with the entry in its log, and may
                // lead again and commit it. Not "not applied": unknown.
                let why = format!("persisting the proposal failed ({e}); it may have landed and may still commit");
                for request in batch {
                    let _ = request.reply.send(Err(WriteError::Unknown(why.clone())));
                }
                Err(e)
            }
            Err(e) => {
                let leader = self.leader_http();
                tracing::debug!(error = %e, "a batch was not proposed");
                for request in batch {
                    let _ = request.reply.send(Err(WriteError::NotLeader { leader }));
                }
                Ok(Output::default())
            }
        }
    }

    /// Acts on what the member did: applies what committed, answers what it proposed, sends
    /// its messages.
    async fn handle(
        &mut self,
        output: Output,
        lifecycle: &mut watch::Receiver<Lifecycle>,
    ) -> Result<(), consensus::MemberError> {
        if output.persisted_bytes > 0 {
            // The synced commit that made the Raft state durable, charged to the simulated disk
            // (nothing on a real one) before anything that vouches for it leaves: a slow disk
            // slows this member's votes and acknowledgements as it would in production.
            self.state.disk_io(DiskOp::Commit { bytes: output.persisted_bytes }).await;
        }
        for event in output.events {
            match event {
                MemberEvent::Role { term, role, leader } => self.role_changed(term, role, leader),
                MemberEvent::Committed { index, term, data } => self.apply(index, term, &data).await?,
                MemberEvent::Snapshot { index, point, configuration } => {
                    self.took_up(configuration);
                    self.state.probe(crate::observe::Probe::RaftSnapshotReceived);
                    let target = Target { raft_index: index, point };
                    if !self.catch_up_to_snapshot(Some(target), lifecycle).await? {
                        return Ok(()); // draining: the loop ends at its next turn
                    }
                }
                MemberEvent::ReadConfirmed { ctx, index } => self.read_confirmed(ctx, index),
                MemberEvent::Configured { index, term, configuration } => {
                    self.configured(index, term, configuration).await?
                }
            }
        }
        self.answer_applied_reads();
        self.state.metrics.raft_commit_index.set(self.member.commit_index() as i64);
        self.publish_view();
        for message in output.messages {
            let Some((outbox, budget)) = self.outboxes.get(&message.to) else {
                tracing::warn!(to = message.to, "a Raft message to a member not in the group: dropped");
                continue;
            };
            // Past the outbox's bytes or its count: dropped, and Raft resends what matters.
            let bytes = consensus::encode(&message);
            let queued =
                budget.try_hold(bytes.len()).map(|held| outbox.try_send((tokio::time::Instant::now(), bytes, held)));
            if !matches!(queued, Some(Ok(()))) {
                self.state.metrics.raft_messages_dropped.inc();
            }
            if message.get_msg_type() == raft::prelude::MessageType::MsgSnapshot {
                // Sent or dropped, the leader probes the follower again at its next heartbeat
                // answer rather than wait for an answer to this one (see `Member::snapshot_sent`).
                self.member.snapshot_sent(message.to);
            }
        }
        // Reads that came while a confirmation was in flight go with the next.
        let reads = self.confirm_queued_reads()?;
        if !reads.messages.is_empty() || !reads.events.is_empty() {
            Box::pin(self.handle(reads, lifecycle)).await?;
        }
        // A member that became leader may take the batches it held back once it caught up.
        if !self.waiting.is_empty() && self.may_judge() {
            let more = self.propose_waiting()?;
            Box::pin(self.handle(more, lifecycle)).await?;
        }
        Ok(())
    }

    fn role_changed(&mut self, term: u64, role: Role, leader: u64) {
        tracing::info!(node = %self.state.config.name, term, role = role.as_str(), leader, "root group role");
        let metrics = &self.state.metrics;
        metrics.raft_term.set(term as i64);
        metrics.raft_leader.set(leader as i64);
        for &each in Role::ALL {
            let label = crate::metrics::Metrics::label("role", each.as_str());
            metrics.raft_role.get_or_create(&label).set(i64::from(each == role));
        }
        self.publish_view();
        self.state.report(crate::observe::NodeEvent::RaftRole { term, role, leader });
        if role != Role::Leader {
            // Answered "outcome unknown" as they drop: they may commit under the new leader.
            self.forget_proposals();
            self.refuse_reads(&WriteError::NotLeader { leader: self.leader_http() });
            self.forget_membership("this member stopped leading before it was made");
        }
    }

    /// Stops waiting for what this member proposed: its requests in flight are answered
    /// "outcome unknown" (see [`InFlight`]), and the heartbeat it proposed no longer holds the
    /// next back — once it leads again, the next is an interval after the last one proposed.
    fn forget_proposals(&mut self) {
        if self.member.is_leader() {
            self.fence = self.fence.max(self.member.last_index());
        }
        self.in_flight.clear();
        self.ahead.clear();
        self.heartbeat = None;
    }

    /// Publishes the member's term, role, leader and whether it may take writes (the HTTP API
    /// reads them), when any changed.
    fn publish_view(&mut self) {
        self.publish_view_paused(None);
    }

    /// Applies committed entry `index` to the store, and answers the requests proposed there.
    #[expect(
        clippy::too_many_lines,
        reason = "71 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    async fn apply(&mut self, index: u64, term: u64, data: &[u8]) -> Result<(), consensus::MemberError> {
        if index <= self.applied {
            // A store copied from a peer while catching up already holds it (and nothing this
            // member proposed: it was a follower).
            return Ok(());
        }
        assert_eq!(index, self.applied + 1, "committed entries come out in order, each once");
        let proposal = if data.is_empty() { None } else { Some(Proposal::decode(data)?) };
        let bytes = match &proposal {
            Some(Proposal::Writes { ops, .. }) => ops.iter().map(Op::logical_bytes).sum(),
            _ => 0,
        };
        self.state.disk_io(DiskOp::Commit { bytes }).await;
        let state = &self.state;
        if let Some(Proposal::Writes { quotas, .. }) = &proposal
            && !state.config.planted().quotas_forgotten
        {
            // Before the commit: a failed one leaves the buckets lower, never higher.
            state.quotas.adopt(quotas, state.root_now_ms());
        }
        let applied = state.with_store(|store| {
            state.settle(store)?;
            let (entries, quotas): (Vec<LogEntry>, _) = match proposal {
                None => (Vec::new(), None),
                Some(Proposal::Heartbeat { timestamp_ms }) => {
                    (vec![store.next_entry(timestamp_ms, Vec::new()).expect("an empty entry is in limits")], None)
                }
                Some(Proposal::Writes { timestamp_ms, ops, quotas }) => {
                    let entries = batch::pack(store, timestamp_ms, ops).map_err(|e| {
                        crate::store::StoreError::CorruptMeta(format!(
                            "committed Raft entry {index} cannot be sealed: {e}"
                        ))
                    })?;
                    (entries, Some(quotas.to_bytes()))
                }
            };
            store.apply_raft(&entries, index, quotas)?;
            if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
                state.applied(first, last);
            }
            Ok::<_, crate::store::StoreError>(store.applied_index())
        });
        let head = match applied {
            Ok(head) => head,
            Err(e) => {
                self.state.after_apply();
                if e.is_damage() {
                    // Damage (a block failing RocksDB's checksum in a compaction, say) is not
                    // cured by reopening: the member heals from a peer's copy (see `recover`).
                    self.state.found_damage();
                }
                return Err(consensus::MemberError::Disk { step: consensus::DiskStep::Apply { index }, source: e });
            }
        };
        self.applied = index;
        self.state.metrics.raft_applied_index.set(index as i64);
        self.ahead.retain(|_, (proposed_at, _)| *proposed_at > index);
        // Applied — the heartbeat, or another leader's entry in its place: either way it is
        // no longer outstanding.
        if self.heartbeat.is_some_and(|at| at <= index) {
            self.heartbeat = None;
        }
        if let Some(mut in_flight) = self.in_flight.remove(&index) {
            let requests = std::mem::take(&mut in_flight.requests);
            if in_flight.term == term {
                in_flight.judged.report(&self.state);
                for (request, identical_dropped) in requests.into_iter().zip(in_flight.judged.dropped.iter().copied()) {
                    self.state.metrics.writes_identical_dropped.inc_by(identical_dropped as u64);
                    let _ = request.reply.send(Ok(WriteReceipt { index: head, identical_dropped }));
                }
            } else {
                for request in requests {
                    let _ = request.reply.send(Err(WriteError::Overwritten { index }));
                }
            }
        }
        self.compact_if_due()
    }
}

/// Encoded bytes of one operation in a proposal, at most.
fn proposal_bytes(op: &Op) -> usize {
    9 + op.logical_bytes() as usize
}

/// `batch` in runs of whole requests, each within [`PROPOSAL_OPS_BYTES_MAX`] (a request over
/// it alone; the HTTP body limit keeps every request far below [`consensus::PROPOSAL_BYTES_MAX`]).
fn split_for_proposals(batch: Vec<WriteRequest>) -> Vec<Vec<WriteRequest>> {
    let mut parts: Vec<Vec<WriteRequest>> = Vec::new();
    let mut bytes = 0;
    for request in batch {
        let request_bytes: usize = request.ops.iter().map(proposal_bytes).sum();
        match parts.last_mut() {
            Some(part) if bytes + request_bytes <= PROPOSAL_OPS_BYTES_MAX => {
                bytes += request_bytes;
                part.push(request);
            }
            _ => {
                bytes = request_bytes;
                parts.push(vec![request]);
            }
        }
    }
    parts
}

/// Operation bytes gathered into one proposal.
const PROPOSAL_OPS_BYTES_MAX: usize = 4 << 20;
const _: () = assert!(
    crate::limits::REQUEST_BODY_BYTES_MAX <= PROPOSAL_OPS_BYTES_MAX
        && PROPOSAL_OPS_BYTES_MAX + 64 <= consensus::PROPOSAL_BYTES_MAX,
    "a request's operations fit one proposal"
);

fn merge(into: &mut Output, more: Output) {
    into.messages.extend(more.messages);
    into.events.extend(more.events);
    into.persisted_bytes += more.persisted_bytes;
}

mod disk;
mod membership;
mod pause;
mod reads;
#[cfg(test)]
mod tests;
