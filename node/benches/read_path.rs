//! Read-path benchmark: `get`s through qs-node's memcached port on loopback, beside a real
//! memcached server holding the same keys, driven by the same client (the `memcache` crate,
//! text protocol) with the same key sequence. Prints throughput, latency percentiles and the
//! qs-node / memcached ratio for single-key and 16-key gets.
//!
//! Run: `./ci/bench-reads.sh` (installs memcached if it can), or
//! `cargo bench -p qs-node --bench read_path -- [--requests N]` with `memcached` on PATH.
//! Both servers are separate processes; the client is one thread, so this measures per-request
//! latency on an otherwise idle machine, not peak throughput under concurrency.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const KEYS: usize = 10_000;
const VALUE_BYTES: usize = 200;
const MULTI_GET_KEYS: usize = 16;
const TOKEN: &str = "bench-producer-token";

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

fn start_memcached() -> (Server, SocketAddr) {
    let addr = free_port();
    let child = Command::new("memcached")
        .args(["-l", "127.0.0.1", "-p", &addr.port().to_string(), "-U", "0", "-m", "256", "-u", "root"])
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

fn start_qs_node(dir: &std::path::Path) -> (Server, SocketAddr) {
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
    let child = Command::new(env!("CARGO_BIN_EXE_qs-node"))
        .arg("--config")
        .arg(&path)
        .env("QS_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start qs-node");
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

/// `requests` gets with a skewed key popularity (a few hot keys, as config reads are), the same
/// sequence for every server; checks every answer.
fn drive(addr: SocketAddr, requests: usize, keys_per_get: usize) -> Figures {
    let client = memcache::Client::connect(format!("memcache://{addr}?protocol=ascii")).expect("connect");
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut pick = move || {
        let hot: f64 = rng.random_range(0.0..1.0);
        ((hot * hot * hot) * KEYS as f64) as usize % KEYS
    };
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
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Figures { per_s: requests as f64 / elapsed.as_secs_f64(), p50: at(0.50), p99: at(0.99), p999: at(0.999) }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let requests = match args.as_slice() {
        [] => 20_000,
        [flag, n] if flag == "--requests" => n.parse().unwrap_or_else(|_| {
            eprintln!("--requests wants a number");
            std::process::exit(2)
        }),
        _ => {
            eprintln!("usage: read_path [--requests N]");
            std::process::exit(2)
        }
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let (_memcached, memcached_addr) = start_memcached();
    {
        let client = memcache::Client::connect(format!("memcache://{memcached_addr}?protocol=ascii")).expect("connect");
        for i in 0..KEYS {
            client.set(&key(i), value(i).as_str(), 0).expect("load memcached");
        }
    }
    let (_qs_node, qs_addr) = start_qs_node(dir.path());

    println!(
        "qsim read-path benchmark: {KEYS} keys of {VALUE_BYTES} B, {requests} requests per row, one client thread"
    );
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
}
