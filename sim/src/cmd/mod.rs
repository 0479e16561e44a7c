//! The `qsim` binary's subcommands (the binary's own modules, not part of the `qs_sim`
//! library): each takes its parsed arguments, prints data to stdout and logs to stderr, and
//! returns the process's exit code (`qs_sim::exit`).
//!
//! - `run`: one scenario under one seed;
//! - `real`: one scenario on real `qs-node` processes, under one seed or several;
//! - `sweep`: `qsim sweep`, `qsim merge` and `qsim nightly`;
//! - `explore`: `qsim explore`, a budget of runs of a swarm scenario chosen by probe rarity;
//! - `shrink`: a failing run to the smallest scenario that fails the same way;
//! - `diff`: `qsim diff`, two runs side by side;
//! - `history`: `qsim history`, a folder of nights across time;
//! - `tools`: `qsim report`, `qsim list`, `qsim sizing`.

pub mod diff;
pub mod explore;
pub mod history;
pub mod real;
pub mod run;
pub mod shrink;
pub mod sweep;
pub mod tools;

use std::path::Path;

use qs_node::EngineKind;
use qs_sim::scenario::Scenario;

/// Loads a scenario file and applies the command line's engine, if any. A RocksDB run in a
/// build without RocksDB (qs-sim's `rocksdb` feature) is refused here, before anything runs.
pub fn load(path: &Path, engine: Option<EngineKind>) -> Result<Scenario, String> {
    let mut scenario = Scenario::load(path).map_err(|e| e.to_string())?;
    if let Some(engine) = engine {
        scenario.override_engine(engine);
    }
    if scenario.engine() == EngineKind::Rocksdb && !cfg!(feature = "rocksdb") {
        return Err(format!(
            "{}: runs on rocksdb, and this qsim was built without RocksDB; run it through ./qsim, which builds \
             RocksDB in when a run needs it (QSIM_ROCKSDB=always builds it in every time)",
            path.display()
        ));
    }
    Ok(scenario)
}
