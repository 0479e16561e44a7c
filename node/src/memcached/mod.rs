//! The read path of an edge node: memcached's text protocol, read-only.
//!
//! Edge nodes answer reads over the memcached text protocol so that existing memcached clients
//! work unchanged. Writes never arrive here: they go to the root over HTTP and reach this node
//! only through replication.
//!
//! Served: `get <key>+`, `gets <key>+` (the cas unique is [`ReadBackend::cas_token`]), `version`,
//! `stats` and `quit`. Write commands (`set`, `add`, `replace`, `append`, `prepend`, `cas`, `ms`,
//! `delete`, `incr`, `decr`, `touch`, `gat`, `gats`, `flush_all`, `verbosity`, ...) are refused
//! with [`READ_ONLY_REPLY`]. Anything else is `ERROR`.
//!
//! Guarantees:
//! - **No input panics or wedges the node.** Every line is read with a bound
//!   ([`LINE_BYTES_MAX`]); nothing is read into an unbounded buffer, and no input-derived value is
//!   unwrapped. Control bytes (NUL, tab, a stray `\r`, ...) and a non-ASCII command word (binary
//!   garbage, or the binary protocol) are malformed; keys are bytes, refused only for what
//!   [`validate_key`](crate::entry::validate_key) refuses in the store, so every stored key can be
//!   read. A malformed request gets `CLIENT_ERROR <what was wrong>` (an unknown command gets
//!   `ERROR`) and the connection goes on with the next line. Lines may end in `\r\n` or a bare
//!   `\n`, as memcached accepts.
//! - **Closed only when the stream cannot be resynchronised:** a line longer than
//!   [`LINE_BYTES_MAX`] (the next line boundary cannot be found without reading unboundedly), or
//!   a storage command whose data length does not parse or exceeds
//!   [`VALUE_BYTES_MAX`](crate::limits::VALUE_BYTES_MAX) (its data block cannot be skipped). Both
//!   get a `CLIENT_ERROR` first. A refused storage command with a sane length has its data block
//!   skipped, so the next request is read from the right place.
//! - **One whole reply per request.** A `get` reply is built completely before any of it is
//!   written, so a backend error on the third key answers `SERVER_ERROR <msg>` alone, never after
//!   partial `VALUE` lines. Errors are sent even when a write carried `noreply`, as memcached
//!   does for errors (`out_errstring`).
//! - **Bounded memory per connection:** the read buffer, one line of at most [`LINE_BYTES_MAX`],
//!   and one reply of at most [`REPLY_BYTES_MAX`]. Each reply is written before the next line is
//!   read, so a client that does not read its replies stops being read (backpressure) instead of
//!   growing a queue.
//! - **Counted.** Every refused or malformed request (including each refused write) adds one to
//!   [`ReadCounters::bogus_requests`], and gets exactly one error reply (`ERROR` or
//!   `CLIENT_ERROR`). Every `SERVER_ERROR` adds one to [`ReadCounters::server_errors`]. Hits and
//!   misses are counted per key, for gets that were answered.
//! - **Bounded time per connection** ([`ConnectionLimits`]): the next request line (or a refused
//!   write's data block) must arrive within the idle timeout, and each reply must be written
//!   within it; otherwise the connection is closed with a [`io::ErrorKind::TimedOut`] error. A
//!   deadline covers a whole line, so a client trickling bytes gains nothing. When the node
//!   drains, a connection closes once the request in flight is answered.
//! - **Deterministic.** No pid, randomness or OS state is read, and the only clock is
//!   `tokio::time`'s for the deadlines (madsim's under the simulator), so the same bytes at the
//!   same times give the same bytes out, inside the simulator as on real sockets. The stream
//!   type is generic, and only `tokio::io` is used, which is real tokio's in both builds.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use crate::connections::{Lifecycle, reached};
use crate::limits::{KEY_BYTES_MAX, VALUE_BYTES_MAX};

/// Longest request line, in bytes, not counting its line end. memcached caps a key line at 2048
/// bytes, but a multi-key `get` is longer: 64 KiB holds `gets` followed by [`KEYS_PER_GET_MAX`]
/// keys of [`KEY_BYTES_MAX`] bytes each with their separating spaces (64 261 bytes), so every
/// request within the other limits fits on one line, while a client that never sends a line end
/// costs at most this much memory.
pub const LINE_BYTES_MAX: usize = 64 << 10;

/// Most keys in one `get`/`gets`. Bounds the store reads one request can trigger, and with
/// [`KEY_BYTES_MAX`] sizes [`LINE_BYTES_MAX`]. Clients batch multi-gets well below this (pylibmc
/// and spymemcached send tens to a few hundred keys per request).
pub const KEYS_PER_GET_MAX: usize = 256;

/// Largest reply to one request, in bytes, headers included. A reply is held whole in memory
/// before it is written (see the module doc), so this bounds what one connection can pin: 16
/// maximal values ([`VALUE_BYTES_MAX`] is 1 MiB). A `get` over it is answered `SERVER_ERROR` and
/// should be split; a single-key `get` always fits.
pub const REPLY_BYTES_MAX: usize = 16 << 20;

/// Longest message in a `SERVER_ERROR` line, in bytes; longer backend messages are cut. The
/// reply must stay one short line, and a store error naming an escaped 250-byte key fits.
pub const ERROR_MESSAGE_BYTES_MAX: usize = 1024;

/// Read buffer per connection, in bytes: a few typical request lines per read.
const READ_BUFFER_BYTES: usize = 8 << 10;

// Every request within the key limits fits on one line.
const _: () = assert!("gets".len() + KEYS_PER_GET_MAX * (1 + KEY_BYTES_MAX) <= LINE_BYTES_MAX);
// Every single-key get fits in one reply: header (key, flags, length, cas) plus value and END.
const _: () = assert!(VALUE_BYTES_MAX + KEY_BYTES_MAX + 64 <= REPLY_BYTES_MAX);

/// The reply to every write command.
pub const READ_ONLY_REPLY: &str = "CLIENT_ERROR read-only: writes go through the root's HTTP API\r\n";

/// What the protocol reads from: the node's store, as of its applied index.
pub trait ReadBackend: Send + Sync {
    /// The value under `key`, checksum-verified by the store. Err is reported as SERVER_ERROR and counted.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Token returned by `gets` as the cas unique: the node's applied index at read time.
    fn cas_token(&self) -> u64;
    /// How long one `get`'s reads of `keys` take beyond the work itself: a simulated disk's
    /// latency (and its cache model's misses), waited before answering. Zero on a real disk.
    fn read_latency(&self, _keys: &[&[u8]]) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    /// Extra `stats` lines from the node (applied index, lag, ...), in a fixed order.
    fn stats(&self) -> Vec<(String, String)>;
}

/// Counters of the read path, shared by all connections of a node.
#[derive(Debug, Default)]
pub struct ReadCounters {
    /// Keys found, over all answered `get`/`gets` requests.
    pub get_hits: AtomicU64,
    /// Keys not found, over all answered `get`/`gets` requests.
    pub get_misses: AtomicU64,
    /// Requests refused: malformed, unknown, over a limit, or a write.
    pub bogus_requests: AtomicU64,
    /// Requests answered `SERVER_ERROR` (backend error, reply over [`REPLY_BYTES_MAX`]).
    pub server_errors: AtomicU64,
    /// Connections served since the counters were made.
    pub connections_total: AtomicU64,
}

/// A plain copy of [`ReadCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCountersSnapshot {
    pub get_hits: u64,
    pub get_misses: u64,
    pub bogus_requests: u64,
    pub server_errors: u64,
    pub connections_total: u64,
}

impl ReadCounters {
    pub fn snapshot(&self) -> ReadCountersSnapshot {
        ReadCountersSnapshot {
            get_hits: self.get_hits.load(Ordering::Relaxed),
            get_misses: self.get_misses.load(Ordering::Relaxed),
            bogus_requests: self.bogus_requests.load(Ordering::Relaxed),
            server_errors: self.server_errors.load(Ordering::Relaxed),
            connections_total: self.connections_total.load(Ordering::Relaxed),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

mod lines;
mod request;

pub use request::{Request, RequestError, parse_request};

use lines::{LineRead, read_line, skip_bytes};

/// What the connection does after a request.
enum Step {
    /// Write the reply, then read the next line.
    Reply(Vec<u8>),
    /// Write the reply, then close.
    ReplyAndClose(Vec<u8>),
    /// Close without a reply (`quit`).
    Close,
    /// A refused storage command: skip its data block of this many bytes and its line end, then
    /// reply.
    SkipData(usize),
}

/// How long a connection may keep the server waiting, and when it must stop (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct ConnectionLimits {
    /// The next request line (or a refused write's data block) must arrive within this, and each
    /// reply must be written within it. None: no deadline (an in-memory stream in a test).
    pub idle_timeout: Option<Duration>,
    /// At [`Lifecycle::Draining`] the connection closes once the request in flight is answered.
    /// None: it never drains.
    pub lifecycle: Option<watch::Receiver<Lifecycle>>,
}

/// Serves one client connection until it quits, ends, or must be closed (see the module doc),
/// with no deadline and no drain: [`serve_connection_within`] without [`ConnectionLimits`].
pub async fn serve_connection<S>(stream: S, backend: &dyn ReadBackend, counters: &ReadCounters) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    serve_connection_within(stream, backend, counters, ConnectionLimits::default()).await
}

/// Serves one client connection until it quits, ends, times out, the node drains, or the
/// connection must be closed (see the module doc). An `Err` is an I/O error of the stream or a
/// passed deadline ([`io::ErrorKind::TimedOut`]); protocol errors are answered, never returned.
pub async fn serve_connection_within<S>(
    stream: S,
    backend: &dyn ReadBackend,
    counters: &ReadCounters,
    mut limits: ConnectionLimits,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ReadCounters::add(&counters.connections_total, 1);
    // BufReader passes writes through to the stream unbuffered.
    let mut conn = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let mut line = Vec::new();
    let idle = limits.idle_timeout;
    loop {
        let read = tokio::select! {
            // Fixed poll order: select!'s default random order draws from a process-wide seed,
            // which would make runs differ under one simulator seed.
            biased;
            // Between requests: every request so far is answered.
            () = draining(&mut limits.lifecycle) => return conn.shutdown().await,
            read = within(idle, "the next request line", read_line(&mut conn, &mut line)) => read?,
        };
        let step = match read {
            LineRead::Eof => return conn.shutdown().await,
            LineRead::Truncated => refuse(RequestError::Truncated, counters),
            LineRead::TooLong => refuse(RequestError::LineTooLong, counters),
            LineRead::Line => match parse_request(&line) {
                Ok(request) => {
                    if let Request::Get { keys, .. } = &request {
                        let latency = backend.read_latency(keys);
                        if !latency.is_zero() {
                            tokio::time::sleep(latency).await;
                        }
                    }
                    respond(request, backend, counters)
                }
                Err(e) => refuse(e, counters),
            },
        };
        let step = match step {
            Step::SkipData(bytes) => {
                within(idle, "a refused write's data block", skip_data_block(&mut conn, &mut line, bytes)).await?
            }
            other => other,
        };
        match step {
            Step::Reply(reply) => {
                within(idle, "writing a reply", async {
                    conn.write_all(&reply).await?;
                    conn.flush().await
                })
                .await?;
            }
            Step::ReplyAndClose(reply) => {
                within(idle, "writing a reply", conn.write_all(&reply)).await?;
                return conn.shutdown().await;
            }
            Step::Close | Step::SkipData(_) => return conn.shutdown().await,
        }
    }
}

/// `io` with a deadline: a `TimedOut` error naming `what` once `limit` has passed.
async fn within<T>(limit: Option<Duration>, what: &str, io: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    let Some(limit) = limit else { return io.await };
    match tokio::time::timeout(limit, io).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} did not complete within connections.memcached.idle_timeout ({limit:?})"),
        )),
    }
}

/// Resolves once the node drains; never without a lifecycle.
async fn draining(lifecycle: &mut Option<watch::Receiver<Lifecycle>>) {
    match lifecycle {
        Some(lifecycle) => reached(lifecycle, Lifecycle::Draining).await,
        None => std::future::pending().await,
    }
}

/// Counts a refused request and gives its reply.
fn refuse(error: RequestError, counters: &ReadCounters) -> Step {
    ReadCounters::add(&counters.bogus_requests, 1);
    let reply = error.reply().into_bytes();
    if error.closes_connection() { Step::ReplyAndClose(reply) } else { Step::Reply(reply) }
}

/// Skips the data block of a refused storage command (already counted) and picks its reply.
async fn skip_data_block<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    bytes: usize,
) -> io::Result<Step> {
    let refused = READ_ONLY_REPLY.as_bytes().to_vec();
    if !skip_bytes(reader, bytes).await? {
        return Ok(Step::ReplyAndClose(refused));
    }
    let bad_chunk = || RequestError::BadDataChunk.reply().into_bytes();
    Ok(match read_line(reader, line).await? {
        LineRead::Line if line.is_empty() => Step::Reply(refused),
        LineRead::Line => Step::Reply(bad_chunk()),
        LineRead::Eof => Step::ReplyAndClose(refused),
        LineRead::Truncated => Step::ReplyAndClose(bad_chunk()),
        LineRead::TooLong => Step::ReplyAndClose(RequestError::LineTooLong.reply().into_bytes()),
    })
}

/// Answers a well-formed request.
fn respond(request: Request<'_>, backend: &dyn ReadBackend, counters: &ReadCounters) -> Step {
    match request {
        Request::Get { keys, cas } => Step::Reply(get_reply(&keys, cas, backend, counters)),
        Request::Version => Step::Reply(format!("VERSION {}\r\n", version()).into_bytes()),
        Request::Stats => Step::Reply(stats_reply(backend, counters)),
        Request::Quit => Step::Close,
        Request::Write { data_bytes, .. } => {
            ReadCounters::add(&counters.bogus_requests, 1);
            match data_bytes {
                Some(bytes) => Step::SkipData(bytes),
                None => Step::Reply(READ_ONLY_REPLY.as_bytes().to_vec()),
            }
        }
    }
}

/// The version this node reports: `qsim-<crate version>`.
pub fn version() -> String {
    format!("qsim-{}", env!("CARGO_PKG_VERSION"))
}

/// The whole reply to a `get`/`gets`: every `VALUE` and `END`, or one `SERVER_ERROR`.
fn get_reply(keys: &[&[u8]], cas: bool, backend: &dyn ReadBackend, counters: &ReadCounters) -> Vec<u8> {
    // Read before the values: if two replies carry the same token, no apply happened between
    // the first token read and the second, so the value did not change in between.
    let token = cas.then(|| backend.cas_token());
    let mut reply = Vec::new();
    let (mut hits, mut misses) = (0, 0);
    for key in keys {
        match backend.get(key) {
            Ok(Some(value)) => {
                hits += 1;
                let numbers = match token {
                    Some(token) => format!(" 0 {} {token}\r\n", value.len()),
                    None => format!(" 0 {}\r\n", value.len()),
                };
                let header = [&b"VALUE "[..], key, numbers.as_bytes()].concat();
                if reply.len() + header.len() + value.len() + "\r\nEND\r\n".len() > REPLY_BYTES_MAX {
                    return server_error(
                        &format!("reply over REPLY_BYTES_MAX ({REPLY_BYTES_MAX} bytes); ask for fewer keys per get"),
                        counters,
                    );
                }
                reply.extend_from_slice(&header);
                reply.extend_from_slice(&value);
                reply.extend_from_slice(b"\r\n");
            }
            Ok(None) => misses += 1,
            Err(message) => return server_error(&message, counters),
        }
    }
    reply.extend_from_slice(b"END\r\n");
    ReadCounters::add(&counters.get_hits, hits);
    ReadCounters::add(&counters.get_misses, misses);
    reply
}

/// A counted `SERVER_ERROR` line; the message is made one line and cut to
/// [`ERROR_MESSAGE_BYTES_MAX`].
fn server_error(message: &str, counters: &ReadCounters) -> Vec<u8> {
    ReadCounters::add(&counters.server_errors, 1);
    let mut text = one_line(message, false);
    if text.len() > ERROR_MESSAGE_BYTES_MAX {
        let mut cut = ERROR_MESSAGE_BYTES_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    format!("SERVER_ERROR {text}\r\n").into_bytes()
}

/// The `stats` reply. Names follow memcached where it has one (`total_connections`).
fn stats_reply(backend: &dyn ReadBackend, counters: &ReadCounters) -> Vec<u8> {
    let s = counters.snapshot();
    let mut lines: Vec<(String, String)> = vec![
        ("version".into(), version()),
        ("get_hits".into(), s.get_hits.to_string()),
        ("get_misses".into(), s.get_misses.to_string()),
        ("bogus_requests".into(), s.bogus_requests.to_string()),
        ("server_errors".into(), s.server_errors.to_string()),
        ("total_connections".into(), s.connections_total.to_string()),
    ];
    lines.extend(backend.stats());
    let mut reply = String::new();
    for (name, value) in &lines {
        let name = one_line(name, true);
        let name = if name.is_empty() { "_".to_string() } else { name };
        reply.push_str(&format!("STAT {name} {}\r\n", one_line(value, false)));
    }
    reply.push_str("END\r\n");
    reply.into_bytes()
}

/// `text` with control characters (and, if `no_spaces`, spaces) replaced by `_`, so it cannot
/// break a reply line.
fn one_line(text: &str, no_spaces: bool) -> String {
    text.chars().map(|c| if c.is_control() || (no_spaces && c == ' ') { '_' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tokio::io::AsyncReadExt;

    use super::*;

    struct Map(BTreeMap<Vec<u8>, Result<Vec<u8>, String>>);

    impl ReadBackend for Map {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
            self.0.get(key).cloned().transpose()
        }
        fn cas_token(&self) -> u64 {
            7
        }
        fn stats(&self) -> Vec<(String, String)> {
            vec![("applied index".into(), "7\r\nEND".into())]
        }
    }

    async fn serve(backend: &Map, counters: &ReadCounters, input: &[u8]) -> String {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (mut rx, mut tx) = tokio::io::split(client);
        let mut out = Vec::new();
        let (served, _, read) = tokio::join!(
            serve_connection(server, backend, counters),
            async {
                // The server may close before reading everything; that is not this test's concern.
                let _ = tx.write_all(input).await;
                let _ = tx.shutdown().await;
            },
            rx.read_to_end(&mut out),
        );
        served.expect("serve");
        read.expect("read");
        String::from_utf8_lossy(&out).into_owned()
    }

    fn map() -> Map {
        Map(BTreeMap::from([
            (b"a".to_vec(), Ok(b"1".to_vec())),
            (b"big".to_vec(), Ok(vec![b'x'; VALUE_BYTES_MAX])),
            (b"bad".to_vec(), Err("checksum mismatch\r\nfor key \"bad\"".into())),
        ]))
    }

    #[tokio::test]
    async fn answers_whole_or_server_error() {
        let (backend, counters) = (map(), ReadCounters::default());
        let out = serve(&backend, &counters, b"get a zz a\r\ngets a bad a\r\nget a\n").await;
        assert_eq!(
            out,
            "VALUE a 0 1\r\n1\r\nVALUE a 0 1\r\n1\r\nEND\r\n\
             SERVER_ERROR checksum mismatch__for key \"bad\"\r\n\
             VALUE a 0 1\r\n1\r\nEND\r\n"
        );
        let s = counters.snapshot();
        assert_eq!(
            s,
            ReadCountersSnapshot {
                get_hits: 3,
                get_misses: 1,
                bogus_requests: 0,
                server_errors: 1,
                connections_total: 1
            }
        );
    }

    #[tokio::test]
    async fn reply_size_is_bounded() {
        let (backend, counters) = (map(), ReadCounters::default());
        let keys = " big".repeat(REPLY_BYTES_MAX / VALUE_BYTES_MAX + 1);
        let out = serve(&backend, &counters, format!("get{keys}\r\nget big\r\n").as_bytes()).await;
        let (first, rest) = out.split_once("\r\n").expect("a line");
        assert!(first.starts_with("SERVER_ERROR reply over REPLY_BYTES_MAX"), "{first}");
        assert!(rest.starts_with(&format!("VALUE big 0 {VALUE_BYTES_MAX}\r\n")));
        assert!(rest.ends_with("\r\nEND\r\n"));
        assert_eq!(counters.snapshot().server_errors, 1);
        assert_eq!(counters.snapshot().get_hits, 1);
    }

    #[tokio::test]
    async fn stats_lines_cannot_break_the_reply() {
        let (backend, counters) = (map(), ReadCounters::default());
        let out = serve(&backend, &counters, b"stats\r\n").await;
        let expected = format!(
            "STAT version qsim-{}\r\nSTAT get_hits 0\r\nSTAT get_misses 0\r\nSTAT bogus_requests 0\r\n\
             STAT server_errors 0\r\nSTAT total_connections 1\r\nSTAT applied_index 7__END\r\nEND\r\n",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(out, expected);
    }

    #[tokio::test]
    async fn write_data_block_is_skipped() {
        let (backend, counters) = (map(), ReadCounters::default());
        let out = serve(&backend, &counters, b"set a 0 0 9\r\nget a\r\nx\r\nset a 0 0 1\r\n12\r\nget a\r\n").await;
        let expected = format!("{READ_ONLY_REPLY}{}VALUE a 0 1\r\n1\r\nEND\r\n", RequestError::BadDataChunk.reply());
        assert_eq!(out, expected);
        assert_eq!(counters.snapshot().bogus_requests, 2);
    }
}
