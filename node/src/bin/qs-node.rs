//! `qs-node`: one node of the replicated store, on real sockets and disks.
//!
//! Usage: `qs-node --config node.toml`. Logs go to stderr (`RUST_LOG`-style filtering with
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

use clap::Parser;
use qs_node::config::NodeConfig;
use qs_node::node::{Node, NodeState};

#[derive(Parser, Debug)]
#[command(version, about = "One node of the qsim replicated key-value store")]
struct Args {
    /// The node's TOML configuration file.
    #[arg(long)]
    config: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match NodeConfig::load(&args.config) {
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
