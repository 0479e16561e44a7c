//! The real `qs-node` process's logs (not compiled under `--cfg madsim`: the simulator installs
//! its own subscriber, which turns the node's `qs::*` events into its trace).
//!
//! Guarantees:
//! - Logs go to standard error, one event per line, in the [`LogFormat`] asked for: `text`
//!   (tracing-subscriber's human format) or `json` (one JSON object per line with the same
//!   content: `timestamp`, `level`, `target`, the event's `fields` — `message` among them — and
//!   the spans it is in).
//! - Colour codes only on a terminal: text is coloured only when standard error is a terminal
//!   and `NO_COLOR` is unset, so a file, a pipe or a log shipper gets plain text. JSON is never
//!   coloured.
//! - Levels come from `RUST_LOG` (tracing-subscriber's `EnvFilter` syntax: `warn`,
//!   `info,qs_node::replication=debug`, ...); `QS_LOG`, the name earlier versions read, is still
//!   read and wins when both are set. Unset: `info`. A value that does not parse is refused,
//!   naming the variable, rather than silently ignored.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines; coloured only on a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

/// The variables that set the levels, in the order they are read: the first one set is used.
pub const LEVEL_VARIABLES: [&str; 2] = ["QS_LOG", "RUST_LOG"];

/// The level filter when no variable is set.
pub const LEVEL_DEFAULT: &str = "info";

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LogSetupError {
    #[error("environment variable {variable}={value:?} is not a log filter: {reason}")]
    BadFilter { variable: &'static str, value: String, reason: String },
    #[error("environment variable {variable} is not valid UTF-8")]
    NotUnicode { variable: &'static str },
}

/// The level filter from the environment (see the module doc).
pub fn filter_from_env() -> Result<EnvFilter, LogSetupError> {
    filter_from(std::env::var)
}

/// The level filter from `lookup` (the environment, or a test's map).
pub fn filter_from(
    lookup: impl Fn(&'static str) -> Result<String, std::env::VarError>,
) -> Result<EnvFilter, LogSetupError> {
    for variable in LEVEL_VARIABLES {
        match lookup(variable) {
            Ok(value) => {
                return EnvFilter::builder().parse(&value).map_err(|e| LogSetupError::BadFilter {
                    variable,
                    value,
                    reason: e.to_string(),
                });
            }
            Err(std::env::VarError::NotPresent) => {}
            Err(std::env::VarError::NotUnicode(_)) => return Err(LogSetupError::NotUnicode { variable }),
        }
    }
    Ok(EnvFilter::new(LEVEL_DEFAULT))
}

/// Whether text logs are coloured: standard error is a terminal and `NO_COLOR` is unset
/// (<https://no-color.org>).
pub fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the process's subscriber: `format` on standard error, levels from the environment.
pub fn init(format: LogFormat) -> Result<(), LogSetupError> {
    let filter = filter_from_env()?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(colour()).init(),
        LogFormat::Json => builder.json().with_ansi(false).with_current_span(true).with_span_list(true).init(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::env::VarError;

    use super::*;

    fn filter(vars: &[(&'static str, &str)]) -> Result<String, LogSetupError> {
        let vars: BTreeMap<&str, String> = vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
        filter_from(|name| vars.get(name).cloned().ok_or(VarError::NotPresent)).map(|f| f.to_string())
    }

    #[test]
    fn reads_rust_log_and_lets_qs_log_win() {
        assert_eq!(filter(&[]).unwrap(), "info");
        assert_eq!(filter(&[("RUST_LOG", "warn")]).unwrap(), "warn");
        assert_eq!(filter(&[("RUST_LOG", "warn"), ("QS_LOG", "debug")]).unwrap(), "debug");
        assert_eq!(
            filter(&[("RUST_LOG", "info,qs_node::replication=debug")]).unwrap(),
            "qs_node::replication=debug,info"
        );
    }

    #[test]
    fn refuses_a_filter_that_does_not_parse_naming_the_variable() {
        let err = filter(&[("RUST_LOG", "qs_node=loud")]).unwrap_err().to_string();
        assert!(err.contains("RUST_LOG") && err.contains("qs_node=loud"), "{err}");
        let err = filter(&[("QS_LOG", "[unclosed")]).unwrap_err().to_string();
        assert!(err.contains("QS_LOG"), "{err}");
    }
}
