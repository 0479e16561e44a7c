//! The reply to each request, built whole in the connection's output buffer before any of it
//! is written: `VALUE` lines and `END`, or one error line.

use super::request::{Request, RequestError};
use super::{
    ERROR_MESSAGE_BYTES_MAX, PENDING_REPLY_BYTES_MAX, PlantedReadBugs, READ_ONLY_REPLY, REPLY_BYTES_MAX,
    REPLY_BYTES_PER_KEY, ReadBackend, ReadCounters,
};

/// What the connection does after a request, its reply (if any) already in the output.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Read the next line.
    Continue,
    /// Write what is pending, then close (`quit`, or an error that closes the connection).
    Close,
    /// A refused storage command: skip its data block of this many bytes and its line end, then
    /// reply.
    SkipData(usize),
}

/// Counts a refused request and puts its reply in `out`.
pub(super) fn refuse(error: RequestError, counters: &ReadCounters, out: &mut Vec<u8>) -> Step {
    ReadCounters::add(&counters.bogus_requests, 1);
    out.extend_from_slice(error.reply().as_bytes());
    if error.closes_connection() { Step::Close } else { Step::Continue }
}

/// Answers a well-formed request, its reply appended to `out`.
pub(super) fn respond(
    request: Request<'_>,
    backend: &dyn ReadBackend,
    counters: &ReadCounters,
    planted: PlantedReadBugs,
    out: &mut Vec<u8>,
) -> Step {
    match request {
        Request::Get { keys, cas } => get_reply(&keys, cas, backend, counters, planted, out),
        Request::Version => out.extend_from_slice(format!("VERSION {}\r\n", version()).as_bytes()),
        Request::Stats => out.extend_from_slice(&stats_reply(backend, counters)),
        Request::Quit => return Step::Close,
        Request::Write { command, data_bytes } => {
            ReadCounters::add(&counters.bogus_requests, 1);
            // PLANTED BUG (legacy `memcached_cas_without_data_block`): `cas` answered as if no
            // data block followed its line.
            let data_bytes = data_bytes.filter(|_| !(planted.cas_without_data_block && command == "cas"));
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
fn get_reply(
    keys: &[&[u8]],
    cas: bool,
    backend: &dyn ReadBackend,
    counters: &ReadCounters,
    planted: PlantedReadBugs,
    out: &mut Vec<u8>,
) {
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
        // PLANTED BUG (legacy `memcached_empty_value_misframed`): no line end after an empty
        // data block.
        if !(planted.empty_value_misframed && value.is_empty()) {
            out.extend_from_slice(b"\r\n");
        }
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
    // PLANTED BUG (legacy `memcached_hits_count_misses`): every key asked for counted a hit.
    let hits = if planted.hits_count_misses { hits + misses } else { hits };
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
