//! What failed in a step of `qsim real` (a tool, a process, a request, a file). Most end the
//! run; a request that fails while the run waits for convergence is one of its pending reasons.
//!
//! Guarantees: each variant names what failed and where (the node, the command with its
//! arguments, the address and path, the file and line), and carries the error it came from as
//! its `source` where there is one. Its message alone is the whole report, the source's text
//! included, as the project's other errors are: `qsim` prints messages, not source chains.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::Signal;

use crate::scenario::FaultKind;

/// A failure of a real run's harness.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    /// A fault of the plan this machine cannot inject, and skipping was not asked for.
    #[error("fault `{kind}` on {target} at {at:?}: {why} (--skip-unsupported runs the scenario without it)")]
    Unsupported { kind: FaultKind, target: String, at: Duration, why: String },

    /// This `qsim`'s own path, to re-run it inside a network namespace.
    #[error("finding this qsim's path: {source}")]
    CurrentExe { source: std::io::Error },
    /// `setpriv … unshare --net …`, re-running this `qsim` in a namespace, could not be run.
    #[error("running `setpriv` and `unshare --net` (util-linux): {source}")]
    Namespace { source: std::io::Error },
    /// A network tool (`ip`, `nft`, `tc`) could not be started, fed or waited for.
    #[error("`{program} {}`: {step}: {source}", args.join(" "))]
    CommandIo { program: String, args: Vec<String>, step: CommandStep, source: std::io::Error },
    /// A network tool ran and failed.
    #[error("`{program} {}` failed ({status}): {stderr}", args.join(" "))]
    Command { program: String, args: Vec<String>, status: ExitStatus, stderr: String },

    /// A node name the run does not have.
    #[error("no node {node}")]
    NoNode { node: String },
    /// A node's log file could not be opened (or its handle shared with the process).
    #[error("{node}'s log file {}: {source}", path.display())]
    LogFile { node: String, path: PathBuf, source: std::io::Error },
    /// A node's process could not be started.
    #[error("starting {node} ({}) through setpriv: {source}", node_bin.display())]
    Spawn { node: String, node_bin: PathBuf, source: std::io::Error },
    /// A node's process id that is no `pid_t`, so it cannot be signalled.
    #[error("{node}'s process id {pid} is not a pid_t")]
    Pid { node: String, pid: u32 },
    /// A signal (a pause, a resume, a stop) could not be sent to a node.
    #[error("signalling {node} ({signal:?}): {source}")]
    Signal { node: String, signal: Signal, source: std::io::Error },
    /// A node's process exited before it answered its first status request.
    #[error("{node} exited at start: {why}")]
    ExitedAtStart { node: String, why: String },
    /// A node's process runs but did not answer over HTTP in time.
    #[error("{node} did not answer on {http} within {waited:?}")]
    StartTimeout { node: String, http: SocketAddr, waited: Duration },

    /// An HTTP request to a node failed or its body could not be read.
    #[error("http://{address}{path}: {source}")]
    Http { address: SocketAddr, path: &'static str, source: ureq::Error },
    /// A node's `/v1/status` is not a status (not JSON, or a field missing or mistyped).
    #[error("http://{address}/v1/status: not a node's status: {source}")]
    Status { address: SocketAddr, source: serde_json::Error },
    /// A memcached `get` through the memcache client failed.
    #[error("memcached get of {key} at {address}: {source}")]
    Memcached { address: SocketAddr, key: String, source: memcache::MemcacheError },
    /// A memcached `get` over a connection of its own (a binary key) failed on the socket.
    #[error("memcached get of {key} at {address}: {source}")]
    MemcachedIo { address: SocketAddr, key: String, source: std::io::Error },
    /// A memcached `get` over a connection of its own was answered with neither a value nor a
    /// miss.
    #[error("memcached get of {key} at {address}: answered {header:?}")]
    MemcachedAnswer { address: SocketAddr, key: String, header: String },

    /// A node's events file could not be read.
    #[error("{}: {source}", path.display())]
    EventsFile { path: PathBuf, source: std::io::Error },
    /// A line of a node's events file (numbered from 1) is not an event line.
    #[error("{}:{line}: not an event line: {source}", path.display())]
    EventsLine { path: PathBuf, line: usize, source: serde_json::Error },

    /// The folder `--keep` names already holds something.
    #[error("--keep {}: not empty (a run keeps its nodes' folders in a new one)", path.display())]
    KeepNotEmpty { path: PathBuf },
    /// The folder `--keep` names could not be made.
    #[error("--keep {}: {source}", path.display())]
    Keep { path: PathBuf, source: std::io::Error },
    /// The scratch folder for the nodes' folders could not be made.
    #[error("making a scratch folder in {}: {source}", root.display())]
    Scratch { root: PathBuf, source: std::io::Error },
    /// The run's TLS certificates could not be issued or written (`certificates::write_at`
    /// reports them as text).
    #[error("the run's certificates: {0}")]
    Certificates(String),
    /// The nodes' configuration files could not be written.
    #[error("writing the nodes' configurations into {}: {source}", dir.display())]
    Configs { dir: PathBuf, source: std::io::Error },
    /// The tokio runtime the writers and readers run on could not be built.
    #[error("building the clients' runtime: {source}")]
    Runtime { source: std::io::Error },
}

/// The step at which a command could not be run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandStep {
    Start,
    WriteInput,
    Wait,
}

impl std::fmt::Display for CommandStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CommandStep::Start => "starting it",
            CommandStep::WriteInput => "writing its input",
            CommandStep::Wait => "waiting for it",
        })
    }
}
