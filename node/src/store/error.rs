//! What store operations fail with. [`StoreError::is_damage`] tells damage (a value, a log
//! entry or an engine block that no longer verifies) from every other failure: damage is what
//! a replica heals from by re-bootstrapping.

use super::EngineError;
use super::{STORE_FORMAT_VERSION, snapshot};
use crate::entry::{ChainHash, DatabaseId, EntryError};

/// Why an entry was refused by `apply`. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyRefusal {
    #[error("entry {found} is out of order: expected index {expected} (gap, repeat or reorder)")]
    IndexOutOfOrder { expected: u64, found: u64 },
    #[error("entry {index} is for database {found}, but this store holds database {expected}")]
    WrongDatabase { index: u64, expected: DatabaseId, found: DatabaseId },
    #[error("entry {index} does not chain: its previous hash is {found:?}, this store's chain hash is {expected:?}")]
    ChainMismatch { index: u64, expected: ChainHash, found: ChainHash },
    #[error("entry {index} is damaged: {source}")]
    BadEntry {
        index: u64,
        #[source]
        source: EntryError,
    },
}

/// Everything a store operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("refused: {0}")]
    Refused(#[from] ApplyRefusal),
    #[error("checksum mismatch reading key {key}: the stored value is damaged and was not returned")]
    Checksum { key: String },
    #[error("reading key {key}: {source}")]
    CorruptRead {
        key: String,
        #[source]
        source: EngineError,
    },
    #[error("log entry {index} in the store is damaged: {reason}")]
    CorruptLog { index: u64, reason: String },
    #[error("store metadata is damaged: {0}")]
    CorruptMeta(String),
    #[error("{location} holds database {found}, not {expected}")]
    WrongDatabase { location: String, expected: DatabaseId, found: DatabaseId },
    /// A read-only open ([`Store::open_read_only`](super::Store::open_read_only)) found no store there; `found` says what is.
    #[error("{location}: no store to open: found {found}")]
    NotAStore { location: String, found: String },
    #[error("{location} has store format version {found}; this build reads version {STORE_FORMAT_VERSION}")]
    UnknownFormat { location: String, found: u64 },
    /// A commit failed and its outcome is unknown: no change runs until the store is reopened
    /// ([`Store::settle`](super::Store::settle)).
    #[error("{location}: a commit failed ({why}); the store must be reopened before it changes again")]
    Unsettled { location: String, why: String },
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl StoreError {
    /// Whether this is damage to the store's own data: a value failing its checksum, a log entry
    /// that no longer decodes or verifies, metadata that no longer parses, or a block the engine
    /// found corrupt (a RocksDB block checksum, a damaged LMDB page). A replica that meets damage
    /// re-bootstraps; every other error (a refused entry, a full disk, a closed engine) is not
    /// healed by replacing the data.
    pub fn is_damage(&self) -> bool {
        match self {
            StoreError::Checksum { .. }
            | StoreError::CorruptRead { .. }
            | StoreError::CorruptLog { .. }
            | StoreError::CorruptMeta(_)
            | StoreError::Engine(EngineError::Corruption { .. }) => true,
            StoreError::Refused(_)
            | StoreError::WrongDatabase { .. }
            | StoreError::NotAStore { .. }
            | StoreError::UnknownFormat { .. }
            | StoreError::Unsettled { .. }
            | StoreError::Snapshot(_)
            | StoreError::Engine(_) => false,
        }
    }
}
