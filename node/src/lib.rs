//! qs-node: the replicated configuration key-value store that qsim tests.
//!
//! The same code runs for real (tokio, real sockets, real LMDB/RocksDB files) and, unchanged,
//! inside the simulator (built with `--cfg madsim`, where `tokio` is madsim's deterministic
//! runtime). It never depends on the simulator.
//!
//! Module map:
//! - [`limits`]: every bound on input, as named constants with their reasons;
//! - [`entry`]: log entries, their versioned encoding, Snappy compression and the BLAKE3 hash
//!   chain;
//! - [`store`]: the store over three engines (LMDB, RocksDB, memory): atomic apply, checked
//!   reads, log retention, snapshots, stats, engine resources (cache, memory);
//! - [`connections`]: the listeners' caps, client deadlines and drain at shutdown;
//! - [`observe`]: the typed seam a node reports what it did through (the simulator's trace);
//! - `resources` (not under the simulator): the real process's memory sampler and limit;
//! - `logs` (not under the simulator): the real process's log format and levels;
//! - [`testkit`]: deterministic synthetic workloads shared by tests, crash tests and benchmarks.

pub mod clock;
pub mod config;
pub mod connections;
pub mod consensus;
pub mod entry;
pub mod fault_points;
pub mod http_api;
pub mod inspect;
pub mod limits;
// The real process's log output: never compiled into a simulated (`--cfg madsim`) build.
#[cfg(not(madsim))]
pub mod logs;
pub mod memcached;
pub mod metrics;
pub mod node;
pub mod observe;
#[cfg(not(madsim))]
pub mod operator;
pub mod replication;
// Reads the real process: never compiled into a simulated (`--cfg madsim`) build.
#[cfg(not(madsim))]
pub mod resources;
pub mod root;
pub mod state;
pub mod status;
pub mod store;
pub mod testkit;
pub mod tls;
pub mod wire;

pub use entry::{ChainHash, DatabaseId, EntryError, LogEntry, Op, StoredEntry, VerifiedEntry};
pub use store::{
    ApplyRefusal, EngineKind, EngineResources, GcOutcome, LogRead, LogReadLimits, MemDisk, MemoryComponent,
    OpenOptions, PrefixUsage, RetentionPolicy, StateDigest, Store, StoreError, StoreLocation, StoreStats,
};
