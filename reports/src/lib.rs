//! qs-reports: HTML reports with plots for qsim runs and sweeps.
//!
//! Module map:
//! - [`schema`]: the trace and summary files a run and a sweep write — the one definition the
//!   simulator writes and the reports read.

pub mod schema;
