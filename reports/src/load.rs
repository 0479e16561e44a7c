//! Reading a run folder and a sweep folder from disk.
//!
//! Guarantees: a missing file, an unreadable file, a file over [`MAX_INPUT_BYTES`], bad JSON (with
//! its line and column) and a bad trace line (with its line number) are each a [`ReportError`]
//! naming the file; nothing here panics on input.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::ReportError;
use crate::schema::{self, Event, RunSummary, SweepSummary};

/// The largest input file a report reads. The reference world (40 nodes, ten simulated minutes)
/// writes an 11 MB trace; 1 GiB is a run a hundred times longer, and keeps a report from eating
/// the machine's memory on a file that is not a trace at all.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

pub const TRACE_FILE: &str = "trace.jsonl";
pub const SUMMARY_FILE: &str = "summary.json";
pub const REPORT_FILE: &str = "report.html";

fn read_text(path: &Path, what: &'static str) -> Result<String, ReportError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReportError::Missing { path: path.to_path_buf(), what });
        }
        Err(source) => return Err(ReportError::Read { path: path.to_path_buf(), source }),
    };
    if meta.len() > MAX_INPUT_BYTES {
        return Err(ReportError::TooLarge { path: path.to_path_buf(), max: MAX_INPUT_BYTES, actual: meta.len() });
    }
    std::fs::read_to_string(path).map_err(|source| ReportError::Read { path: path.to_path_buf(), source })
}

fn read_json<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<T, ReportError> {
    let text = read_text(path, what)?;
    serde_json::from_str(&text).map_err(|e| ReportError::BadJson {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// A gzipped sweep summary (`summary.json.gz`, as the nightly history keeps them), decompressed
/// to at most [`MAX_INPUT_BYTES`].
pub fn sweep_summary_gz(path: &Path) -> Result<SweepSummary, ReportError> {
    use std::io::Read;
    let what = "a night's summary, gzipped by ci/nightly-history.sh";
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReportError::Missing { path: path.to_path_buf(), what });
        }
        Err(source) => return Err(ReportError::Read { path: path.to_path_buf(), source }),
    };
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(file)
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|source| ReportError::Read { path: path.to_path_buf(), source })?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(ReportError::TooLarge {
            path: path.to_path_buf(),
            max: MAX_INPUT_BYTES,
            actual: text.len() as u64,
        });
    }
    serde_json::from_slice(&text).map_err(|e| ReportError::BadJson {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// `run_dir/summary.json`.
pub fn run_summary(run_dir: &Path) -> Result<RunSummary, ReportError> {
    read_json(&run_dir.join(SUMMARY_FILE), "the run's summary, written at the end of `qsim run`")
}

/// `run_dir/trace.jsonl`, every line an event.
pub fn trace(run_dir: &Path) -> Result<Vec<Event>, ReportError> {
    let path = run_dir.join(TRACE_FILE);
    let text = read_text(&path, "the run's trace, written by `qsim run --out`")?;
    schema::parse_trace(&text).map_err(|message| ReportError::BadTrace { path, message })
}

/// A trace file's text, within [`MAX_INPUT_BYTES`].
pub fn read_trace_text(path: &Path) -> Result<String, ReportError> {
    read_text(path, "a run's trace, written by `qsim run --out`")
}

/// `sweep_dir/summary.json`.
pub fn sweep_summary(sweep_dir: &Path) -> Result<SweepSummary, ReportError> {
    read_json(&sweep_dir.join(SUMMARY_FILE), "the sweep's summary, written at the end of `qsim sweep`")
}

/// Writes `dir/report.html`, returning its path.
pub fn write_report(dir: &Path, html: &str) -> Result<PathBuf, ReportError> {
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, html).map_err(|source| ReportError::Write { path: path.clone(), source })?;
    Ok(path)
}
