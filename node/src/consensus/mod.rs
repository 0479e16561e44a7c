//! The root group's consensus — the foundation of a root of 3 or 5 members: one raft-rs
//! `RawNode` per member, driven by the node (ticks, messages, proposals, each `Ready` handled
//! in raft-rs's order), so that the same code runs on tokio and, unchanged, under madsim.
//!
//! **Status: not wired into the node yet.** The root is still one process and `[root]` takes no
//! members; nothing a user runs reaches this module. What is here, and tested under the
//! simulator (`node/tests/integration/simulated_raft.rs`):
//!
//! - [`Member`]: a member's consensus state; [`Member::tick`], [`Member::receive`] and
//!   [`Member::propose`] each return an [`Output`] — the messages to send and the
//!   [`MemberEvent`]s to act on, in order;
//! - [`MemberEvent`]: typed role changes (term, role, leader) and committed entries — what the
//!   simulator's at-most-one-leader-per-term checker and the root's apply path will read;
//! - [`encode`]/[`decode`]: a Raft message's bytes (protobuf, raft-rs's own codec), bounded;
//! - `deterministic_elections`: under madsim, randomized election timeouts drawn from the run's
//!   seed rather than the OS (raft-rs draws them from `rand::thread_rng()`, which madsim cannot
//!   seed on Linux; `vendor/raft.patch` makes the source settable).
//!
//! What it lacks before a root may use it, each a part of the issue still open: durable Raft
//! state (here `MemStorage`: a member that restarts forgets its vote and log, which breaks
//! Raft's safety — it is the planted bug "a member that forgets its vote", so it must never
//! back a real root); Raft messages as a replication-port frame; committed batches applied as
//! the Quicksilver log's entries; log compaction and snapshots kept in step with the store.

use raft::prelude::{ConfState, Entry, EntryType, Message};
use raft::storage::MemStorage;
use raft::{Config, RawNode, StateRole};

/// Ticks without a leader's heartbeat before a follower campaigns (raft-rs randomizes it into
/// `ELECTION_TICKS..2 * ELECTION_TICKS`). With the node's tick of [`TICK`], a leader is
/// replaced within 1 to 2 s of its last heartbeat — etcd's default ratio (10 heartbeats).
pub const ELECTION_TICKS: usize = 10;
/// Ticks between a leader's heartbeats.
pub const HEARTBEAT_TICKS: usize = 1;
/// How often a member ticks.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(100);
/// Largest encoded Raft message accepted: a batch is at most `limits::ENTRY_BYTES_MAX` and a
/// message carries a bounded run of them.
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;

/// A member's role, as raft-rs names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Role {
    Follower,
    PreCandidate,
    Candidate,
    Leader,
}

impl From<StateRole> for Role {
    fn from(role: StateRole) -> Role {
        match role {
            StateRole::Follower => Role::Follower,
            StateRole::PreCandidate => Role::PreCandidate,
            StateRole::Candidate => Role::Candidate,
            StateRole::Leader => Role::Leader,
        }
    }
}

/// What a member did, in the order it did it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberEvent {
    /// Its term, role or known leader changed (`leader` 0: none known).
    Role { term: u64, role: Role, leader: u64 },
    /// An entry was committed by a majority and is to be applied, in index order.
    Committed { index: u64, term: u64, data: Vec<u8> },
}

/// What one call into a member produced.
#[derive(Debug, Default)]
pub struct Output {
    /// To send, each to its `to` member.
    pub messages: Vec<Message>,
    pub events: Vec<MemberEvent>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error("not the leader; the leader is {}", leader.map_or("not known".to_string(), |l| format!("member {l}")))]
    NotLeader { leader: Option<u64> },
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
}

/// One member's consensus state.
pub struct Member {
    raw: RawNode<MemStorage>,
    /// The last (term, role, leader) reported.
    reported: Option<(u64, Role, u64)>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("id", &self.raw.raft.id).field("reported", &self.reported).finish()
    }
}

impl Member {
    /// Member `id` of a group whose voters are `voters` (ids from 1; `id` among them).
    pub fn new(id: u64, voters: &[u64]) -> Result<Member, raft::Error> {
        assert!(voters.contains(&id), "member {id} is not among the voters {voters:?}");
        let storage = MemStorage::new_with_conf_state(ConfState::from((voters.to_vec(), Vec::<u64>::new())));
        let config = Config {
            id,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            // A leader that cannot hear a majority steps down, so a partitioned leader stops
            // acknowledging; pre-vote keeps a member that was cut off from deposing a healthy
            // leader when it returns.
            check_quorum: true,
            pre_vote: true,
            ..Config::default()
        };
        config.validate()?;
        let raw = RawNode::new(&config, storage, &logger())?;
        Ok(Member { raw, reported: None })
    }

    pub fn id(&self) -> u64 {
        self.raw.raft.id
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// One tick of [`TICK`].
    pub fn tick(&mut self) -> Output {
        self.raw.tick();
        self.drain()
    }

    /// A message from another member.
    pub fn receive(&mut self, message: Message) -> Result<Output, raft::Error> {
        self.raw.step(message)?;
        Ok(self.drain())
    }

    /// Proposes `data` for the group's log. Only the leader takes proposals: a follower
    /// refuses with the leader it knows, rather than forwarding inside Raft (raft-rs's default),
    /// where the proposal's fate would be unknown to the member the writer asked — the root
    /// answers the writer with a redirect, and the leader acknowledges what it commits. A
    /// proposal is committed once a [`MemberEvent::Committed`] with it comes out.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<Output, ProposeError> {
        if !self.is_leader() {
            let leader = self.raw.raft.leader_id;
            return Err(ProposeError::NotLeader { leader: (leader != raft::INVALID_ID).then_some(leader) });
        }
        self.raw.propose(Vec::new(), data)?;
        Ok(self.drain())
    }

    /// Handles everything raft-rs has ready, in the order it requires: a leader's messages may
    /// leave before its entries are persisted (Raft §10.2.1); committed entries are applied;
    /// new entries and the hard state are persisted; only then go the messages that vouch for
    /// them (votes, appends' answers).
    fn drain(&mut self) -> Output {
        let mut out = Output::default();
        if self.raw.has_ready() {
            let mut ready = self.raw.ready();
            out.messages.extend(ready.take_messages());
            let storage = self.raw.raft.raft_log.store.clone();
            if !ready.snapshot().is_empty() {
                storage
                    .wl()
                    .apply_snapshot(ready.snapshot().clone())
                    .expect("a snapshot raft-rs hands over applies to its own storage");
            }
            committed(ready.take_committed_entries(), &mut out);
            storage.wl().append(ready.entries()).expect("raft-rs appends after what its storage holds");
            if let Some(hard_state) = ready.hs() {
                storage.wl().set_hardstate(hard_state.clone());
            }
            out.messages.extend(ready.take_persisted_messages());
            let mut light = self.raw.advance(ready);
            if let Some(commit) = light.commit_index() {
                storage.wl().mut_hard_state().set_commit(commit);
            }
            out.messages.extend(light.take_messages());
            committed(light.take_committed_entries(), &mut out);
            self.raw.advance_apply();
        }
        let now = (self.raw.raft.term, Role::from(self.raw.raft.state), self.raw.raft.leader_id);
        if self.reported != Some(now) {
            self.reported = Some(now);
            // Before this call's commits: a commit is reported under the role that made it.
            out.events.insert(0, MemberEvent::Role { term: now.0, role: now.1, leader: now.2 });
        }
        out
    }
}

/// Committed normal entries with data, as events (a new leader's empty entry is Raft's own).
fn committed(entries: Vec<Entry>, out: &mut Output) {
    for entry in entries {
        if entry.get_entry_type() == EntryType::EntryNormal && !entry.data.is_empty() {
            out.events.push(MemberEvent::Committed { index: entry.index, term: entry.term, data: entry.data.to_vec() });
        }
    }
}

/// A Raft message's bytes.
pub fn encode(message: &Message) -> Vec<u8> {
    protobuf::Message::write_to_bytes(message).expect("a Raft message built by raft-rs encodes")
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("a Raft message of {0} bytes is over the {MESSAGE_BYTES_MAX}-byte limit")]
    TooLarge(usize),
    #[error("not a Raft message: {0}")]
    Malformed(#[from] protobuf::ProtobufError),
}

/// A Raft message from its bytes, refused past [`MESSAGE_BYTES_MAX`] or malformed.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    if bytes.len() > MESSAGE_BYTES_MAX {
        return Err(DecodeError::TooLarge(bytes.len()));
    }
    Ok(protobuf::Message::parse_from_bytes(bytes)?)
}

/// Under madsim: every member of this process draws its election timeouts from the run's
/// seed. Call before the first member starts; later calls change nothing.
#[cfg(madsim)]
pub fn deterministic_elections() {
    raft::set_election_timeout_source(|min, max| min + (madsim::rand::random::<u64>() as usize) % (max - min));
}

/// raft-rs's log lines into the node's own (tracing), at one level lower: raft-rs logs every
/// election and leader change at info, which is debug detail for an operator; its warnings
/// and errors stay what they are.
fn logger() -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!())
}

struct TracingDrain;

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record<'_>, _: &slog::OwnedKVList) -> Result<(), slog::Never> {
        match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::error!(target: "raft", "{}", record.msg()),
            slog::Level::Warning => tracing::warn!(target: "raft", "{}", record.msg()),
            slog::Level::Info => tracing::debug!(target: "raft", "{}", record.msg()),
            slog::Level::Debug | slog::Level::Trace => tracing::trace!(target: "raft", "{}", record.msg()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Delivers every message until the group is quiet.
    fn settle(members: &mut [Member], mut outbox: Vec<Message>, events: &mut Vec<(u64, MemberEvent)>) {
        while let Some(message) = outbox.pop() {
            let to = members.iter_mut().find(|m| m.id() == message.to).expect("a message to a member");
            let id = to.id();
            let out = to.receive(message).unwrap();
            outbox.extend(out.messages);
            events.extend(out.events.into_iter().map(|e| (id, e)));
        }
    }

    #[test]
    fn three_members_elect_one_leader_and_commit_in_the_same_order() {
        let voters = [1, 2, 3];
        let mut members: Vec<Member> = voters.iter().map(|&id| Member::new(id, &voters).unwrap()).collect();
        let mut events = Vec::new();
        // Tick member 1 alone until it campaigns; deliver everything.
        let mut outbox = Vec::new();
        for _ in 0..2 * ELECTION_TICKS {
            let out = members[0].tick();
            outbox.extend(out.messages);
            events.extend(out.events.into_iter().map(|e| (1, e)));
        }
        settle(&mut members, outbox, &mut events);
        assert!(members[0].is_leader(), "member 1 campaigned first and should lead: {events:?}");
        assert!(!members[1].is_leader() && !members[2].is_leader());
        for n in 0..5u8 {
            let out = members[0].propose(vec![n]).unwrap();
            settle(&mut members, out.messages, &mut events);
        }
        // A follower refuses a proposal, naming the leader.
        assert!(matches!(members[1].propose(vec![9]), Err(ProposeError::NotLeader { leader: Some(1) })));
        // Heartbeats carry the commit index to the followers.
        let out = members[0].tick();
        settle(&mut members, out.messages, &mut events);
        for id in voters {
            let applied: Vec<Vec<u8>> = events
                .iter()
                .filter(|(member, _)| *member == id)
                .filter_map(|(_, e)| match e {
                    MemberEvent::Committed { data, .. } => Some(data.clone()),
                    MemberEvent::Role { .. } => None,
                })
                .collect();
            assert_eq!(applied, (0..5u8).map(|n| vec![n]).collect::<Vec<_>>(), "member {id} applied otherwise");
        }
    }

    #[test]
    fn bad_bytes_are_refused_not_parsed_into_a_message() {
        assert!(matches!(decode(&vec![0u8; MESSAGE_BYTES_MAX + 1]), Err(DecodeError::TooLarge(_))));
        assert!(matches!(decode(&[0xff, 0xff, 0xff]), Err(DecodeError::Malformed(_))));
        let message = Message { to: 2, term: 7, ..Message::default() };
        assert_eq!(decode(&encode(&message)).unwrap(), message);
    }
}
