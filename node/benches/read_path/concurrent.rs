//! The concurrent table: raw text-protocol clients on many connections, each checking every
//! reply byte, alternated between the servers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::one_connection::percentile;
use crate::popularity;
use crate::servers::{Server, process_cpu};

/// One row of the concurrent table: `connections` clients, each writing `depth` requests of
/// `keys_per_get` keys (`gets` when `cas`) and then reading all their replies.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub connections: usize,
    pub depth: usize,
    pub keys_per_get: usize,
    pub cas: bool,
}

impl Shape {
    pub fn label(&self) -> String {
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
pub struct Data {
    pub keys: Vec<Vec<u8>>,
    pub values: Vec<Vec<u8>>,
}

/// Writes one batch of requests into `out`, the key of each expected `VALUE` into `ids`.
pub fn build_batch(
    shape: Shape,
    pick: &mut impl FnMut() -> usize,
    data: &Data,
    out: &mut Vec<u8>,
    ids: &mut Vec<usize>,
) {
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
pub struct ReplyCheck {
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
pub struct Tally {
    latencies: Vec<Duration>,
}

pub const RECEIVE_BUFFER_BYTES: usize = 64 << 10;

/// One connection as a blocking OS thread.
pub fn connection_thread(
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
pub async fn connection_task(
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
pub enum ClientKind {
    Threads,
    Tokio,
}

/// One measured interval against one server.
pub struct Interval {
    pub elapsed: Duration,
    pub latencies: Vec<Duration>,
    pub server_cpu: Duration,
    pub server_waited: Duration,
    pub client_cpu: Duration,
}

/// Runs `shape` against `addr` for `seconds`: all connections open first, start together, and
/// stop together; batches finished after the stop are not counted.
pub fn measure(
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
    // The interval between two marks, with the latencies the connections recorded in it.
    let between = |(at, server_cpu, server_waited, client_cpu): (Instant, Duration, Duration, Duration),
                   (end, server_end, server_waited_end, client_end): (Instant, Duration, Duration, Duration),
                   latencies: Vec<Duration>| Interval {
        elapsed: end - at,
        latencies,
        server_cpu: server_end - server_cpu,
        server_waited: server_waited_end.saturating_sub(server_waited),
        client_cpu: client_end - client_cpu,
    };
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
            let begun = mark();
            std::thread::sleep(Duration::from_secs_f64(seconds));
            stop.store(true, Ordering::Relaxed);
            let ended = mark();
            let latencies = threads.into_iter().flat_map(|t| t.join().expect("client thread").latencies).collect();
            between(begun, ended, latencies)
        }
        ClientKind::Tokio => runtime.block_on(async {
            let start = Arc::new(tokio::sync::Barrier::new(shape.connections + 1));
            let tasks: Vec<_> = seeds
                .map(|seed| tokio::spawn(connection_task(addr, shape, seed, data.clone(), start.clone(), stop.clone())))
                .collect();
            start.wait().await;
            let begun = mark();
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            stop.store(true, Ordering::Relaxed);
            let ended = mark();
            let mut latencies = Vec::new();
            for task in tasks {
                latencies.extend(task.await.expect("client task").latencies);
            }
            between(begun, ended, latencies)
        }),
    }
}

/// A server's figures for one row, over all its rounds.
pub struct RowFigures {
    pub gets_per_s: f64,
    pub keys_per_s: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub server_cores: f64,
    /// Threads of the server runnable but waiting for a CPU, on average.
    pub server_waiting: f64,
    pub client_cores: f64,
}

pub fn summarise(shape: Shape, intervals: &[Interval]) -> RowFigures {
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
