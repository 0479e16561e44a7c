//! A batch of producers' writes judged against the state it will apply to, and packed into
//! log entries — the same on a root of one and on a root group's leader.
//!
//! Guarantees:
//! - A write whose key already holds the same value (or, for a delete, holds nothing) — in the
//!   store, or in what is ahead of it (earlier writes of the batch; in a group, the leader's
//!   proposals not applied yet) — is dropped and counted. A value that cannot be read is never
//!   taken for the same value or for nothing: the write is kept, and repairs the key.
//! - [`pack`] seals entries that chain onto the store's head, within the entry limits.

use std::collections::{BTreeMap, BTreeSet};

use crate::entry::{LogEntry, Op};
use crate::limits::{ENTRY_BYTES_MAX, OPS_PER_ENTRY_MAX};
use crate::observe::Probe;
use crate::state::NodeState;
use crate::store::Store;

/// Encoded bytes one entry may use, leaving room below `ENTRY_BYTES_MAX` for the header.
const ENTRY_BODY_BYTES_MAX: usize = ENTRY_BYTES_MAX - 4096;

/// What judging a batch found.
#[derive(Debug, Default)]
pub(super) struct Judged {
    /// The operations to write, in order.
    pub(super) kept: Vec<Op>,
    /// Per request, how many of its operations were dropped as identical rewrites.
    pub(super) dropped: Vec<usize>,
    probes: Vec<Probe>,
    /// Per key whose current value could not be read: whether it was damage (else I/O).
    read_failures: Vec<bool>,
}

impl Judged {
    /// Reports what was judged, once the batch committed.
    pub(super) fn report(&self, state: &NodeState) {
        for &damage in &self.read_failures {
            if damage {
                state.found_damage(); // counted; the write just committed repaired the key
            }
        }
        for probe in &self.probes {
            state.probe(*probe);
        }
        let mut accepted = self.kept.len();
        if state.config.planted().writes_accepted_counts_identical_rewrites {
            // PLANTED BUG (legacy `writes_accepted_counts_identical_rewrites`).
            accepted += self.dropped.iter().sum::<usize>();
        }
        state.metrics.writes_accepted.inc_by(accepted as u64);
    }
}

/// Judges `requests` (each a producer's operations) against `store` with `ahead` laid over it:
/// for a key that writes ahead of this batch change, the value it will hold once they apply
/// (`Some(None)`: deleted); `None` for every other key.
pub(super) fn judge<'a>(
    state: &NodeState,
    store: &Store,
    requests: &[&[Op]],
    ahead: impl Fn(&[u8]) -> Option<Option<&'a [u8]>>,
) -> Judged {
    let mut judged = Judged::default();
    let mut pending: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for ops in requests {
        let mut identical = 0;
        let mut keys = BTreeSet::new();
        for op in *ops {
            if !keys.insert(op.key()) {
                judged.probes.push(Probe::RepeatedKeyInOneRequest);
            }
            // What the key holds, or `None` when that is unknown: a value that fails its
            // checksum (or any read error) is not "absent". Only a known value can make a
            // write an identical rewrite; an unknown one is always written, so a delete or
            // set of a damaged key reaches the log and repairs it everywhere.
            let known = pending.get(op.key()).cloned().or_else(|| ahead(op.key()).map(|v| v.map(<[u8]>::to_vec)));
            let current: Option<Option<Vec<u8>>> = match known {
                Some(value) => Some(value),
                None => match store.get(op.key()) {
                    Ok(value) => Some(value),
                    // Planted bug: the unreadable key counts as absent.
                    Err(_) if state.config.planted().unreadable_key_counts_as_absent => Some(None),
                    Err(e) => {
                        tracing::warn!(error = %e, "reading a key's current value failed: the write is kept");
                        judged.read_failures.push(e.is_damage());
                        None
                    }
                },
            };
            let unchanged = match (op, current) {
                (_, None) => false,
                (Op::Set { value, .. }, Some(current)) => current.as_deref() == Some(value.as_slice()),
                (Op::Delete { .. }, Some(current)) => current.is_none(),
            };
            if unchanged {
                identical += 1;
                judged.probes.push(Probe::IdenticalRewriteDropped);
                continue;
            }
            if let Op::Delete { .. } = op {
                judged.probes.push(Probe::DeleteCommitted);
            }
            pending.insert(op.key().to_vec(), op.value().map(<[u8]>::to_vec));
            judged.kept.push(op.clone());
        }
        judged.dropped.push(identical);
    }
    judged
}

/// Splits `ops` into sealed, chained entries within the entry limits.
pub(super) fn pack(store: &Store, timestamp_ms: u64, ops: Vec<Op>) -> Result<Vec<LogEntry>, crate::entry::EntryError> {
    let mut entries: Vec<LogEntry> = Vec::new();
    let mut current: Vec<Op> = Vec::new();
    let mut current_bytes = 0;
    let seal = |ops: Vec<Op>, entries: &mut Vec<LogEntry>| -> Result<(), crate::entry::EntryError> {
        let (index, prev) = match entries.last() {
            Some(last) => (last.index + 1, last.hash),
            None => (store.applied_index() + 1, store.chain_hash()),
        };
        entries.push(LogEntry::seal(index, store.db_id(), timestamp_ms, prev, ops)?);
        Ok(())
    };
    for op in ops {
        let op_bytes = 16 + op.key().len() + if let Op::Set { value, .. } = &op { value.len() } else { 0 };
        if !current.is_empty()
            && (current.len() == OPS_PER_ENTRY_MAX || current_bytes + op_bytes > ENTRY_BODY_BYTES_MAX)
        {
            seal(std::mem::take(&mut current), &mut entries)?;
            current_bytes = 0;
        }
        current_bytes += op_bytes;
        current.push(op);
    }
    if !current.is_empty() {
        seal(current, &mut entries)?;
    }
    Ok(entries)
}
