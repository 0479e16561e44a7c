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
//!   interval, so replicas can measure their lag as below a root of one.
//!
//! Not yet (each part of the root group's issue): Raft log compaction and snapshots (a member's
//! Raft log grows with the root's history; a member that is far behind catches up from it);
//! producers' quotas are per member (a failover starts the new leader's buckets full); the
//! simulated disk is not charged for Raft persists.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::batch::{self, Judged};
use super::{WriteError, WriteReceipt, WriteRequest};
use crate::config::RootConfig;
use crate::connections::{Lifecycle, reached};
use crate::consensus::{self, Member, MemberEvent, Output, ProposeError, RaftDisk, Restored, Role};
use crate::entry::{LogEntry, Op};
use crate::replication::protocol::{ClientHello, Message, Want, read_message, write_message};
use crate::state::{DiskOp, NodeState};

/// Messages queued for one peer before more are dropped (Raft resends what matters).
const OUTBOX_DEPTH: usize = 1024;
/// Inbound Raft messages queued before more are dropped.
pub(crate) const INBOX_DEPTH: usize = 4096;
/// How long a member gives a peer to accept its connection and answer its hello.
const CONNECT_DEADLINE: Duration = Duration::from_secs(2);
/// How long a member waits before dialling a peer again after a failed connection.
const REDIAL_AFTER: Duration = Duration::from_millis(200);

/// Starts member `me` of the root group: its consensus, restored from the store, and a task
/// per peer carrying its messages. Returns where the committer sends its batches.
pub(super) fn start(
    state: Arc<NodeState>,
    root: &RootConfig,
) -> Result<(mpsc::Sender<Vec<WriteRequest>>, tokio::task::JoinHandle<()>), consensus::MemberError> {
    let me = root.member_id.expect("a group member's configuration names its id (validated)");
    let voters: Vec<u64> = root.members.iter().map(|m| m.id).collect();
    #[cfg(madsim)]
    consensus::deterministic_elections();
    let (member, applied) = restore(&state, me, &voters)?;
    let (inbox_tx, inbox) = mpsc::channel(INBOX_DEPTH);
    state.raft_inbox.set(inbox_tx).expect("one consensus per node");
    let mut outboxes = BTreeMap::new();
    for peer in root.members.iter().filter(|m| m.id != me) {
        let (tx, rx) = mpsc::channel(OUTBOX_DEPTH);
        outboxes.insert(peer.id, tx);
        tokio::spawn(send_to_peer(state.clone(), me, peer.id, peer.replication, rx));
    }
    let leaders_http = root.members.iter().map(|m| (m.id, m.http)).collect();
    let (batches_tx, batches) = mpsc::channel(16);
    let group = Group {
        applied,
        me,
        voters,
        state,
        member,
        leaders_http,
        heartbeat_interval: root.heartbeat_interval,
        in_flight: BTreeMap::new(),
        ahead: BTreeMap::new(),
        waiting: VecDeque::new(),
        outboxes,
    };
    Ok((batches_tx, tokio::spawn(group.run(inbox, batches))))
}

/// Member `me` as the store holds it: its Raft log and hard state, and the last Raft index its
/// store applied.
fn restore(state: &Arc<NodeState>, me: u64, voters: &[u64]) -> Result<(Member, u64), consensus::MemberError> {
    let records =
        state.read_store(|store| store.raft_records()).map_err(|e| consensus::MemberError::Damaged(e.to_string()))?;
    let restored = Restored { hard_state: records.hard_state, entries: records.entries, applied: records.applied };
    let planted = state.config.planted();
    let disk = StoreDisk { state: state.clone(), forget_vote: planted.raft_forget_vote };
    let mut member = Member::restore(me, voters, restored, Box::new(disk))?;
    if planted.raft_apply_before_commit {
        member.apply_before_commit(records.applied);
    }
    Ok((member, records.applied))
}

/// How long a member whose disk failed waits before it reopens its store and tries again.
const RECOVER_AFTER: Duration = Duration::from_secs(1);

/// The store as a member's [`RaftDisk`]: each persist one synced commit.
struct StoreDisk {
    state: Arc<NodeState>,
    /// PLANTED BUG (legacy `raft_forget_vote`): the hard state is never persisted.
    forget_vote: bool,
}

impl RaftDisk for StoreDisk {
    fn persist(&mut self, hard_state: Option<Vec<u8>>, entries: Vec<(u64, Vec<u8>)>) -> Result<(), String> {
        let hard_state = hard_state.filter(|_| !self.forget_vote);
        self.state.with_store(|store| store.persist_raft(hard_state, &entries)).map_err(|e| e.to_string())
    }
}

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
    voters: Vec<u64>,
    member: Member,
    /// The last Raft index this member applied.
    applied: u64,
    leaders_http: BTreeMap<u64, SocketAddr>,
    heartbeat_interval: Duration,
    /// By Raft index: what this member proposed as leader and has not applied.
    in_flight: BTreeMap<u64, InFlight>,
    /// By key: the value its newest in-flight proposal leaves (None: deleted), and that
    /// proposal's index.
    ahead: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>,
    /// Batches that came while this member leads but has not applied its term's first entry.
    waiting: VecDeque<Vec<WriteRequest>>,
    outboxes: BTreeMap<u64, mpsc::Sender<Vec<u8>>>,
}

impl Group {
    async fn run(mut self, mut inbox: mpsc::Receiver<(u64, Vec<u8>)>, mut batches: mpsc::Receiver<Vec<WriteRequest>>) {
        let mut lifecycle = self.state.lifecycle();
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
                Some((from, bytes)) = inbox.recv() => match consensus::decode(&bytes) {
                    Ok(message) if message.from == from => self.member.receive(message),
                    Ok(message) => {
                        tracing::warn!(from, claimed = message.from, "a Raft message whose sender is not the member that sent it: dropped");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(from, error = %e, "a Raft frame that is not a Raft message: dropped");
                        continue;
                    }
                },
                Some(batch) = batches.recv() => {
                    self.waiting.push_back(batch);
                    self.propose_waiting()
                }
                _ = ticker.tick() => self.tick(),
            };
            let handled = match stepped {
                Ok(output) => self.handle(output).await,
                Err(e) => Err(e),
            };
            match handled {
                Ok(()) => {}
                // A message raft-rs refuses (from a stale or foreign term, say) is dropped.
                Err(consensus::MemberError::Raft(e)) => tracing::debug!(error = %e, "a Raft message was refused"),
                // The disk failed a persist or an apply: what landed is unknown until the store
                // is reopened. Start the member again from what the store holds, as a restart
                // would; nothing it had not persisted was vouched for.
                Err(consensus::MemberError::Disk(e)) => {
                    tracing::error!(node = %self.state.config.name, error = %e, "the root group member's disk failed: it restarts from its store");
                    if !self.recover(&mut lifecycle).await {
                        break;
                    }
                }
                Err(e) => {
                    tracing::error!(node = %self.state.config.name, error = %e, "the root group member stops: its Raft state is damaged");
                    break;
                }
            }
        }
        for batch in self.waiting.drain(..) {
            drop(batch); // never proposed: answered "shutting down, not applied"
        }
    }

    /// After a disk failure: reopens the store and restores the member from it, again every
    /// [`RECOVER_AFTER`] until that works. Whatever was in flight is answered "outcome unknown";
    /// the batches waiting are refused when the member next finds it does not lead. False when
    /// the node drains first.
    async fn recover(&mut self, lifecycle: &mut watch::Receiver<Lifecycle>) -> bool {
        self.in_flight.clear();
        self.ahead.clear();
        loop {
            tokio::select! {
                biased;
                () = reached(lifecycle, Lifecycle::Draining) => return false,
                () = tokio::time::sleep(RECOVER_AFTER) => {}
            }
            let settled = self.state.with_store(|store| self.state.settle(store));
            let restored = settled
                .map_err(|e| e.to_string())
                .and_then(|()| restore(&self.state, self.me, &self.voters).map_err(|e| e.to_string()));
            match restored {
                Ok((member, applied)) => {
                    self.member = member;
                    self.applied = applied;
                    tracing::info!(node = %self.state.config.name, applied, "the root group member restarted from its store");
                    return true;
                }
                Err(e) => {
                    tracing::warn!(node = %self.state.config.name, error = %e, "the root group member cannot restart yet")
                }
            }
        }
    }

    fn tick(&mut self) -> Result<Output, consensus::MemberError> {
        let mut output = self.member.tick()?;
        let idle_ms = crate::clock::unix_ms().saturating_sub(self.state.newest_entry_ms());
        if self.in_flight.is_empty()
            && self.member.leads_with_committed_state(self.applied)
            && idle_ms >= self.heartbeat_interval.as_millis() as u64
        {
            let proposal = Proposal::Heartbeat { timestamp_ms: crate::clock::unix_ms() };
            match self.member.propose(proposal.encode()) {
                Ok((_, more)) => merge(&mut output, more),
                Err(ProposeError::Stopped(e)) => return Err(e),
                Err(e) => tracing::debug!(error = %e, "heartbeat not proposed"),
            }
        }
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
        if !self.member.leads_with_committed_state(self.applied) {
            return Ok(output); // once the term's first entry is applied
        }
        while let Some(batch) = self.waiting.pop_front() {
            for part in split_for_proposals(batch) {
                merge(&mut output, self.propose(part)?);
            }
        }
        Ok(output)
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
        if judged.kept.is_empty() && self.in_flight.is_empty() {
            // Nothing to write, and nothing ahead of it: the committed state already holds it.
            let index = self.state.read_store(|store| store.applied_index());
            judged.report(&self.state);
            for (request, identical_dropped) in batch.into_iter().zip(judged.dropped.iter().copied()) {
                self.state.metrics.writes_identical_dropped.inc_by(identical_dropped as u64);
                let _ = request.reply.send(Ok(WriteReceipt { index, identical_dropped }));
            }
            return Ok(Output::default());
        }
        let proposal = Proposal::Writes { timestamp_ms: crate::clock::unix_ms(), ops: judged.kept.clone() };
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
            Err(ProposeError::Stopped(e)) => Err(e),
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
    async fn handle(&mut self, output: Output) -> Result<(), consensus::MemberError> {
        for event in output.events {
            match event {
                MemberEvent::Role { term, role, leader } => self.role_changed(term, role, leader),
                MemberEvent::Committed { index, term, data } => self.apply(index, term, &data).await?,
            }
        }
        self.state.metrics.raft_commit_index.set(self.member.commit_index() as i64);
        for message in output.messages {
            let Some(outbox) = self.outboxes.get(&message.to) else {
                tracing::warn!(to = message.to, "a Raft message to a member not in the group: dropped");
                continue;
            };
            if outbox.try_send(consensus::encode(&message)).is_err() {
                self.state.metrics.raft_messages_dropped.inc();
            }
        }
        // A member that became leader may take the batches it held back once it caught up.
        if !self.waiting.is_empty() && self.member.leads_with_committed_state(self.applied) {
            let more = self.propose_waiting()?;
            Box::pin(self.handle(more)).await?;
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
        self.state.set_raft_view(crate::state::RaftView { term, role, leader });
        self.state.report(crate::observe::NodeEvent::RaftRole { term, role, leader });
        if role != Role::Leader {
            // Answered "outcome unknown" as they drop: they may commit under the new leader.
            self.in_flight.clear();
            self.ahead.clear();
        }
    }

    /// Applies committed entry `index` to the store, and answers the requests proposed there.
    async fn apply(&mut self, index: u64, term: u64, data: &[u8]) -> Result<(), consensus::MemberError> {
        assert_eq!(index, self.applied + 1, "committed entries come out in order, each once");
        let proposal = if data.is_empty() { None } else { Some(Proposal::decode(data)?) };
        let bytes = match &proposal {
            Some(Proposal::Writes { ops, .. }) => ops.iter().map(Op::logical_bytes).sum(),
            _ => 0,
        };
        self.state.disk_io(DiskOp::Commit { bytes }).await;
        let state = &self.state;
        let applied = state.with_store(|store| {
            state.settle(store)?;
            let entries: Vec<LogEntry> = match proposal {
                None => Vec::new(),
                Some(Proposal::Heartbeat { timestamp_ms }) => {
                    vec![store.next_entry(timestamp_ms, Vec::new()).expect("an empty entry is in limits")]
                }
                Some(Proposal::Writes { timestamp_ms, ops }) => batch::pack(store, timestamp_ms, ops).map_err(|e| {
                    crate::store::StoreError::CorruptMeta(format!("committed Raft entry {index} cannot be sealed: {e}"))
                })?,
            };
            store.apply_raft(&entries, index)?;
            if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
                state.applied(first, last);
            }
            Ok::<_, crate::store::StoreError>(store.applied_index())
        });
        let head = match applied {
            Ok(head) => head,
            Err(e) => {
                self.state.after_apply();
                return Err(consensus::MemberError::Disk(format!("applying committed Raft entry {index}: {e}")));
            }
        };
        self.applied = index;
        self.state.metrics.raft_applied_index.set(index as i64);
        self.ahead.retain(|_, (proposed_at, _)| *proposed_at > index);
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
        Ok(())
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
    crate::http_api::BODY_BYTES_MAX <= PROPOSAL_OPS_BYTES_MAX
        && PROPOSAL_OPS_BYTES_MAX + 64 <= consensus::PROPOSAL_BYTES_MAX,
    "a request's operations fit one proposal"
);

fn merge(into: &mut Output, more: Output) {
    into.messages.extend(more.messages);
    into.events.extend(more.events);
}

/// Carries this member's messages to `peer`, dialling it (over TLS with `[tls]`) and again
/// after every failure, until the member's consensus ends or the node stops. Messages that
/// wait while the peer is unreachable are sent once it is back; Raft ignores the stale ones.
async fn send_to_peer(
    state: Arc<NodeState>,
    me: u64,
    peer: u64,
    address: SocketAddr,
    mut outbox: mpsc::Receiver<Vec<u8>>,
) {
    let mut lifecycle: watch::Receiver<Lifecycle> = state.lifecycle();
    let deadline = CONNECT_DEADLINE;
    loop {
        let connected = tokio::select! {
            biased;
            () = reached(&mut lifecycle, Lifecycle::Draining) => return,
            connected = connect(&state, me, address, deadline) => connected,
        };
        let mut stream = match connected {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(peer, %address, error = %e, "could not reach a root group member");
                tokio::select! {
                    biased;
                    () = reached(&mut lifecycle, Lifecycle::Draining) => return,
                    () = tokio::time::sleep(REDIAL_AFTER) => continue,
                }
            }
        };
        loop {
            let message = tokio::select! {
                biased;
                () = reached(&mut lifecycle, Lifecycle::Draining) => return,
                message = outbox.recv() => match message {
                    Some(message) => message,
                    None => return,
                },
            };
            if let Err(e) = write_message(&mut stream, &Message::Raft { message }).await {
                tracing::debug!(peer, %address, error = %e, "a root group member's connection broke");
                break;
            }
        }
    }
}

/// Dials a peer member and says who this member is.
async fn connect(
    state: &NodeState,
    me: u64,
    address: SocketAddr,
    deadline: Duration,
) -> Result<crate::replication::dial::SourceStream, String> {
    let mut stream = crate::replication::dial::dial(state, address, deadline).await.map_err(|e| e.to_string())?;
    let hello = ClientHello::new(state.node_id, state.config.database_id, 0, Want::Raft { member: me });
    write_message(&mut stream, &Message::Hello(hello)).await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(deadline, read_message(&mut stream)).await {
        Ok(Ok(Some(Message::Welcome { .. }))) => Ok(stream),
        Ok(Ok(Some(Message::Refused { reason, detail }))) => Err(format!("refused ({reason}): {detail}")),
        Ok(Ok(Some(other))) => Err(format!("answered a Raft hello with a {} frame", other.frame_type())),
        Ok(Ok(None)) => Err("closed the connection after the hello".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer to the hello within {deadline:?}")),
    }
}

/// What a leader proposes: a batch of writes, or a heartbeat. Its bytes are the Raft entry's
/// data: a kind byte (1 writes, 2 heartbeat), the timestamp (u64 LE); for writes, the count
/// (u32 LE) and each operation — 1 set or 2 delete, the key, and for a set the value, each a
/// u32 LE length and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Proposal {
    Writes { timestamp_ms: u64, ops: Vec<Op> },
    Heartbeat { timestamp_ms: u64 },
}

impl Proposal {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Proposal::Writes { timestamp_ms, ops } => {
                out.push(1);
                out.extend_from_slice(&timestamp_ms.to_le_bytes());
                out.extend_from_slice(&u32::try_from(ops.len()).expect("a batch's ops fit a u32").to_le_bytes());
                for op in ops {
                    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
                        out.extend_from_slice(&u32::try_from(b.len()).expect("limits keep it small").to_le_bytes());
                        out.extend_from_slice(b);
                    };
                    match op {
                        Op::Set { key, value } => {
                            out.push(1);
                            bytes(&mut out, key);
                            bytes(&mut out, value);
                        }
                        Op::Delete { key } => {
                            out.push(2);
                            bytes(&mut out, key);
                        }
                    }
                }
            }
            Proposal::Heartbeat { timestamp_ms } => {
                out.push(2);
                out.extend_from_slice(&timestamp_ms.to_le_bytes());
            }
        }
        out
    }

    /// A committed entry's proposal. Its bytes passed through a majority's disks: one that
    /// does not decode is damage, and stops the member rather than being skipped.
    fn decode(bytes: &[u8]) -> Result<Proposal, consensus::MemberError> {
        let damaged = |what: &str| consensus::MemberError::Damaged(format!("a committed proposal: {what}"));
        let mut rest = bytes;
        let mut take = |n: usize, what: &str| -> Result<&[u8], consensus::MemberError> {
            if rest.len() < n {
                return Err(damaged(&format!("truncated in {what}")));
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let kind = take(1, "kind")?[0];
        let timestamp_ms = u64::from_le_bytes(take(8, "timestamp")?.try_into().expect("8 bytes"));
        let proposal = match kind {
            1 => {
                let count = u32::from_le_bytes(take(4, "count")?.try_into().expect("4 bytes")) as usize;
                let mut ops = Vec::with_capacity(count.min(crate::root::WRITE_REQUESTS_PER_BATCH_MAX));
                for _ in 0..count {
                    let tag = take(1, "operation")?[0];
                    let mut field = |what: &str| -> Result<Vec<u8>, consensus::MemberError> {
                        let len = u32::from_le_bytes(take(4, what)?.try_into().expect("4 bytes")) as usize;
                        Ok(take(len, what)?.to_vec())
                    };
                    let op = match tag {
                        1 => Op::Set { key: field("key")?, value: field("value")? },
                        2 => Op::Delete { key: field("key")? },
                        other => return Err(damaged(&format!("operation tag {other}"))),
                    };
                    op.validate().map_err(|e| damaged(&e.to_string()))?;
                    ops.push(op);
                }
                Proposal::Writes { timestamp_ms, ops }
            }
            2 => Proposal::Heartbeat { timestamp_ms },
            other => return Err(damaged(&format!("kind {other}"))),
        };
        if !rest.is_empty() {
            return Err(damaged(&format!("{} bytes after its end", rest.len())));
        }
        Ok(proposal)
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_proposal_round_trips_and_damage_is_refused() {
        let writes = Proposal::Writes {
            timestamp_ms: 42,
            ops: vec![Op::Set { key: b"k".to_vec(), value: b"v".to_vec() }, Op::Delete { key: b"d".to_vec() }],
        };
        for proposal in [writes, Proposal::Heartbeat { timestamp_ms: 7 }] {
            let bytes = proposal.encode();
            assert_eq!(Proposal::decode(&bytes).unwrap(), proposal);
            for cut in 0..bytes.len() {
                assert!(Proposal::decode(&bytes[..cut]).is_err(), "a proposal cut at {cut} decoded");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Proposal::decode(&longer).is_err(), "trailing bytes are refused");
        }
        assert!(Proposal::decode(&[3, 0, 0, 0, 0, 0, 0, 0, 0]).is_err(), "an unknown kind is refused");
    }
}
