//! What can go wrong while building a report, each error naming the file and what was wrong.
//!
//! Guarantee: every message is complete on its own — a user who reads only the error knows which
//! file to look at and at which line (for a trace), without a backtrace.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An input file the report needs does not exist.
    #[error("{}: not found ({what})", path.display())]
    Missing { path: PathBuf, what: &'static str },
    /// An input file exists but could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// An input file is larger than a report will read (see [`crate::load::MAX_INPUT_BYTES`]).
    #[error("{}: {actual} bytes, more than the {max} a report reads", path.display())]
    TooLarge { path: PathBuf, max: u64, actual: u64 },
    /// A summary file is not the JSON the schema describes.
    #[error("{}: bad JSON at line {line}, column {column}: {message}", path.display())]
    BadJson { path: PathBuf, line: usize, column: usize, message: String },
    /// A trace line is not an event; `message` starts with `trace line N:`.
    #[error("{}: {message}", path.display())]
    BadTrace { path: PathBuf, message: String },
    /// The report could not be written.
    #[error("{}: cannot write the report: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}
