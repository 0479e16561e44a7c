//! The root group's consensus — the foundation of a root of 3 or 5 members: one raft-rs
//! `RawNode` per member, driven by the node (ticks, messages, proposals, each `Ready` handled
//! in raft-rs's order), so that the same code runs on tokio and, unchanged, under madsim.
//!
//! - [`Member`]: a member's consensus state; [`Member::tick`], [`Member::receive`] and
//!   [`Member::propose`] each return an [`Output`] — the messages to send and the
//!   [`MemberEvent`]s to act on, in order;
//! - [`RaftDisk`]: where a member keeps its hard state, log and snapshot (the store, in the
//!   node: `root::group`); everything a message vouches for is on it before the message leaves;
//! - snapshots and compaction: a member snapshots at an index it applied ([`Member::compact`]):
//!   the snapshot is Raft's metadata plus the [`StorePoint`] its store stood at — the store is
//!   the data. A member that receives one records it durably, acknowledges it, and reports
//!   [`MemberEvent::Snapshot`]: its store must reach that point (the root catches it up from a
//!   peer's Quicksilver log, as a replica does) before any later entry is applied;
//! - [`encode`]/[`decode`]: a Raft message's bytes (protobuf's wire format, through raft-rs's
//!   prost-codec: prost's `Message`), bounded. Raft entries, hard states and snapshots are kept
//!   on the disk in the same encoding, which the rust-protobuf codec raft-rs used before wrote
//!   too (`wire_tests` pins bytes it wrote);
//! - membership changes (`membership`): the group's voters changed through its own log, one
//!   change at a time, joint consensus for more than one voter; [`Member::configuration`],
//!   [`Member::propose_membership`], [`MemberEvent::Configured`];
//! - where the state lives: `storage` (the [`RaftDisk`], raft-rs's in-memory log beside the
//!   latest snapshot), `restore` (a member from what its disk holds, checked for damage first),
//!   `codec` (messages' bytes, `qs-node inspect`'s summary);
//! - `deterministic_elections`: under madsim, randomized election timeouts drawn from the run's
//!   seed rather than the OS (raft-rs draws them from `rand::thread_rng()`, which madsim cannot
//!   seed on Linux; `vendor/raft.patch` makes the source settable).

use raft::prelude::{ConfState, Entry, EntryType, Message, Snapshot};
use raft::{RawNode, StateRole};

use crate::entry::ChainHash;

mod adopt;
mod codec;
mod membership;
mod restore;
mod standing;
mod storage;
pub use crate::store::RaftWrite;
pub use adopt::own_state_over_copy;
use codec::logger;
pub use codec::{DecodeError, RaftSummary, decode, encode, summarize};
pub use membership::{Configuration, MembershipChange, MembershipError, VOTERS_MIN};
pub use restore::{LostHardState, Restored};
use standing::Standing;
use storage::MemberLog;
pub use storage::{RaftDisk, Volatile};

/// Ticks without a leader's heartbeat before a follower campaigns (raft-rs randomizes it into
/// `ELECTION_TICKS..2 * ELECTION_TICKS`). With the node's tick of [`TICK`], a leader is
/// replaced within 1 to 2 s of its last heartbeat — etcd's default ratio (10 heartbeats).
pub const ELECTION_TICKS: usize = 10;
/// Ticks between a leader's heartbeats.
pub const HEARTBEAT_TICKS: usize = 1;
/// How often a member ticks.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(100);
/// Largest encoded Raft message accepted: the replication protocol's Raft frame limit.
pub const MESSAGE_BYTES_MAX: usize = crate::replication::protocol::RAFT_MESSAGE_BYTES_MAX;
/// Largest proposal (one Raft entry's data): the root splits its batches to stay below it.
pub const PROPOSAL_BYTES_MAX: usize = 6 << 20;
/// Entry bytes a leader packs into one append beyond its first entry (raft-rs's
/// `max_size_per_msg`), so an append is at most this plus one proposal.
pub const APPEND_BYTES_MAX: usize = 1 << 20;
const _: () =
    assert!(APPEND_BYTES_MAX + PROPOSAL_BYTES_MAX + (64 << 10) <= MESSAGE_BYTES_MAX, "an append fits a frame");

pub use qs_vocab::RaftRole as Role;

/// Why a root group member is not taking part in its group for a while: it takes no writes
/// then, whatever role it last had (its peers elect another leader if it led).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pause {
    /// Bringing its store to a Raft snapshot's point from a peer's log or store.
    CatchingUp,
    /// Replacing its damaged (or forked) store with a peer's copy.
    Healing,
    /// Restarting its consensus from its store after a failure (a disk error, damaged state).
    Restarting,
}

impl Pause {
    /// The name `/v1/status` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Pause::CatchingUp => "catching_up",
            Pause::Healing => "healing",
            Pause::Restarting => "restarting",
        }
    }

    /// What the member is doing, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Pause::CatchingUp => "catching its store up to a Raft snapshot",
            Pause::Healing => "replacing its store with a peer's copy",
            Pause::Restarting => "restarting its consensus from its store after a failure",
        }
    }
}

fn role_of(role: StateRole) -> Role {
    match role {
        StateRole::Follower => Role::Follower,
        StateRole::PreCandidate => Role::PreCandidate,
        StateRole::Candidate => Role::Candidate,
        StateRole::Leader => Role::Leader,
    }
}

/// What a member did, in the order it did it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberEvent {
    /// Its term, role or known leader changed (`leader` 0: none known).
    Role { term: u64, role: Role, leader: u64 },
    /// An entry was committed by a majority and is to be applied, in index order. `data` is
    /// empty for the entry a leader appends when elected.
    Committed { index: u64, term: u64, data: Vec<u8> },
    /// The leader sent a snapshot at `index` and this member installed it in place of its log:
    /// its store must reach `point` (what the entries up to `index` made of it) before any
    /// later entry is applied. Comes before every `Committed` after it. `configuration`: the
    /// group's voters at `index`, which the member took up with it.
    Snapshot { index: u64, point: StorePoint, configuration: Configuration },
    /// The read asked with `ctx` ([`Member::read_index`]) is confirmed: a majority still
    /// followed this leader after it was asked, when the group had committed up to `index`.
    ReadConfirmed { ctx: u64, index: u64 },
    /// A membership change committed at `index` (in `term`) and was applied: the group's
    /// voters are now `configuration`'s. The entry carries nothing for the store, which
    /// records it as applied as it does the empty entry a new leader appends.
    Configured { index: u64, term: u64, configuration: Configuration },
}

/// Where a member's store stood once it applied a snapshot's Raft index: its Quicksilver log's
/// last index and chain hash. A snapshot's data begins with it; the producers' quota ledger
/// committed by then follows (see [`Member::snapshot_quotas`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorePoint {
    pub log_index: u64,
    pub hash: ChainHash,
}

impl StorePoint {
    const BYTES: usize = 8 + 32;

    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = self.log_index.to_be_bytes().to_vec();
        bytes.extend_from_slice(&self.hash.0);
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<StorePoint, MemberError> {
        if bytes.len() != Self::BYTES {
            return Err(MemberError::Damaged(format!(
                "a snapshot's store point is {} bytes, not {}",
                bytes.len(),
                Self::BYTES
            )));
        }
        let (index, hash) = bytes.split_at(8);
        Ok(StorePoint {
            log_index: u64::from_be_bytes(index.try_into().expect("8 bytes")),
            hash: ChainHash(hash.try_into().expect("32 bytes")),
        })
    }

    /// A snapshot's data: the store point, then the quota ledger's bytes (empty when none was
    /// committed, and in snapshots written before ledgers travelled with them).
    fn split_snapshot_data(data: &[u8]) -> Result<(StorePoint, &[u8]), MemberError> {
        if data.len() < Self::BYTES {
            return Err(MemberError::Damaged(format!(
                "a snapshot's data is {} bytes, shorter than its store point ({} bytes)",
                data.len(),
                Self::BYTES
            )));
        }
        let (point, quotas) = data.split_at(Self::BYTES);
        Ok((StorePoint::decode(point)?, quotas))
    }
}

/// What one call into a member produced.
#[derive(Debug, Default)]
pub struct Output {
    /// To send, each to its `to` member.
    pub messages: Vec<Message>,
    pub events: Vec<MemberEvent>,
    /// Bytes persisted on the member's disk to produce this (entries, hard state, a received
    /// snapshot's record): what a disk model charges before the messages leave.
    pub persisted_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error("not the leader; the leader is {}", leader.map_or("not known".to_string(), |l| format!("member {l}")))]
    NotLeader { leader: Option<u64> },
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("{0}")]
    Stopped(#[from] MemberError),
}

/// Why a member stopped.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// The member's store failed (a disk error, damage found mid-commit): what landed is
    /// unknown until the store is reopened.
    #[error("the member's store failed {step}: {source}")]
    Disk {
        step: DiskStep,
        #[source]
        source: crate::store::StoreError,
    },
    #[error("the member's persisted Raft state is damaged: {0}")]
    Damaged(String),
}

/// What a member was doing with its store when the store failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskStep {
    /// Persisting Raft state: entries, the hard state, a snapshot received.
    Persist,
    /// Recording a snapshot and dropping the log before it.
    Compact,
    /// Reading which Raft index its store applied.
    ReadApplied,
    /// Recording Raft entry `index` applied: a snapshot's, its store caught up to it.
    RecordApplied { index: u64 },
    /// Reading the quota ledger a snapshot carries.
    ReadQuotaLedger,
    /// Applying committed Raft entry `index` to the store.
    Apply { index: u64 },
    /// Applying entries pulled from a peer's log to catch its store up to a snapshot.
    CatchUp,
}

impl std::fmt::Display for DiskStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiskStep::Persist => write!(f, "persisting its Raft state"),
            DiskStep::Compact => write!(f, "compacting its Raft log"),
            DiskStep::ReadApplied => write!(f, "reading the Raft index its store applied"),
            DiskStep::RecordApplied { index } => write!(f, "recording Raft entry {index} applied"),
            DiskStep::ReadQuotaLedger => write!(f, "reading the quota ledger"),
            DiskStep::Apply { index } => write!(f, "applying committed Raft entry {index}"),
            DiskStep::CatchUp => write!(f, "applying entries pulled from a peer"),
        }
    }
}

impl MemberError {
    /// The store failed while the member was at `step`.
    pub fn disk(step: DiskStep) -> impl FnOnce(crate::store::StoreError) -> MemberError {
        move |source| MemberError::Disk { step, source }
    }
}

/// One member's consensus state.
pub struct Member {
    raw: RawNode<MemberLog>,
    /// The configurations this member applied since the snapshot its log starts after (the
    /// first: the snapshot's, or the group's first), each with the index that made it: a
    /// snapshot records the one at its index.
    configurations: Vec<(u64, ConfState)>,
    disk: Box<dyn RaftDisk>,
    /// PLANTED BUG (legacy `raft_apply_before_commit`): entries come out as committed when
    /// they are appended; the last index that came out so.
    applies_uncommitted: Option<u64>,
    /// Whether it may vote yet (a member that started with nothing may not, at first).
    standing: Standing,
    /// PLANTED BUG (legacy `raft_snapshot_first_configuration`): the voters every snapshot
    /// records, whatever the configuration at its index.
    snapshots_first_voters: Option<ConfState>,
    /// The first index of the term it last looked up, and that term (see `term_start`).
    term_start: std::cell::Cell<Option<(u64, u64)>>,
    /// The last (term, role, leader) reported.
    reported: Option<(u64, Role, u64)>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("id", &self.raw.raft.id).field("reported", &self.reported).finish()
    }
}

impl Member {
    /// PLANTED BUG (legacy `raft_apply_before_commit`, the simulator's bug zoo only): from now
    /// on every entry comes out as [`MemberEvent::Committed`] as soon as this member appends it,
    /// whether or not a majority has it; what raft-rs later reports committed is ignored.
    #[cfg(any(test, madsim, qsim_harness))]
    pub fn apply_before_commit(&mut self, applied: u64) {
        self.applies_uncommitted = Some(applied);
    }

    /// PLANTED BUG (legacy `raft_snapshot_first_configuration`, the simulator's bug zoo only):
    /// every snapshot from now on records `first` as the group's voters, whatever the
    /// configuration at its index.
    #[cfg(any(test, madsim, qsim_harness))]
    pub fn snapshot_first_configuration(&mut self, first: &[u64]) {
        self.snapshots_first_voters = Some(ConfState::from((first.to_vec(), Vec::<u64>::new())));
    }

    /// PLANTED BUG (legacy `raft_without_pre_vote`, the simulator's bug zoo only): pre-vote
    /// and check-quorum off — a member that cannot hear the leader campaigns in a new term at
    /// every election timeout, and every member that hears it follows into that term, deposing
    /// a leader that still reaches a majority.
    #[cfg(any(test, madsim, qsim_harness))]
    pub fn without_pre_vote_or_check_quorum(&mut self) {
        self.raw.raft.pre_vote = false;
        self.raw.raft.set_check_quorum(false);
    }

    pub fn id(&self) -> u64 {
        self.raw.raft.id
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// Its term, role and the leader it knows (0: none).
    pub fn role(&self) -> (u64, Role, u64) {
        (self.raw.raft.term, role_of(self.raw.raft.state), self.raw.raft.leader_id)
    }

    /// The leader this member knows of, if any.
    pub fn leader(&self) -> Option<u64> {
        let leader = self.raw.raft.leader_id;
        (leader != raft::INVALID_ID).then_some(leader)
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The highest index this member knows to be committed.
    /// The index of the last entry in this member's Raft log.
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// The snapshot this member's log starts after: its Raft index and where the store stood.
    pub fn snapshot(&self) -> Option<(u64, StorePoint)> {
        let held = self.raw.raft.raft_log.store.snapshot.lock().expect("the snapshot lock is never poisoned");
        let snapshot = held.as_ref()?;
        let (point, _) = StorePoint::split_snapshot_data(snapshot.get_data())
            .expect("a held snapshot's point was checked when it came");
        Some((snapshot.get_metadata().index, point))
    }

    /// The producers' quota ledger (its encoded bytes) the snapshot this member's log starts
    /// after carries, if it carries one: what the group had committed of the buckets by then.
    /// A member that caught its store up to the snapshot from a peer's log has not applied the
    /// proposals that carried it.
    pub fn snapshot_quotas(&self) -> Option<Vec<u8>> {
        let held = self.raw.raft.raft_log.store.snapshot.lock().expect("the snapshot lock is never poisoned");
        let (_, quotas) = StorePoint::split_snapshot_data(held.as_ref()?.get_data())
            .expect("a held snapshot's point was checked when it came");
        (!quotas.is_empty()).then(|| quotas.to_vec())
    }

    /// Snapshots at `applied` (an index this member applied, its store at `point`, the quota
    /// ledger committed by then `quotas`, empty for none), and drops the log before the last
    /// `keep` entries up to it: a member further behind than that is sent the snapshot. Durable
    /// on the member's disk when it returns.
    pub fn compact(&mut self, applied: u64, point: StorePoint, quotas: &[u8], keep: u64) -> Result<(), MemberError> {
        let log = &self.raw.raft.raft_log;
        assert!(applied <= log.applied, "a snapshot at {applied} is past what was applied ({})", log.applied);
        let term = log.term(applied)?;
        let mut snapshot = Snapshot::default();
        let metadata = snapshot.mut_metadata();
        metadata.index = applied;
        metadata.term = term;
        let at = self.configurations.iter().rposition(|(index, _)| *index <= applied).unwrap_or(0);
        let conf = self.snapshots_first_voters.clone().unwrap_or_else(|| self.configurations[at].1.clone());
        metadata.set_conf_state(conf);
        let mut data = point.encode();
        data.extend_from_slice(quotas);
        snapshot.data = data;
        let storage = self.raw.raft.raft_log.store.clone();
        let first_kept = (applied + 1).saturating_sub(keep).max(raft::Storage::first_index(&storage)?);
        let bytes = prost::Message::encode_to_vec(&snapshot);
        self.disk.compact(bytes, first_kept).map_err(MemberError::disk(DiskStep::Compact))?;
        storage.entries.wl().compact(first_kept)?;
        *storage.snapshot.lock().expect("the snapshot lock is never poisoned") = Some(snapshot);
        // The snapshot records the configuration at its index: older ones are no longer asked.
        self.configurations.drain(..at);
        Ok(())
    }

    /// What this member keeps on its disk, as one write: its hard state, its log, and the
    /// snapshot the log starts after. For a store copied from a peer, made this member's own.
    pub fn own_state(&self) -> RaftWrite {
        let storage = &self.raw.raft.raft_log.store;
        let core = storage.entries.rl();
        let hard_state = prost::Message::encode_to_vec(core.hard_state());
        drop(core);
        // The storage's own bounds, not the Raft log's: the log's last index counts entries
        // still unstable (proposed or received, not yet persisted), which the storage does not
        // hold — asking it for them panics in raft-rs (a heal while entries were in flight did).
        let first = raft::Storage::first_index(storage).expect("a member's log has a first index");
        let last = raft::Storage::last_index(storage).expect("a member's log has a last index");
        let entries = if last >= first {
            raft::Storage::entries(storage, first, last + 1, None, raft::GetEntriesContext::empty(false))
                .expect("a member's own log reads back")
        } else {
            Vec::new()
        };
        let snapshot = storage.snapshot.lock().expect("the snapshot lock is never poisoned").clone();
        RaftWrite {
            snapshot: snapshot.map(|s| prost::Message::encode_to_vec(&s)),
            hard_state: Some(hard_state),
            entries: entries.iter().map(|e| (e.index, prost::Message::encode_to_vec(e))).collect(),
        }
    }

    /// The index of the first entry this member's log holds.
    pub fn first_index(&self) -> u64 {
        self.raw.raft.raft_log.first_index()
    }

    /// Whether this member leads and has applied every entry committed before its term, so
    /// that what it holds is the committed state: only then may it judge a write against that
    /// state (an identical rewrite is dropped only against committed data).
    pub fn leads_with_committed_state(&self, applied: u64) -> bool {
        // A new leader's first entry of its term is the empty one it appends on election;
        // once that is committed and applied, so is everything before it.
        self.is_leader() && applied >= self.term_start()
    }

    /// The index of the first entry of this member's current term in its log (the empty
    /// entry a leader appends when elected).
    /// Found once per term: a leader's log only grows within its term, so the walk back is
    /// paid at its first call, not at every proposal and tick.
    fn term_start(&self) -> u64 {
        let log = &self.raw.raft.raft_log;
        let term = self.raw.raft.term;
        if let Some((cached_term, index)) = self.term_start.get()
            && cached_term == term
        {
            return index;
        }
        let mut index = log.last_index();
        while index > log.first_index() && log.term(index - 1).is_ok_and(|t| t == term) {
            index -= 1;
        }
        self.term_start.set(Some((term, index)));
        index
    }

    /// One tick of [`TICK`].
    pub fn tick(&mut self) -> Result<Output, MemberError> {
        self.raw.tick();
        self.leave_stranded_joint()?;
        let out = self.drain()?;
        self.update_standing();
        Ok(out)
    }

    fn update_standing(&mut self) {
        self.standing.update(self.raw.raft.state == raft::StateRole::Leader, self.raw.raft.raft_log.committed);
    }

    /// A message from another member. A message raft-rs will not step (from a member outside
    /// the group, say) is an error the caller logs; the member goes on.
    ///
    /// A member that started with nothing (its disk replaced) grants no vote until it holds
    /// what the group committed (see `Standing`, in `consensus::standing`). And a leader's
    /// heartbeat may commit past what such a member holds (the leader remembers it holding more): the commit is taken as far
    /// as the member's log goes, and the leader's next append finds the gap.
    pub fn receive(&mut self, mut message: Message) -> Result<Output, MemberError> {
        use raft::prelude::MessageType;
        let vote = matches!(message.get_msg_type(), MessageType::MsgRequestVote | MessageType::MsgRequestPreVote);
        if vote && self.standing != Standing::Voting {
            self.standing.saw(message.from, message.log_term, message.index);
            let others: Vec<u64> = self.configuration().members().into_iter().filter(|&m| m != self.id()).collect();
            if !self.standing.may_vote_for(message.index, message.log_term, &others) {
                tracing::debug!(member = self.id(), candidate = message.from, term = message.term, standing = ?self.standing, "no vote: this member started with nothing and has not caught up with the group");
                return Ok(Output::default());
            }
        }
        match message.get_msg_type() {
            MessageType::MsgHeartbeat => message.commit = message.commit.min(self.raw.raft.raft_log.last_index()),
            MessageType::MsgAppend => self.standing.heard_leader(message.term, message.commit),
            MessageType::MsgSnapshot => {
                let index = message.get_snapshot().get_metadata().index;
                self.standing.heard_leader(message.term, index);
            }
            _ => {}
        }
        match self.raw.step(message) {
            Ok(()) => {}
            // An answer from a member the configuration no longer holds (one just removed, still
            // answering what it was sent): nothing to act on, and no reason to stop.
            Err(raft::Error::StepPeerNotFound) => {
                tracing::debug!(member = self.id(), "an answer from a member outside the configuration: ignored");
                return Ok(Output::default());
            }
            Err(e) => return Err(e.into()),
        }
        let out = self.drain()?;
        self.update_standing();
        Ok(out)
    }

    /// The snapshot message to `to` that the last output held was handed to its link. raft-rs
    /// waits in its snapshot state for the follower's answer, and an answer lost on the way (a
    /// link cut and dialled again) would strand the follower: no append, only heartbeats, for
    /// ever. Reported as finished, the leader probes again at the next heartbeat answer
    /// (raft-rs's `report_snapshot`, which etcd's transport calls after each snapshot it sends).
    /// (raft-bit-rot-rocksdb seed 82: a member back from a set-aside store took a snapshot and
    /// then stayed at it for 140 s while the group committed 250 entries more.)
    pub fn snapshot_sent(&mut self, to: u64) {
        self.raw.report_snapshot(to, raft::SnapshotStatus::Finish);
    }

    /// Asks the group to confirm that this member still leads, for reads asked before now
    /// (Raft's ReadIndex; raft-rs's default `ReadOnlyOption::Safe`: a heartbeat round, no
    /// clock): a [`MemberEvent::ReadConfirmed`] with `ctx` comes out once a majority answered.
    /// Nothing comes out if it does not lead, or stops leading first.
    pub fn read_index(&mut self, ctx: u64) -> Result<Output, MemberError> {
        self.raw.read_index(ctx.to_be_bytes().to_vec());
        self.drain()
    }

    /// Proposes `data` for the group's log. Only the leader takes proposals: a follower
    /// refuses with the leader it knows, rather than forwarding inside Raft (raft-rs's default),
    /// where the proposal's fate would be unknown to the member the writer asked — the root
    /// answers the writer with a redirect, and the leader acknowledges what it commits. A
    /// proposal is committed once a [`MemberEvent::Committed`] with it comes out.
    /// Returns the proposal's index with the output.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(u64, Output), ProposeError> {
        if !self.is_leader() {
            return Err(ProposeError::NotLeader { leader: self.leader() });
        }
        self.raw.propose(Vec::new(), data)?;
        let index = self.raw.raft.raft_log.last_index();
        Ok((index, self.drain()?))
    }

    /// Handles everything raft-rs has ready, in the order it requires: new entries and the
    /// hard state are persisted (durably, on the member's [`RaftDisk`]) before any message
    /// that vouches for them leaves, and committed entries come out in index order. (A leader
    /// may send its appends before persisting them, Raft §10.2.1; this member does not bother:
    /// one commit per `Ready` is short next to a network round trip.)
    fn drain(&mut self) -> Result<Output, MemberError> {
        let mut out = Output::default();
        if self.raw.has_ready() {
            let mut ready = self.raw.ready();
            let storage = self.raw.raft.raft_log.store.clone();
            out.messages.extend(ready.take_messages());
            for read in ready.take_read_states() {
                // Only this member's own contexts (8 bytes each) are ever asked.
                if let Ok(ctx) = <[u8; 8]>::try_from(read.request_ctx.as_slice()) {
                    out.events.push(MemberEvent::ReadConfirmed { ctx: u64::from_be_bytes(ctx), index: read.index });
                }
            }
            let mut write = RaftWrite::default();
            let received = (!ready.snapshot().is_empty()).then(|| ready.snapshot().clone());
            if let Some(snapshot) = &received {
                // From the leader, in place of the log this member lacks: its store point must
                // be sound before it is recorded.
                let (point, _) = StorePoint::split_snapshot_data(snapshot.get_data())?;
                let index = snapshot.get_metadata().index;
                let configuration = Configuration::of(index, snapshot.get_metadata().get_conf_state());
                out.events.push(MemberEvent::Snapshot { index, point, configuration });
                // raft-rs takes the snapshot's configuration as it restores it.
                self.configurations =
                    vec![(snapshot.get_metadata().index, snapshot.get_metadata().get_conf_state().clone())];
                write.snapshot = Some(prost::Message::encode_to_vec(snapshot));
            }
            match &mut self.applies_uncommitted {
                None => self.committed(ready.take_committed_entries(), &mut out)?,
                Some(emitted) => {
                    let fresh: Vec<Entry> = ready.entries().iter().filter(|e| e.index > *emitted).cloned().collect();
                    *emitted = fresh.last().map_or(*emitted, |e| e.index);
                    self.committed(fresh, &mut out)?;
                }
            }
            let hard_state = ready.hs().cloned();
            write.hard_state = hard_state.as_ref().map(prost::Message::encode_to_vec);
            write.entries =
                ready.entries().iter().map(|entry| (entry.index, prost::Message::encode_to_vec(entry))).collect();
            if write != RaftWrite::default() {
                let bytes = write.snapshot.as_ref().map_or(0, Vec::len)
                    + write.hard_state.as_ref().map_or(0, Vec::len)
                    + write.entries.iter().map(|(_, e)| e.len()).sum::<usize>();
                out.persisted_bytes += bytes as u64;
                self.disk.persist(write).map_err(MemberError::disk(DiskStep::Persist))?;
            }
            if let Some(snapshot) = received {
                storage.entries.wl().apply_snapshot(snapshot.clone())?;
                *storage.snapshot.lock().expect("the snapshot lock is never poisoned") = Some(snapshot);
            }
            storage.entries.wl().append(ready.entries())?;
            if let Some(hard_state) = hard_state {
                storage.entries.wl().set_hardstate(hard_state);
            }
            out.messages.extend(ready.take_persisted_messages());
            let mut light = self.raw.advance(ready);
            if let Some(commit) = light.commit_index() {
                // Not persisted on its own: a commit index is never needed for safety, and a
                // restart takes it from the applied index at least (see `restore`).
                storage.entries.wl().mut_hard_state().set_commit(commit);
            }
            out.messages.extend(light.take_messages());
            if self.applies_uncommitted.is_none() {
                self.committed(light.take_committed_entries(), &mut out)?;
            }
            self.raw.advance_apply();
        }
        let now = (self.raw.raft.term, role_of(self.raw.raft.state), self.raw.raft.leader_id);
        if self.reported != Some(now) {
            self.reported = Some(now);
            // Before this call's commits: a commit is reported under the role that made it.
            out.events.insert(0, MemberEvent::Role { term: now.0, role: now.1, leader: now.2 });
        }
        Ok(out)
    }
}

impl Member {
    /// Committed entries, as events, in index order. An empty normal one is the entry a new
    /// leader appends on its election: Raft's own, yet it comes out, so the applier can count
    /// every index it applied. A membership change is applied to the consensus here, as it
    /// comes out, and comes out as [`MemberEvent::Configured`].
    fn committed(&mut self, entries: Vec<Entry>, out: &mut Output) -> Result<(), MemberError> {
        for entry in entries {
            let (index, term) = (entry.index, entry.term);
            match entry.get_entry_type() {
                EntryType::EntryNormal => {
                    out.events.push(MemberEvent::Committed { index, term, data: entry.data.to_vec() })
                }
                EntryType::EntryConfChangeV2 => {
                    let cc = membership::decode(index, &entry.data)?;
                    let conf = self.raw.apply_conf_change(&cc).map_err(|e| {
                        MemberError::Damaged(format!("the membership change at Raft index {index} cannot apply: {e}"))
                    })?;
                    let configuration = Configuration::of(index, &conf);
                    let last = self.configurations.last().map_or(0, |(at, _)| *at);
                    assert!(index > last, "membership change {index} applied after the one at {last}");
                    self.configurations.push((index, conf));
                    self.hand_over_if_removed(&configuration);
                    out.events.push(MemberEvent::Configured { index, term, configuration });
                }
                EntryType::EntryConfChange => {
                    return Err(MemberError::Damaged(format!(
                        "Raft index {index} holds a version 1 membership change, which no member proposes"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Under madsim: every member of this process draws its election timeouts from the run's
/// seed. Call before the first member starts; later calls change nothing.
#[cfg(madsim)]
pub fn deterministic_elections() {
    raft::set_election_timeout_source(|min, max| min + (madsim::rand::random::<u64>() as usize) % (max - min));
}

#[cfg(test)]
mod membership_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire_tests;
