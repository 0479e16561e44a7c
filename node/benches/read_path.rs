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
//!   Each row alternates the servers (`--rounds` times each, default 2, `--seconds` each,
//!   default 2) so a change in background load hits both. Beside each server: the CPU it used
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
//! Run: `./ci/bench-reads.sh` (installs memcached if it can), or
//! `cargo bench -p qs-node --bench read_path -- [--requests N] [--seconds S] [--rounds R]
//! [--client tokio|threads] [--only ROW] [--memcached-threads N] [--node-workers N]
//! [--node-bin PATH]` with `memcached` on PATH (`--only` keeps the concurrent rows whose label
//! contains ROW, e.g. `--only "64 conns, get 1"`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const KEYS: usize = 10_000;
const VALUE_BYTES: usize = 200;
const MULTI_GET_KEYS: usize = 16;
const TOKEN: &str = "bench-producer-token";
/// memcached's default worker threads, passed explicitly so the header can say it.
const MEMCACHED_THREADS_DEFAULT: usize = 4;

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// CPU time the server process has used so far.
    fn cpu(&self) -> Duration {
        process_cpu(procfs::process::Process::new(self.child.id() as i32))
    }

    /// Time the server's threads have spent runnable but waiting for a CPU (the run queue wait of
    /// `/proc/<pid>/task/*/schedstat`): on a machine with more runnable threads than cores, how
    /// much of its share of the CPU a server did not get. Zero where the kernel does not say.
    fn waited(&self) -> Duration {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id()));
        let nanos: u64 = tasks
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
            .filter_map(|line| line.split_whitespace().nth(1).and_then(|wait| wait.parse::<u64>().ok()))
            .sum();
        Duration::from_nanos(nanos)
    }
}

fn process_cpu(process: procfs::ProcResult<procfs::process::Process>) -> Duration {
    let ticks = process.and_then(|p| p.stat()).map(|s| s.utime + s.stime).unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / procfs::ticks_per_second() as f64)
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port")
}

fn wait_for(addr: SocketAddr, what: &str) {
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        if start.elapsed() > Duration::from_secs(20) {
            eprintln!("read_path: {what} did not start listening on {addr}");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

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

fn start_memcached(threads: usize) -> (Server, SocketAddr) {
    let addr = free_port();
    let threads = threads.to_string();
    let child = Command::new("memcached")
        .args(["-l", "127.0.0.1", "-p", &addr.port().to_string(), "-U", "0", "-m", "256", "-t", &threads, "-u", "root"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("read_path: cannot start memcached ({e}); install it (Debian: apt-get install memcached) or run ./ci/bench-reads.sh");
            std::process::exit(1)
        });
    wait_for(addr, "memcached");
    (Server { child }, addr)
}

/// `workers`: the node's runtime workers through tokio's `TOKIO_WORKER_THREADS`; None leaves the
/// node's default (one per core).
fn start_qs_node(dir: &std::path::Path, workers: Option<usize>, binary: &std::path::Path) -> (Server, SocketAddr) {
    let (replication, memcached, http) = (free_port(), free_port(), free_port());
    let config = format!(
        "name = \"bench-root\"\nrole = \"root\"\ndatabase_id = \"be\"\n[storage]\nengine = \"lmdb\"\npath = \"{}\"\n\
         [listen]\nreplication = \"{replication}\"\nmemcached = \"{memcached}\"\nhttp = \"{http}\"\n\
         [root]\nbatch_window = \"20ms\"\n[[root.producers]]\nname = \"bench\"\ntoken = \"{TOKEN}\"\n\
         prefixes = [\"dns:\"]\nwrites_per_s = 1000000\nburst = 1000000\n",
        dir.join("store").display()
    );
    let path = dir.join("bench-root.toml");
    std::fs::write(&path, config).expect("write config");
    let mut command = Command::new(binary);
    command.arg("--config").arg(&path).env("QS_LOG", "warn").env_remove("TOKIO_WORKER_THREADS");
    if let Some(workers) = workers {
        command.env("TOKIO_WORKER_THREADS", workers.to_string());
    }
    let child = command.stdout(Stdio::null()).spawn().expect("start qs-node");
    wait_for(http, "qs-node");
    // Load through the write API, in batches, as producers would.
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
        let ops: Vec<_> =
            chunk.iter().map(|&i| serde_json::json!({"op": "set", "key": key(i), "value": value(i)})).collect();
        ureq::post(&format!("http://{http}/v1/batch"))
            .header("authorization", &format!("Bearer {TOKEN}"))
            .send_json(serde_json::json!({ "ops": ops }))
            .expect("load qs-node");
    }
    (Server { child }, memcached)
}

struct Figures {
    per_s: f64,
    p50: Duration,
    p99: Duration,
    p999: Duration,
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

/// `requests` gets through the `memcache` crate on one connection, the same key sequence for
/// every server; checks every answer.
fn drive(addr: SocketAddr, requests: usize, keys_per_get: usize) -> Figures {
    let client = memcache::Client::connect(format!("memcache://{addr}?protocol=ascii")).expect("connect");
    let mut pick = popularity(42);
    let mut latencies = Vec::with_capacity(requests);
    let start = Instant::now();
    for _ in 0..requests {
        let ids: Vec<usize> = (0..keys_per_get).map(|_| pick()).collect();
        let begun = Instant::now();
        if keys_per_get == 1 {
            let got: Option<String> = client.get(&key(ids[0])).expect("get");
            assert_eq!(got.as_deref(), Some(value(ids[0]).as_str()), "wrong value from {addr}");
        } else {
            let names: Vec<String> = ids.iter().map(|&i| key(i)).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let got: std::collections::HashMap<String, String> = client.gets(&refs).expect("gets");
            assert_eq!(
                got.len(),
                ids.iter().collect::<std::collections::BTreeSet<_>>().len(),
                "missing keys from {addr}"
            );
        }
        latencies.push(begun.elapsed());
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    Figures {
        per_s: requests as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        p999: percentile(&latencies, 0.999),
    }
}

/// One row of the concurrent table: `connections` clients, each writing `depth` requests of
/// `keys_per_get` keys (`gets` when `cas`) and then reading all their replies.
#[derive(Clone, Copy, Debug)]
struct Shape {
    connections: usize,
    depth: usize,
    keys_per_get: usize,
    cas: bool,
}

impl Shape {
    fn label(&self) -> String {
        let command = if self.cas { "gets" } else { "get" };
        let keys = if self.keys_per_get == 1 { "1 key".to_string() } else { format!("{} keys", self.keys_per_get) };
        if self.depth == 1 {
            format!("{} conns, {command} {keys}", self.connections)
        } else {
            format!("{} conns, {}x {command} {keys} piped", self.connections, self.depth)
        }
    }
}

/// The keys and values every client checks against, shared read-only.
struct Data {
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
}

/// Writes one batch of requests into `out`, the key of each expected `VALUE` into `ids`.
fn build_batch(shape: Shape, pick: &mut impl FnMut() -> usize, data: &Data, out: &mut Vec<u8>, ids: &mut Vec<usize>) {
    out.clear();
    ids.clear();
    for _ in 0..shape.depth {
        out.extend_from_slice(if shape.cas { b"gets" } else { b"get" });
        for _ in 0..shape.keys_per_get {
            let id = pick();
            ids.push(id);
            out.push(b' ');
            out.extend_from_slice(&data.keys[id]);
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// A resumable check of a batch's replies as their bytes arrive: every `VALUE` line names the
/// requested key with flags 0, the right length (and a cas unique for `gets`), the value is
/// exactly the stored one, and each request ends with `END`.
#[derive(Default)]
struct ReplyCheck {
    pos: usize,
    request: usize,
    key: usize,
}

impl ReplyCheck {
    /// True once every reply of the batch is in `buf`; Err on any byte out of place.
    fn advance(&mut self, buf: &[u8], shape: Shape, ids: &[usize], data: &Data) -> Result<bool, String> {
        loop {
            if self.request == shape.depth {
                return if self.pos == buf.len() { Ok(true) } else { Err("bytes after the last reply".into()) };
            }
            let rest = &buf[self.pos..];
            if self.key == shape.keys_per_get {
                if rest.len() < 5 {
                    return Ok(false);
                }
                if &rest[..5] != b"END\r\n" {
                    return Err(format!(
                        "expected END, got {:?}",
                        String::from_utf8_lossy(&rest[..rest.len().min(80)])
                    ));
                }
                self.pos += 5;
                self.request += 1;
                self.key = 0;
                continue;
            }
            let Some(end) = rest.iter().position(|&b| b == b'\n') else { return Ok(false) };
            let id = ids[self.request * shape.keys_per_get + self.key];
            let bad = || format!("unexpected reply line {:?}", String::from_utf8_lossy(&rest[..end]));
            let line = rest[..end].strip_suffix(b"\r").ok_or_else(bad)?;
            let line = line.strip_prefix(b"VALUE ").ok_or_else(bad)?;
            let line = line.strip_prefix(&data.keys[id][..]).ok_or_else(bad)?;
            let line = line.strip_prefix(b" 0 ").ok_or_else(bad)?;
            let (length, cas) = match line.iter().position(|&b| b == b' ') {
                Some(space) => (&line[..space], Some(&line[space + 1..])),
                None => (line, None),
            };
            let length: usize = std::str::from_utf8(length).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
            if shape.cas != cas.is_some_and(|c| !c.is_empty() && c.iter().all(u8::is_ascii_digit)) {
                return Err(bad());
            }
            let value = &data.values[id];
            if length != value.len() {
                return Err(bad());
            }
            let block = end + 1;
            if rest.len() < block + length + 2 {
                return Ok(false);
            }
            if rest[block..block + length] != value[..] || &rest[block + length..block + length + 2] != b"\r\n" {
                return Err(format!("wrong value for {}", String::from_utf8_lossy(&data.keys[id])));
            }
            self.pos += block + length + 2;
            self.key += 1;
        }
    }
}

/// What one connection did in a measurement: batches completed before the stop, and each one's
/// latency.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
}

const RECEIVE_BUFFER_BYTES: usize = 64 << 10;

/// One connection as a blocking OS thread.
fn connection_thread(
    addr: SocketAddr,
    shape: Shape,
    seed: u64,
    data: Arc<Data>,
    start: Arc<Barrier>,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut pick = popularity(seed);
    let (mut out, mut ids) = (Vec::new(), Vec::new());
    let mut buf = vec![0u8; RECEIVE_BUFFER_BYTES];
    let mut tally = Tally::default();
    start.wait();
    while !stop.load(Ordering::Relaxed) {
        build_batch(shape, &mut pick, &data, &mut out, &mut ids);
        let begun = Instant::now();
        stream.write_all(&out).expect("write requests");
        let (mut check, mut filled) = (ReplyCheck::default(), 0);
        while !check.advance(&buf[..filled], shape, &ids, &data).unwrap_or_else(|e| panic!("{addr}: {e}")) {
            if filled == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let n = stream.read(&mut buf[filled..]).expect("read replies");
            assert!(n > 0, "{addr} closed the connection");
            filled += n;
        }
        let latency = begun.elapsed();
        if stop.load(Ordering::Relaxed) {
            break; // finished after the measurement ended: not counted
        }
        tally.latencies.push(latency);
    }
    tally
}

/// One connection as a task on a tokio runtime.
async fn connection_task(
    addr: SocketAddr,
    shape: Shape,
    seed: u64,
    data: Arc<Data>,
    start: Arc<tokio::sync::Barrier>,
    stop: Arc<AtomicBool>,
) -> Tally {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut pick = popularity(seed);
    let (mut out, mut ids) = (Vec::new(), Vec::new());
    let mut buf = vec![0u8; RECEIVE_BUFFER_BYTES];
    let mut tally = Tally::default();
    start.wait().await;
    while !stop.load(Ordering::Relaxed) {
        build_batch(shape, &mut pick, &data, &mut out, &mut ids);
        let begun = Instant::now();
        stream.write_all(&out).await.expect("write requests");
        let (mut check, mut filled) = (ReplyCheck::default(), 0);
        while !check.advance(&buf[..filled], shape, &ids, &data).unwrap_or_else(|e| panic!("{addr}: {e}")) {
            if filled == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let n = stream.read(&mut buf[filled..]).await.expect("read replies");
            assert!(n > 0, "{addr} closed the connection");
            filled += n;
        }
        let latency = begun.elapsed();
        if stop.load(Ordering::Relaxed) {
            break;
        }
        tally.latencies.push(latency);
    }
    tally
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientKind {
    Threads,
    Tokio,
}

/// One measured interval against one server.
struct Interval {
    elapsed: Duration,
    latencies: Vec<Duration>,
    server_cpu: Duration,
    server_waited: Duration,
    client_cpu: Duration,
}

/// Runs `shape` against `addr` for `seconds`: all connections open first, start together, and
/// stop together; batches finished after the stop are not counted.
fn measure(
    client: ClientKind,
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    addr: SocketAddr,
    shape: Shape,
    data: &Arc<Data>,
    seconds: f64,
) -> Interval {
    let stop = Arc::new(AtomicBool::new(false));
    let seeds = (0..shape.connections as u64).map(|c| 1000 + c);
    let mark = || (Instant::now(), server.cpu(), server.waited(), process_cpu(procfs::process::Process::myself()));
    match client {
        ClientKind::Threads => {
            let start = Arc::new(Barrier::new(shape.connections + 1));
            let threads: Vec<_> = seeds
                .map(|seed| {
                    let (data, start, stop) = (data.clone(), start.clone(), stop.clone());
                    std::thread::spawn(move || connection_thread(addr, shape, seed, data, start, stop))
                })
                .collect();
            start.wait();
            let (at, server_cpu, server_waited, client_cpu) = mark();
            std::thread::sleep(Duration::from_secs_f64(seconds));
            stop.store(true, Ordering::Relaxed);
            let (end, server_end, server_waited_end, client_end) = mark();
            let latencies = threads.into_iter().flat_map(|t| t.join().expect("client thread").latencies).collect();
            Interval {
                elapsed: end - at,
                latencies,
                server_cpu: server_end - server_cpu,
                server_waited: server_waited_end.saturating_sub(server_waited),
                client_cpu: client_end - client_cpu,
            }
        }
        ClientKind::Tokio => runtime.block_on(async {
            let start = Arc::new(tokio::sync::Barrier::new(shape.connections + 1));
            let tasks: Vec<_> = seeds
                .map(|seed| tokio::spawn(connection_task(addr, shape, seed, data.clone(), start.clone(), stop.clone())))
                .collect();
            start.wait().await;
            let (at, server_cpu, server_waited, client_cpu) = mark();
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            stop.store(true, Ordering::Relaxed);
            let (end, server_end, server_waited_end, client_end) = mark();
            let mut latencies = Vec::new();
            for task in tasks {
                latencies.extend(task.await.expect("client task").latencies);
            }
            Interval {
                elapsed: end - at,
                latencies,
                server_cpu: server_end - server_cpu,
                server_waited: server_waited_end.saturating_sub(server_waited),
                client_cpu: client_end - client_cpu,
            }
        }),
    }
}

/// A server's figures for one row, over all its rounds.
struct RowFigures {
    gets_per_s: f64,
    keys_per_s: f64,
    p50: Duration,
    p99: Duration,
    server_cores: f64,
    /// Threads of the server runnable but waiting for a CPU, on average.
    server_waiting: f64,
    client_cores: f64,
}

fn summarise(shape: Shape, intervals: &[Interval]) -> RowFigures {
    let elapsed: f64 = intervals.iter().map(|i| i.elapsed.as_secs_f64()).sum();
    let mut latencies: Vec<Duration> = intervals.iter().flat_map(|i| i.latencies.iter().copied()).collect();
    assert!(!latencies.is_empty(), "no batch completed in {elapsed:.1} s");
    latencies.sort_unstable();
    let gets = (latencies.len() * shape.depth) as f64;
    let cores = |cpu: Duration| cpu.as_secs_f64() / elapsed;
    RowFigures {
        gets_per_s: gets / elapsed,
        keys_per_s: gets * shape.keys_per_get as f64 / elapsed,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        server_cores: cores(intervals.iter().map(|i| i.server_cpu).sum()),
        server_waiting: cores(intervals.iter().map(|i| i.server_waited).sum()),
        client_cores: cores(intervals.iter().map(|i| i.client_cpu).sum()),
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
        rounds: 2,
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
