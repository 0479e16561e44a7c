//! Hard limits on everything the log and the store accept.
//!
//! Each limit is checked where input enters (the root's write path, the entry decoder, `apply`),
//! and input over a limit is refused with [`LimitExceeded`], which names the limit. Nothing is
//! truncated or dropped silently.

use std::fmt;

/// Longest key, in bytes. Every key must be readable over the memcached text protocol on the
/// read path, and memcached caps keys at 250 bytes. (LMDB's own default cap is 511.)
pub const KEY_BYTES_MAX: usize = 250;

/// Largest value, in bytes. memcached's default item size limit is 1 MiB, and the seed's LMDB
/// fragmentation pain came from large values needing long contiguous runs of free pages.
pub const VALUE_BYTES_MAX: usize = 1 << 20;

/// Most operations in one log entry. Bounds the work (and the transaction) a replica must do to
/// apply one entry, and the allocation the decoder makes from an op count it read off the wire.
pub const OPS_PER_ENTRY_MAX: usize = 10_000;

/// Largest encoded (uncompressed) log entry, in bytes. Bounds a replication frame and the
/// decompression buffer. One maximal operation (key + 1 MiB value) must fit, with room to spare.
pub const ENTRY_BYTES_MAX: usize = 4 << 20;

/// Largest HTTP request body the root's API reads: one maximal value plus framing, or a batch of
/// small writes. Within one Raft proposal (asserted beside `root::group`'s proposal limit).
pub const REQUEST_BODY_BYTES_MAX: usize = 2 << 20;

/// Most log entries one `collect_garbage` pass removes, so one pass is one bounded transaction;
/// a store far behind on collection catches up over several passes.
pub const GC_ENTRIES_PER_PASS_MAX: u64 = 100_000;

/// Input that is over one of the limits above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded {
    /// Name of the limit, as the constant is named (e.g. `KEY_BYTES_MAX`).
    pub limit: &'static str,
    /// The limit's value.
    pub max: usize,
    /// What the input had.
    pub actual: usize,
}

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {} but the limit {} is {}", self.what(), self.actual, self.limit, self.max)
    }
}

impl LimitExceeded {
    fn what(&self) -> &'static str {
        match self.limit {
            "KEY_BYTES_MAX" => "key length",
            "VALUE_BYTES_MAX" => "value length",
            "OPS_PER_ENTRY_MAX" => "operation count",
            "ENTRY_BYTES_MAX" => "encoded entry size",
            _ => "size",
        }
    }
}

impl std::error::Error for LimitExceeded {}

pub(crate) fn check(limit: &'static str, max: usize, actual: usize) -> Result<(), LimitExceeded> {
    if actual > max { Err(LimitExceeded { limit, max, actual }) } else { Ok(()) }
}
