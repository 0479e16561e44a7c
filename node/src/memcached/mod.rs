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
//!   [`VALUE_BYTES_MAX`] (its data block cannot be skipped). Both
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
//!   within it; otherwise the connection is closed with a [`std::io::ErrorKind::TimedOut`] error. A
//!   deadline covers a whole line, so a client trickling bytes gains nothing. One timer per
//!   connection serves every deadline: it is re-armed only when it fires before the deadline it
//!   stands for, not armed and cancelled for every request. When the node drains, a connection
//!   closes once the request in flight is answered (with pipelined requests, the ones before it
//!   too: every request read is answered).
//! - **Deterministic.** No pid, randomness or OS state is read, and the only clock is
//!   `tokio::time`'s for the deadlines (madsim's under the simulator), so the same bytes at the
//!   same times give the same bytes out, inside the simulator as on real sockets. The stream
//!   type is generic, and only `tokio::io` is used, which is real tokio's in both builds.

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Looks up each of `keys` in order, in one view of the store, handing `found` each key's
    /// position in `keys` and its checksum-verified value (None: absent), borrowed for the call;
    /// stops at the first `false`. Err is reported as SERVER_ERROR and counted.
    fn get_each(&self, keys: &[&[u8]], found: &mut dyn FnMut(usize, Option<&[u8]>) -> bool) -> Result<(), String>;
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

/// Planted bugs of the read path, the simulator's bug zoo (`qs_node::config::LegacyConfig`'s
/// `memcached_*`): all off unless a scenario's `[legacy]` turns one on in a harness build
/// ([`NodeConfig::planted`](crate::config::NodeConfig::planted)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlantedReadBugs {
    /// An empty value's data block loses its line end.
    pub empty_value_misframed: bool,
    /// A refused `cas` does not skip its data block.
    pub cas_without_data_block: bool,
    /// `get_hits` counts misses too.
    pub hits_count_misses: bool,
}

impl PlantedReadBugs {
    /// The read path's planted bugs in `legacy`.
    pub fn of(legacy: &crate::config::LegacyConfig) -> PlantedReadBugs {
        PlantedReadBugs {
            empty_value_misframed: legacy.memcached_empty_value_misframed,
            cas_without_data_block: legacy.memcached_cas_without_data_block,
            hits_count_misses: legacy.memcached_hits_count_misses,
        }
    }
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

mod connection;
mod lines;
mod reply;
mod request;
#[cfg(test)]
mod tests;

pub use connection::{ConnectionLimits, serve_connection, serve_connection_within};

pub use reply::version;
pub use request::{Request, RequestError, parse_request};
