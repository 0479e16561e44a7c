//! qs-reports: HTML reports with plots for qsim runs and sweeps.
//!
//! The entry points the `qsim` CLI calls:
//! - [`write_run_report`]`(run_dir)`: reads `trace.jsonl` and `summary.json`, writes
//!   `run_dir/report.html`, returns its path;
//! - [`write_sweep_report`]`(sweep_dir)`: reads the sweep's `summary.json` (and looks at each run's
//!   folder, tolerating missing or broken ones), writes `sweep_dir/report.html` linking to each
//!   run's `report.html` by relative path;
//! - [`render_run`] and [`render_sweep`]: the same pages as strings, from data in memory.
//!
//! A page is one static HTML file: inline CSS, inline SVG charts, no script, nothing fetched, so
//! it opens from disk in any browser. HTML is built with maud, which escapes every interpolated
//! value: no string from a trace or a summary can become markup. Every error is a [`ReportError`]
//! naming the file.
//!
//! Module map:
//! - [`schema`]: the trace and summary files a run and a sweep write — the one definition the
//!   simulator writes and the reports read.
//! - [`load`]: reading run and sweep folders; every failure a [`ReportError`] naming the file.
//! - [`facts`]: what a run's summary and trace say per node, per fault, per violation.
//! - [`series`]: gap splitting and downsampling (min/max per bucket, per-tier spreads).
//! - [`chart`]: plotters SVG charts on one shared time axis; lane charts; histograms.
//! - [`html`]: the page shell with its inline style sheet, tables, badges, link segments, number
//!   formatting.
//! - [`run`]: the run report page; its per-node charts are the list [`run::NODE_METRICS`].
//! - [`sweep`]: the sweep report page.
//! - [`diff`]: two runs side by side (`qsim diff`): where the traces part, provenance, verdicts.
//! - [`history`]: a folder of nights' merged summaries across time (`qsim history`): failure groups
//!   new, gone or back, pass rate and wall time per scenario × engine, probes per night; its page.
//! - [`testkit`]: deterministic synthetic runs (every event kind) for tests and the benchmark.

pub mod chart;
pub mod diff;
mod error;
pub mod facts;
pub mod history;
pub mod html;
pub mod load;
pub mod run;
pub mod schema;
pub mod series;
pub mod sizing;
pub mod sweep;
pub mod testkit;

pub use error::ReportError;
pub use run::{render_run, write_run_report};
pub use sweep::{render_sweep, write_sweep_report};
