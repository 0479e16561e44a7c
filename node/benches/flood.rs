//! Flood benchmark: how long a producer's writes take while a connection flood holds a real
//! `qs-node`'s listeners at their shipped caps, against the same writes on a quiet node, in the
//! same run. The integration tests (`node/tests/integration/connections.rs`) assert what must
//! hold under a flood — every write answered, none as slow as the flood's own header timeout;
//! this prints how fast, which depends on the machine and is never asserted.
//!
//! Three phases on one root (LMDB, loopback, batch window 20 ms, `[connections]` as shipped):
//! - **quiet**: `--writes` writes, each on a connection of its own from 127.0.0.2;
//! - **one address**: the same while 127.0.0.1 opens three times every listener's cap, each
//!   connection sending half a request and going silent (refused past the address's share);
//! - **many addresses**: the same while 127.0.0.10–200 open three times the HTTP cap (shed at
//!   the cap, each address far below its share).
//!
//! For each: p50, p99 and max of a write (connect to answer), and the ratio to the quiet phase.
//!
//! Run: `cargo bench -p qs-node --bench flood -- [--writes N]`. Needs an open-files hard limit
//! of about 8 000 (`ulimit -Hn`).

#[path = "common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Process, free_ports};

use qs_node::connections::settings::{
    HTTP_CONNECTIONS_MAX_DEFAULT, MEMCACHED_CONNECTIONS_MAX_DEFAULT, REPLICATION_CONNECTIONS_MAX_DEFAULT,
};

const TOKEN: &str = "bench-producer-token";
const CAPS: [usize; 3] =
    [HTTP_CONNECTIONS_MAX_DEFAULT, MEMCACHED_CONNECTIONS_MAX_DEFAULT, REPLICATION_CONNECTIONS_MAX_DEFAULT];
/// What each flood connection sends before it goes silent, per listener (HTTP, memcached,
/// replication): half a request.
const HALVES: [&[u8]; 3] = [b"PUT /v1/keys/k:x HTTP/1.1\r\nhost: a\r\n", b"get k:", b"QSR"];
/// The longest the node is given to start, or the flood to fill a listener.
const PATIENCE: Duration = Duration::from_secs(60);

fn fail(message: &str) -> ! {
    eprintln!("flood: {message}");
    std::process::exit(2)
}

fn writes_option() -> usize {
    let mut writes = 200;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--writes" => {
                writes = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| fail("--writes: a count"));
            }
            "--bench" => {}
            other => fail(&format!("unknown argument {other}; see node/benches/flood.rs")),
        }
    }
    writes.max(1)
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect(&to.into())?;
    Ok(socket.into())
}

/// Starts a root with the shipped connection settings; returns it and its listeners' addresses
/// (HTTP, memcached, replication).
fn start(dir: &Path) -> (Process, [SocketAddr; 3]) {
    let ports = free_ports::<3>();
    let [http, memcached, replication] = ports;
    let config = format!(
        "name = \"flood-bench\"\nrole = \"root\"\ndatabase_id = \"fb\"\n[storage]\nengine = \"lmdb\"\npath = \"{}\"\n\
         [listen]\nreplication = \"{replication}\"\nmemcached = \"{memcached}\"\nhttp = \"{http}\"\n\
         [root]\nbatch_window = \"20ms\"\n[[root.producers]]\nname = \"bench\"\ntoken = \"{TOKEN}\"\n\
         prefixes = [\"k:\"]\nwrites_per_s = 1000000\nburst = 1000000\n",
        dir.join("store").display()
    );
    let path = dir.join("root.toml");
    std::fs::write(&path, config).expect("write a configuration");
    let child = Command::new(env!("CARGO_BIN_EXE_qs-node"))
        .arg("--config")
        .arg(&path)
        .env("QS_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start qs-node");
    let process = Process(child);
    let started = Instant::now();
    while TcpStream::connect(http).is_err() {
        assert!(started.elapsed() < PATIENCE, "flood: qs-node did not listen on {http}");
        std::thread::sleep(Duration::from_millis(20));
    }
    (process, ports)
}

/// One write on a connection of its own from 127.0.0.2: connect to answer. Panics unless 200.
fn write_once(http: SocketAddr, n: usize) -> Duration {
    let started = Instant::now();
    let mut stream = connect_from(ip(2), http).unwrap_or_else(|e| panic!("flood: write {n} could not connect: {e}"));
    let body = format!("value-{n}");
    let request = format!(
        "PUT /v1/keys/k:bench-{n} HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer {TOKEN}\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("flood: send a write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("flood: read an answer");
    let status = String::from_utf8_lossy(&answer[..answer.len().min(12)]).into_owned();
    assert!(status.starts_with("HTTP/1.1 200"), "flood: write {n} answered {status:?}");
    started.elapsed()
}

/// The node's `/metrics` sample `series` (0 if absent), asked from an address of its own: the
/// flooding addresses are at their share, and a request from one would be refused.
fn sample(http: SocketAddr, series: &str) -> f64 {
    let Ok(mut stream) = connect_from(ip(3), http) else { return 0.0 };
    let mut answer = Vec::new();
    let asked = stream.write_all(b"GET /metrics HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n");
    if asked.and_then(|()| stream.read_to_end(&mut answer)).is_err() {
        return 0.0;
    }
    let text = String::from_utf8_lossy(&answer);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    qs_node::metrics::page::Page::parse(body).ok().and_then(|page| page.value(series)).unwrap_or(0.0)
}

/// Holds up to `per_port[i]` silent half-requests open to `targets[i]` from `sources` in turn,
/// reopening what the node closes, until `stop`.
fn flood(targets: [SocketAddr; 3], per_port: [usize; 3], sources: Vec<IpAddr>, stop: Arc<AtomicBool>) {
    let mut held: [Vec<TcpStream>; 3] = Default::default();
    let mut next = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for port in 0..3 {
            held[port].retain_mut(|stream| {
                stream.set_nonblocking(true).expect("nonblocking");
                let mut byte = [0u8; 1];
                match stream.read(&mut byte) {
                    Ok(0) => false,
                    Ok(_) => true,
                    Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                }
            });
            let room = held[port].len() + per_port[port] / 4;
            while held[port].len() < per_port[port].min(room) {
                next += 1;
                let Ok(mut stream) = connect_from(sources[next % sources.len()], targets[port]) else { break };
                let _ = stream.write_all(HALVES[port]); // a refused connection may be closed already
                held[port].push(stream);
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

struct Figures {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

fn measure(http: SocketAddr, writes: usize, first: usize) -> Figures {
    let mut latencies: Vec<Duration> = (first..first + writes).map(|n| write_once(http, n)).collect();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Figures { p50: at(0.5), p99: at(0.99), max: latencies[latencies.len() - 1] }
}

/// Runs `writes` writes while a flood of `per_port` connections from `sources` holds the node,
/// once the HTTP listener holds `http_open` of them.
fn flooded(
    ports: [SocketAddr; 3],
    per_port: [usize; 3],
    sources: Vec<IpAddr>,
    http_open: f64,
    writes: usize,
    first: usize,
) -> Figures {
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = {
        let stop = stop.clone();
        std::thread::spawn(move || flood(ports, per_port, sources, stop))
    };
    let started = Instant::now();
    while sample(ports[0], "qs_connections_open{listener=\"http\"}") < http_open {
        assert!(started.elapsed() < PATIENCE, "flood: the HTTP listener never held {http_open} flood connections");
        std::thread::sleep(Duration::from_millis(100));
    }
    let figures = measure(ports[0], writes, first);
    stop.store(true, Ordering::Relaxed);
    flooder.join().expect("the flood thread");
    figures
}

fn main() {
    let writes = writes_option();
    let per_port = CAPS.map(|cap| cap * 3);
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let wanted = per_port.iter().sum::<usize>() as u64 + 512;
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if hard < wanted {
        fail(&format!("holds {wanted} sockets; the hard open-files limit is {hard} (raise it: ulimit -Hn)"));
    }
    let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, raised).expect("raise the open-files limit");
    let dir = tempfile::tempdir().expect("a scratch folder");
    let (_root, ports) = start(dir.path());
    for n in 0..20 {
        write_once(ports[0], 1_000_000 + n); // the first commits, the page cache
    }
    println!(
        "flood: one root, LMDB on loopback, batch_window 20ms, [connections] as shipped (caps {CAPS:?}); \
         {writes} writes per phase, each on a connection of its own"
    );
    println!("{:<16} {:>10} {:>10} {:>10} {:>12} {:>12}", "phase", "p50", "p99", "max", "p50 / quiet", "p99 / quiet");
    let quiet = measure(ports[0], writes, 0);
    let row = |name: &str, f: &Figures| {
        println!(
            "{name:<16} {:>10.2?} {:>10.2?} {:>10.2?} {:>11.2}x {:>11.2}x",
            f.p50,
            f.p99,
            f.max,
            f.p50.as_secs_f64() / quiet.p50.as_secs_f64(),
            f.p99.as_secs_f64() / quiet.p99.as_secs_f64()
        );
    };
    row("quiet", &quiet);
    // Nine tenths of one address's share (half the cap): refused connections close and timed-out
    // ones reopen, so the count hovers just below the share rather than sitting on it.
    let half = (HTTP_CONNECTIONS_MAX_DEFAULT / 2) as f64 * 0.9;
    let one = flooded(ports, per_port, vec![ip(1)], half, writes, writes);
    row("one address", &one);
    // The first flood's connections close with its thread; the second starts from an empty
    // listener once they have.
    let started = Instant::now();
    while sample(ports[0], "qs_connections_open{listener=\"http\"}") > 16.0 && started.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(100));
    }
    let many_sources: Vec<IpAddr> = (10..=200).map(ip).collect();
    let full = HTTP_CONNECTIONS_MAX_DEFAULT as f64 * 0.9;
    let many = flooded(ports, [per_port[0], 0, 0], many_sources, full, writes, 2 * writes);
    row("many addresses", &many);
}
