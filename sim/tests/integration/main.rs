//! The simulator's integration tests: one test binary, so qs-sim, the node and RocksDB are linked
//! once for all of them rather than once per file. Each file here is a module; every one of them
//! is `#![cfg(madsim)]` but `docs` (the docs' counts against the tree), so in the normal build
//! the binary holds that alone.
//!
//! Run: `RUSTFLAGS="--cfg madsim" cargo test -p qs-sim --test integration --target-dir target/madsim`
//! (a module alone: `… --test integration --target-dir target/madsim runs::`); `ci/test.sh` runs
//! them with the rest of qs-sim's tests (`cargo test -p qs-sim` in that build).

// Runs the `qsim` binary: in the simulator's build only, as every module using it is.
#[cfg(madsim)]
mod common;

mod concurrent;
mod diff;
// Not the simulator's: the docs' counts against the tree, in both builds.
mod docs;
mod explore;
mod history;
mod madsim_tcp_accepts;
mod madsim_tcp_window;
mod madsim_timers;
mod node_log;
mod page_cache;
mod regression;
mod resources;
mod runs;
mod scale;
mod shrink;
mod sweeps;
