//! `qs-node`: one node of the replicated store, on real sockets and disks.
//!
//! Usage: `qs-node --config node.toml`; and `qs-node inspect --config node.toml [--verify]
//! [--top N] [--dump CATEGORY [--out FILE]]` or `qs-node inspect --path DIR [--engine E]
//! [--database-id ID] ...`, which opens the store read-only — beside the running node, if there
//! is one — and prints what it holds (see `qs_node::inspect` for the report, the dump format and
//! its exit codes: 0 ok, 1 unreadable, 2 usage, 3 damage found, 4 no store). Logs go to stderr (`RUST_LOG`-style filtering with
//! `QS_LOG`, default `info`). Exit codes: 0 never (it runs until killed), 2 bad arguments or
//! configuration, 1 failure to start, 20 (`qs_node::resources::EXIT_MEMORY_LIMIT`) resident memory went past
//! `[memory] limit_bytes` (the reason is logged first; a supervisor should restart the node).
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
use qs_node::node::{Node, NodeState};
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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Open a store read-only (beside its running node, if any) and report what it holds.
    Inspect(InspectArgs),
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
    if let Some(Command::Inspect(inspect_args)) = args.command {
        return run_inspect(inspect_args);
    }
    let Some(config_path) = args.config else {
        unreachable!("clap requires --config without a subcommand");
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match NodeConfig::load(&config_path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("qs-node: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("qs-node: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let node_id = uuid::Uuid::new_v4().as_u128();
        match Node::start(config, node_id).await {
            Ok(node) => {
                let listen = &node.state.config.listen;
                tracing::info!(
                    node = %node.state.config.name,
                    replication = %listen.replication,
                    memcached = %listen.memcached,
                    http = %listen.http,
                    "qs-node serving"
                );
                run_memory_watch(node.state).await
            }
            Err(e) => {
                eprintln!("qs-node: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

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
