//! `qsim history NIGHTS`: a folder of nights (each a subfolder holding the `summary.json` that
//! `qsim merge` stamped with its date and build) read as one story. Prints what changed — the
//! latest night, failure groups new, back or gone, pairs slower or passing less, probes no
//! longer reached — and writes `index.html` and `history.json` into `--out`. Exit 0 when the page
//! is written, 2 when the nights cannot be read (the file and what was wrong named). Whether a
//! night is good is the merge's to judge (`--known`), not the history's.

use std::path::Path;
use std::process::ExitCode;

use qs_reports::history::{History, load_nights, write_history};
use qs_sim::exit;

pub fn history(nights_dir: &Path, out: &Path) -> ExitCode {
    let (nights, skipped) = match load_nights(nights_dir) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("qsim history: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    for folder in &skipped {
        eprintln!("qsim history: skipped {}: no summary.json", nights_dir.join(folder).display());
    }
    let history = History::of(&nights);
    for line in history.headlines() {
        println!("{line}");
    }
    match write_history(&history, out) {
        Ok(page) => {
            println!("page       {}", page.display());
            ExitCode::from(exit::PASS)
        }
        Err(e) => {
            eprintln!("qsim history: {e}");
            ExitCode::from(exit::USAGE)
        }
    }
}
