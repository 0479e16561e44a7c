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
//! - **Deterministic.** No clock, pid, randomness or OS state is read, so the same bytes in give
//!   the same bytes out, inside the simulator as on real sockets. The stream type is generic, and
//!   only `tokio::io` is used, which is real tokio's in both builds.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::limits::{KEY_BYTES_MAX, LimitExceeded, VALUE_BYTES_MAX};

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

/// One parsed request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get` (`cas == false`) or `gets` (`cas == true`), with 1 to [`KEYS_PER_GET_MAX`] keys, each
    /// at most [`KEY_BYTES_MAX`] bytes, in request order (repeats kept, as memcached does).
    Get {
        keys: Vec<&'a [u8]>,
        cas: bool,
    },
    Version,
    Stats,
    Quit,
    /// A write command, refused. `data_bytes` is the length of the data block that follows the
    /// line (storage commands only); it has been checked against `VALUE_BYTES_MAX`.
    Write {
        command: &'static str,
        data_bytes: Option<usize>,
    },
}

/// Why a request was refused. The reply is [`RequestError::reply`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("empty request line")]
    EmptyLine,
    #[error("control byte 0x{byte:02x} at offset {offset} of the request line")]
    ControlByte { byte: u8, offset: usize },
    /// The command word has a non-ASCII byte: binary garbage, or the binary protocol.
    #[error("byte 0x{byte:02x} at offset {offset} in the command word; only the text protocol is served")]
    NotText { byte: u8, offset: usize },
    /// Answered `ERROR`, as memcached answers an unknown command.
    #[error("unknown command")]
    UnknownCommand,
    #[error("{command} needs at least one key")]
    MissingKey { command: &'static str },
    /// `position` counts keys from 1.
    #[error("key {position}: {limit}")]
    KeyTooLong { position: usize, limit: LimitExceeded },
    #[error("{count} keys in one request but the limit KEYS_PER_GET_MAX is {KEYS_PER_GET_MAX}; split the request")]
    TooManyKeys { count: usize },
    #[error("{command} takes no arguments here")]
    UnexpectedArgument { command: &'static str },
    /// Closes the connection: the data block that follows cannot be skipped.
    #[error("bad command line format: {command} needs a decimal data length; closing the connection")]
    BadDataLength { command: &'static str },
    /// Closes the connection: the data block is too large to skip.
    #[error("{0}; closing the connection")]
    ValueTooLarge(LimitExceeded),
    /// Closes the connection: the next line boundary cannot be found with bounded reading.
    #[error("line too long: no line end within LINE_BYTES_MAX ({LINE_BYTES_MAX}) bytes; closing the connection")]
    LineTooLong,
    /// The connection ended in the middle of a line.
    #[error("truncated request: the connection ended before the line end")]
    Truncated,
    /// A write's data block was not followed by a line end; the rest of that line is discarded.
    #[error("bad data chunk: the data block is not followed by a line end")]
    BadDataChunk,
}

impl RequestError {
    /// The reply line for this error, with its `\r\n`.
    pub fn reply(&self) -> String {
        match self {
            RequestError::UnknownCommand => "ERROR\r\n".to_string(),
            other => format!("CLIENT_ERROR {other}\r\n"),
        }
    }

    /// True when the connection is closed after the reply.
    pub fn closes_connection(&self) -> bool {
        matches!(
            self,
            RequestError::BadDataLength { .. }
                | RequestError::ValueTooLarge(_)
                | RequestError::LineTooLong
                | RequestError::Truncated
        )
    }
}

/// Write commands, each with the position of its data-length token if a data block follows.
const WRITE_COMMANDS: &[(&str, Option<usize>)] = &[
    ("set", Some(4)),
    ("add", Some(4)),
    ("replace", Some(4)),
    ("append", Some(4)),
    ("prepend", Some(4)),
    ("cas", Some(4)),
    ("ms", Some(2)),
    ("delete", None),
    ("incr", None),
    ("decr", None),
    ("touch", None),
    ("gat", None),
    ("gats", None),
    ("md", None),
    ("ma", None),
    ("flush_all", None),
    ("verbosity", None),
    ("cache_memlimit", None),
    ("shutdown", None),
    ("slabs", None),
    ("lru", None),
    ("lru_crawler", None),
];

/// Parses one request line, without its line end. Pure: no I/O, no counting.
///
/// Tokens are separated by spaces (runs of spaces are one separator, as in memcached). Keys are
/// bytes: any byte but space and the ASCII controls, the same rule the store applies to the keys it
/// accepts ([`crate::entry::validate_key`]), so every stored key, UTF-8 or not, can be asked for.
/// The command word must be ASCII; anything else is binary garbage (or the binary protocol,
/// whose requests start with the byte 0x80) and is refused as such, not as an unknown command.
pub fn parse_request(line: &[u8]) -> Result<Request<'_>, RequestError> {
    // The first problem in the line is reported: a binary-protocol request starts with 0x80.
    let command_start = line.iter().position(|&b| b != b' ').unwrap_or(line.len());
    let command_end = line[command_start..].iter().position(|&b| b == b' ').map_or(line.len(), |n| command_start + n);
    let non_ascii = line[command_start..command_end].iter().position(|b| !b.is_ascii()).map(|n| command_start + n);
    let control = line.iter().position(|&b| b.is_ascii_control());
    match (non_ascii, control) {
        (Some(offset), control) if control.is_none_or(|c| offset < c) => {
            return Err(RequestError::NotText { byte: line[offset], offset });
        }
        (_, Some(offset)) => return Err(RequestError::ControlByte { byte: line[offset], offset }),
        _ => {}
    }
    let mut tokens = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
    let command = tokens.next().ok_or(RequestError::EmptyLine)?;
    match command {
        b"get" | b"gets" => {
            let name = if command == b"get" { "get" } else { "gets" };
            let count = tokens.clone().count();
            if count == 0 {
                return Err(RequestError::MissingKey { command: name });
            }
            if count > KEYS_PER_GET_MAX {
                return Err(RequestError::TooManyKeys { count });
            }
            let keys: Vec<&[u8]> = tokens.collect();
            for (i, key) in keys.iter().enumerate() {
                if key.len() > KEY_BYTES_MAX {
                    let limit = LimitExceeded { limit: "KEY_BYTES_MAX", max: KEY_BYTES_MAX, actual: key.len() };
                    return Err(RequestError::KeyTooLong { position: i + 1, limit });
                }
            }
            Ok(Request::Get { keys, cas: name == "gets" })
        }
        b"version" | b"stats" | b"quit" => {
            let (name, request) = match command {
                b"version" => ("version", Request::Version),
                b"stats" => ("stats", Request::Stats),
                _ => ("quit", Request::Quit),
            };
            if tokens.next().is_some() {
                return Err(RequestError::UnexpectedArgument { command: name });
            }
            Ok(request)
        }
        _ => {
            let Some(&(name, length_at)) = WRITE_COMMANDS.iter().find(|(name, _)| name.as_bytes() == command) else {
                return Err(RequestError::UnknownCommand);
            };
            let data_bytes = match length_at {
                None => None,
                Some(at) => {
                    let token = tokens.nth(at - 1).ok_or(RequestError::BadDataLength { command: name })?;
                    Some(parse_data_length(token).ok_or(RequestError::BadDataLength { command: name })?)
                }
            };
            if let Some(actual) = data_bytes
                && actual > VALUE_BYTES_MAX
            {
                return Err(RequestError::ValueTooLarge(LimitExceeded {
                    limit: "VALUE_BYTES_MAX",
                    max: VALUE_BYTES_MAX,
                    actual,
                }));
            }
            Ok(Request::Write { command: name, data_bytes })
        }
    }
}

/// A data length: decimal digits only (no sign), as memcached's `safe_strtol` effectively
/// requires. Saturates rather than overflowing, since anything that large is over the limit.
fn parse_data_length(token: &[u8]) -> Option<usize> {
    if token.is_empty() || !token.iter().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(token.iter().fold(0usize, |n, b| n.saturating_mul(10).saturating_add(usize::from(b - b'0'))))
}

/// What reading one line found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineRead {
    /// A whole line is in the buffer, its line end (`\n` or `\r\n`) removed.
    Line,
    /// The stream ended cleanly, between lines.
    Eof,
    /// The stream ended in the middle of a line.
    Truncated,
    /// No line end within `LINE_BYTES_MAX` bytes (plus the line end itself).
    TooLong,
}

/// Reads one line into `line`, holding at most `LINE_BYTES_MAX + 1` bytes of it.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, line: &mut Vec<u8>) -> io::Result<LineRead> {
    line.clear();
    // A line's content, an optional '\r' and its '\n': the most that can be scanned for one line.
    let scan_max = LINE_BYTES_MAX + 2;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() { LineRead::Eof } else { LineRead::Truncated });
        }
        let window = &available[..available.len().min(scan_max - line.len())];
        if let Some(end) = window.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&window[..end]);
            reader.consume(end + 1);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(if line.len() > LINE_BYTES_MAX { LineRead::TooLong } else { LineRead::Line });
        }
        if line.len() + window.len() >= scan_max {
            return Ok(LineRead::TooLong);
        }
        let taken = window.len();
        line.extend_from_slice(window);
        reader.consume(taken);
    }
}

/// Skips `bytes` bytes. False if the stream ended first.
async fn skip_bytes<R: AsyncBufRead + Unpin>(reader: &mut R, mut bytes: usize) -> io::Result<bool> {
    while bytes > 0 {
        let available = reader.fill_buf().await?.len();
        if available == 0 {
            return Ok(false);
        }
        let taken = available.min(bytes);
        reader.consume(taken);
        bytes -= taken;
    }
    Ok(true)
}

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

/// Serves one client connection until it quits, ends, or must be closed (see the module doc).
/// An `Err` is an I/O error of the stream; protocol errors are answered, never returned.
pub async fn serve_connection<S>(stream: S, backend: &dyn ReadBackend, counters: &ReadCounters) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ReadCounters::add(&counters.connections_total, 1);
    // BufReader passes writes through to the stream unbuffered.
    let mut conn = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let mut line = Vec::new();
    loop {
        let step = match read_line(&mut conn, &mut line).await? {
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
            Step::SkipData(bytes) => skip_data_block(&mut conn, &mut line, bytes).await?,
            other => other,
        };
        match step {
            Step::Reply(reply) => {
                conn.write_all(&reply).await?;
                conn.flush().await?;
            }
            Step::ReplyAndClose(reply) => {
                conn.write_all(&reply).await?;
                return conn.shutdown().await;
            }
            Step::Close | Step::SkipData(_) => return conn.shutdown().await,
        }
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

    #[test]
    fn parses_reads() {
        assert_eq!(parse_request(b"get a"), Ok(Request::Get { keys: vec![b"a"], cas: false }));
        assert_eq!(parse_request(b"gets a  b a "), Ok(Request::Get { keys: vec![b"a", b"b", b"a"], cas: true }));
        // Keys are bytes, as the store's keys are: UTF-8 or not.
        let keys: Vec<&[u8]> = vec!["caf\u{e9}".as_bytes(), b"\xff\x80"];
        assert_eq!(parse_request("get caf\u{e9} \u{ff}".as_bytes()).map(|_| ()), Ok(()));
        assert_eq!(parse_request(b"get caf\xc3\xa9 \xff\x80"), Ok(Request::Get { keys, cas: false }));
        assert_eq!(parse_request(b"  version"), Ok(Request::Version));
        assert_eq!(parse_request(b"stats"), Ok(Request::Stats));
        assert_eq!(parse_request(b"quit"), Ok(Request::Quit));
    }

    #[test]
    fn refuses_malformed_reads() {
        assert_eq!(parse_request(b""), Err(RequestError::EmptyLine));
        assert_eq!(parse_request(b"   "), Err(RequestError::EmptyLine));
        assert_eq!(parse_request(b"get"), Err(RequestError::MissingKey { command: "get" }));
        assert_eq!(parse_request(b"gets  "), Err(RequestError::MissingKey { command: "gets" }));
        assert_eq!(parse_request(b"GET a"), Err(RequestError::UnknownCommand));
        assert_eq!(parse_request(b"mg a v"), Err(RequestError::UnknownCommand));
        assert_eq!(parse_request(b"stats items"), Err(RequestError::UnexpectedArgument { command: "stats" }));
        assert_eq!(parse_request(b"get a\0b"), Err(RequestError::ControlByte { byte: 0, offset: 5 }));
        assert_eq!(parse_request(b"get a\tb"), Err(RequestError::ControlByte { byte: 9, offset: 5 }));
        assert_eq!(parse_request(b"get a\r"), Err(RequestError::ControlByte { byte: 13, offset: 5 }));
        assert_eq!(parse_request(b"  \x80\x00"), Err(RequestError::NotText { byte: 0x80, offset: 2 }));
        assert_eq!(parse_request(b"g\x00\x80"), Err(RequestError::ControlByte { byte: 0, offset: 1 }));
        assert_eq!(parse_request(b"get \x00\x80"), Err(RequestError::ControlByte { byte: 0, offset: 4 }));
        assert_eq!(parse_request(b"\x80"), Err(RequestError::NotText { byte: 0x80, offset: 0 }));
        assert_eq!(parse_request(b"  g\xffet a"), Err(RequestError::NotText { byte: 0xff, offset: 3 }));
        assert_eq!(parse_request("g\u{e9}t a".as_bytes()), Err(RequestError::NotText { byte: 0xc3, offset: 1 }));
    }

    #[test]
    fn key_and_key_count_limits() {
        let key = "k".repeat(KEY_BYTES_MAX);
        assert!(parse_request(format!("get {key}").as_bytes()).is_ok());
        let long = format!("get a {key}k");
        let err = parse_request(long.as_bytes()).unwrap_err();
        assert!(matches!(err, RequestError::KeyTooLong { position: 2, ref limit } if limit.actual == 251), "{err:?}");
        assert!(err.reply().contains("KEY_BYTES_MAX"));

        let keys = |n: usize| format!("get{}", " k".repeat(n));
        assert!(parse_request(keys(KEYS_PER_GET_MAX).as_bytes()).is_ok());
        assert_eq!(
            parse_request(keys(KEYS_PER_GET_MAX + 1).as_bytes()),
            Err(RequestError::TooManyKeys { count: KEYS_PER_GET_MAX + 1 })
        );
        let widest = format!("gets{}", format!(" {key}").repeat(KEYS_PER_GET_MAX));
        assert!(widest.len() <= LINE_BYTES_MAX);
        assert!(parse_request(widest.as_bytes()).is_ok());
    }

    #[test]
    fn parses_writes_and_their_data_length() {
        assert_eq!(parse_request(b"set k 0 0 5"), Ok(Request::Write { command: "set", data_bytes: Some(5) }));
        assert_eq!(
            parse_request(b"cas k 0 0 5 99 noreply"),
            Ok(Request::Write { command: "cas", data_bytes: Some(5) })
        );
        assert_eq!(parse_request(b"ms k 3 T0"), Ok(Request::Write { command: "ms", data_bytes: Some(3) }));
        assert_eq!(parse_request(b"delete k"), Ok(Request::Write { command: "delete", data_bytes: None }));
        assert_eq!(parse_request(b"flush_all"), Ok(Request::Write { command: "flush_all", data_bytes: None }));
        assert_eq!(parse_request(b"gat 0 k"), Ok(Request::Write { command: "gat", data_bytes: None }));
        for bad in ["set k 0 0", "set k 0 0 -1", "set k 0 0 +5", "set k 0 0 5x", "set"] {
            assert_eq!(parse_request(bad.as_bytes()), Err(RequestError::BadDataLength { command: "set" }), "{bad}");
        }
        let huge = format!("append k 0 0 {}", VALUE_BYTES_MAX + 1);
        let err = parse_request(huge.as_bytes()).unwrap_err();
        assert!(matches!(err, RequestError::ValueTooLarge(_)) && err.closes_connection());
        let overflow = parse_request(b"set k 0 0 99999999999999999999999999").unwrap_err();
        assert!(matches!(overflow, RequestError::ValueTooLarge(_)));
        assert_eq!(parse_request(format!("set k 0 0 {VALUE_BYTES_MAX}").as_bytes()).map(|_| ()), Ok(()));
    }

    #[test]
    fn error_replies_are_one_line() {
        assert_eq!(RequestError::UnknownCommand.reply(), "ERROR\r\n");
        assert!(RequestError::LineTooLong.reply().starts_with("CLIENT_ERROR line too long"));
        let errors = [
            RequestError::EmptyLine,
            RequestError::ControlByte { byte: 0, offset: 0 },
            RequestError::NotText { byte: 0x80, offset: 0 },
            RequestError::MissingKey { command: "get" },
            RequestError::TooManyKeys { count: 999 },
            RequestError::BadDataLength { command: "set" },
            RequestError::LineTooLong,
            RequestError::Truncated,
            RequestError::BadDataChunk,
        ];
        for e in errors {
            let reply = e.reply();
            assert!(reply.starts_with("CLIENT_ERROR ") && reply.ends_with("\r\n"), "{reply:?}");
            assert_eq!(reply.matches('\n').count(), 1, "{reply:?}");
        }
    }

    async fn lines_of(input: &[u8], capacity: usize) -> Vec<(LineRead, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(capacity, input);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            let read = read_line(&mut reader, &mut line).await.expect("reading a slice cannot fail");
            out.push((read, line.clone()));
            if read != LineRead::Line {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn reads_lines_at_any_buffer_size() {
        for capacity in [1, 2, 3, 7, 8192] {
            let lines = lines_of(b"get a\r\nversion\n\r\nx\r", capacity).await;
            let expected: Vec<(LineRead, Vec<u8>)> = vec![
                (LineRead::Line, b"get a".to_vec()),
                (LineRead::Line, b"version".to_vec()),
                (LineRead::Line, b"".to_vec()),
                (LineRead::Truncated, b"x\r".to_vec()),
            ];
            assert_eq!(lines, expected, "capacity {capacity}");
            assert_eq!(lines_of(b"", capacity).await, vec![(LineRead::Eof, vec![])]);
        }
    }

    #[tokio::test]
    async fn line_limit_is_exact() {
        for capacity in [1000, 8192, 1 << 20] {
            let mut exact = vec![b'a'; LINE_BYTES_MAX];
            exact.extend_from_slice(b"\r\n");
            assert_eq!(lines_of(&exact, capacity).await[0], (LineRead::Line, vec![b'a'; LINE_BYTES_MAX]));
            let mut bare = vec![b'a'; LINE_BYTES_MAX];
            bare.push(b'\n');
            assert_eq!(lines_of(&bare, capacity).await[0].0, LineRead::Line);
            let mut over = vec![b'a'; LINE_BYTES_MAX + 1];
            over.push(b'\n');
            assert_eq!(lines_of(&over, capacity).await[0].0, LineRead::TooLong);
            let endless = vec![b'a'; 3 * LINE_BYTES_MAX];
            let (read, held) = &lines_of(&endless, capacity).await[0];
            assert_eq!(*read, LineRead::TooLong);
            assert!(held.len() <= LINE_BYTES_MAX + 1);
        }
    }

    #[tokio::test]
    async fn skips_data_across_reads() {
        let mut reader = BufReader::with_capacity(3, &b"0123456789rest"[..]);
        assert!(skip_bytes(&mut reader, 10).await.expect("slice"));
        let mut rest = String::new();
        reader.read_to_string(&mut rest).await.expect("slice");
        assert_eq!(rest, "rest");
        let mut short = BufReader::new(&b"0123"[..]);
        assert!(!skip_bytes(&mut short, 10).await.expect("slice"));
    }

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
