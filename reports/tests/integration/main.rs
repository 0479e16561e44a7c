//! The report tests: one test binary, each file here a module, with the helpers in `common`.
//!
//! Run: `cargo test -p qs-reports --test integration` (a module alone: `… --test integration
//! escaping::`). `chromium` opens reports in headless Chromium, which must be installed
//! (`ci/system-deps.sh` installs it when `QSIM_WITH_CHROMIUM=1`, as `ci/test.sh` sets).

mod common;

mod bad_input;
mod chromium;
mod escaping;
mod run_report;
mod sweep_report;
