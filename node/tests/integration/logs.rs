//! The log lines of a real `qs-node` whose standard error is a file, as under a supervisor or a
//! log shipper: no terminal colour codes in the text format; with `--log-format json`, every
//! line one JSON object with the text format's content; levels from `RUST_LOG` (and `QS_LOG`,
//! which wins); a filter that does not parse refused with exit code 2, naming the variable.
// Real processes: the tokio build on Linux.
#![cfg(all(not(madsim), target_os = "linux"))]

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::process::{NodeProcess, Ports, Role, write_config};

const PATIENCE: Duration = Duration::from_secs(60);

/// Runs a root with `args` and `env` until it serves, stops it with SIGTERM, and returns its log.
fn log_of_a_run(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports::new();
    let config = write_config(dir.path(), "root", ports, Role::Root { batch_window: "20ms" }, "");
    let mut node = NodeProcess::start(&config, ports, args, env);
    node.wait_serving(PATIENCE);
    node.signal("TERM");
    let status = node.wait_exit(PATIENCE);
    assert_eq!(status.code(), Some(0), "{}", node.log_text());
    node.log_text()
}

#[test]
fn text_logs_to_a_file_carry_no_escape_codes() {
    let log = log_of_a_run(&[], &[]);
    assert!(log.contains("qs-node serving"), "{log}");
    assert!(log.contains(" INFO "), "{log}");
    assert!(!log.contains('\u{1b}'), "escape codes in a log written to a file:\n{log:?}");
    // Colour is for terminals; even asking for it through the environment does not put it in a file.
    let log = log_of_a_run(&[], &[("CLICOLOR_FORCE", "1"), ("TERM", "xterm-256color")]);
    assert!(!log.contains('\u{1b}'), "{log:?}");
}

#[test]
fn json_logs_are_one_object_a_line_with_the_text_formats_fields() {
    let log = log_of_a_run(&["--log-format", "json"], &[]);
    let mut serving = None;
    let mut lines = 0;
    for line in log.lines() {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON object ({e}): {line:?}"));
        for field in ["timestamp", "level", "target"] {
            assert!(event[field].is_string(), "{field} missing: {line}");
        }
        assert!(event["fields"]["message"].is_string(), "no message: {line}");
        if event["fields"]["message"] == "qs-node serving" {
            serving = Some(event);
        }
        lines += 1;
    }
    assert!(lines >= 3, "{log}");
    let serving = serving.unwrap_or_else(|| panic!("no 'qs-node serving' line:\n{log}"));
    assert_eq!(serving["level"], "INFO");
    assert_eq!(serving["fields"]["node"], "root");
    assert!(serving["fields"]["http"].as_str().is_some_and(|a| a.starts_with("127.0.0.1:")), "{serving}");
    assert!(!log.contains('\u{1b}'));
}

#[test]
fn levels_come_from_rust_log_and_qs_log_wins() {
    let log = log_of_a_run(&[], &[("RUST_LOG", "warn")]);
    assert!(!log.contains(" INFO "), "RUST_LOG=warn still logged info:\n{log}");
    let log = log_of_a_run(&[], &[("RUST_LOG", "warn"), ("QS_LOG", "info")]);
    assert!(log.contains("qs-node serving"), "QS_LOG=info did not win over RUST_LOG=warn:\n{log}");
    let log = log_of_a_run(&[], &[("RUST_LOG", "warn,qs_node::node=info")]);
    assert!(log.contains("store open") && !log.contains("qs-node serving"), "{log}");
}

#[test]
fn a_filter_that_does_not_parse_is_refused_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "root", Ports::new(), Role::Root { batch_window: "20ms" }, "");
    let output = Command::new(env!("CARGO_BIN_EXE_qs-node"))
        .arg("--config")
        .arg(&config)
        .env_remove("QS_LOG")
        .env("RUST_LOG", "qs_node=chatty")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("RUST_LOG") && stderr.contains("qs_node=chatty"), "{stderr}");
    let output = Command::new(env!("CARGO_BIN_EXE_qs-node"))
        .arg("--config")
        .arg(&config)
        .args(["--log-format", "xml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--log-format") && stderr.contains("json"), "{stderr}");
}
