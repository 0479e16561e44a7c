//! The nodes' own log under the simulator (`qsim run --log`): every `tracing` event the node
//! code emits — the lines an operator reads from `qs-node` in production — filtered by
//! `RUST_LOG` (`info` when unset), one line each in the run folder's `nodes.log`, stamped with
//! the simulated time (the trace's clock, so a line sits beside the trace's events) and the
//! node it came from (madsim's `node` span names it).
//!
//! Guarantees: writing the log changes nothing in the run — no simulated time passes, no
//! random draw is made, and the trace's digest is the same with and without it (tested).

use std::fs::File;
use std::io::LineWriter;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// The log's file name in the run folder.
pub const FILE_NAME: &str = "nodes.log";

/// Each line's time: seconds of simulated time since the run started, to the millisecond.
struct SimulatedTime;

impl FormatTime for SimulatedTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        let ms = crate::world::now_ms();
        write!(w, "{:>4}.{:03}s", ms / 1000, ms % 1000)
    }
}

/// Sends this process's `tracing` events to `out`/[`FILE_NAME`] from now on; returns its path.
/// Once per process: a second call fails (the subscriber is global).
pub fn install(out: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let path = out.join(FILE_NAME);
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Line by line: a run that panics or is killed at its budget keeps every line before.
        .with_writer(Mutex::new(LineWriter::new(file)))
        .with_ansi(false)
        .with_timer(SimulatedTime)
        .try_init()
        .map_err(|e| format!("installing the node log: {e}"))?;
    Ok(path)
}
