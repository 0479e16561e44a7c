//! The node's integration tests: one test binary, so RocksDB and the rest of the node are linked
//! once for all of them rather than once per file. Each file here is a module; a module that
//! needs one build says so with its own `#![cfg(...)]` (`simulated` only with `--cfg madsim`,
//! the real processes and sockets only without), so the binary builds either way.
//!
//! Run: `cargo test -p qs-node --test integration` (a module alone: `… --test integration
//! cluster::`); under the simulator's build, `RUSTFLAGS="--cfg madsim" cargo test -p qs-node
//! --test integration --target-dir target/madsim simulated::` (what `ci/test.sh` runs).

// Real processes, sockets and helpers for them: the tokio build only, as every module using
// them is.
#[cfg(not(madsim))]
mod common;

mod chain;
mod cluster;
mod connections;
mod corruption;
mod crash;
mod inspect;
mod logs;
mod membership;
mod memcached_protocol;
mod model;
mod refusals;
mod replication_frames;
mod resources;
mod root_group;
mod shipped;
mod shutdown;
mod simulated;
mod simulated_raft;
mod simulated_tls;
mod snapshot;
mod tls;
