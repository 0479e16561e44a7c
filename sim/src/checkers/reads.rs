//! Reads: monotonic reads, and no read of a value that was never written or that was already
//! overwritten before the reader's last-seen index.
//!
//! Every value the writers send starts with a per-key version (`00000042.` then the payload),
//! so a read names the write it returns. Each reader is a session pinned to one edge; `gets`
//! returns the edge's applied index as the cas token, the reader's "last-seen index".
//!
//! For a read of key `k` returning version `v` by reader `r` with last-seen index `L` (the
//! largest token `r` has seen, this read's included):
//! - `v` must be a version some writer sent for `k` (never an invented value), and not one the
//!   root refused (400, 403, 429, or a 503 — each says nothing in the request was applied, so
//!   a refused value that becomes visible later is a write the node lied about);
//! - `v` must not be older than a version `r` read before for `k` (monotonic reads);
//! - no acknowledged write of `k` with a newer version may have landed at a root index `<= L`
//!   (the edge had applied it by then, so returning an older version is a stale read);
//! - a miss is stale the same way when the newest write of `k` that landed at an index `<= L`
//!   set a value, unless a delete of `k` with a newer version was sent and not refused: a miss
//!   carries no index, so the edge may be past `L`, where that delete landed (or may have,
//!   unacknowledged). Deletes take a version like writes.
//!
//! Fed two ways: `write_acked` trace events (the history), and each read directly from the
//! reader workload (reads are too many to trace one by one; violations are traced).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::sync::Locked;
use crate::trace::{Checker, Event, Observer};

/// The separator between a value's version and its payload.
pub const VERSION_SEPARATOR: u8 = b'.';

/// Encodes `version` in front of `payload`.
pub fn versioned_value(version: u64, payload: &[u8]) -> Vec<u8> {
    let mut value = format!("{version:08}").into_bytes();
    value.push(VERSION_SEPARATOR);
    value.extend_from_slice(payload);
    value
}

/// The version a value carries, if it is one a writer made.
pub fn version_of(value: &[u8]) -> Option<u64> {
    let end = value.iter().position(|&b| b == VERSION_SEPARATOR)?;
    std::str::from_utf8(&value[..end]).ok()?.parse().ok()
}

#[derive(Debug, Default)]
struct History {
    /// Highest version sent so far.
    sent_max: u64,
    /// Versions of the deletes sent and not refused: each may have landed, at an index the
    /// edge may already have passed (a miss carries no index of its own).
    deletes: std::collections::BTreeSet<u64>,
    /// Acknowledged writes: (root index, version, whether a delete), in acknowledgement order.
    acked: Vec<(u64, u64, bool)>,
    /// Versions whose request the root refused: none of them ever landed.
    refused: std::collections::BTreeSet<u64>,
}

#[derive(Debug, Default)]
pub struct ReadState {
    keys: BTreeMap<String, History>,
    /// Per reader: the largest token seen, and per key the newest version read.
    sessions: BTreeMap<String, (u64, BTreeMap<String, u64>)>,
    /// Reads per key (the report's key usage).
    pub reads_per_key: BTreeMap<String, u64>,
}

/// One read as the reader saw it.
#[derive(Debug)]
pub struct Observed<'a> {
    pub at_ms: u64,
    pub reader: &'a str,
    pub node: &'a str,
    pub key: &'a str,
    /// The value, or None for a miss.
    pub value: Option<&'a [u8]>,
    pub token: u64,
}

impl ReadState {
    /// A writer is about to send `version` of `key`.
    pub fn sent(&mut self, key: &str, version: u64) {
        let history = self.keys.entry(key.to_string()).or_default();
        history.sent_max = history.sent_max.max(version);
    }

    /// A writer is about to send a delete of `key`, as its `version`.
    pub fn delete_sent(&mut self, key: &str, version: u64) {
        let history = self.keys.entry(key.to_string()).or_default();
        history.sent_max = history.sent_max.max(version);
        history.deletes.insert(version);
    }

    /// The root refused `version` of `key` (it never landed) — unless that version was
    /// acknowledged before: a rewrite of a key's settled value carries the version of the write
    /// that set it, and refusing the rewrite says nothing of the write that landed.
    pub fn refused(&mut self, key: &str, version: u64) {
        if let Some(history) = self.keys.get_mut(key) {
            history.deletes.remove(&version);
            if !history.acked.iter().any(|&(_, acked, _)| acked == version) {
                history.refused.insert(version);
            }
        }
    }

    /// Whether the root refused `version` of `key` (so it must never be found anywhere).
    pub fn was_refused(&self, key: &str, version: u64) -> bool {
        self.keys.get(key).is_some_and(|h| h.refused.contains(&version))
    }

    /// Checks one read; returns the violation it shows, if any.
    pub fn read(&mut self, read: Observed<'_>) -> Option<Event> {
        *self.reads_per_key.entry(read.key.to_string()).or_default() += 1;
        let session = self.sessions.entry(read.reader.to_string()).or_default();
        session.0 = session.0.max(read.token);
        let last_seen = session.0;
        let history = self.keys.get(read.key);
        let violation = |message: String| Event::Violation {
            at_ms: read.at_ms,
            checker: Checker::Reads,
            node: read.node.to_string(),
            index: last_seen,
            message: format!("{} read {}: {message}", read.reader, read.key),
        };
        // The newest write that landed at or before the reader's index: (version, deleted).
        let newest_landed = |history: &History| {
            history
                .acked
                .iter()
                .filter(|(index, _, _)| *index <= last_seen)
                .map(|(_, version, deleted)| (*version, *deleted))
                .max()
        };
        let Some(value) = read.value else {
            let history = history?;
            return match newest_landed(history) {
                Some((version, false)) if history.deletes.range(version..).next().is_none() => {
                    Some(violation(format!(
                        "missing, but version {version} landed at or before index {last_seen}, which the edge had applied"
                    )))
                }
                _ => None,
            };
        };
        let Some(version) = version_of(value) else {
            return Some(violation(format!(
                "returned {:?}, a value no writer ever sent",
                String::from_utf8_lossy(value)
            )));
        };
        if history.is_none_or(|h| version > h.sent_max) {
            return Some(violation(format!("returned version {version}, which no writer ever sent")));
        }
        if history.is_some_and(|h| h.refused.contains(&version)) {
            return Some(violation(format!(
                "returned version {version}, whose write the root refused: it said nothing of it was applied"
            )));
        }
        let previous = session.1.insert(read.key.to_string(), version).unwrap_or(0);
        if version < previous {
            return Some(violation(format!(
                "returned version {version} after this reader had read version {previous}"
            )));
        }
        match history.and_then(newest_landed) {
            Some((newer, _)) if newer > version => Some(violation(format!(
                "returned version {version}, but version {newer} landed at or before index {last_seen}, which the edge had applied"
            ))),
            _ => None,
        }
    }
}

/// The checker: shared between the recorder (history from trace events) and the readers.
#[derive(Debug, Clone, Default)]
pub struct Reads(pub Arc<Mutex<ReadState>>);

impl Reads {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, ReadState> {
        self.0.locked()
    }
}

impl Observer for Reads {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        if let Event::WriteAcked { key, index, version, deleted, .. } = event {
            let mut state = self.lock();
            let history = state.keys.entry(key.clone()).or_default();
            history.acked.push((*index, *version, *deleted));
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<'a>(reader: &'a str, key: &'a str, value: Option<&'a [u8]>, token: u64) -> Observed<'a> {
        Observed { at_ms: 0, reader, node: "edge-1", key, value, token }
    }

    #[test]
    fn catches_stale_invented_and_non_monotonic_reads() {
        let mut check = Reads::default();
        check.lock().sent("k", 1);
        check.lock().sent("k", 2);
        check.observe(&Event::WriteAcked { at_ms: 0, key: "k".into(), index: 10, version: 1, deleted: false });
        let v1 = versioned_value(1, b"a");
        let v2 = versioned_value(2, b"b");
        let mut state = check.lock();
        assert!(state.read(read("r1", "k", None, 5)).is_none(), "not yet written at index 5");
        assert!(state.read(read("r2", "k", None, 10)).is_some(), "written at 10, missing at 10");
        assert!(state.read(read("r3", "k", Some(&v1), 10)).is_none());
        assert!(state.read(read("r3", "k", Some(&v2), 11)).is_none(), "a newer unacknowledged write");
        assert!(state.read(read("r3", "k", Some(&v1), 12)).is_some(), "went back from 2 to 1");
        assert!(state.read(read("r4", "k", Some(&versioned_value(3, b"c")), 12)).is_some(), "never sent");
        assert!(state.read(read("r4", "k", Some(b"garbage"), 12)).is_some(), "not a writer's value");
        drop(state);
        check.observe(&Event::WriteAcked { at_ms: 0, key: "k".into(), index: 20, version: 2, deleted: false });
        let mut state = check.lock();
        assert!(state.read(read("r5", "k", Some(&v1), 19)).is_none(), "version 2 landed after 19");
        assert!(state.read(read("r5", "k", Some(&v1), 20)).is_some(), "version 2 landed at 20");
    }

    #[test]
    fn unanswered_writes_may_be_read_or_missed_and_a_key_written_once_is_never_missed_after_it_landed() {
        let mut check = Reads::default();
        let (v1, v2) = (versioned_value(1, b"a"), versioned_value(2, b"b"));
        // Version 1 of `lost` was sent and never answered (timed out, the root cut off): it may
        // have committed or not, so reading it and missing it are both fine, at any index.
        check.lock().sent("lost", 1);
        {
            let mut state = check.lock();
            assert!(state.read(read("r1", "lost", Some(&v1), 3)).is_none(), "it committed");
            assert!(state.read(read("r2", "lost", None, 50)).is_none(), "it did not");
        }
        // `once` is written once, acknowledged at root index 7.
        check.lock().sent("once", 1);
        check.observe(&Event::WriteAcked { at_ms: 0, key: "once".into(), index: 7, version: 1, deleted: false });
        {
            let mut state = check.lock();
            assert!(state.read(read("r3", "once", None, 6)).is_none(), "the edge had not applied 7 yet");
            assert!(state.read(read("r4", "once", None, 7)).is_some(), "applied at 7, then missing");
            assert!(state.read(read("r4", "once", Some(&v1), 8)).is_none());
        }
        // Version 2 in flight when the writer was killed: a reader may see it, but may not go
        // back to 1 afterwards; another reader may still see 1 (2 never landed, as far as anyone knows).
        check.lock().sent("once", 2);
        let mut state = check.lock();
        assert!(state.read(read("r5", "once", Some(&v2), 9)).is_none());
        assert!(state.read(read("r5", "once", Some(&v1), 9)).is_some(), "went back from 2 to 1");
        assert!(state.read(read("r6", "once", Some(&v1), 9)).is_none());
    }

    #[test]
    fn a_miss_after_a_delete_is_fresh_and_a_delete_in_flight_explains_a_miss() {
        let mut check = Reads::default();
        let v1 = versioned_value(1, b"a");
        check.lock().sent("k", 1);
        check.observe(&Event::WriteAcked { at_ms: 0, key: "k".into(), index: 5, version: 1, deleted: false });
        assert!(check.lock().read(read("r1", "k", None, 6)).is_some(), "set at 5, missing at 6");
        // Version 2, a delete, sent and not yet answered: it may have landed, so a miss is fine,
        // and so is version 1.
        check.lock().delete_sent("k", 2);
        assert!(check.lock().read(read("r2", "k", None, 6)).is_none());
        assert!(check.lock().read(read("r3", "k", Some(&v1), 6)).is_none());
        // Acknowledged at 8: from index 8 on, version 1 is stale and a miss is right.
        check.observe(&Event::WriteAcked { at_ms: 0, key: "k".into(), index: 8, version: 2, deleted: true });
        assert!(check.lock().read(read("r4", "k", None, 8)).is_none());
        assert!(check.lock().read(read("r4", "k", Some(&v1), 9)).is_some(), "deleted at 8");
        // Version 3 sets it again at 12: a miss at 12 is stale, unless a newer delete was sent.
        check.lock().sent("k", 3);
        check.observe(&Event::WriteAcked { at_ms: 0, key: "k".into(), index: 12, version: 3, deleted: false });
        assert!(check.lock().read(read("r5", "k", None, 12)).is_some());
        check.lock().delete_sent("k", 4);
        assert!(check.lock().read(read("r6", "k", None, 12)).is_none());
        // Refused (a 403 or 429): it never landed, and explains nothing.
        check.lock().refused("k", 4);
        assert!(check.lock().read(read("r7", "k", None, 12)).is_some());
    }

    /// A refused write (400, 403, 429, 503) never landed: its value read later, at any index
    /// and by any reader, is a write the root said it did not apply.
    #[test]
    fn a_refused_write_is_never_read() {
        let mut check = Reads::default();
        check.lock().sent("k", 1);
        check.observe(&Event::WriteAcked { at_ms: 0, key: "k".into(), index: 3, version: 1, deleted: false });
        check.lock().sent("k", 2);
        check.lock().refused("k", 2);
        let v1 = versioned_value(1, b"a");
        assert!(check.lock().read(read("r1", "k", Some(&v1), 5)).is_none());
        let found = check.lock().read(read("r2", "k", Some(&versioned_value(2, b"b")), 5));
        let Some(Event::Violation { message, .. }) = found else { panic!("{found:?}") };
        assert!(message.contains("whose write the root refused"), "{message}");
        // A refused rewrite of the settled value (version 1 again) takes nothing back.
        check.lock().refused("k", 1);
        assert!(check.lock().read(read("r3", "k", Some(&v1), 5)).is_none(), "version 1 was acknowledged");
    }
}
