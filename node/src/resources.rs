//! The node's memory budget, the way fdbserver's `--memory` works: the real `qs-node` process
//! samples its own resident set size once a second and, past `[memory] limit_bytes`, says why
//! and exits with [`EXIT_MEMORY_LIMIT`] so that its supervisor restarts it.
//!
//! Guarantees:
//! - Every sample also refreshes the memory and cache gauges of `/metrics` (resident size, the
//!   limit, what the engine accounts for, cache hits and misses), so they are never older than
//!   one [`SAMPLE_INTERVAL`].
//! - Past the limit, [`watch_memory`] returns an [`OverLimit`] that names the resident size, the
//!   limit and every accounted component — the engine's, and the node's connection and write
//!   batch `buffers` ([`NodeState::buffer_bytes`]); the binary logs it and exits.
//! - A limit is never silently unenforced: if the resident size cannot be read (no `/proc`),
//!   [`watch_memory`] fails at its first sample and the node does not run.
//!
//! This reads the real process, so it exists only outside the simulator (`--cfg madsim`
//! leaves the module out): in a simulated run every node shares one process, and reading it
//! would make the run depend on the machine.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytesize::ByteSize;

use crate::state::NodeState;
use crate::store::{EngineResources, MemoryComponent};

/// Exit code of a node that went past its memory limit: fdbserver's `FDB_EXIT_NO_MEM` (20), so
/// supervisors that already treat it as "out of memory, restart" need no new rule. Distinct from
/// 1 (failed to start) and 2 (bad arguments or configuration).
pub const EXIT_MEMORY_LIMIT: u8 = 20;

/// How often the resident size is sampled: fdbserver's memory monitor checks once a second too;
/// often enough that a node cannot grow far past its limit between two checks, rarely enough
/// that reading `/proc` costs nothing measurable.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// One sample that was over the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverLimit {
    /// Resident set size of the process.
    pub resident_bytes: u64,
    /// `memory.limit_bytes`.
    pub limit_bytes: u64,
    /// The components the engine accounts for, with their bytes.
    pub accounted: Vec<(MemoryComponent, u64)>,
}

impl fmt::Display for OverLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "resident memory (RSS) {} ({} bytes) is over the limit memory.limit_bytes = {} ({} bytes); accounted: ",
            ByteSize(self.resident_bytes),
            self.resident_bytes,
            ByteSize(self.limit_bytes),
            self.limit_bytes
        )?;
        if self.accounted.is_empty() {
            f.write_str("nothing")?;
        }
        for (i, (component, bytes)) in self.accounted.iter().enumerate() {
            let separator = if i == 0 { "" } else { ", " };
            write!(f, "{separator}{component} {}", ByteSize(*bytes))?;
        }
        let accounted: u64 = self.accounted.iter().map(|(_, bytes)| bytes).sum();
        write!(
            f,
            "; unaccounted {} (code, heap, thread stacks); exiting with code {EXIT_MEMORY_LIMIT} so a supervisor restarts the node",
            ByteSize(self.resident_bytes.saturating_sub(accounted))
        )
    }
}

/// Why the memory limit cannot be enforced.
#[derive(Debug, thiserror::Error)]
pub enum MemoryWatchError {
    #[error("memory.limit_bytes is set, but this process's resident memory cannot be read: {0}")]
    Unreadable(String),
}

/// Resident set size of this process, from `/proc/self/statm`.
#[cfg(target_os = "linux")]
pub fn resident_bytes() -> Result<u64, String> {
    let statm = procfs::process::Process::myself().and_then(|me| me.statm()).map_err(|e| e.to_string())?;
    Ok(statm.resident.saturating_mul(procfs::page_size()))
}

/// Resident set size of this process: not measurable without `/proc`.
#[cfg(not(target_os = "linux"))]
pub fn resident_bytes() -> Result<u64, String> {
    Err("resident memory is read from /proc, which this system does not have".into())
}

/// Samples the process once every [`SAMPLE_INTERVAL`] (the first at once), refreshing the memory
/// gauges of `state.metrics`, until its resident size is over `limit_bytes`; without a limit it
/// never returns. Run it only in the real node process (see the module doc).
pub async fn watch_memory(state: Arc<NodeState>, limit_bytes: Option<u64>) -> Result<OverLimit, MemoryWatchError> {
    let mut ticks = tokio::time::interval(SAMPLE_INTERVAL);
    // A late tick (a busy machine) is not made up for with a burst of samples.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warned = false;
    loop {
        ticks.tick().await;
        let resident = resident_bytes();
        let engine: EngineResources = state.read_store(|store| store.resources());
        let accounted = accounted(&engine, state.buffer_bytes());
        state.metrics.record_memory(resident.as_ref().ok().copied(), limit_bytes, &accounted, &engine);
        match (resident, limit_bytes) {
            (Ok(resident_bytes), Some(limit_bytes)) if resident_bytes > limit_bytes => {
                return Ok(OverLimit { resident_bytes, limit_bytes, accounted });
            }
            (Err(e), Some(_)) => return Err(MemoryWatchError::Unreadable(e)),
            (Err(e), None) if !warned => {
                tracing::warn!(error = %e, "resident memory cannot be read; the resident_bytes metric stays 0");
                warned = true;
            }
            _ => {}
        }
    }
}

/// Every accounted component: the engine's, then the node's [`MemoryComponent::Buffers`]
/// (always present: its counters are the node's own, so it is always measured).
fn accounted(engine: &EngineResources, buffer_bytes: u64) -> Vec<(MemoryComponent, u64)> {
    let mut accounted = engine.accounted();
    accounted.push((MemoryComponent::Buffers, buffer_bytes));
    accounted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_resident_size_limit_and_components() {
        let over = OverLimit {
            resident_bytes: 30 << 20,
            limit_bytes: 1 << 20,
            accounted: vec![
                (MemoryComponent::BlockCache, 256 << 10),
                (MemoryComponent::Memtables, 2 << 20),
                (MemoryComponent::Buffers, 48 << 10),
            ],
        };
        let text = over.to_string();
        for needle in [
            "RSS",
            "30.0 MiB",
            "memory.limit_bytes",
            "1.0 MiB",
            "block_cache 256.0 KiB",
            "memtables 2.0 MiB",
            "buffers 48.0 KiB",
            "code 20",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from: {text}");
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn reads_this_process_resident_size() {
        let resident = resident_bytes().unwrap();
        // A test binary is at least a few pages resident and far below a terabyte.
        assert!((64 << 10..1 << 40).contains(&resident), "{resident}");
    }
}
