//! Workloads: producers writing through the root's HTTP API, and readers on the edges reading
//! over the memcached port.
//!
//! Both are open loop (a slow cluster does not slow them down) and draw every choice from
//! generators seeded by the run's seed, so they are part of the run's determinism.
//!
//! - The writer (`writer.rs`) writes `cfg<w>:<n>` keys with values `<version>.<payload>` (see
//!   [`crate::checkers::reads`]), one `PUT` per request or, with its modes, batches with
//!   repeated keys, deletes, identical rewrites and refused requests; it never has two writes
//!   to one key in flight, so the newest acknowledgement of a key is a value the key may end
//!   with. Each acknowledgement is traced. With a `burst`, it writes at the burst's rate for the
//!   burst's length, periodically.
//! - A reader is a session pinned to one edge, sending `gets` (the cas unique is the edge's
//!   applied index) or plain `get` for one key or several (half the requests ask for 2–4, as
//!   clients batch lookups), with Zipf key popularity; each key's answer goes to the reads
//!   checker (a plain `get` carries no index: it is judged against the session's last-seen
//!   one), and latency (per request), reads and misses (per key) and errors (per request) are
//!   summed per edge for the once-a-second `read_sample`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::checkers::contract::{LedgerBook, Ledgers};
use crate::checkers::reads::{Observed, Reads};
use crate::sync::Locked;
use crate::trace::SharedRecorder;

/// The producer's token, configured on the root.
pub use crate::scenario::nodes::PRODUCER_TOKEN;
/// Longest the writer waits for one write before giving up on it.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a reader waits for one answer before dropping the connection.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Most keys one read request asks for.
const KEYS_PER_READ_MAX: usize = 4;

/// Per key (its bytes), what it may end with (`checkers::convergence`): the writers and the
/// census record each write they send and each answer.
pub type Acked = Arc<Mutex<BTreeMap<Vec<u8>, KeyFate>>>;

pub use crate::checkers::convergence::KeyFate;

pub mod census;
mod writer;
pub use writer::{Judges, WriterSpec, key_name, writer};

/// The scenario's writers and readers, in the order they start: a writer per writer workload,
/// all sending to `roots` (the root's HTTP address, or a group's members'), then a reader per
/// reader workload and edge — the last tier's nodes among `nodes` (each a name and its
/// memcached address), in their order. The simulator and a real run start these same clients.
pub fn specs(
    scenario: &crate::scenario::Scenario,
    seed: u64,
    writer_modes: &[crate::scenario::WriterModes],
    roots: &[SocketAddr],
    nodes: &[(String, SocketAddr)],
) -> (Vec<WriterSpec>, Vec<ReaderSpec>) {
    use crate::scenario::Workload;
    let mut writers = Vec::new();
    // Each writer's key count, in writer order.
    let mut key_spaces: Vec<u64> = Vec::new();
    for (i, workload) in scenario.workload.iter().enumerate() {
        if let Workload::Writer { rate_per_s, keys, value_bytes, burst, preload_rate_per_s, modes: _ } =
            workload.clone()
        {
            key_spaces.push(keys);
            writers.push(WriterSpec {
                writer_id: writers.len(),
                roots: roots.to_vec(),
                rate_per_s,
                keys,
                value_bytes,
                burst,
                preload_rate_per_s,
                modes: writer_modes[writers.len()],
                seed: seed + i as u64,
            });
        }
    }
    let edges = edges(scenario, nodes);
    let mut readers = Vec::new();
    for (i, workload) in scenario.workload.iter().enumerate() {
        let Workload::Reader { rate_per_s, skew, hot_keys } = workload.clone() else { continue };
        // One list shared by every edge's reader: ten thousand edges hold one copy, not one each.
        let all_keys: Arc<[String]> = key_spaces
            .iter()
            .enumerate()
            .flat_map(|(w, keys)| (0..hot_keys.unwrap_or(*keys).min(*keys)).map(move |n| key_name(w, n)))
            .collect();
        if all_keys.is_empty() {
            break; // nothing is ever written, so there is nothing to read
        }
        for (e, (edge, addr)) in edges.iter().enumerate() {
            readers.push(ReaderSpec {
                name: format!("reader{i}@{edge}"),
                edge: edge.clone(),
                addr: *addr,
                rate_per_s,
                skew,
                keys: all_keys.clone(),
                seed: seed ^ ((i as u64) << 32) ^ e as u64,
            });
        }
    }
    (writers, readers)
}

/// The last tier's nodes among `nodes` (each a name and its memcached address), in their order.
pub fn edges<'a>(
    scenario: &crate::scenario::Scenario,
    nodes: &'a [(String, SocketAddr)],
) -> Vec<&'a (String, SocketAddr)> {
    let last_tier = scenario.topology.tiers.last().map(|t| t.get_ref().name.clone()).unwrap_or_default();
    nodes.iter().filter(|(name, _)| name.rsplit_once('-').is_some_and(|(tier, _)| tier == last_tier)).collect()
}

/// Reads summed over one sampling window, per edge.
#[derive(Debug, Default, Clone)]
pub struct ReadWindow {
    pub reads: u64,
    pub misses: u64,
    pub errors: u64,
    pub latencies_us: Vec<u64>,
}

pub type ReadWindows = Arc<Mutex<BTreeMap<String, ReadWindow>>>;

impl ReadWindow {
    /// The window as the `read_sample` event of edge `node` at `at_ms`.
    pub fn into_sample(mut self, at_ms: u64, node: String) -> crate::trace::Event {
        let (p50_us, p99_us, max_us) = percentiles(&mut self.latencies_us);
        let (reads, misses, errors) = (self.reads, self.misses, self.errors);
        crate::trace::Event::ReadSample { at_ms, node, reads, misses, p50_us, p99_us, max_us, errors }
    }
}

/// The 50th and 99th percentile and the maximum of `values` (sorted in place).
pub fn percentiles(values: &mut [u64]) -> (u64, u64, u64) {
    if values.is_empty() {
        return (0, 0, 0);
    }
    values.sort_unstable();
    let at = |q: f64| qs_reports::series::quantile(values, q).unwrap_or(0);
    (at(0.5), at(0.99), values[values.len() - 1])
}

/// What one reader does.
#[derive(Clone, Debug)]
pub struct ReaderSpec {
    pub name: String,
    pub edge: String,
    pub addr: SocketAddr,
    pub rate_per_s: f64,
    pub skew: f64,
    /// Every key the writers use (shared by all readers of one workload).
    pub keys: Arc<[String]>,
    pub seed: u64,
}

#[expect(
    clippy::too_many_lines,
    reason = "71 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub async fn reader(spec: ReaderSpec, recorder: SharedRecorder, reads: Reads, windows: ReadWindows, ledgers: Ledgers) {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x7265_6164_6572);
    // The request's shape (how many keys, `get` or `gets`) from a stream of its own.
    let mut shapes = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x7368_6170_6573);
    let interval = Duration::from_secs_f64(1.0 / spec.rate_per_s);
    let popularity =
        rand_distr::Zipf::new(spec.keys.len() as f64, spec.skew).expect("validated: at least one key, skew >= 0");
    let mut connection: Option<BufReader<tokio::net::TcpStream>> = None;
    loop {
        tokio::time::sleep(interval).await;
        // Zipf ranks start at 1; rank 1 is the hottest key.
        let draw = |rng: &mut ChaCha8Rng| {
            let rank = rng.sample(popularity) as usize;
            spec.keys[(rank - 1).min(spec.keys.len() - 1)].as_str()
        };
        let mut keys = vec![draw(&mut rng)];
        if shapes.random_bool(0.5) {
            for _ in 1..shapes.random_range(2..=KEYS_PER_READ_MAX) {
                let key = draw(&mut shapes);
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        let with_cas = shapes.random_bool(0.75);
        let started = tokio::time::Instant::now();
        if connection.is_none()
            && let Ok(Ok(stream)) = tokio::time::timeout(READ_TIMEOUT, tokio::net::TcpStream::connect(spec.addr)).await
        {
            connection = Some(BufReader::new(stream));
        }
        let answer = match connection.as_mut() {
            Some(conn) => {
                ledgers.get_sent(&spec.edge, keys.len() as u64);
                tokio::time::timeout(READ_TIMEOUT, get(conn, &keys, with_cas)).await.unwrap_or(Err(GetError::Io))
            }
            None => Err(GetError::Io),
        };
        // The operator's counters' ledger (`checkers::contract`): what came back, and what
        // the edge answered with an error (it counts no hit or miss for those).
        match &answer {
            Ok(values) => ledgers.get_answered(&spec.edge, keys.len() as u64, values.iter().flatten().count() as u64),
            Err(GetError::Refused) => ledgers.get_failed(&spec.edge, keys.len() as u64),
            Err(GetError::Io) => {}
        }
        let latency_us = started.elapsed().as_micros() as u64;
        let mut windows = windows.locked();
        let window = windows.entry(spec.edge.clone()).or_default();
        match answer {
            Ok(values) => {
                window.reads += values.len() as u64;
                window.misses += values.iter().filter(|v| v.is_none()).count() as u64;
                window.latencies_us.push(latency_us);
                drop(windows);
                let at_ms = recorder.locked().now_ms();
                for (key, value) in keys.iter().zip(&values) {
                    let (value, token) = match value {
                        Some((value, token)) => (Some(value.as_slice()), *token),
                        None => (None, 0),
                    };
                    let observed = Observed { at_ms, reader: &spec.name, node: &spec.edge, key, value, token };
                    let found = reads.lock().read(observed);
                    if let Some(violation) = found {
                        recorder.locked().record(violation);
                    }
                }
            }
            Err(GetError::Refused) => window.errors += 1,
            Err(GetError::Io) => {
                window.errors += 1;
                connection = None;
            }
        }
    }
}

enum GetError {
    /// The connection failed or timed out; reconnect.
    Io,
    /// The edge answered with an error (not ready, or a damaged value).
    Refused,
}

/// One `gets` (`with_cas`) or `get` of `keys`: per key in order, its value and cas unique (the
/// edge's applied index; 0 for a plain `get`, whose answer carries none), or None for a miss.
/// A miss carries no token; the reads checker judges it against the session's last-seen index.
/// An answer naming a key not asked for, or one twice, is a broken connection.
async fn get(
    conn: &mut BufReader<tokio::net::TcpStream>,
    keys: &[&str],
    with_cas: bool,
) -> Result<Vec<Option<(Vec<u8>, u64)>>, GetError> {
    let stream = conn.get_mut();
    let command = if with_cas { "gets" } else { "get" };
    stream.write_all(format!("{command} {}\r\n", keys.join(" ")).as_bytes()).await.map_err(|_| GetError::Io)?;
    stream.flush().await.map_err(|_| GetError::Io)?;
    let mut values: Vec<Option<(Vec<u8>, u64)>> = vec![None; keys.len()];
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).await.map_err(|_| GetError::Io)?;
        if line == "END\r\n" {
            return Ok(values);
        }
        if line.starts_with("SERVER_ERROR") || line.starts_with("CLIENT_ERROR") {
            return Err(GetError::Refused);
        }
        // VALUE <key> <flags> <bytes> [<cas unique>]
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(&"VALUE"), Some(key), Some(bytes)) = (fields.first(), fields.get(1), fields.get(3)) else {
            return Err(GetError::Io);
        };
        let cas = match (with_cas, fields.get(4)) {
            (true, Some(cas)) => cas.parse().map_err(|_| GetError::Io)?,
            (false, None) => 0,
            _ => return Err(GetError::Io),
        };
        let bytes: usize = bytes.parse().map_err(|_| GetError::Io)?;
        let Some(position) = keys.iter().position(|k| k == key).filter(|&at| values[at].is_none()) else {
            return Err(GetError::Io);
        };
        let mut data = vec![0; bytes + 2];
        conn.read_exact(&mut data).await.map_err(|_| GetError::Io)?;
        data.truncate(bytes);
        values[position] = Some((data, cas));
    }
}
