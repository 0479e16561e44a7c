//! `qs-node inspect`: look into a store — a running node's included — without disturbing it,
//! as Quora's MCInspector looks into a live memcached.
//!
//! # Guarantees
//! - **Read-only.** The store is opened with [`Store::open_read_only`]: LMDB with `MDB_RDONLY`
//!   (data file mapped and opened read-only; the reader registers in the shared `lock.mdb`
//!   reader table as any LMDB reader does, and takes no lock the writer waits on), RocksDB as a
//!   read-only instance (no `LOCK`, no LOG, no file written). Nothing is ever written to the
//!   store directory; nothing is created where no store is.
//! - **One consistent view.** Every figure comes from one snapshot: one LMDB read transaction,
//!   or the one state a read-only RocksDB instance recovered at open (reopened if that raced a
//!   flush, see [`Store::open_read_only`]). The head, the categories, the largest values, the
//!   verification and the dump all describe the same commit.
//! - **Refusals are explicit.** A memory-engine node (nothing on disk), a missing path, a
//!   directory holding something else, a store of another engine or another database: an error
//!   naming the path and what was found there ([`EXIT_NO_STORE`]).
//!
//! # Report
//! Plain text, one `field value` pair a line, fields in a fixed order, so two reports diff:
//!
//! ```text
//! engine              lmdb
//! path                /var/lib/qs-node/root
//! database_id         5157534d00000000000000000000c0de
//! applied_index       412
//! chain_hash          3f0c…(64 hex digits)
//! log_first_retained  1
//! log_last_retained   412
//! log_entries         412
//! keys                600
//! bytes               23130
//! raft_term           3                   (a root group member's store only: its Raft term,
//! raft_vote           2                    the member it voted for, the commit index it last
//! raft_commit         414                  persisted, the Raft log it holds, and the last Raft
//! raft_log            1..414               index its store applied, and the snapshot its
//! raft_applied        414                  log starts after: `none` until it was compacted)
//! raft_snapshot       none
//! category            cfg keys 300 bytes 11890 largest_value 32
//! category            dns keys 300 bytes 11240 largest_value 28
//! largest_value       32 cfg:zone-17
//! ...
//! values_checked      600                 (--verify only, from here on)
//! checksum_failures   0
//! head_totals         ok
//! log_chain           ok 1..412
//! dumped_keys         300                 (--dump only: keys written, damaged ones named
//! result              ok                   on `dump_damaged` lines)
//! ```
//!
//! `bytes` are key plus value lengths (as `/v1/status` and `Store::usage_by_prefix` count
//! them); a key's category is the part before its first `:` (the whole key if it has none).
//! Categories are sorted by name; `largest_value` lines (the `--top` N largest values: value
//! length, key) by length, largest first, then by key. Keys and categories are written in the
//! dump's key encoding (below). With `--verify`: every value's CRC32C is checked
//! (`checksum_failure <key>` names each damaged one), the head's key count and bytes are compared
//! with the scan (`head_totals`), and the retained log is decoded entry by entry (each entry's
//! own BLAKE3 hash, its index, database id and previous hash) from the first to the last retained
//! entry, whose hash must be the head's chain hash (`log_chain ok FIRST..LAST`, or
//! `log_chain broken at INDEX: reason` for the first mismatch).
//!
//! # Dump format (`--dump CATEGORY`)
//! Every key of the category (the category as the report names it), in key order, one line
//! each: `<key>\t<value>\n`, both percent-encoded: the bytes `!`..`~` other than `%` stand for
//! themselves, every other byte (space, tab, newline, `%`, control bytes, bytes ≥ 0x80) is
//! `%XX` with two upper-case hex digits. So a line holds exactly one key and one value,
//! binary values round-trip exactly (percent-decode each field), and a dump diffs line by line
//! against another. Each value is checksum-verified before it is written; a damaged one is left
//! out and named (and counts as damage). The dump goes to `--out FILE`, or to standard output —
//! then the report goes to standard error, so standard output holds only the dump.
//!
//! # Exit codes
//! [`EXIT_OK`] 0: report written, nothing damaged found; 1: the store could not be read (an I/O
//! or engine error); [`EXIT_USAGE`] 2: bad arguments or configuration file; [`EXIT_DAMAGED`] 3:
//! damage found (a checksum failure, head totals or log chain that do not agree, a damaged value
//! in the dump, or an engine reporting corruption); [`EXIT_NO_STORE`] 4: no store there (missing
//! path, memory engine, something else in the directory, another engine or database).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use percent_encoding::{AsciiSet, CONTROLS, percent_encode};

use crate::config::NodeConfig;
use crate::entry::{ChainHash, DatabaseId, LogEntry};
use crate::store::{self, EngineError, EngineKind, Store, StoreError, StoreLocation};

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_DAMAGED: u8 = 3;
pub const EXIT_NO_STORE: u8 = 4;

/// Most damaged values named one by one in a report (all are counted).
pub const NAMED_FAILURES_MAX: usize = 100;

/// Bytes written as `%XX` in keys and values: all but `!`..`~`, and `%` itself.
const ENCODED: &AsciiSet = &CONTROLS.add(b' ').add(b'%');

/// A key or value in the dump's encoding (see the module doc).
pub fn encode(bytes: &[u8]) -> String {
    percent_encode(bytes, ENCODED).to_string()
}

/// Which store to look into.
#[derive(Clone, Debug)]
pub enum Target {
    /// The store a node's configuration names, checked against its database id.
    Config(PathBuf),
    /// A store directory; the engine is detected from its files when not given.
    Path { path: PathBuf, engine: Option<EngineKind>, database_id: Option<DatabaseId> },
}

/// What to do besides the head and the categories.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Check every value's checksum, the head's totals and the retained log's chain.
    pub verify: bool,
    /// How many of the largest values to list.
    pub top: usize,
    /// Dump the keys and values of this category.
    pub dump: Option<String>,
}

/// Why inspect could not report.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    NoStore(String),
    #[error("{0}")]
    Damaged(String),
    #[error("{0}")]
    Failed(String),
}

impl InspectError {
    pub fn exit_code(&self) -> u8 {
        match self {
            InspectError::Usage(_) => EXIT_USAGE,
            InspectError::NoStore(_) => EXIT_NO_STORE,
            InspectError::Damaged(_) => EXIT_DAMAGED,
            InspectError::Failed(_) => EXIT_FAILED,
        }
    }
}

impl From<StoreError> for InspectError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotAStore { .. } | StoreError::WrongDatabase { .. } | StoreError::UnknownFormat { .. } => {
                InspectError::NoStore(e.to_string())
            }
            StoreError::Checksum { .. }
            | StoreError::CorruptRead { .. }
            | StoreError::CorruptLog { .. }
            | StoreError::CorruptMeta(_)
            | StoreError::Engine(EngineError::Corruption { .. }) => InspectError::Damaged(e.to_string()),
            other => InspectError::Failed(other.to_string()),
        }
    }
}

/// Keys and bytes of one category.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Category {
    pub keys: u64,
    /// Key plus value lengths.
    pub bytes: u64,
    /// The largest value length in the category.
    pub largest_value: u64,
}

/// The retained log's chain, checked from its first to its last entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainCheck {
    /// No entry is retained.
    Empty,
    /// Every entry from `first` to `last` decodes, hashes, follows its predecessor, and the last
    /// one's hash is the head's chain hash.
    Verified { first: u64, last: u64 },
    /// The first mismatch.
    Broken { index: u64, reason: String },
}

/// The findings of `--verify`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verification {
    pub values_checked: u64,
    pub checksum_failures: u64,
    /// The first [`NAMED_FAILURES_MAX`] damaged keys, encoded.
    pub damaged_keys: Vec<String>,
    /// `None` when the scan's keys and bytes equal the head's; otherwise what differs.
    pub head_totals_mismatch: Option<String>,
    pub chain: ChainCheck,
}

impl Verification {
    pub fn ok(&self) -> bool {
        self.checksum_failures == 0
            && self.head_totals_mismatch.is_none()
            && !matches!(self.chain, ChainCheck::Broken { .. })
    }
}

/// Everything inspect found, from one view of the store.
#[derive(Clone, Debug)]
pub struct Report {
    pub engine: EngineKind,
    pub path: PathBuf,
    pub database_id: DatabaseId,
    pub applied_index: u64,
    pub chain_hash: ChainHash,
    pub first_retained_index: u64,
    pub keys: u64,
    pub bytes: u64,
    /// By category, raw bytes (the report encodes them).
    pub categories: BTreeMap<Vec<u8>, Category>,
    /// The largest values: (value length, key), largest first, then by key.
    pub largest_values: Vec<(u64, Vec<u8>)>,
    pub verification: Option<Verification>,
    /// Keys written to the dump, and damaged values left out of it (encoded keys).
    pub dumped: Option<(u64, Vec<String>)>,
    /// A root group member's Raft state; None for any other store.
    pub raft: Option<crate::consensus::RaftSummary>,
}

impl Report {
    /// The last retained log index (`first_retained_index - 1` when none is retained).
    pub fn last_retained_index(&self) -> u64 {
        self.applied_index
    }

    /// Whether anything damaged was found.
    pub fn damaged(&self) -> bool {
        self.verification.as_ref().is_some_and(|v| !v.ok()) || self.dumped.as_ref().is_some_and(|(_, d)| !d.is_empty())
    }

    pub fn exit_code(&self) -> u8 {
        if self.damaged() { EXIT_DAMAGED } else { EXIT_OK }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = |name: &str, value: &dyn fmt::Display| writeln!(f, "{name:<20}{value}");
        line("engine", &self.engine)?;
        line("path", &self.path.display())?;
        line("database_id", &self.database_id)?;
        line("applied_index", &self.applied_index)?;
        line("chain_hash", &self.chain_hash.to_hex())?;
        line("log_first_retained", &self.first_retained_index)?;
        line("log_last_retained", &self.last_retained_index())?;
        line("log_entries", &(self.applied_index + 1).saturating_sub(self.first_retained_index))?;
        line("keys", &self.keys)?;
        line("bytes", &self.bytes)?;
        if let Some(raft) = &self.raft {
            line("raft_term", &raft.term)?;
            line("raft_vote", &raft.vote)?;
            line("raft_commit", &raft.commit)?;
            match raft.log {
                Some((first, last)) => line("raft_log", &format!("{first}..{last}"))?,
                None => line("raft_log", &"empty")?,
            }
            line("raft_applied", &raft.applied)?;
            match raft.snapshot {
                Some(index) => line("raft_snapshot", &index)?,
                None => line("raft_snapshot", &"none")?,
            }
        }
        for (name, c) in &self.categories {
            let text = format!("{} keys {} bytes {} largest_value {}", encode(name), c.keys, c.bytes, c.largest_value);
            line("category", &text)?;
        }
        for (len, key) in &self.largest_values {
            line("largest_value", &format!("{len} {}", encode(key)))?;
        }
        if let Some(v) = &self.verification {
            line("values_checked", &v.values_checked)?;
            line("checksum_failures", &v.checksum_failures)?;
            for key in &v.damaged_keys {
                line("checksum_failure", key)?;
            }
            match &v.head_totals_mismatch {
                None => line("head_totals", &"ok")?,
                Some(what) => line("head_totals", &format!("mismatch: {what}"))?,
            }
            match &v.chain {
                ChainCheck::Empty => line("log_chain", &"ok (no entry retained)")?,
                ChainCheck::Verified { first, last } => line("log_chain", &format!("ok {first}..{last}"))?,
                ChainCheck::Broken { index, reason } => line("log_chain", &format!("broken at {index}: {reason}"))?,
            }
        }
        if let Some((count, damaged)) = &self.dumped {
            line("dumped_keys", count)?;
            for key in damaged {
                line("dump_damaged", key)?;
            }
        }
        line("result", &if self.damaged() { "DAMAGED" } else { "ok" })
    }
}

/// Resolves `target` to a store location and the database it must hold.
fn locate(target: &Target) -> Result<(StoreLocation, Option<DatabaseId>), InspectError> {
    match target {
        Target::Config(file) => {
            let config = NodeConfig::load(file).map_err(|e| InspectError::Usage(e.to_string()))?;
            if config.storage.engine == EngineKind::Memory {
                return Err(InspectError::NoStore(format!(
                    "{}: node {} runs on the memory engine, whose store lives inside the node's process: \
                     there is nothing on disk to inspect",
                    file.display(),
                    config.name
                )));
            }
            Ok((StoreLocation::new(config.storage.engine, &config.storage.path), Some(config.database_id)))
        }
        Target::Path { path, engine, database_id } => {
            let engine = match engine {
                Some(EngineKind::Memory) => {
                    return Err(InspectError::NoStore(
                        "the memory engine keeps its store inside the node's process: there is nothing on disk to inspect"
                            .into(),
                    ));
                }
                Some(engine) => *engine,
                None => store::detect_engine(path).ok_or_else(|| {
                    InspectError::NoStore(format!(
                        "{}: no store to open: found {}",
                        path.display(),
                        store::describe_path(path)
                    ))
                })?,
            };
            Ok((StoreLocation::new(engine, path), *database_id))
        }
    }
}

/// Opens the store `target` names read-only and reports on it; with `options.dump`, writes the
/// category's keys and values to `dump` from the same view.
pub fn inspect(target: &Target, options: &Options, dump: &mut dyn Write) -> Result<Report, InspectError> {
    let (location, database_id) = locate(target)?;
    let path = match &location {
        StoreLocation::Lmdb(path) | StoreLocation::Rocksdb(path) => path.clone(),
        StoreLocation::Memory(_) => PathBuf::new(),
    };
    let store = Store::open_read_only(&location, database_id)?;
    report(&store, &path, options, dump)
}

#[expect(
    clippy::too_many_lines,
    reason = "83 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn report(store: &Store, path: &Path, options: &Options, dump: &mut dyn Write) -> Result<Report, InspectError> {
    let mut categories: BTreeMap<Vec<u8>, Category> = BTreeMap::new();
    // Ordered by length descending, then key ascending; the last is the first to drop.
    let mut largest: BTreeSet<(Reverse<u64>, Vec<u8>)> = BTreeSet::new();
    let (mut keys, mut bytes, mut checked, mut failures) = (0u64, 0u64, 0u64, 0u64);
    let mut damaged_keys = Vec::new();
    let mut dumped = options.dump.as_ref().map(|_| (0u64, Vec::new()));
    let mut write_error = None;
    store.scan_records(&mut |key, record| {
        let value_len = store::record_value_len(record);
        let category = key.split(|b| *b == b':').next().unwrap_or(key);
        let entry = categories.entry(category.to_vec()).or_default();
        entry.keys += 1;
        entry.bytes += key.len() as u64 + value_len;
        entry.largest_value = entry.largest_value.max(value_len);
        keys += 1;
        bytes += key.len() as u64 + value_len;
        if options.top > 0 {
            largest.insert((Reverse(value_len), key.to_vec()));
            if largest.len() > options.top {
                largest.pop_last();
            }
        }
        let mut verified = None;
        if options.verify {
            checked += 1;
            verified = Some(store::verified_value(key, record));
            if verified == Some(None) {
                failures += 1;
                if damaged_keys.len() < NAMED_FAILURES_MAX {
                    damaged_keys.push(encode(key));
                }
            }
        }
        if let (Some(wanted), Some((count, damaged))) = (&options.dump, &mut dumped)
            && category == wanted.as_bytes()
        {
            match verified.unwrap_or_else(|| store::verified_value(key, record)) {
                Some(value) => {
                    if let Err(e) = writeln!(dump, "{}\t{}", encode(key), encode(value)) {
                        write_error = Some(e);
                        return false;
                    }
                    *count += 1;
                }
                None => damaged.push(encode(key)),
            }
        }
        true
    })?;
    if let Some(e) = write_error {
        return Err(InspectError::Failed(format!("writing the dump: {e}")));
    }
    dump.flush().map_err(|e| InspectError::Failed(format!("writing the dump: {e}")))?;
    let verification = if options.verify {
        let (head_keys, head_bytes) = store.head_totals();
        let head_totals_mismatch = (head_keys != keys || head_bytes != bytes).then(|| {
            format!("the head counts {head_keys} keys and {head_bytes} bytes, the scan found {keys} and {bytes}")
        });
        Some(Verification {
            values_checked: checked,
            checksum_failures: failures,
            damaged_keys,
            head_totals_mismatch,
            chain: check_chain(store)?,
        })
    } else {
        None
    };
    Ok(Report {
        engine: store.engine_kind(),
        path: path.to_path_buf(),
        database_id: store.db_id(),
        applied_index: store.applied_index(),
        chain_hash: store.chain_hash(),
        first_retained_index: store.first_retained_index(),
        keys,
        bytes,
        categories,
        largest_values: largest.into_iter().map(|(Reverse(len), key)| (len, key)).collect(),
        verification,
        dumped,
        raft: crate::consensus::summarize(&store.raft_records()?)
            .map_err(|e| InspectError::Failed(format!("reading the Raft state: {e}")))?,
    })
}

/// Decodes the retained log from its first entry to the applied index and checks that it chains
/// (see the module doc); stops at the first mismatch.
fn check_chain(store: &Store) -> Result<ChainCheck, InspectError> {
    let (first, last) = (store.first_retained_index(), store.applied_index());
    if first > last {
        return Ok(ChainCheck::Empty);
    }
    // The hash entry `first` must name as its predecessor, when known: genesis for entry 1.
    let mut prev: Option<ChainHash> = (first == 1).then_some(ChainHash::GENESIS);
    let mut expected = first;
    let mut broken = None;
    store.scan_log_records(first, &mut |key, compressed| {
        if expected > last {
            return false; // entries past the head are not the head's
        }
        let fail = |reason: String| Some(ChainCheck::Broken { index: expected, reason });
        let index = key.try_into().map(u64::from_be_bytes).ok();
        if index != Some(expected) {
            broken = fail(match index {
                Some(index) => format!("missing: the next entry held is {index}"),
                None => format!("a log key of {} bytes", key.len()),
            });
            return false;
        }
        let entry = match LogEntry::decompress(compressed) {
            Ok(entry) => entry,
            Err(e) => {
                broken = fail(format!("does not decode: {e}"));
                return false;
            }
        };
        if entry.index != expected {
            broken = fail(format!("holds entry {} under its key", entry.index));
        } else if entry.db_id != store.db_id() {
            broken = fail(format!("is for database {}", entry.db_id));
        } else if let Some(prev) = prev
            && entry.prev_hash != prev
        {
            broken = fail(format!(
                "names previous hash {} but entry {} hashes to {}",
                entry.prev_hash.to_hex(),
                expected - 1,
                prev.to_hex()
            ));
        }
        if broken.is_some() {
            return false;
        }
        prev = Some(entry.hash);
        expected += 1;
        true
    })?;
    if let Some(broken) = broken {
        return Ok(broken);
    }
    if expected <= last {
        return Ok(ChainCheck::Broken {
            index: expected,
            reason: format!("missing: the log ends at {}", expected - 1),
        });
    }
    if prev != Some(store.chain_hash()) {
        return Ok(ChainCheck::Broken {
            index: last,
            reason: format!(
                "hashes to {}, but the head's chain hash is {}",
                prev.map(|h| h.to_hex()).unwrap_or_default(),
                store.chain_hash().to_hex()
            ),
        });
    }
    Ok(ChainCheck::Verified { first, last })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_is_exact_and_leaves_printable_bytes_alone() {
        assert_eq!(encode(b"cfg:zone-1"), "cfg:zone-1");
        assert_eq!(encode(b"a b\tc\n%\x00\xff~!"), "a%20b%09c%0A%25%00%FF~!");
        let all: Vec<u8> = (0..=255).collect();
        let decoded: Vec<u8> = percent_encoding::percent_decode_str(&encode(&all)).collect();
        assert_eq!(decoded, all);
    }
}
