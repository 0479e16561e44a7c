//! A member's Raft state in bytes: messages on the wire ([`encode`], [`decode`], bounded) and
//! what a store holds, summed up for `qs-node inspect` ([`summarize`]); and raft-rs's log lines
//! into the node's own.

use raft::prelude::{Message, Snapshot};

use super::{MESSAGE_BYTES_MAX, MemberError};

/// A root member's Raft state as its store holds it, for `qs-node inspect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftSummary {
    pub term: u64,
    /// The member it voted for in `term` (0: none).
    pub vote: u64,
    /// The highest index it knew committed when its hard state was last persisted.
    pub commit: u64,
    /// The Raft log it holds: `first..=last` (`None` when empty).
    pub log: Option<(u64, u64)>,
    /// The last Raft index whose batch its store applied.
    pub applied: u64,
    /// The index of the snapshot its log starts after, if it was ever compacted or replaced.
    pub snapshot: Option<u64>,
}

/// What `records` say of a member's Raft state; `None` for a store that never was a root
/// group member's.
pub fn summarize(records: &crate::store::RaftRecords) -> Result<Option<RaftSummary>, MemberError> {
    if records.hard_state.is_none() && records.entries.is_empty() && records.applied == 0 && records.snapshot.is_none()
    {
        return Ok(None);
    }
    let hard_state: raft::prelude::HardState = match &records.hard_state {
        Some(bytes) => prost::Message::decode(bytes.as_slice())
            .map_err(|e| MemberError::Damaged(format!("the hard state: {e}")))?,
        None => raft::prelude::HardState::default(),
    };
    let log = records.entries.first().zip(records.entries.last()).map(|(first, last)| (first.0, last.0));
    let snapshot = match &records.snapshot {
        Some(bytes) => {
            let snapshot: Snapshot = prost::Message::decode(bytes.as_slice())
                .map_err(|e| MemberError::Damaged(format!("the Raft snapshot: {e}")))?;
            Some(snapshot.get_metadata().index)
        }
        None => None,
    };
    Ok(Some(RaftSummary {
        term: hard_state.term,
        vote: hard_state.vote,
        commit: hard_state.commit,
        log,
        applied: records.applied,
        snapshot,
    }))
}

/// A Raft message's bytes.
pub fn encode(message: &Message) -> Vec<u8> {
    prost::Message::encode_to_vec(message)
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("a Raft message of {0} bytes is over the {MESSAGE_BYTES_MAX}-byte limit")]
    TooLarge(usize),
    #[error("not a Raft message: {0}")]
    Malformed(#[from] prost::DecodeError),
}

/// A Raft message from its bytes, refused past [`MESSAGE_BYTES_MAX`] or malformed.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    if bytes.len() > MESSAGE_BYTES_MAX {
        return Err(DecodeError::TooLarge(bytes.len()));
    }
    Ok(prost::Message::decode(bytes)?)
}

/// raft-rs's log lines into the node's own (tracing), at one level lower: raft-rs logs every
/// election and leader change at info, which is debug detail for an operator; its warnings
/// and errors stay what they are.
pub(super) fn logger() -> slog::Logger {
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
