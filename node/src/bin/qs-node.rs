//! `qs-node`: one node of the replicated store, on real sockets and disks.
//!
//! Usage: `qs-node --config node.toml`. Logs go to stderr (`RUST_LOG`-style filtering with
//! `QS_LOG`, default `info`). Exit codes: 0 never (it runs until killed), 2 bad arguments or
//! configuration, 1 failure to start.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use qs_node::config::NodeConfig;
use qs_node::node::Node;

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
                std::future::pending::<()>().await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("qs-node: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
