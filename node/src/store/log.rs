//! The store's log: reads for replication and garbage collection of its oldest entries.
//!
//! Guarantees: a log read returns contiguous entries from the index asked for, each checked
//! (decoded and hash-verified) on its way out of the engine — or, for a source's reads, equal
//! byte for byte to bytes this store checked as that same entry moments before
//! ([`CheckedRecently`]) — within its limits and never past the applied index; a collected
//! index is answered as such, never with the nearest entry. A garbage-collection pass removes a
//! contiguous prefix in one commit and never passes the applied index.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::record::log_key;
use super::{Store, StoreError, Table, Write};
use crate::entry::{EntryError, LogEntry, StoredEntry};
use crate::limits::GC_ENTRIES_PER_PASS_MAX;

/// A log retention policy. An entry is collected only when every rule that is set allows it:
/// it is not among the newest `keep_entries_min`, and it is older than `keep_age_ms`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Always keep at least this many of the newest entries.
    pub keep_entries_min: Option<u64>,
    /// Keep every entry whose root timestamp is younger than this.
    pub keep_age_ms: Option<u64>,
    /// PLANTED BUG (legacy `retention_either_rule`, the simulator's bug zoo only): an entry is
    /// collected when either rule allows it — once older than `keep_age_ms`, even among the
    /// newest `keep_entries_min`.
    pub planted_either_rule: bool,
}

/// What one garbage-collection pass did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcOutcome {
    pub collected: u64,
    /// The oldest index still readable after the pass.
    pub first_retained: u64,
    /// True when the pass stopped at [`GC_ENTRIES_PER_PASS_MAX`] with more to collect.
    pub more: bool,
}

/// Answer to a log read for replication: entries as [`LogEntry`], or as [`StoredEntry`], the
/// checked bytes alone ([`Store::read_stored_log_after`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRead<E = LogEntry> {
    /// Entries from the requested index on, in order (empty when the reader is caught up).
    Entries(Vec<E>),
    /// The requested index was garbage-collected; the oldest entry still held is
    /// `first_retained`. The reader must find another source or a snapshot.
    Collected { first_retained: u64 },
    /// The reader claims to have applied past this store's `applied` index.
    Ahead { applied: u64 },
}

/// Bounds on one log read.
#[derive(Clone, Copy, Debug)]
pub struct LogReadLimits {
    pub entries_max: usize,
    /// Compressed bytes; at least one entry is returned even if it alone is larger.
    pub bytes_max: usize,
}

/// Log entries a read asks the engine for at once: a caught-up reader wants one or two, and a
/// read that stops at its byte limit leaves at most this many unread.
const LOG_READ_CHUNK: u64 = 16;

/// What a log read needs of the entries it returns: their index.
trait Indexed {
    fn log_index(&self) -> u64;
}

impl Indexed for LogEntry {
    fn log_index(&self) -> u64 {
        self.index
    }
}

impl Indexed for StoredEntry {
    fn log_index(&self) -> u64 {
        self.index()
    }
}

/// The entries a source's log reads checked last, as [`StoredEntry`] values (built by
/// [`StoredEntry::check`] alone). A source streams each new entry to every client and probe it
/// serves at about the same moment: in a tree of ten thousand nodes each entry was decompressed,
/// parsed and hashed twice per replica on its way out, a tenth of a run. Bytes read back equal
/// to checked bytes under the same index check the same, so one check serves them all; bytes
/// rot changed, or an older entry, are checked in full.
#[derive(Debug, Default)]
pub(super) struct CheckedRecently(Mutex<VecDeque<StoredEntry>>);

/// Entries [`CheckedRecently`] keeps: the newest few, what caught-up clients read next.
const CHECKED_RECENTLY_MAX: usize = 4;

impl CheckedRecently {
    /// `stored`, the bytes the log holds under `index`, checked: from this cache when they equal
    /// bytes checked before as that entry, else by [`StoredEntry::check`] (and kept).
    fn check(&self, index: u64, stored: &[u8]) -> Result<StoredEntry, EntryError> {
        // A panic while the cache was held leaves entries that were checked: still true.
        let lock = || self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(hit) = lock().iter().find(|e| e.index() == index && e.compressed() == stored) {
            return Ok(hit.clone());
        }
        // Checked with the cache unlocked: the other clients' reads of a real node go on beside
        // the check of a large entry.
        let entry = StoredEntry::check(stored.to_vec())?;
        let mut recent = lock();
        // Another reader may have checked the same bytes meanwhile.
        if entry.index() == index && !recent.contains(&entry) {
            if recent.len() == CHECKED_RECENTLY_MAX {
                recent.pop_front();
            }
            recent.push_back(entry.clone());
        }
        Ok(entry)
    }
}

impl Store {
    /// Log entries after `last_index` (the reader's last applied index), within `limits`.
    /// Every entry is decoded and its hash verified before it is returned.
    pub fn read_log_after(&self, last_index: u64, limits: LogReadLimits) -> Result<LogRead, StoreError> {
        self.read_log_as(last_index, limits, |_, stored| LogEntry::decompress(stored))
    }

    /// [`read_log_after`](Self::read_log_after), each entry as the bytes it is stored as,
    /// checked as thoroughly but never built: what a source forwards. Bytes a read checked
    /// moments before as the same entry are not checked again (a cache of the newest few:
    /// see the module doc).
    pub fn read_stored_log_after(
        &self,
        last_index: u64,
        limits: LogReadLimits,
    ) -> Result<LogRead<StoredEntry>, StoreError> {
        self.read_log_as(last_index, limits, |index, stored| self.checked_recently.check(index, stored))
    }

    /// A log read whose entries `decode` makes from their index and stored bytes (verifying
    /// them).
    fn read_log_as<E: Indexed>(
        &self,
        last_index: u64,
        limits: LogReadLimits,
        decode: impl Fn(u64, &[u8]) -> Result<E, EntryError>,
    ) -> Result<LogRead<E>, StoreError> {
        if last_index > self.head.applied_index {
            return Ok(LogRead::Ahead { applied: self.head.applied_index });
        }
        let from = last_index + 1;
        if from < self.head.first_retained_index {
            return Ok(LogRead::Collected { first_retained: self.head.first_retained_index });
        }
        if from > self.head.applied_index {
            // Caught up: the head says there is nothing after, and the engine is not asked.
            return Ok(LogRead::Entries(Vec::new()));
        }
        // Every index from `from` to the head's is in the log, so the engine is asked for them
        // by key, a few at a time, up to the entry limit: an entry just written is a point read
        // RocksDB answers from its memtable, where a scan opened an iterator over every
        // memtable and level-0 file to reach it.
        let last = self.head.applied_index.min(from.saturating_add(limits.entries_max as u64).saturating_sub(1));
        let mut entries: Vec<E> = Vec::new();
        let mut bytes = 0usize;
        let mut failure = None;
        let mut next = from;
        while next <= last && failure.is_none() {
            let chunk_last = last.min(next.saturating_add(LOG_READ_CHUNK - 1));
            let keys: Vec<[u8; 8]> = (next..=chunk_last).map(log_key).collect();
            let keys: Vec<&[u8]> = keys.iter().map(<[u8; 8]>::as_slice).collect();
            let mut full = false;
            self.engine.get_each(Table::Log, &keys, &mut |position, stored| {
                let expected = next + position as u64;
                let corrupt = |reason: String| Some(StoreError::CorruptLog { index: expected, reason });
                let Some(stored) = stored else {
                    failure = corrupt("entry is missing from the log".into());
                    return false;
                };
                if !entries.is_empty() && bytes + stored.len() > limits.bytes_max {
                    full = true;
                    return false;
                }
                match decode(expected, stored) {
                    Ok(entry) if entry.log_index() == expected => {
                        bytes += stored.len();
                        entries.push(entry);
                        true
                    }
                    Ok(entry) => {
                        failure = corrupt(format!("found entry {} where {expected} belongs", entry.log_index()));
                        false
                    }
                    Err(e) => {
                        failure = corrupt(e.to_string());
                        false
                    }
                }
            })?;
            if full {
                break;
            }
            next = chunk_last + 1;
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        // `from` is within the log (the head said so above), so a read that found nothing lost it.
        if entries.is_empty() {
            return Err(StoreError::CorruptLog { index: from, reason: "entry is missing from the log".into() });
        }
        // A reply stays within its limits (one entry may pass the byte limit alone: an entry is
        // never split), and never reaches past what this store applied.
        assert!(
            entries.len() <= limits.entries_max && (entries.len() <= 1 || bytes <= limits.bytes_max),
            "a log read of {} entries, {bytes} bytes, passed its limits {limits:?}",
            entries.len()
        );
        assert!(
            entries.last().is_none_or(|e| e.log_index() <= self.head.applied_index),
            "a log read past the applied index"
        );
        Ok(LogRead::Entries(entries))
    }

    /// Collects the oldest log entries the policy allows, as one bounded commit.
    pub fn collect_garbage(&mut self, policy: RetentionPolicy, now_ms: u64) -> Result<GcOutcome, StoreError> {
        self.check_settled()?;
        let first = self.head.first_retained_index;
        let mut new_first = first;
        if policy.keep_entries_min.is_some() || policy.keep_age_ms.is_some() {
            let protected_from =
                policy.keep_entries_min.map_or(u64::MAX, |n| (self.head.applied_index + 1).saturating_sub(n));
            let limit = first.saturating_add(GC_ENTRIES_PER_PASS_MAX);
            let end = protected_from.min(self.head.applied_index + 1).min(limit);
            match policy.keep_age_ms {
                None => new_first = end.max(first),
                Some(age) => {
                    // The planted bug's end: every applied entry, the count rule ignored.
                    let end = if policy.planted_either_rule { (self.head.applied_index + 1).min(limit) } else { end };
                    self.scan_entries(first, LogEntry::decompress, &mut |index, _, entry| {
                        let collectable = index < end && entry.timestamp_ms.saturating_add(age) <= now_ms;
                        if collectable {
                            new_first = index + 1;
                        }
                        collectable
                    })?;
                }
            }
        }
        // GC never passes the applied index: the newest entry stays until the next is applied
        // (a follower resuming at applied + 1 must find the chain's end).
        assert!(
            new_first <= self.head.applied_index + 1 && new_first >= first,
            "garbage collection moved the first retained index to {new_first} (was {first}, applied {})",
            self.head.applied_index
        );
        let collected = new_first - first;
        if collected > 0 {
            let mut head = self.head;
            head.first_retained_index = new_first;
            let mut writes = vec![Write::DeleteRange {
                table: Table::Log,
                start: log_key(first).to_vec(),
                end: log_key(new_first).to_vec(),
            }];
            head.changes_from(&self.head, &mut writes);
            if let Err(e) = self.engine.commit(writes) {
                return Err(self.commit_failed(e));
            }
            self.head = head;
        }
        let more = collected == GC_ENTRIES_PER_PASS_MAX;
        Ok(GcOutcome { collected, first_retained: new_first, more })
    }

    /// Visits log entries from index `from` on, each made by `decode` from its stored bytes
    /// (which verifies it), with its stored (compressed) length, until `visit` returns false; an
    /// undecodable entry is [`StoreError::CorruptLog`].
    fn scan_entries<E>(
        &self,
        from: u64,
        decode: fn(&[u8]) -> Result<E, EntryError>,
        visit: &mut dyn FnMut(u64, usize, E) -> bool,
    ) -> Result<(), StoreError> {
        let mut damaged = None;
        self.engine.scan(Table::Log, &log_key(from), &mut |key, value| {
            let index = key.try_into().map(u64::from_be_bytes).unwrap_or(0);
            match decode(value) {
                Ok(entry) => visit(index, value.len(), entry),
                Err(e) => {
                    damaged = Some(StoreError::CorruptLog { index, reason: e.to_string() });
                    false
                }
            }
        })?;
        damaged.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{DatabaseId, Op};
    use crate::store::{MemDisk, OpenOptions, StoreLocation};

    #[test]
    fn a_source_forwards_only_bytes_it_checked_and_finds_rot_after_a_check() {
        let disk = MemDisk::default();
        let mut store = Store::open(&StoreLocation::Memory(disk.clone()), &OpenOptions::new(DatabaseId(7))).unwrap();
        for n in 1..=3u8 {
            let entry =
                store.next_entry(u64::from(n), vec![Op::Set { key: format!("k{n}").into_bytes(), value: vec![n; 64] }]);
            store.apply(&[entry.unwrap()]).unwrap();
        }
        let limits = LogReadLimits { entries_max: 10, bytes_max: 1 << 20 };
        let first = store.read_stored_log_after(0, limits).unwrap();
        let LogRead::Entries(entries) = &first else { panic!("{first:?}") };
        assert_eq!(entries.iter().map(StoredEntry::index).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(store.checked_recently.0.lock().unwrap().len(), 3, "each checked entry is kept");
        assert_eq!(store.read_stored_log_after(0, limits).unwrap(), first, "read again from what was checked");
        // Bytes that rot after their check are checked again, and refused.
        assert!(disk.corrupt_log_entry(2));
        let read = store.read_stored_log_after(0, limits);
        assert!(matches!(read, Err(StoreError::CorruptLog { index: 2, .. })), "{read:?}");
        let read = store.read_stored_log_after(1, limits);
        assert!(matches!(read, Err(StoreError::CorruptLog { index: 2, .. })), "{read:?}");
        // The cache holds no more than its few newest.
        for n in 4..=12u8 {
            let entry =
                store.next_entry(u64::from(n), vec![Op::Set { key: format!("k{n}").into_bytes(), value: vec![n; 64] }]);
            store.apply(&[entry.unwrap()]).unwrap();
        }
        assert!(store.read_stored_log_after(2, limits).is_ok());
        let kept: Vec<u64> = store.checked_recently.0.lock().unwrap().iter().map(StoredEntry::index).collect();
        assert_eq!(kept, [9, 10, 11, 12]);
    }
}
