//! Reads the leader confirms before it answers them: Raft's ReadIndex (raft-rs's `read_index`,
//! with its default `ReadOnlyOption::Safe`).
//!
//! A member that believes it leads may have been deposed without hearing of it yet — paused (a
//! stalled VM, a long GC pause) or cut off from its peers while clients still reach it — and a
//! read it answers from its own store then misses what the new leader acknowledged. So `GET
//! /v1/keys` on the leader waits until a majority answered a heartbeat sent after the read
//! arrived (at that moment no other member can have led a later term that committed anything),
//! and this member applied the commit index it had then.
//!
//! Guarantees:
//! - **every read is answered**: confirmed, or refused with the error a write would get when
//!   the member stops leading or pauses; a confirmation that never comes (heartbeat answers
//!   lost) is given up after [`READ_CONFIRM_TIMEOUT`], by the reader and here;
//! - **one heartbeat round per batch, not per read**: reads that arrive while a confirmation
//!   is in flight share the next one (never the one in flight: its heartbeat left before them).

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::super::WriteError;
use super::Group;
use crate::consensus::{self, Output};

/// How long a read waits for the leader to confirm it: two election timeouts. A leader that
/// hears no majority for one election timeout steps down (check-quorum) and refuses its reads
/// then; the second is room for the heartbeat round itself.
pub const READ_CONFIRM_TIMEOUT: Duration =
    Duration::from_millis(2 * consensus::ELECTION_TICKS as u64 * consensus::TICK.as_millis() as u64);

/// Where a reader waits for its read to be confirmed.
pub(crate) type ReadReply = oneshot::Sender<Result<(), WriteError>>;

/// The reads a leader is confirming.
#[derive(Debug, Default)]
pub(super) struct Reads {
    /// The context of the last confirmation asked of raft-rs.
    last_ctx: u64,
    /// The batch whose confirmation is in flight: its context, when it was asked, its readers.
    in_flight: Option<(u64, Instant, Vec<ReadReply>)>,
    /// Readers that arrived since: the next batch.
    queued: Vec<ReadReply>,
    /// Confirmed batches, each waiting for this member to apply its index.
    confirmed: Vec<(u64, Vec<ReadReply>)>,
}

impl Group {
    /// A reader asks this member to confirm a read: refused at once unless it leads and may
    /// serve, else queued for the next confirmation.
    pub(super) fn read_requested(&mut self, reply: ReadReply) -> Result<Output, consensus::MemberError> {
        if let Some(refusal) = self.read_refusal() {
            let _ = reply.send(Err(refusal));
            return Ok(Output::default());
        }
        self.reads.queued.push(reply);
        self.confirm_queued_reads()
    }

    /// Why this member cannot confirm reads now, if it cannot.
    fn read_refusal(&self) -> Option<WriteError> {
        if !self.member.is_leader() {
            return Some(WriteError::NotLeader { leader: self.leader_http() });
        }
        (!self.member.leads_with_committed_state(self.applied)).then_some(WriteError::LeaderNotReady)
    }

    /// Asks raft-rs to confirm the queued readers, unless a confirmation is in flight.
    pub(super) fn confirm_queued_reads(&mut self) -> Result<Output, consensus::MemberError> {
        if self.reads.in_flight.is_some() || self.reads.queued.is_empty() {
            return Ok(Output::default());
        }
        self.reads.last_ctx += 1;
        let ctx = self.reads.last_ctx;
        let readers = std::mem::take(&mut self.reads.queued);
        self.reads.in_flight = Some((ctx, Instant::now(), readers));
        self.member.read_index(ctx)
    }

    /// raft-rs confirmed `ctx`: a majority still followed this member after its readers asked,
    /// and the group had committed up to `index`.
    pub(super) fn read_confirmed(&mut self, ctx: u64, index: u64) {
        match self.reads.in_flight.take() {
            Some((asked, _, readers)) if asked == ctx => self.reads.confirmed.push((index, readers)),
            other => self.reads.in_flight = other, // an older one, given up on
        }
        self.answer_applied_reads();
    }

    /// Answers the confirmed readers whose index this member has applied.
    pub(super) fn answer_applied_reads(&mut self) {
        let applied = self.applied;
        self.reads.confirmed.retain_mut(|(index, readers)| {
            if *index > applied {
                return true;
            }
            for reader in readers.drain(..) {
                let _ = reader.send(Ok(()));
            }
            false
        });
    }

    /// Gives up on a confirmation that did not come in time (its heartbeat answers lost): its
    /// readers gave up too. The next batch may go.
    pub(super) fn expire_reads(&mut self) -> Result<Output, consensus::MemberError> {
        if self.reads.in_flight.as_ref().is_some_and(|(_, asked, _)| asked.elapsed() >= READ_CONFIRM_TIMEOUT) {
            self.reads.in_flight = None;
        }
        self.confirm_queued_reads()
    }

    /// Refuses every read waiting here with `refusal`: this member stopped leading, or paused.
    pub(super) fn refuse_reads(&mut self, refusal: &WriteError) {
        let reads = std::mem::take(&mut self.reads);
        let readers = reads.in_flight.into_iter().flat_map(|(_, _, r)| r);
        let readers = readers.chain(reads.queued).chain(reads.confirmed.into_iter().flat_map(|(_, r)| r));
        for reader in readers {
            let _ = reader.send(Err(refusal.clone()));
        }
        self.reads.last_ctx = reads.last_ctx; // never reuse a context raft-rs may still answer
    }
}

#[cfg(test)]
mod tests {
    /// The shipped timeout: two election timeouts of the shipped tick (2 s).
    #[test]
    fn a_read_waits_two_election_timeouts_at_most() {
        assert_eq!(super::READ_CONFIRM_TIMEOUT, std::time::Duration::from_secs(2));
    }
}
