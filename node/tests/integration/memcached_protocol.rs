//! The memcached text protocol of the read path, end to end: `serve_connection` over an in-memory
//! duplex stream against a `BTreeMap` backend. Well-formed requests get memcached's replies;
//! malformed, unknown and write requests get one counted error reply each and the connection
//! keeps serving, except where the stream cannot be resynchronised (it is then closed). A
//! proptest feeds arbitrary bytes and checks the server never fails, every reply is well formed,
//! and the counters agree with the replies.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use qs_node::limits::{KEY_BYTES_MAX, VALUE_BYTES_MAX};
use qs_node::memcached::{
    KEYS_PER_GET_MAX, LINE_BYTES_MAX, READ_ONLY_REPLY, ReadBackend, ReadCounters, ReadCountersSnapshot,
    serve_connection,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A backend over a map; keys in `failing` answer an error, as a checksum failure would.
#[derive(Debug, Default)]
struct MemBackend {
    values: BTreeMap<Vec<u8>, Vec<u8>>,
    failing: BTreeSet<Vec<u8>>,
    applied: u64,
}

impl ReadBackend for MemBackend {
    fn get_each(&self, keys: &[&[u8]], found: &mut dyn FnMut(usize, Option<&[u8]>) -> bool) -> Result<(), String> {
        for (position, key) in keys.iter().enumerate() {
            if self.failing.contains(*key) {
                return Err(format!("checksum mismatch for key {}", String::from_utf8_lossy(key)));
            }
            if !found(position, self.values.get(*key).map(Vec::as_slice)) {
                break;
            }
        }
        Ok(())
    }

    fn cas_token(&self) -> u64 {
        self.applied
    }

    fn stats(&self) -> Vec<(String, String)> {
        vec![("applied_index".into(), self.applied.to_string()), ("keys".into(), self.values.len().to_string())]
    }
}

fn backend() -> MemBackend {
    MemBackend {
        values: BTreeMap::from([
            (b"alpha".to_vec(), b"one".to_vec()),
            (b"beta".to_vec(), b"two\r\nlines".to_vec()),
            (b"empty".to_vec(), Vec::new()),
            (b"\xffbin".to_vec(), b"\x00\xff".to_vec()),
        ]),
        failing: BTreeSet::from([b"rotten".to_vec()]),
        applied: 42,
    }
}

/// What one connection did: the bytes the client read back, the server's result, the counters.
#[derive(Debug)]
struct Session {
    out: Vec<u8>,
    served: std::io::Result<()>,
    counters: ReadCountersSnapshot,
}

impl Session {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }
}

/// Sends `input` in one write, closes the client's write side, and reads every reply until the
/// server closes. Writing and reading run concurrently, so neither side can block the other.
async fn session(backend: &MemBackend, input: &[u8]) -> Session {
    let counters = ReadCounters::default();
    let (client, server) = tokio::io::duplex(64 << 10);
    let (mut rx, mut tx) = tokio::io::split(client);
    let mut out = Vec::new();
    let (served, (), read) = tokio::join!(
        serve_connection(server, backend, &counters),
        async {
            // When the server closes early (quit, line too long) the rest of the write fails; fine.
            if tx.write_all(input).await.is_ok() {
                let _ = tx.shutdown().await;
            }
        },
        rx.read_to_end(&mut out)
    );
    read.expect("reading the replies");
    Session { out, served, counters: counters.snapshot() }
}

async fn run(input: &[u8]) -> Session {
    session(&backend(), input).await
}

fn client_error(reply: &str) -> bool {
    reply.starts_with("CLIENT_ERROR ") && reply.ends_with("\r\n") && reply.matches('\n').count() == 1
}

#[tokio::test]
async fn get_hit_and_miss() {
    let s = run(b"get alpha\r\nget nope\r\nget empty\r\n").await;
    assert_eq!(s.text(), "VALUE alpha 0 3\r\none\r\nEND\r\nEND\r\nVALUE empty 0 0\r\n\r\nEND\r\n");
    assert!(s.served.is_ok());
    assert_eq!(
        s.counters,
        ReadCountersSnapshot { get_hits: 2, get_misses: 1, bogus_requests: 0, server_errors: 0, connections_total: 1 }
    );
}

#[tokio::test]
async fn multi_key_get_in_request_order() {
    let s = run(b"get beta nope alpha beta \xffbin\r\n").await;
    let mut expected =
        b"VALUE beta 0 10\r\ntwo\r\nlines\r\nVALUE alpha 0 3\r\none\r\nVALUE beta 0 10\r\ntwo\r\nlines\r\n".to_vec();
    expected.extend_from_slice(b"VALUE \xffbin 0 2\r\n\x00\xff\r\nEND\r\n");
    assert_eq!(s.out, expected);
    assert_eq!((s.counters.get_hits, s.counters.get_misses), (4, 1));
}

#[tokio::test]
async fn gets_carries_the_applied_index_as_cas() {
    let s = run(b"gets alpha nope empty\r\n").await;
    assert_eq!(s.text(), "VALUE alpha 0 3 42\r\none\r\nVALUE empty 0 0 42\r\n\r\nEND\r\n");
}

#[tokio::test]
async fn backend_error_is_a_whole_server_error() {
    let s = run(b"get alpha rotten beta\r\nget alpha\r\n").await;
    assert_eq!(s.text(), "SERVER_ERROR checksum mismatch for key rotten\r\nVALUE alpha 0 3\r\none\r\nEND\r\n");
    assert_eq!(s.counters.server_errors, 1);
    assert_eq!(s.counters.bogus_requests, 0);
    // Only the answered get is counted.
    assert_eq!((s.counters.get_hits, s.counters.get_misses), (1, 0));
}

#[tokio::test]
async fn version() {
    let s = run(b"version\r\n").await;
    assert_eq!(s.text(), format!("VERSION qsim-{}\r\n", env!("CARGO_PKG_VERSION")));
}

#[tokio::test]
async fn stats_are_deterministic_and_include_the_backend() {
    let s = run(b"get alpha nope\r\nbogus\r\nstats\r\n").await;
    let text = s.text();
    let stats = text.strip_prefix("VALUE alpha 0 3\r\none\r\nEND\r\nERROR\r\n").expect("get and error replies first");
    let expected = format!(
        "STAT version qsim-{}\r\nSTAT get_hits 1\r\nSTAT get_misses 1\r\nSTAT bogus_requests 1\r\n\
         STAT server_errors 0\r\nSTAT total_connections 1\r\nSTAT applied_index 42\r\nSTAT keys 4\r\nEND\r\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(stats, expected);
    for word in ["pid", "uptime", "time", "rusage"] {
        assert!(!stats.contains(&format!("STAT {word} ")), "{word} is not deterministic");
    }
    // The same input gives the same bytes.
    assert_eq!(run(b"get alpha nope\r\nbogus\r\nstats\r\n").await.out, s.out);
}

#[tokio::test]
async fn quit_closes_and_nothing_after_it_is_served() {
    let s = run(b"get alpha\r\nquit\r\nget alpha\r\n").await;
    assert_eq!(s.text(), "VALUE alpha 0 3\r\none\r\nEND\r\n");
    assert!(s.served.is_ok());
    assert_eq!(run(b"quit extra\r\nquit\n").await.text(), "CLIENT_ERROR quit takes no arguments here\r\n");
}

#[tokio::test]
async fn quit_closes_while_the_client_is_still_connected() {
    let counters = ReadCounters::default();
    let backend = backend();
    let (mut client, server) = tokio::io::duplex(1024);
    let client_side = async {
        client.write_all(b"version\r\n").await.expect("write");
        let mut reply = [0u8; 64];
        let n = client.read(&mut reply).await.expect("read");
        assert!(reply[..n].starts_with(b"VERSION qsim-"), "a reply arrives before the client sends more");
        client.write_all(b"quit\r\n").await.expect("write");
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.expect("the server closes");
        assert!(rest.is_empty());
    };
    let (served, ()) = tokio::join!(serve_connection(server, &backend, &counters), client_side);
    served.expect("serve");
}

#[tokio::test]
async fn writes_are_refused_and_their_data_blocks_skipped() {
    let input = b"set alpha 0 0 5\r\nquit!\r\nget alpha\r\n\
        add k 1 2 0 noreply\r\n\r\n\
        cas k 0 0 3 99\r\nget\r\n\
        append k 0 0 4\nab\nc\n\
        ms k 2 T0\r\n\0\0\r\n\
        delete alpha\r\nincr n 1\r\ntouch alpha 10\r\ngat 10 alpha\r\nflush_all\r\nverbosity 1\r\n\
        get alpha\r\n";
    let s = run(input).await;
    // set, add, cas, append, ms, then six writes without data.
    let refused = 11;
    let hit = "VALUE alpha 0 3\r\none\r\nEND\r\n";
    assert_eq!(s.text(), format!("{READ_ONLY_REPLY}{hit}{}{hit}", READ_ONLY_REPLY.repeat(refused - 1)));
    assert_eq!(s.counters.bogus_requests, refused as u64);
    assert_eq!(s.counters.get_hits, 2);
}

#[tokio::test]
async fn a_data_block_without_its_line_end_is_a_bad_chunk() {
    let s = run(b"set k 0 0 2\r\nabcdef\r\nget alpha\r\n").await;
    assert_eq!(
        s.text(),
        "CLIENT_ERROR bad data chunk: the data block is not followed by a line end\r\nVALUE alpha 0 3\r\none\r\nEND\r\n"
    );
    assert_eq!(s.counters.bogus_requests, 1);
    // The client hangs up inside the data block: the refusal is still sent, then the end.
    let s = run(b"set k 0 0 10\r\nabc").await;
    assert_eq!(s.text(), READ_ONLY_REPLY);
    assert!(s.served.is_ok());
}

#[tokio::test]
async fn an_unskippable_data_block_closes() {
    for line in ["set k 0 0 x\r\n", "set k 0 0 -1\r\n", "set k\r\n", "prepend k 0 0\r\n"] {
        let s = run(format!("{line}get alpha\r\n").as_bytes()).await;
        assert!(client_error(&s.text()) && s.text().contains("closing the connection"), "{line}: {}", s.text());
        assert_eq!(s.counters.bogus_requests, 1);
        assert!(s.served.is_ok());
    }
    let huge = format!("set k 0 0 {}\r\n", VALUE_BYTES_MAX + 1);
    let s = run(format!("{huge}get alpha\r\n").as_bytes()).await;
    assert!(client_error(&s.text()) && s.text().contains("VALUE_BYTES_MAX"), "{}", s.text());
    // A maximal block is skipped.
    let mut max = format!("set k 0 0 {VALUE_BYTES_MAX}\r\n").into_bytes();
    max.extend(std::iter::repeat_n(b'v', VALUE_BYTES_MAX));
    max.extend_from_slice(b"\r\nget alpha\r\n");
    assert_eq!(run(&max).await.text(), format!("{READ_ONLY_REPLY}VALUE alpha 0 3\r\none\r\nEND\r\n"));
}

#[tokio::test]
async fn truncated_lines() {
    for input in [&b"get alpha"[..], b"get alpha\r", b"version\r\nget al", b"\xff\x00"] {
        let s = run(input).await;
        let text = s.text();
        assert!(
            text.ends_with("CLIENT_ERROR truncated request: the connection ended before the line end\r\n"),
            "{input:?}: {text:?}"
        );
        assert_eq!(s.counters.bogus_requests, 1);
        assert_eq!(s.counters.get_hits + s.counters.get_misses, 0);
        assert!(s.served.is_ok());
    }
    // A clean end between lines is no error.
    let s = run(b"version\r\n").await;
    assert_eq!(s.counters.bogus_requests, 0);
    let s = run(b"").await;
    assert!(s.out.is_empty() && s.served.is_ok());
}

#[tokio::test]
async fn oversized_key() {
    let key = "k".repeat(KEY_BYTES_MAX + 1);
    let s = run(format!("get alpha {key}\r\nget alpha\r\n").as_bytes()).await;
    let text = s.text();
    let (error, rest) = text.split_once("\r\n").expect("a line");
    assert_eq!(error, "CLIENT_ERROR key 2: key length is 251 but the limit KEY_BYTES_MAX is 250");
    assert_eq!(rest, "VALUE alpha 0 3\r\none\r\nEND\r\n");
    assert_eq!(s.counters.bogus_requests, 1);
    // The longest key is fine.
    let s = run(format!("get {}\r\n", "k".repeat(KEY_BYTES_MAX)).as_bytes()).await;
    assert_eq!(s.text(), "END\r\n");
}

#[tokio::test]
async fn too_many_keys() {
    let s = run(format!("get{}\r\nget alpha\r\n", " alpha".repeat(KEYS_PER_GET_MAX + 1)).as_bytes()).await;
    let text = s.text();
    let (error, rest) = text.split_once("\r\n").expect("a line");
    assert!(error.starts_with("CLIENT_ERROR 257 keys in one request") && error.contains("KEYS_PER_GET_MAX"), "{error}");
    assert_eq!(rest, "VALUE alpha 0 3\r\none\r\nEND\r\n");
    assert_eq!(s.counters.bogus_requests, 1);
    let s = run(format!("get{}\r\n", " alpha".repeat(KEYS_PER_GET_MAX)).as_bytes()).await;
    assert_eq!(s.counters.get_hits, KEYS_PER_GET_MAX as u64);
}

#[tokio::test]
async fn unknown_commands() {
    let s = run(b"GET alpha\r\nfrobnicate\r\nmg alpha v\r\nget alpha\r\n").await;
    assert_eq!(s.text(), "ERROR\r\nERROR\r\nERROR\r\nVALUE alpha 0 3\r\none\r\nEND\r\n");
    assert_eq!(s.counters.bogus_requests, 3);
}

#[tokio::test]
async fn binary_garbage_then_a_healthy_get() {
    // Deterministic pseudo-random bytes (xorshift), with NUL and 0xFF guaranteed.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut garbage = vec![0x80, 0x00, 0x00, 0x05, 0xff, 0xff, 0x00];
    for _ in 0..4096 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        garbage.push(state as u8);
    }
    garbage.extend_from_slice(b"\r\nget alpha\r\n");
    let lines = garbage.iter().filter(|&&b| b == b'\n').count() as u64;
    let s = run(&garbage).await;
    assert!(s.served.is_ok());
    let text = s.text();
    assert!(text.ends_with("VALUE alpha 0 3\r\none\r\nEND\r\n"), "{text:?}");
    // Every garbage line got one error reply, each counted.
    let errors = text.lines().filter(|l| *l == "ERROR" || l.starts_with("CLIENT_ERROR ")).count() as u64;
    assert!(errors >= 1);
    assert_eq!(errors, s.counters.bogus_requests);
    assert!(s.counters.bogus_requests < lines);
    // The binary protocol's magic byte is named.
    let s = run(b"\x80\x01\r\n").await;
    assert_eq!(
        s.text(),
        "CLIENT_ERROR byte 0x80 at offset 0 in the command word; only the text protocol is served\r\n"
    );
}

#[tokio::test]
async fn a_line_over_the_limit_closes() {
    let mut input = b"get alpha\r\nget ".to_vec();
    input.extend(std::iter::repeat_n(b'k', LINE_BYTES_MAX + 10));
    input.extend_from_slice(b"\r\nget alpha\r\n");
    let s = run(&input).await;
    assert!(s.served.is_ok());
    let text = s.text();
    let rest = text.strip_prefix("VALUE alpha 0 3\r\none\r\nEND\r\n").expect("the first get is served");
    assert!(rest.starts_with("CLIENT_ERROR line too long") && client_error(rest), "{rest:?}");
    assert_eq!(s.counters.bogus_requests, 1);
    // A line with no end at all, far over the limit, is cut off the same way without reading it all.
    let s = run(&vec![b'x'; 4 * LINE_BYTES_MAX]).await;
    assert!(s.text().starts_with("CLIENT_ERROR line too long"));
}

#[tokio::test]
async fn empty_lines() {
    let s = run(b"\r\n\n   \r\nget alpha\r\n").await;
    assert_eq!(
        s.text(),
        format!("{}VALUE alpha 0 3\r\none\r\nEND\r\n", "CLIENT_ERROR empty request line\r\n".repeat(3))
    );
    assert_eq!(s.counters.bogus_requests, 3);
}

#[tokio::test]
async fn bare_newline_endings() {
    let s = run(b"get alpha\nversion\ngets beta\nset k 0 0 1\nx\nget alpha\n").await;
    assert_eq!(
        s.text(),
        format!(
            "VALUE alpha 0 3\r\none\r\nEND\r\nVERSION qsim-{}\r\nVALUE beta 0 10 42\r\ntwo\r\nlines\r\nEND\r\n{READ_ONLY_REPLY}VALUE alpha 0 3\r\none\r\nEND\r\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[tokio::test]
async fn pipelined_requests_in_one_write() {
    let one = b"get alpha nope\r\n";
    let input: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
    let s = run(&input).await;
    assert_eq!(s.text(), "VALUE alpha 0 3\r\none\r\nEND\r\n".repeat(1000));
    assert_eq!((s.counters.get_hits, s.counters.get_misses), (1000, 1000));
    let s = run(b"version\r\nbad\r\n\r\nget alpha\r\nstats\r\nquit\r\nversion\r\n").await;
    let text = s.text();
    assert!(text.starts_with("VERSION "));
    assert!(text.contains("\r\nERROR\r\nCLIENT_ERROR empty request line\r\nVALUE alpha 0 3\r\none\r\nEND\r\nSTAT "));
    assert!(text.ends_with("END\r\n") && text.matches("VERSION").count() == 1);
}

#[tokio::test]
async fn counters_are_shared_across_connections() {
    let backend = backend();
    let counters = ReadCounters::default();
    for _ in 0..3 {
        let (mut client, server) = tokio::io::duplex(1024);
        let client_side = async {
            client.write_all(b"get alpha\r\nnope\r\n").await.expect("write");
            client.shutdown().await.expect("shutdown");
            let mut out = Vec::new();
            client.read_to_end(&mut out).await.expect("read");
        };
        let (served, ()) = tokio::join!(serve_connection(server, &backend, &counters), client_side);
        served.expect("serve");
    }
    assert_eq!(
        counters.snapshot(),
        ReadCountersSnapshot { get_hits: 3, get_misses: 0, bogus_requests: 3, server_errors: 0, connections_total: 3 }
    );
}

/// One reply, as read back by a strict client.
#[derive(Debug, PartialEq)]
enum Reply {
    Values(usize),
    Stats,
    Version,
    Error,
    ClientError,
    ServerError,
}

/// Splits `out` into replies, failing on anything a memcached client could not parse.
fn parse_replies(mut out: &[u8]) -> Result<Vec<Reply>, String> {
    fn line(out: &mut &[u8]) -> Result<Vec<u8>, String> {
        let end = out.windows(2).position(|w| w == b"\r\n").ok_or("a reply line without \\r\\n")?;
        let line = out[..end].to_vec();
        if line.contains(&b'\n') || line.contains(&b'\r') {
            return Err(format!("a stray line end in {line:?}"));
        }
        *out = &out[end + 2..];
        Ok(line)
    }
    let mut replies = Vec::new();
    while !out.is_empty() {
        let first = line(&mut out)?;
        let text = String::from_utf8_lossy(&first).into_owned();
        let reply = if first.starts_with(b"VALUE ") || first == b"END" {
            let mut values = 0;
            let mut current = first;
            while current != b"END" {
                let fields: Vec<&[u8]> = current.split(|&b| b == b' ').collect();
                if fields.len() != 4 && fields.len() != 5 || fields[0] != b"VALUE" || fields[2] != b"0" {
                    return Err(format!("bad VALUE line {:?}", String::from_utf8_lossy(&current)));
                }
                let n: usize = std::str::from_utf8(fields[3]).ok().and_then(|n| n.parse().ok()).ok_or("bad length")?;
                if out.len() < n + 2 || &out[n..n + 2] != b"\r\n" {
                    return Err("a data block without its \\r\\n".into());
                }
                out = &out[n + 2..];
                values += 1;
                current = line(&mut out)?;
            }
            Reply::Values(values)
        } else if first.starts_with(b"STAT ") {
            let mut current = first;
            while current != b"END" {
                if !current.starts_with(b"STAT ") || current.split(|&b| b == b' ').count() < 3 {
                    return Err(format!("bad STAT line {:?}", String::from_utf8_lossy(&current)));
                }
                current = line(&mut out)?;
            }
            Reply::Stats
        } else if text.starts_with("VERSION qsim-") {
            Reply::Version
        } else if text == "ERROR" {
            Reply::Error
        } else if text.starts_with("CLIENT_ERROR ") {
            Reply::ClientError
        } else if text.starts_with("SERVER_ERROR ") {
            Reply::ServerError
        } else {
            return Err(format!("unknown reply {text:?}"));
        };
        replies.push(reply);
    }
    Ok(replies)
}

/// Request-shaped fragments, so random inputs reach every path, not only the garbage ones.
fn fragments() -> impl Strategy<Value = Vec<u8>> {
    let pieces: Vec<&'static [u8]> = vec![
        b"get",
        b"gets",
        b" ",
        b"alpha",
        b"beta",
        b"rotten",
        b"nope",
        b"\xffbin",
        b"\r\n",
        b"\n",
        b"\r",
        b"set k 0 0 3",
        b"set k 0 0 x",
        b"abc",
        b"delete k",
        b"version",
        b"stats",
        b"quit",
        b"\0",
        b"\xff",
        b"\x80",
        b"GET",
    ];
    prop::collection::vec(prop::sample::select(pieces), 0..60).prop_map(|parts| parts.concat())
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![prop::collection::vec(any::<u8>(), 0..2000), fragments()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_break_the_server(input in input()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        let s = runtime.block_on(run(&input));
        prop_assert!(s.served.is_ok(), "{:?}", s.served);
        let replies = parse_replies(&s.out).map_err(|e| TestCaseError::fail(format!("{e}; output {:?}", s.text())))?;
        let count = |r: &Reply| replies.iter().filter(|x| *x == r).count() as u64;
        // Each refused request got exactly one error reply, each SERVER_ERROR is counted.
        prop_assert_eq!(count(&Reply::Error) + count(&Reply::ClientError), s.counters.bogus_requests);
        prop_assert_eq!(count(&Reply::ServerError), s.counters.server_errors);
        let values: usize = replies.iter().map(|r| if let Reply::Values(n) = r { *n } else { 0 }).sum();
        prop_assert_eq!(values as u64, s.counters.get_hits);
        prop_assert_eq!(s.counters.connections_total, 1);
        // The counter moves when it should: an input with no line end, or whose first line has a
        // control byte, is refused at least once.
        let first_line = input.split(|&b| b == b'\n').next().unwrap_or_default();
        let first_line = first_line.strip_suffix(b"\r").unwrap_or(first_line);
        if !input.is_empty() && (!input.contains(&b'\n') || first_line.iter().any(u8::is_ascii_control)) {
            prop_assert!(s.counters.bogus_requests >= 1, "input {:?} output {:?}", input, s.text());
        }
        // Deterministic: the same bytes give the same reply.
        let again = runtime.block_on(run(&input));
        prop_assert_eq!(again.out, s.out);
    }
}
