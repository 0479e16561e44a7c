//! qs-reports: HTML reports with plots for qsim runs and sweeps.
//!
//! Module map:
//! - [`schema`]: the trace and summary files a run and a sweep write — the one definition the
//!   simulator writes and the reports read.
//! - [`load`]: reading run and sweep folders; every failure a [`ReportError`] naming the file.
//! - [`html`]: escaping, the page shell with its inline style sheet, number formatting.
//! - [`series`]: gap splitting and downsampling (min/max per bucket, per-tier spreads).
//! - [`chart`]: plotters SVG charts on one shared time axis; lane charts; histograms.
//! - [`facts`]: what a run's summary and trace say per node, per fault, per violation.
//! - [`run`]: the run report page ([`render_run`], [`write_run_report`]); its per-node charts
//!   are the list [`run::NODE_METRICS`].
//! - [`sweep`]: the sweep report page ([`render_sweep`], [`write_sweep_report`]).
//! - [`testkit`]: deterministic synthetic runs (every event kind) for tests and the benchmark.

pub mod chart;
mod error;
pub mod facts;
pub mod html;
pub mod load;
pub mod run;
pub mod schema;
pub mod series;
pub mod sweep;
pub mod testkit;

pub use error::ReportError;
pub use run::{render_run, write_run_report};
pub use sweep::{render_sweep, write_sweep_report};
