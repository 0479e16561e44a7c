//! The files a run and a sweep leave behind: the one definition both the simulator (writer) and
//! the reports (reader) use.
//!
//! A run folder holds `trace.jsonl` (one [`Event`] per line, in simulated-time order) and
//! `summary.json` (a [`RunSummary`]). A sweep folder holds `summary.json` (a [`SweepSummary`])
//! and one run folder per (scenario, seed) under `<scenario>/seed-<seed>/`.
//!
//! Compatibility: fields are only ever added, with `#[serde(default)]`, so a report can be rebuilt
//! from the trace of an older run. Serialization is canonical (fields in declaration order, no
//! maps with unordered keys), which the simulator's trace digest relies on.
//!
//! - `trace.rs`: `trace.jsonl`'s events and the kinds they name (faults, probes, phases);
//! - `run.rs`: a run's `summary.json`, with its verdicts, topology, sizing and key categories;
//! - `sweep.rs`: a sweep's `summary.json`, with each run's outcome, failure groups and known
//!   failures.

mod run;
mod sweep;
mod trace;

pub use run::*;
pub use sweep::*;
pub use trace::*;
