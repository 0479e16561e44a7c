//! The protocol over in-memory streams: replies byte for byte, refusals, limits, deadlines
//! and draining, against a map-backed [`ReadBackend`].

use std::collections::BTreeMap;
use std::io;
use std::task::Poll;
#[cfg(not(madsim))] // The deadline tests run on tokio's paused clock only.
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::*;
use crate::connections::Lifecycle;

struct Map(BTreeMap<Vec<u8>, Result<Vec<u8>, String>>);

impl ReadBackend for Map {
    fn get_each(&self, keys: &[&[u8]], found: &mut dyn FnMut(usize, Option<&[u8]>) -> bool) -> Result<(), String> {
        for (position, key) in keys.iter().enumerate() {
            let value = self.0.get(*key).cloned().transpose()?;
            if !found(position, value.as_deref()) {
                break;
            }
        }
        Ok(())
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
        ReadCountersSnapshot { get_hits: 3, get_misses: 1, bogus_requests: 0, server_errors: 1, connections_total: 1 }
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

// Tokio's paused clock; the simulator's runtime has its own (node/tests/integration/simulated.rs).
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

// Tokio's paused clock; the simulator's runtime has its own (node/tests/integration/simulated.rs).
#[cfg(not(madsim))]
/// Serves `client` with a 10 s idle timeout; the connection's result and when it ended.
async fn timed<F: Future<Output = ()>>(
    backend: &Map,
    server: tokio::io::DuplexStream,
    client: F,
) -> (io::Result<()>, Duration) {
    let counters = ReadCounters::default();
    let limits = ConnectionLimits { idle_timeout: Some(Duration::from_secs(10)), ..ConnectionLimits::default() };
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

// Tokio's paused clock; the simulator's runtime has its own (node/tests/integration/simulated.rs).
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

// Tokio's paused clock; the simulator's runtime has its own (node/tests/integration/simulated.rs).
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
    fn get_each(&self, keys: &[&[u8]], found: &mut dyn FnMut(usize, Option<&[u8]>) -> bool) -> Result<(), String> {
        self.1.send_replace(Lifecycle::Draining);
        self.0.get_each(keys, found)
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
    let limits = ConnectionLimits { lifecycle: Some(watched), ..ConnectionLimits::default() };
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
    let limits = ConnectionLimits { lifecycle: Some(watched), ..ConnectionLimits::default() };
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
