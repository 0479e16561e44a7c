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
//!   one reply of at most [`REPLY_BYTES_MAX`], and at most [`PENDING_REPLY_BYTES_MAX`] of earlier
//!   replies not yet written. Replies are written before the connection waits for more input:
//!   requests already in the read buffer (a pipelining client's) are answered first and their
//!   replies written together, in one write rather than one per request, and a client that does
//!   not read its replies stops being read (backpressure) instead of growing a queue. An idle
//!   connection holds no reply buffer.
//! - **Counted.** Every refused or malformed request (including each refused write) adds one to
//!   [`ReadCounters::bogus_requests`], and gets exactly one error reply (`ERROR` or
//!   `CLIENT_ERROR`). Every `SERVER_ERROR` adds one to [`ReadCounters::server_errors`]. Hits and
//!   misses are counted per key, for gets that were answered.
//! - **Bounded time per connection** ([`ConnectionLimits`]): the next request line (or a refused
//!   write's data block) must arrive within the idle timeout, and each reply must be written
//!   within it; otherwise the connection is closed with a [`io::ErrorKind::TimedOut`] error. A
//!   deadline covers a whole line, so a client trickling bytes gains nothing. One timer per
//!   connection serves every deadline: it is re-armed only when it fires before the deadline it
//!   stands for, not armed and cancelled for every request. When the node drains, a connection
//!   closes once the request in flight is answered (with pipelined requests, the ones before it
//!   too: every request read is answered).
//! - **Deterministic.** No pid, randomness or OS state is read, and the only clock is
//!   `tokio::time`'s for the deadlines (madsim's under the simulator), so the same bytes at the
//!   same times give the same bytes out, inside the simulator as on real sockets. The stream
//!   type is generic, and only `tokio::io` is used, which is real tokio's in both builds.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
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

/// Replies not yet written, in bytes, past which they are written before the next buffered
/// request is answered: a client that pipelines many requests gets its replies in writes of about
/// this size, and the bytes held for it stay bounded. The next reply is built on top, so at most
/// this plus [`REPLY_BYTES_MAX`] is held.
pub const PENDING_REPLY_BYTES_MAX: usize = 64 << 10;

/// Room made in the reply buffer per key asked for, before reading (up to
/// [`PENDING_REPLY_BYTES_MAX`] per request): values of a few hundred bytes fit without the buffer
/// growing, and so being copied, key by key.
const REPLY_BYTES_PER_KEY: usize = 512;

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
    /// Looks up each of `keys` in order, in one view of the store, handing `found` each key's
    /// position in `keys` and its verified value (None: absent), borrowed for the call; stops at
    /// the first `false`. Err is reported as SERVER_ERROR and counted. By default one
    /// [`get`](Self::get) per key; a store that can read them all at once should.
    fn get_each(&self, keys: &[&[u8]], found: &mut dyn FnMut(usize, Option<&[u8]>) -> bool) -> Result<(), String> {
        for (position, key) in keys.iter().enumerate() {
            if !found(position, self.get(key)?.as_deref()) {
                break;
            }
        }
        Ok(())
    }
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

/// What the connection does after a request, its reply (if any) already in the output.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Read the next line.
    Continue,
    /// Write what is pending, then close (`quit`, or an error that closes the connection).
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
    limits: ConnectionLimits,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ReadCounters::add(&counters.connections_total, 1);
    // BufReader passes writes through to the stream unbuffered; `out` is the write buffer.
    let mut conn = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let mut line = Vec::new();
    let mut out = Vec::new();
    let mut deadline = Deadline::new(limits.idle_timeout);
    // Two views of the lifecycle: a cheap look between buffered requests, and a future that
    // wakes the connection while it waits for input. The future lives as long as the connection,
    // so it registers with the lifecycle once, not once per request.
    let mut lifecycle = limits.lifecycle;
    if let Some(lifecycle) = &mut lifecycle {
        lifecycle.mark_changed();
    }
    let mut drain = std::pin::pin!(draining(lifecycle.clone()));
    loop {
        // Between requests: every request so far is answered, written or in `out`.
        if drain_started(&mut lifecycle) {
            return close(&mut conn, &mut out, &mut deadline).await;
        }
        let read = if line_buffered(&conn) {
            // The next request is already here: answer it before writing what is pending, up to
            // a bound. Reading it needs no I/O.
            if out.len() >= PENDING_REPLY_BYTES_MAX {
                write_out(&mut conn, &mut out, &mut deadline).await?;
            }
            read_line(&mut conn, &mut line).await?
        } else {
            // About to wait for the client: everything answered so far goes out first.
            write_out(&mut conn, &mut out, &mut deadline).await?;
            tokio::select! {
                // Fixed poll order: select!'s default random order draws from a process-wide seed,
                // which would make runs differ under one simulator seed.
                biased;
                () = &mut drain => return close(&mut conn, &mut out, &mut deadline).await,
                read = deadline.within("the next request line", read_line(&mut conn, &mut line)) => read?,
            }
        };
        let step = match read {
            LineRead::Eof => return close(&mut conn, &mut out, &mut deadline).await,
            LineRead::Truncated => refuse(RequestError::Truncated, counters, &mut out),
            LineRead::TooLong => refuse(RequestError::LineTooLong, counters, &mut out),
            LineRead::Line => match parse_request(&line) {
                Ok(request) => {
                    if let Request::Get { keys, .. } = &request {
                        let latency = backend.read_latency(keys);
                        if !latency.is_zero() {
                            // Earlier replies do not wait for this request's (simulated) disk.
                            write_out(&mut conn, &mut out, &mut deadline).await?;
                            tokio::time::sleep(latency).await;
                        }
                    }
                    respond(request, backend, counters, &mut out)
                }
                Err(e) => refuse(e, counters, &mut out),
            },
        };
        match step {
            Step::Continue => {}
            Step::Close => return close(&mut conn, &mut out, &mut deadline).await,
            Step::SkipData(bytes) => {
                // Never wait for input while holding replies.
                write_out(&mut conn, &mut out, &mut deadline).await?;
                let skipped = skip_data_block(&mut conn, &mut line, bytes, &mut out);
                if deadline.within("a refused write's data block", skipped).await? == Step::Close {
                    return close(&mut conn, &mut out, &mut deadline).await;
                }
            }
        }
    }
}

/// Whether a whole request line is already in the read buffer, so reading it needs no I/O.
fn line_buffered<S: AsyncRead>(conn: &BufReader<S>) -> bool {
    conn.buffer().contains(&b'\n')
}

/// Writes the pending replies, within the deadline, and lets go of their buffer.
async fn write_out<W: AsyncWrite + Unpin>(conn: &mut W, out: &mut Vec<u8>, deadline: &mut Deadline) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    deadline
        .within("writing a reply", async {
            conn.write_all(out).await?;
            conn.flush().await
        })
        .await?;
    // An idle connection holds no reply buffer (see `ListenerKind::buffer_bytes`).
    *out = Vec::new();
    Ok(())
}

/// Writes the pending replies and closes the stream.
async fn close<W: AsyncWrite + Unpin>(conn: &mut W, out: &mut Vec<u8>, deadline: &mut Deadline) -> io::Result<()> {
    write_out(conn, out, deadline).await?;
    conn.shutdown().await
}

/// The connection's deadlines (see the module doc): each wait must end within the idle timeout,
/// counted from when it first had to wait. One timer stands for all of them: a deadline is never
/// earlier than the one before (time only moves forward), so the timer is set to the first and,
/// when it fires before the current one, moved to it.
struct Deadline {
    limit: Option<Duration>,
    /// Created at the first wait; never without a limit (no timer in a runtime without time).
    timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl Deadline {
    fn new(limit: Option<Duration>) -> Deadline {
        Deadline { limit, timer: None }
    }

    /// `io` with a deadline: a `TimedOut` error naming `what` once the limit has passed.
    async fn within<T>(&mut self, what: &str, io: impl Future<Output = io::Result<T>>) -> io::Result<T> {
        let Some(limit) = self.limit else { return io.await };
        let mut io = std::pin::pin!(io);
        let mut until = None;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(result) = io.as_mut().poll(cx) {
                return Poll::Ready(result);
            }
            let until = *until.get_or_insert_with(|| tokio::time::Instant::now() + limit);
            let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until)));
            loop {
                match timer.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) if timer.deadline() >= until => {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("{what} did not complete within connections.memcached.idle_timeout ({limit:?})"),
                        )));
                    }
                    Poll::Ready(()) => timer.as_mut().reset(until),
                }
            }
        })
        .await
    }
}

/// Resolves once the node drains; never without a lifecycle.
async fn draining(lifecycle: Option<watch::Receiver<Lifecycle>>) {
    match lifecycle {
        Some(mut lifecycle) => reached(&mut lifecycle, Lifecycle::Draining).await,
        None => std::future::pending().await,
    }
}

/// Whether the node has started draining, looked at without waiting: one atomic load while the
/// lifecycle has not changed since the last look.
fn drain_started(lifecycle: &mut Option<watch::Receiver<Lifecycle>>) -> bool {
    let Some(lifecycle) = lifecycle else { return false };
    match lifecycle.has_changed() {
        Ok(false) => false,
        Ok(true) => *lifecycle.borrow_and_update() >= Lifecycle::Draining,
        // The sender is gone: so is the node.
        Err(_) => true,
    }
}

/// Counts a refused request and puts its reply in `out`.
fn refuse(error: RequestError, counters: &ReadCounters, out: &mut Vec<u8>) -> Step {
    ReadCounters::add(&counters.bogus_requests, 1);
    out.extend_from_slice(error.reply().as_bytes());
    if error.closes_connection() { Step::Close } else { Step::Continue }
}

/// Skips the data block of a refused storage command (already counted), puts its reply in `out`
/// and says whether the connection goes on.
async fn skip_data_block<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    bytes: usize,
    out: &mut Vec<u8>,
) -> io::Result<Step> {
    let refused = READ_ONLY_REPLY.as_bytes();
    if !skip_bytes(reader, bytes).await? {
        out.extend_from_slice(refused);
        return Ok(Step::Close);
    }
    let bad_chunk = || RequestError::BadDataChunk.reply();
    let (reply, step) = match read_line(reader, line).await? {
        LineRead::Line if line.is_empty() => (refused.to_vec(), Step::Continue),
        LineRead::Line => (bad_chunk().into_bytes(), Step::Continue),
        LineRead::Eof => (refused.to_vec(), Step::Close),
        LineRead::Truncated => (bad_chunk().into_bytes(), Step::Close),
        LineRead::TooLong => (RequestError::LineTooLong.reply().into_bytes(), Step::Close),
    };
    out.extend_from_slice(&reply);
    Ok(step)
}

/// Answers a well-formed request, its reply appended to `out`.
fn respond(request: Request<'_>, backend: &dyn ReadBackend, counters: &ReadCounters, out: &mut Vec<u8>) -> Step {
    match request {
        Request::Get { keys, cas } => get_reply(&keys, cas, backend, counters, out),
        Request::Version => out.extend_from_slice(format!("VERSION {}\r\n", version()).as_bytes()),
        Request::Stats => out.extend_from_slice(&stats_reply(backend, counters)),
        Request::Quit => return Step::Close,
        Request::Write { data_bytes, .. } => {
            ReadCounters::add(&counters.bogus_requests, 1);
            match data_bytes {
                Some(bytes) => return Step::SkipData(bytes),
                None => out.extend_from_slice(READ_ONLY_REPLY.as_bytes()),
            }
        }
    }
    Step::Continue
}

/// The version this node reports: `qsim-<crate version>`.
pub fn version() -> String {
    format!("qsim-{}", env!("CARGO_PKG_VERSION"))
}

/// The whole reply to a `get`/`gets`, appended to `out`: every `VALUE` and `END`, or one
/// `SERVER_ERROR` (what was appended of the reply so far is taken back first).
fn get_reply(keys: &[&[u8]], cas: bool, backend: &dyn ReadBackend, counters: &ReadCounters, out: &mut Vec<u8>) {
    // Read before the values: if two replies carry the same token, no apply happened between
    // the first token read and the second, so the value did not change in between.
    let token = cas.then(|| backend.cas_token());
    out.reserve((keys.len() * REPLY_BYTES_PER_KEY).min(PENDING_REPLY_BYTES_MAX));
    let start = out.len();
    let (mut hits, mut misses) = (0, 0);
    let mut too_big = false;
    let read = backend.get_each(keys, &mut |position, value| {
        let Some(value) = value else {
            misses += 1;
            return true;
        };
        hits += 1;
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(keys[position]);
        out.extend_from_slice(b" 0 ");
        push_decimal(out, value.len() as u64);
        if let Some(token) = token {
            out.push(b' ');
            push_decimal(out, token);
        }
        out.extend_from_slice(b"\r\n");
        if out.len() - start + value.len() + "\r\nEND\r\n".len() > REPLY_BYTES_MAX {
            too_big = true;
            return false;
        }
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
        true
    });
    if let Err(message) = read {
        out.truncate(start);
        return server_error(&message, counters, out);
    }
    if too_big {
        out.truncate(start);
        return server_error(
            &format!("reply over REPLY_BYTES_MAX ({REPLY_BYTES_MAX} bytes); ask for fewer keys per get"),
            counters,
            out,
        );
    }
    out.extend_from_slice(b"END\r\n");
    ReadCounters::add(&counters.get_hits, hits);
    ReadCounters::add(&counters.get_misses, misses);
}

/// `n` in decimal, as `format!` would write it, without allocating.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// A counted `SERVER_ERROR` line, appended to `out`; the message is made one line and cut to
/// [`ERROR_MESSAGE_BYTES_MAX`].
fn server_error(message: &str, counters: &ReadCounters, out: &mut Vec<u8>) {
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
    out.extend_from_slice(format!("SERVER_ERROR {text}\r\n").as_bytes());
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

    /// A stream that hands over its input as fast as it is read, then ends, and records each
    /// write it is given.
    struct Recorder {
        input: Vec<u8>,
        writes: Vec<Vec<u8>>,
    }

    impl tokio::io::AsyncRead for Recorder {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let n = buf.remaining().min(self.input.len());
            let taken: Vec<u8> = self.input.drain(..n).collect();
            buf.put_slice(&taken);
            Poll::Ready(Ok(()))
        }
    }

    impl tokio::io::AsyncWrite for Recorder {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    async fn recorded(backend: &Map, input: &[u8]) -> Vec<Vec<u8>> {
        let mut recorder = Recorder { input: input.to_vec(), writes: Vec::new() };
        serve_connection(&mut recorder, backend, &ReadCounters::default()).await.expect("serve");
        recorder.writes
    }

    #[tokio::test]
    async fn pipelined_replies_go_out_in_one_write() {
        let writes = recorded(&map(), &b"get a\r\nversion\r\nget zz\r\n".repeat(8)).await;
        let reply = format!("VALUE a 0 1\r\n1\r\nEND\r\nVERSION {}\r\nEND\r\n", version());
        assert_eq!(writes, vec![reply.repeat(8).into_bytes()]);
        // A request after the buffered ones were answered: its reply is a write of its own.
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut rx, mut tx) = tokio::io::split(client);
        let (backend, counters) = (map(), ReadCounters::default());
        let client = async {
            let mut reply = [0u8; 21];
            for _ in 0..3 {
                tx.write_all(b"get a\r\n").await.expect("write");
                rx.read_exact(&mut reply).await.expect("read");
                assert_eq!(&reply, b"VALUE a 0 1\r\n1\r\nEND\r\n");
            }
            tx.shutdown().await.expect("shutdown");
        };
        let (served, ()) = tokio::join!(serve_connection(server, &backend, &counters), client);
        served.expect("serve");
        assert_eq!(counters.snapshot().get_hits, 3);
    }

    #[tokio::test]
    async fn replies_held_for_pipelined_requests_are_bounded() {
        let mut backend = map();
        backend.0.insert(b"mid".to_vec(), Ok(vec![b'm'; 1000]));
        let requests = 3 * PENDING_REPLY_BYTES_MAX / 1000;
        let writes = recorded(&backend, &b"get mid\r\n".repeat(requests)).await;
        let reply = format!("VALUE mid 0 1000\r\n{}\r\nEND\r\n", "m".repeat(1000));
        assert!(writes.len() >= 3, "{} writes", writes.len());
        assert!(writes.iter().all(|w| w.len() < PENDING_REPLY_BYTES_MAX + reply.len()));
        assert_eq!(writes.concat(), reply.repeat(requests).into_bytes());
    }

    // Tokio's paused clock; the simulator's runtime has its own (node/tests/simulated.rs).
    #[cfg(not(madsim))]
    #[tokio::test(start_paused = true)]
    async fn a_client_that_does_not_read_stops_being_read() {
        let (backend, counters) = (map(), ReadCounters::default());
        let (client, server) = tokio::io::duplex(4 << 10);
        let (_rx, mut tx) = tokio::io::split(client);
        let sent = AtomicU64::new(0);
        let flood = async {
            for _ in 0..100_000 {
                if tx.write_all(b"get a\r\n").await.is_err() {
                    return;
                }
                sent.fetch_add(7, Ordering::Relaxed);
            }
        };
        tokio::select! {
            _ = serve_connection(server, &backend, &counters) => panic!("the server ended"),
            () = flood => panic!("the server read 700 000 bytes of requests whose replies were never read"),
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        // Replies held (64 KiB of 21-byte replies answer 22 000 bytes of requests), the read
        // buffer, and both directions of the pipe.
        assert!(sent.load(Ordering::Relaxed) < 64 << 10, "{} bytes read", sent.load(Ordering::Relaxed));
    }

    // Tokio's paused clock; the simulator's runtime has its own (node/tests/simulated.rs).
    #[cfg(not(madsim))]
    /// Serves `client` with a 10 s idle timeout; the connection's result and when it ended.
    async fn timed<F: Future<Output = ()>>(
        backend: &Map,
        server: tokio::io::DuplexStream,
        client: F,
    ) -> (io::Result<()>, Duration) {
        let counters = ReadCounters::default();
        let limits = ConnectionLimits { idle_timeout: Some(Duration::from_secs(10)), lifecycle: None };
        let begun = tokio::time::Instant::now();
        let served = async {
            let served = serve_connection_within(server, backend, &counters, limits).await;
            (served, begun.elapsed())
        };
        tokio::select! {
            biased;
            ended = served => ended,
            () = async { client.await; std::future::pending().await } => unreachable!(),
        }
    }

    // Tokio's paused clock; the simulator's runtime has its own (node/tests/simulated.rs).
    #[cfg(not(madsim))]
    #[tokio::test(start_paused = true)]
    async fn idle_deadline_counts_from_the_last_reply() {
        let backend = map();
        // Silent from the start.
        let (_client, server) = tokio::io::duplex(1 << 16);
        let (served, after) = timed(&backend, server, async {}).await;
        assert_eq!(served.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
        assert_eq!(after, Duration::from_secs(10));
        // A request every 6 s keeps it open (the timer set at the first wait fires at 10 s and is
        // moved on, never cutting a live client); then 10 s of silence after the last reply.
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut rx, mut tx) = tokio::io::split(client);
        let client = async move {
            let mut reply = [0u8; 21];
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_secs(6)).await;
                tx.write_all(b"get a\r\n").await.expect("write");
                rx.read_exact(&mut reply).await.expect("read");
            }
            // Keep both halves open.
            std::future::pending::<()>().await;
        };
        let (served, after) = timed(&backend, server, client).await;
        assert_eq!(served.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
        assert_eq!(after, Duration::from_secs(40));
        // A line trickled a byte every 2 s: the deadline covers the whole line.
        let (client, server) = tokio::io::duplex(1 << 16);
        let (_rx, mut tx) = tokio::io::split(client);
        let client = async move {
            for byte in b"get aaaaaaaaaaaaaaaaaaaa".iter().cycle() {
                tokio::time::sleep(Duration::from_secs(2)).await;
                tx.write_all(&[*byte]).await.expect("write");
            }
        };
        let (served, after) = timed(&backend, server, client).await;
        assert_eq!(served.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
        assert_eq!(after, Duration::from_secs(10));
    }

    // Tokio's paused clock; the simulator's runtime has its own (node/tests/simulated.rs).
    #[cfg(not(madsim))]
    #[tokio::test(start_paused = true)]
    async fn a_reply_not_taken_times_out() {
        let backend = map();
        let (client, server) = tokio::io::duplex(1024);
        let (_rx, mut tx) = tokio::io::split(client);
        let client = async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            tx.write_all(b"get big\r\n").await.expect("write");
            std::future::pending::<()>().await;
        };
        let (served, after) = timed(&backend, server, client).await;
        let error = served.expect_err("the reply cannot be written");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("writing a reply"), "{error}");
        assert_eq!(after, Duration::from_secs(13));
    }

    /// Starts the node's drain when it reads its first key.
    struct DrainsOnFirstGet(Map, watch::Sender<Lifecycle>);

    impl ReadBackend for DrainsOnFirstGet {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
            self.1.send_replace(Lifecycle::Draining);
            self.0.get(key)
        }
        fn cas_token(&self) -> u64 {
            self.0.cas_token()
        }
        fn stats(&self) -> Vec<(String, String)> {
            self.0.stats()
        }
    }

    #[tokio::test]
    async fn draining_closes_between_pipelined_requests() {
        let (lifecycle, watched) = watch::channel(Lifecycle::Serving);
        let backend = DrainsOnFirstGet(map(), lifecycle);
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut rx, mut tx) = tokio::io::split(client);
        tx.write_all(b"version\r\nget a\r\nget a\r\nversion\r\n").await.expect("write");
        let limits = ConnectionLimits { idle_timeout: None, lifecycle: Some(watched) };
        let counters = ReadCounters::default();
        serve_connection_within(server, &backend, &counters, limits).await.expect("serve");
        let mut out = String::new();
        rx.read_to_string(&mut out).await.expect("read");
        // The request in flight when the drain began is answered, with those before it; the rest
        // are not read.
        assert_eq!(out, format!("VERSION {}\r\nVALUE a 0 1\r\n1\r\nEND\r\n", version()));
        // Already draining when the connection starts: closed before reading anything.
        let (lifecycle, watched) = watch::channel(Lifecycle::Draining);
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut rx, mut tx) = tokio::io::split(client);
        tx.write_all(b"version\r\n").await.expect("write");
        let limits = ConnectionLimits { idle_timeout: None, lifecycle: Some(watched) };
        serve_connection_within(server, &map(), &counters, limits).await.expect("serve");
        let mut out = Vec::new();
        rx.read_to_end(&mut out).await.expect("read");
        assert!(out.is_empty());
        drop(lifecycle);
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
