//! `qs-node`: one node of the replicated store, on real sockets and disks.
//!
//! Usage: `qs-node --config node.toml [--log-format text|json] [--events FILE]`; and `qs-node inspect --config
//! node.toml [--verify] [--top N] [--dump CATEGORY [--out FILE]]` or `qs-node inspect --path DIR
//! [--engine E] [--database-id ID] ...`, which opens the store read-only — beside the running
//! node, if there is one — and prints what it holds (see `qs_node::inspect` for the report, the
//! dump format and its exit codes: 0 ok, 1 unreadable, 2 usage, 3 damage found, 4 no store).
//!
//! `qs-node certs ca --out DIR` and `qs-node certs node --ca DIR --name NAME --ip IP ...` issue
//! the certificates `[tls]` reads (`qs_node::tls::issue`; docs/operating.md, "TLS").
//!
//! `qs-node members --node URL` prints a root group's configuration as that member applied it;
//! with `--add ID` / `--remove ID` (repeatable) it asks the group for that membership change,
//! with the operator token from `QS_OPERATOR_TOKEN` (`[root] operator_token`), following the
//! redirect to the leader, and exits 0 once the change was made (docs/operating.md,
//! "Changing a root group's members"; `qs_node::operator`).
//!
//! Logs go to standard error (`qs_node::logs`): `text`, coloured only on a terminal, or `json`,
//! one object per line; levels from `RUST_LOG` (or `QS_LOG`), default `info`.
//!
//! `SIGTERM` or `SIGINT` shuts the node down gracefully (`Node::shutdown`): it stops accepting,
//! commits the write batch in flight and the writes already queued (refusing later ones with
//! 503), lets open connections finish within `connections.drain_timeout`, cuts what is left,
//! closes the store and exits 0. A second signal during the shutdown exits at once with code 1;
//! every acknowledged write is durable either way.
//!
//! Exit codes: 0 shut down on a signal, 2 bad arguments, configuration or log filter, 1
//! failure to start (or a second signal), 20 (`qs_node::resources::EXIT_MEMORY_LIMIT`) resident
//! memory went past `[memory] limit_bytes` (the reason is logged first; a supervisor should
//! restart the node).
//!
//! At start the binary raises its open-files soft limit to the hard limit, as Go's runtime does,
//! so that the listeners' connection caps, not the descriptor limit, are what bounds them; it
//! warns when the caps and a reserve for the store do not fit even so.
//!
//! The binary samples its own memory once a second (`qs_node::resources`): that refreshes the
//! memory and cache figures of `/metrics` and enforces the limit. Only this real process does:
//! a node inside the simulator never reads the machine's memory, so a `--cfg madsim` build of
//! this binary (which nothing runs) only serves.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use qs_node::config::NodeConfig;
use qs_node::entry::DatabaseId;
use qs_node::inspect;
use qs_node::node::Node;
use qs_node::state::NodeState;
use qs_node::store::EngineKind;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "One node of the qsim replicated key-value store",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
struct Args {
    /// The node's TOML configuration file.
    #[arg(long, required = true)]
    config: Option<PathBuf>,
    /// Log lines on standard error: text (coloured only on a terminal) or json (one object a line).
    #[cfg(not(madsim))]
    #[arg(long, value_enum, default_value_t = qs_node::logs::LogFormat::Text)]
    log_format: qs_node::logs::LogFormat,
    /// Append every apply, bootstrap, source change, probe and Raft role change to this file,
    /// one JSON object a line with the wall-clock time (`qs_node::observe::EventLine`): what
    /// `qsim real` merges into a run's trace.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Open a store read-only (beside its running node, if any) and report what it holds.
    Inspect(InspectArgs),
    /// Issue TLS certificates: a CA for one deployment, and each node's certificate.
    #[command(subcommand)]
    Certs(CertsCommand),
    /// Show a root group's members, or change them (one change at a time).
    Members(MembersArgs),
}

#[derive(clap::Args, Debug)]
struct MembersArgs {
    /// A member's HTTP API: http://HOST:PORT, or https://… with --ca.
    #[arg(long)]
    node: String,
    /// The deployment's CA certificate (PEM), to verify an https:// member.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// A member of the roster ([[root.members]]) to add as a voter; repeatable.
    #[arg(long = "add", value_name = "ID")]
    add: Vec<u64>,
    /// A voter to remove; repeatable. Replacing a member (add one, remove one) goes through
    /// joint consensus.
    #[arg(long = "remove", value_name = "ID")]
    remove: Vec<u64>,
}

#[derive(Subcommand, Debug)]
enum CertsCommand {
    /// A new CA: writes ca.pem (give it to every node as tls.ca) and ca.key (keep it off the nodes).
    Ca {
        /// Where to write ca.pem and ca.key.
        #[arg(long)]
        out: PathBuf,
        /// The CA's common name. Default: "qs-node CA" and a random suffix, so that two CAs
        /// never share a name (a verifier matches a certificate's issuer by name first).
        #[arg(long)]
        name: Option<String>,
        /// Days the CA is valid from now.
        #[arg(long, default_value_t = 3650)]
        days: u32,
    },
    /// A node certificate signed by the CA in --ca: writes <name>.pem and <name>.key into --out,
    /// replacing them if present (a rotation: the node picks them up within tls.reload_interval).
    Node {
        /// The folder holding ca.pem and ca.key.
        #[arg(long)]
        ca: PathBuf,
        /// The node's name: the certificate's common name and the files' names.
        #[arg(long)]
        name: String,
        /// An IP address peers dial this node at (its listen.replication address); repeatable.
        #[arg(long = "ip", required = true)]
        ips: Vec<std::net::IpAddr>,
        /// A DNS name clients of the HTTPS port use; repeatable.
        #[arg(long = "dns")]
        dns_names: Vec<String>,
        /// Days the certificate is valid from now.
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// Where to write the files (default: --ca).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct InspectArgs {
    /// The node's configuration file: its [storage] engine and path, and its database id.
    #[arg(long, required_unless_present = "path", conflicts_with_all = ["path", "engine", "database_id"])]
    config: Option<PathBuf>,
    /// A store directory (instead of --config).
    #[arg(long)]
    path: Option<PathBuf>,
    /// The engine of --path (lmdb | rocksdb); detected from its files when not given.
    #[arg(long, requires = "path")]
    engine: Option<EngineKind>,
    /// Refuse a --path store that holds another database.
    #[arg(long, requires = "path")]
    database_id: Option<DatabaseId>,
    /// Check every value's checksum, the head's totals and the retained log's hash chain.
    #[arg(long)]
    verify: bool,
    /// How many of the largest values to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Write the keys and values of this key category (the part of a key before its first ':').
    #[arg(long, value_name = "CATEGORY")]
    dump: Option<String>,
    /// Write the dump to this file instead of standard output.
    #[arg(long, requires = "dump")]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Some(Command::Inspect(inspect_args)) => return run_inspect(inspect_args),
        Some(Command::Certs(certs)) => return run_certs(certs),
        Some(Command::Members(members)) => return run_members(members),
        None => {}
    }
    let Some(config_path) = args.config else {
        unreachable!("clap requires --config without a subcommand");
    };
    #[cfg(not(madsim))]
    if let Err(e) = qs_node::logs::init(args.log_format) {
        eprintln!("qs-node: {e}");
        return ExitCode::from(2);
    }
    let config = match NodeConfig::load(&config_path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("qs-node: {e}");
            return ExitCode::from(2);
        }
    };
    let observer: Option<std::sync::Arc<dyn qs_node::observe::NodeObserver>> = match &args.events {
        None => None,
        Some(path) => match qs_node::observe::EventsFile::open(path) {
            Ok(file) => Some(std::sync::Arc::new(file)),
            Err(e) => {
                eprintln!("qs-node: opening the events file {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
    };
    #[cfg(not(madsim))]
    fit_open_files_limit(&config);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("qs-node: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(config, observer));
    // A task stuck in a synchronous store call (a dead disk) must not keep the process alive.
    #[cfg(not(madsim))]
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

/// `qs-node members`: prints the member's answer; exit 0 when it is a success, 1 when the
/// member refused or could not be asked, 2 when a change is asked without an operator token.
#[cfg(not(madsim))]
fn run_members(args: MembersArgs) -> ExitCode {
    let change = (!args.add.is_empty() || !args.remove.is_empty())
        .then(|| qs_node::consensus::MembershipChange { add: args.add.clone(), remove: args.remove.clone() });
    let token = std::env::var("QS_OPERATOR_TOKEN").ok();
    if change.is_some() && token.is_none() {
        eprintln!("qs-node members: a change needs the operator token ([root] operator_token) in QS_OPERATOR_TOKEN");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("qs-node members: {e}");
            return ExitCode::FAILURE;
        }
    };
    let asked = qs_node::operator::members(&args.node, args.ca.as_deref(), token.as_deref(), change.as_ref());
    match runtime.block_on(asked) {
        Ok(answer) => {
            println!("{}", serde_json::to_string_pretty(&answer.body).unwrap_or_default());
            if answer.status.is_success() {
                ExitCode::SUCCESS
            } else {
                eprintln!("qs-node members: the member answered {}", answer.status);
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("qs-node members: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(madsim)]
fn run_members(_: MembersArgs) -> ExitCode {
    eprintln!("qs-node members: not in a --cfg madsim build");
    ExitCode::FAILURE
}

/// `qs-node certs`: exit 0 with the files written, 1 when they could not be.
fn run_certs(command: CertsCommand) -> ExitCode {
    use qs_node::tls::issue::{Issued, KeySource, Validity, new_ca, node_certificate};
    let now = std::time::SystemTime::now();
    let written = match command {
        CertsCommand::Ca { out, name, days } => {
            if out.join("ca.key").exists() {
                eprintln!(
                    "qs-node certs ca: {} exists; a new CA would lock out every node certified by it. \
                     Move it away first if that is what you want",
                    out.join("ca.key").display()
                );
                return ExitCode::FAILURE;
            }
            let name =
                name.unwrap_or_else(|| format!("qs-node CA {}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
            new_ca(&name, Validity::days_from(now, days), KeySource::Generated)
                .map_err(|e| e.to_string())
                .and_then(|ca| ca.write(&out, "ca").map_err(|e| e.to_string()))
        }
        CertsCommand::Node { ca, name, ips, dns_names, days, out } => Issued::read(&ca, "ca")
            .map_err(|e| format!("the CA: {e}"))
            .and_then(|authority| {
                node_certificate(
                    &authority,
                    &name,
                    &ips,
                    &dns_names,
                    Validity::days_from(now, days),
                    KeySource::Generated,
                )
                .map_err(|e| e.to_string())
            })
            .and_then(|issued| issued.write(out.as_ref().unwrap_or(&ca), &name).map_err(|e| e.to_string())),
    };
    match written {
        Ok((certificate, key)) => {
            println!("{}\n{}", certificate.display(), key.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("qs-node certs: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Serves until a signal, then shuts down (see the module doc).
async fn run(config: NodeConfig, observer: Option<std::sync::Arc<dyn qs_node::observe::NodeObserver>>) -> ExitCode {
    // Before the node starts: a signal during start-up is then handled once it runs.
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("qs-node: installing the signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let node_id = uuid::Uuid::new_v4().as_u128();
    let location = qs_node::store::StoreLocation::new(config.storage.engine, &config.storage.path);
    let hooks = qs_node::node::SimHooks { observer, ..Default::default() };
    let node = match Node::start_simulated(config, &location, node_id, hooks).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("qs-node: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listen = &node.state.config.listen;
    tracing::info!(
        node = %node.state.config.name,
        replication = %listen.replication,
        memcached = %listen.memcached,
        http = %listen.http,
        "qs-node serving"
    );
    let mut memory = tokio::spawn(run_memory_watch(node.state.clone()));
    let signal = tokio::select! {
        biased;
        signal = signals.next() => signal,
        // The watch ends only when the limit cannot be enforced (past it, it exits itself).
        code = &mut memory => return code.unwrap_or(ExitCode::FAILURE),
    };
    // The watch holds the node's state; the store closes only once nothing does.
    memory.abort();
    let _ = memory.await;
    let name = node.state.config.name.clone();
    let drain_timeout = node.state.config.connections.drain_timeout;
    tracing::info!(node = %name, %signal, "shutting down on {signal}");
    tokio::select! {
        biased;
        second = signals.next() => {
            tracing::error!(node = %name, signal = %second, "second signal during the shutdown: exiting at once");
            ExitCode::FAILURE
        }
        report = node.shutdown(drain_timeout) => {
            if report.store_closed {
                tracing::info!(node = %name, drained = report.drained, connections_cut = report.connections_cut, "store closed; exiting");
            } else {
                // Every commit is durable: the next start finds every acknowledged write.
                tracing::warn!(node = %name, "the store was still in use at the end of the shutdown; exiting without closing it");
            }
            ExitCode::SUCCESS
        }
    }
}

/// SIGTERM and SIGINT, as one stream of signals.
#[cfg(not(madsim))]
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

#[cfg(not(madsim))]
impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals { terminate: signal(SignalKind::terminate())?, interrupt: signal(SignalKind::interrupt())? })
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            biased;
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

/// Under the simulator a process gets no signals (and this binary is never run there).
#[cfg(madsim)]
struct Signals;

#[cfg(madsim)]
impl Signals {
    fn new() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn next(&mut self) -> &'static str {
        std::future::pending().await
    }
}

/// Descriptors kept for everything but client connections: the store's files (RocksDB keeps its
/// SST files open), snapshot transfers, outgoing replication connections, logs.
#[cfg(not(madsim))]
const OPEN_FILES_RESERVE: u64 = 1024;

/// Raises the open-files soft limit to the hard limit when the connection caps and
/// [`OPEN_FILES_RESERVE`] need more than the soft limit, and warns when even the hard limit is
/// too low: past it, an accept fails with "too many open files" on every listener at once,
/// which is what the caps are there to prevent.
#[cfg(all(not(madsim), target_os = "linux"))]
fn fit_open_files_limit(config: &NodeConfig) {
    use qs_node::connections::ListenerKind;
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let caps: u64 = ListenerKind::ALL.iter().map(|&kind| config.connections.max(kind) as u64).sum();
    let needed = caps + OPEN_FILES_RESERVE;
    let limit = getrlimit(Resource::Nofile);
    // None: unlimited.
    let Some(soft) = limit.current else { return };
    if soft >= needed {
        return;
    }
    let raised = match limit.maximum {
        Some(hard) if hard <= soft => soft,
        hard => {
            let target = hard.unwrap_or(needed).max(soft);
            match setrlimit(Resource::Nofile, Rlimit { current: Some(target), maximum: limit.maximum }) {
                Ok(()) => {
                    tracing::info!(from = soft, to = target, "raised the open-files limit to its hard limit");
                    target
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not raise the open-files limit");
                    soft
                }
            }
        }
    };
    if raised < needed {
        tracing::warn!(
            open_files_limit = raised,
            connections_max_total = caps,
            reserve = OPEN_FILES_RESERVE,
            "the open-files limit is below the connection caps plus a reserve for the store: a flood of \
             connections can exhaust descriptors on every listener; raise the limit (ulimit -n, systemd \
             LimitNOFILE) or lower connections.*.max"
        );
    }
}

/// Elsewhere the limit is left as it is.
#[cfg(all(not(madsim), not(target_os = "linux")))]
fn fit_open_files_limit(_config: &NodeConfig) {}

/// `qs-node inspect`: the report on stdout (on stderr when the dump takes stdout).
fn run_inspect(args: InspectArgs) -> ExitCode {
    let target = match (args.config, args.path) {
        (Some(config), _) => inspect::Target::Config(config),
        (None, Some(path)) => inspect::Target::Path { path, engine: args.engine, database_id: args.database_id },
        (None, None) => unreachable!("clap requires --config or --path"),
    };
    let options = inspect::Options { verify: args.verify, top: args.top, dump: args.dump };
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut dump: Box<dyn std::io::Write> = match &args.out {
        Some(file) => match std::fs::File::create(file) {
            Ok(file) => Box::new(std::io::BufWriter::new(file)),
            Err(e) => {
                eprintln!("qs-node inspect: creating {}: {e}", file.display());
                return ExitCode::from(inspect::EXIT_USAGE);
            }
        },
        None => Box::new(std::io::BufWriter::new(stdout.lock())),
    };
    let report_to_stderr = options.dump.is_some() && args.out.is_none();
    match inspect::inspect(&target, &options, &mut dump) {
        Ok(report) => {
            drop(dump);
            let text = report.to_string();
            let written = if report_to_stderr {
                std::io::stderr().lock().write_all(text.as_bytes())
            } else {
                stdout.lock().write_all(text.as_bytes()).and_then(|()| stdout.lock().flush())
            };
            match written {
                // The reader stopped reading (`| head`): what it read is what it wanted.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("qs-node inspect: writing the report: {e}");
                    ExitCode::from(inspect::EXIT_FAILED)
                }
                _ => ExitCode::from(report.exit_code()),
            }
        }
        Err(e) => {
            drop(dump);
            eprintln!("qs-node inspect: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Samples the process's memory once a second for `/metrics` and, past `[memory] limit_bytes`,
/// logs why and exits with `EXIT_MEMORY_LIMIT`. Without a limit it never returns.
#[cfg(not(madsim))]
async fn run_memory_watch(state: std::sync::Arc<NodeState>) -> ExitCode {
    use qs_node::resources::{EXIT_MEMORY_LIMIT, watch_memory};
    let limit = state.config.memory.limit_bytes.map(|b| b.as_u64());
    match watch_memory(state.clone(), limit).await {
        Ok(over) => {
            tracing::error!(
                node = %state.config.name,
                resident_bytes = over.resident_bytes,
                limit_bytes = over.limit_bytes,
                "memory limit exceeded: {over}"
            );
            // Exit at once, without unwinding: every commit is already durable, and an orderly
            // shutdown would only spend time and memory in a process that is over its budget.
            std::process::exit(i32::from(EXIT_MEMORY_LIMIT));
        }
        Err(e) => {
            eprintln!("qs-node: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Under the simulator the process is not the node: nothing is sampled (see the module doc).
#[cfg(madsim)]
async fn run_memory_watch(_state: std::sync::Arc<NodeState>) -> ExitCode {
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
