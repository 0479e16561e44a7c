//! Read-path benchmark: `get`s through qs-node's memcached port on loopback, beside a real
//! memcached server holding the same keys, driven by the same client code with the same key
//! sequences, both measured in the same run. Prints throughput (gets/s and keys/s), latency
//! percentiles, the CPU each server and the client used, and the qs-node / memcached ratio.
//!
//! Two tables:
//! - **One connection** (the original rows): the `memcache` crate's client on one thread,
//!   single-key and 16-key gets, one request at a time. Both servers are bound by loopback
//!   latency here, so this measures per-request latency, not capacity.
//! - **Concurrent connections**: 16 and 64 connections, each a raw text-protocol client that
//!   writes a batch of requests and then reads and checks every reply byte for byte (key, length,
//!   value, `END`; `gets` also parses the cas unique). Rows: one `get` of 1 or 16 keys at a time,
//!   and pipelined batches (8 single-key `get`s, or 4 `gets` of 16 keys, written before any reply
//!   is read). A pipelined row's latency is the batch's (first byte written to last reply read).
//!   Each row alternates the servers (`--rounds` times each, default 5, `--seconds` each,
//!   default 2) so a change in background load hits both. Five rounds, not two: with two, the
//!   16-key row at 64 connections read 0.94–1.06× between runs of one build on an idle machine;
//!   with five, three runs read 1.03–1.09×. Beside each server: the CPU it used
//!   (`server cores`), how many of its threads were, on average, runnable but waiting for a CPU
//!   (`server waiting`, from `/proc/<pid>/task/*/schedstat`), and the CPU the client used; the
//!   ratio line adds the server CPU per get. On a machine with more runnable threads than
//!   cores, throughput follows the CPU a server is given as much as the CPU it needs per get.
//!
//! The concurrent client (`--client`): `tokio` (default) is one task per connection on a
//! multi-thread tokio runtime with one worker per core; `threads` is one OS thread per connection
//! with blocking `std::net` sockets. Measured here against the same memcached at 64 connections,
//! the tokio client used 3.0–3.9 µs of CPU per get and the threads client 4.7–5.1 µs (a context
//! switch per reply), so the tokio client leaves more of a small machine to the servers. Both
//! print the CPU they used (`client cores`), so a reader can see whether the client, rather than
//! the server, ran out of CPU: the client and the servers share the machine's cores.
//!
//! memcached runs with its default 4 worker threads (`-t 4`); qs-node with its runtime's default
//! of one worker per core. Neither is tuned; `--memcached-threads N` and `--node-workers N`
//! (tokio's `TOKIO_WORKER_THREADS`) change them to see what the thread counts do. `--node-bin
//! PATH` runs another qs-node build (an earlier commit's, say) against the same memcached.
//!
//! Files: `main.rs` (options, the key set, the two tables' order), `servers.rs` (starting and
//! measuring the servers), `one_connection.rs` and `concurrent.rs` (one table each).
//!
//! Run: `./ci/bench-reads.sh` (installs memcached if it can), or
//! `cargo bench -p qs-node --bench read_path -- [--requests N] [--seconds S] [--rounds R]
//! [--client tokio|threads] [--only ROW] [--memcached-threads N] [--node-workers N]
//! [--node-bin PATH]` with `memcached` on PATH (`--only` keeps the concurrent rows whose label
//! contains ROW, e.g. `--only "64 conns, get 1"`).

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const KEYS: usize = 10_000;
const VALUE_BYTES: usize = 200;
const MULTI_GET_KEYS: usize = 16;
const TOKEN: &str = "bench-producer-token";
/// memcached's default worker threads, passed explicitly so the header can say it.
const MEMCACHED_THREADS_DEFAULT: usize = 4;

mod concurrent;
mod one_connection;
mod servers;

use concurrent::{ClientKind, Data, Interval, Shape, measure, summarise};
use one_connection::drive;
use servers::{start_memcached, start_qs_node};

fn key(i: usize) -> String {
    format!("dns:zone-{i:05}")
}

fn value(i: usize) -> String {
    let record = format!("{{\"type\":\"A\",\"content\":\"192.0.2.{}\",\"ttl\":300,\"proxied\":true}}", i % 256);
    record.repeat(VALUE_BYTES / record.len() + 1)[..VALUE_BYTES].to_string()
}

/// A few hot keys, as config reads are: the same skew for every row and server.
fn popularity(seed: u64) -> impl FnMut() -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    move || {
        let hot: f64 = rng.random_range(0.0..1.0);
        ((hot * hot * hot) * KEYS as f64) as usize % KEYS
    }
}

struct Options {
    requests: usize,
    seconds: f64,
    rounds: usize,
    client: ClientKind,
    /// Only the concurrent rows whose label contains this.
    only: Option<String>,
    /// memcached's `-t`.
    memcached_threads: usize,
    /// qs-node's runtime workers; None: its default.
    node_workers: Option<usize>,
    /// The qs-node binary: this build's, or another (an earlier build, to compare).
    node_bin: std::path::PathBuf,
}

fn options() -> Options {
    let usage = || -> ! {
        eprintln!(
            "usage: read_path [--requests N] [--seconds S] [--rounds R] [--client tokio|threads] [--only ROW] \
             [--memcached-threads N] [--node-workers N] [--node-bin PATH]"
        );
        std::process::exit(2)
    };
    let mut options = Options {
        requests: 20_000,
        seconds: 2.0,
        rounds: 5,
        client: ClientKind::Tokio,
        only: None,
        memcached_threads: MEMCACHED_THREADS_DEFAULT,
        node_workers: None,
        node_bin: env!("CARGO_BIN_EXE_qs-node").into(),
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--requests" => options.requests = value.parse().unwrap_or_else(|_| usage()),
            "--seconds" => options.seconds = value.parse().unwrap_or_else(|_| usage()),
            "--rounds" => options.rounds = value.parse().unwrap_or_else(|_| usage()),
            "--only" => options.only = Some(value),
            "--memcached-threads" => options.memcached_threads = value.parse().unwrap_or_else(|_| usage()),
            "--node-workers" => options.node_workers = Some(value.parse().unwrap_or_else(|_| usage())),
            "--node-bin" => options.node_bin = value.into(),
            "--client" => {
                options.client = match value.as_str() {
                    "threads" => ClientKind::Threads,
                    "tokio" => ClientKind::Tokio,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    if options.requests == 0
        || options.rounds == 0
        || !options.seconds.is_finite()
        || options.seconds <= 0.0
        || options.memcached_threads == 0
        || options.node_workers == Some(0)
    {
        usage();
    }
    options
}

#[expect(
    clippy::too_many_lines,
    reason = "112 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn main() {
    let options = options();
    let requests = options.requests;
    let dir = tempfile::tempdir().expect("temporary directory");
    let (memcached, memcached_addr) = start_memcached(options.memcached_threads);
    {
        let client = memcache::Client::connect(format!("memcache://{memcached_addr}?protocol=ascii")).expect("connect");
        for i in 0..KEYS {
            client.set(&key(i), value(i).as_str(), 0).expect("load memcached");
        }
    }
    let (qs_node, qs_addr) = start_qs_node(dir.path(), options.node_workers, &options.node_bin);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = options.node_workers.unwrap_or(cores);
    let memcached_threads = options.memcached_threads;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().take(3).collect::<Vec<_>>().join(" ");

    println!(
        "qsim read-path benchmark: {KEYS} keys of {VALUE_BYTES} B; {cores} cores, load average {load} at start; \
         memcached -t {memcached_threads}, qs-node {workers} runtime workers{}",
        if options.node_bin == std::path::Path::new(env!("CARGO_BIN_EXE_qs-node")) {
            String::new()
        } else {
            format!(" ({})", options.node_bin.display())
        }
    );
    println!("\nOne connection, `memcache` crate client, {requests} requests per row");
    println!("{:<22} {:<10} {:>11} {:>10} {:>10} {:>10}", "request", "server", "requests/s", "p50", "p99", "p99.9");
    for keys_per_get in [1, MULTI_GET_KEYS] {
        // Warm both up with the same sequence first.
        drive(memcached_addr, requests / 10, keys_per_get);
        drive(qs_addr, requests / 10, keys_per_get);
        let reference = drive(memcached_addr, requests, keys_per_get);
        let ours = drive(qs_addr, requests, keys_per_get);
        let label = if keys_per_get == 1 { "get, 1 key".to_string() } else { format!("get, {keys_per_get} keys") };
        for (server, f) in [("memcached", &reference), ("qs-node", &ours)] {
            println!(
                "{:<22} {:<10} {:>11.0} {:>10.1?} {:>10.1?} {:>10.1?}",
                label, server, f.per_s, f.p50, f.p99, f.p999
            );
        }
        println!(
            "{:<22} qs-node / memcached: throughput {:.2}x, p99 latency {:.2}x\n",
            "",
            ours.per_s / reference.per_s,
            ours.p99.as_secs_f64() / reference.p99.as_secs_f64()
        );
    }

    let data = Arc::new(Data {
        keys: (0..KEYS).map(|i| key(i).into_bytes()).collect(),
        values: (0..KEYS).map(|i| value(i).into_bytes()).collect(),
    });
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(cores).enable_all().build().expect("client runtime");
    let client_name = match options.client {
        ClientKind::Threads => "one OS thread per connection, blocking std::net",
        ClientKind::Tokio => "one task per connection on a tokio runtime",
    };
    println!(
        "Concurrent connections, raw text-protocol client ({client_name}); {} x {} s per server per row, \
         servers alternated; pipelined latency is per batch",
        options.rounds, options.seconds
    );
    println!(
        "(server cores: CPU the server used; server waiting: its threads runnable but waiting for a CPU, on \
         average; client cores: CPU the client used)"
    );
    println!(
        "{:<31} {:<10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "request", "server", "gets/s", "keys/s", "p50", "p99", "server", "server", "client"
    );
    println!(
        "{:<31} {:<10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "", "", "", "", "", "", "cores", "waiting", "cores"
    );
    let mut shapes = Vec::new();
    for connections in [16, 64] {
        shapes.push(Shape { connections, depth: 1, keys_per_get: 1, cas: false });
        shapes.push(Shape { connections, depth: 1, keys_per_get: MULTI_GET_KEYS, cas: false });
        shapes.push(Shape { connections, depth: 8, keys_per_get: 1, cas: false });
        shapes.push(Shape { connections, depth: 4, keys_per_get: MULTI_GET_KEYS, cas: true });
    }
    for shape in shapes {
        if options.only.as_ref().is_some_and(|only| !shape.label().contains(only.as_str())) {
            continue;
        }
        let servers = [("memcached", &memcached, memcached_addr), ("qs-node", &qs_node, qs_addr)];
        // Warm-up: connections, caches, the node's runtime; not counted.
        for (_, server, addr) in servers {
            measure(options.client, &runtime, server, addr, shape, &data, options.seconds / 4.0);
        }
        let mut intervals: [Vec<Interval>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..options.rounds {
            for (i, (_, server, addr)) in servers.iter().enumerate() {
                intervals[i].push(measure(options.client, &runtime, server, *addr, shape, &data, options.seconds));
            }
        }
        let [reference, ours] = intervals.map(|row| summarise(shape, &row));
        let label = shape.label();
        for ((name, ..), f) in servers.iter().zip([&reference, &ours]) {
            println!(
                "{:<31} {:<10} {:>10.0} {:>10.0} {:>9.1?} {:>9.1?} {:>8.2} {:>8.2} {:>8.2}",
                label, name, f.gets_per_s, f.keys_per_s, f.p50, f.p99, f.server_cores, f.server_waiting, f.client_cores
            );
        }
        println!(
            "{:<31} qs-node / memcached: throughput {:.2}x, p99 latency {:.2}x, server CPU per get {:.2}x\n",
            "",
            ours.gets_per_s / reference.gets_per_s,
            ours.p99.as_secs_f64() / reference.p99.as_secs_f64(),
            (ours.server_cores / ours.gets_per_s) / (reference.server_cores / reference.gets_per_s),
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the end: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
}
