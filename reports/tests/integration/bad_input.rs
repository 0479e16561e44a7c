//! Bad input is an error that names the file and what was wrong — never a panic, never a page.

use crate::common::*;
use qs_reports::ReportError;

#[test]
fn missing_summary_names_the_file() {
    let (_tmp, dir) = copy_fixture("quickstart-seed-1");
    std::fs::remove_file(dir.join("summary.json")).unwrap();
    let err = qs_reports::write_run_report(&dir).unwrap_err();
    assert!(matches!(err, ReportError::Missing { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.starts_with(&dir.join("summary.json").display().to_string()), "{msg}");
    assert!(msg.contains("not found"), "{msg}");
    assert!(!dir.join("report.html").exists(), "no page for a broken run");
}

#[test]
fn missing_trace_names_the_file() {
    let (_tmp, dir) = copy_fixture("quickstart-seed-1");
    std::fs::remove_file(dir.join("trace.jsonl")).unwrap();
    let msg = qs_reports::write_run_report(&dir).unwrap_err().to_string();
    assert!(msg.contains("trace.jsonl: not found"), "{msg}");
}

#[test]
fn corrupt_trace_line_names_file_and_line() {
    let (_tmp, dir) = copy_fixture("quickstart-seed-1");
    let trace = dir.join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[41] = "{\"event\":\"applied\",\"at_ms\":\"soon\"}";
    std::fs::write(&trace, lines.join("\n")).unwrap();
    let err = qs_reports::write_run_report(&dir).unwrap_err();
    assert!(matches!(err, ReportError::BadTrace { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("{}: trace line 42:", trace.display())), "{msg}");
}

#[test]
fn bad_summary_json_names_file_line_and_column() {
    let (_tmp, dir) = copy_fixture("bug-gc-skip-seed-1");
    std::fs::write(dir.join("summary.json"), "{\n  \"scenario\": \"x\",\n  \"seed\": \"one\"\n}").unwrap();
    let msg = qs_reports::write_run_report(&dir).unwrap_err().to_string();
    assert!(msg.contains("summary.json: bad JSON at line 3"), "{msg}");
}

#[test]
fn missing_sweep_summary_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let msg = qs_reports::write_sweep_report(tmp.path()).unwrap_err().to_string();
    assert!(msg.contains("summary.json: not found (the sweep's summary"), "{msg}");
}
