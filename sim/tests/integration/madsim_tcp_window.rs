//! The carried madsim patch's TCP window (`vendor/madsim/src/sim/net/tcp/window.rs`,
//! `vendor/README.md`): a connection carries at most its window one way before its writer
//! waits; every read frees what it took and wakes the writer; a partitioned link holds the
//! writer until it heals; a dropped reader fails the writer as a reset would. Stock madsim's
//! TCP never fills (the last test pins that an unset window keeps it so), which is why a write
//! deadline in the node was never exercised by a simulated run.
#![cfg(madsim)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use madsim::net::{NetSim, TcpListener, TcpStream};
use madsim::runtime::{Handle, Runtime};
use madsim::time::sleep;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WINDOW: usize = 16 * 1024;
const CHUNK: usize = 1000;

/// The server's address in every test.
fn server() -> SocketAddr {
    "10.0.0.1:7000".parse().expect("an address")
}

/// Runs `test` in a simulation (seed 7) whose TCP connections carry `window` bytes one way
/// (`None`: stock madsim, no window).
fn simulate<F, Fut>(window: Option<usize>, test: F)
where
    F: FnOnce(Handle) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut config = madsim::Config::default();
    config.tcp.window_bytes = window;
    let runtime = Runtime::with_seed_and_config(7, config);
    let handle = runtime.handle().clone();
    runtime.block_on(test(handle));
}

/// A server on 10.0.0.1 that accepts one connection and hands it to `serve`; a client on
/// 10.0.0.2 that writes `CHUNK`-byte writes (each flushed, then a millisecond's pause, so the
/// simulation moves on) for ever, counting the bytes each write accepted, until a write fails
/// (its error kind is kept).
struct Pair {
    written: Arc<AtomicUsize>,
    failed: Arc<std::sync::Mutex<Option<std::io::ErrorKind>>>,
    client: madsim::task::NodeId,
}

fn pair<F, Fut>(handle: &Handle, serve: F) -> Pair
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let server_node = handle.create_node().ip(server().ip()).build();
    server_node.spawn(async move {
        let listener = TcpListener::bind(server()).await.expect("bind");
        let (stream, _) = listener.accept().await.expect("accept");
        serve(stream).await;
    });
    let written = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(std::sync::Mutex::new(None));
    let client = handle.create_node().ip("10.0.0.2".parse().expect("an address")).build();
    let (count, fail) = (written.clone(), failed.clone());
    client.spawn(async move {
        sleep(Duration::from_millis(100)).await; // the listener binds first
        let mut stream = TcpStream::connect(server()).await.expect("connect");
        let chunk = [7u8; CHUNK];
        loop {
            let result = match stream.write(&chunk).await {
                Ok(n) => stream.flush().await.map(|()| n),
                Err(e) => Err(e),
            };
            match result {
                Ok(n) => count.fetch_add(n, Ordering::SeqCst),
                Err(e) => {
                    *fail.lock().expect("not poisoned") = Some(e.kind());
                    return;
                }
            };
            sleep(Duration::from_millis(1)).await;
        }
    });
    Pair { written, failed, client: client.id() }
}

#[test]
fn a_writer_to_a_reader_that_never_reads_stops_at_the_window() {
    simulate(Some(WINDOW), |handle| async move {
        let pair = pair(&handle, |stream| async move {
            sleep(Duration::from_secs(3600)).await; // holds the stream, never reads
            drop(stream);
        });
        sleep(Duration::from_secs(10)).await;
        assert_eq!(pair.written.load(Ordering::SeqCst), WINDOW, "the writer went past the window");
        assert_eq!(*pair.failed.lock().expect("not poisoned"), None);
    });
}

#[test]
fn reading_frees_room_and_wakes_the_writer() {
    simulate(Some(WINDOW), |handle| async move {
        let read = Arc::new(AtomicUsize::new(0));
        let taken = read.clone();
        let pair = pair(&handle, move |mut stream| async move {
            // Reads 100 bytes a second: the writer can only ever be a window ahead.
            let mut buf = [0u8; 100];
            loop {
                sleep(Duration::from_secs(1)).await;
                stream.read_exact(&mut buf).await.expect("read");
                taken.fetch_add(buf.len(), Ordering::SeqCst);
            }
        });
        sleep(Duration::from_secs(60)).await;
        let (written, read) = (pair.written.load(Ordering::SeqCst), read.load(Ordering::SeqCst));
        assert!(read >= 5000, "the reader took only {read} bytes");
        assert!(written > WINDOW, "the writer was never woken by the reads ({written} bytes)");
        assert!(written <= read + WINDOW, "the writer ran {written} bytes ahead of {read} read");
    });
}

#[test]
fn a_partitioned_link_holds_the_writer_until_it_heals() {
    simulate(Some(WINDOW), |handle| async move {
        let read = Arc::new(AtomicUsize::new(0));
        let taken = read.clone();
        let pair = pair(&handle, move |mut stream| async move {
            let mut buf = [0u8; 4096];
            loop {
                let n = stream.read(&mut buf).await.expect("read");
                taken.fetch_add(n, Ordering::SeqCst);
            }
        });
        sleep(Duration::from_secs(1)).await;
        NetSim::current().clog_node(pair.client);
        sleep(Duration::from_secs(1)).await; // what was on the wire arrives
        let (before, read_before) = (pair.written.load(Ordering::SeqCst), read.load(Ordering::SeqCst));
        sleep(Duration::from_secs(20)).await;
        let during = pair.written.load(Ordering::SeqCst);
        assert!(during - before <= WINDOW, "a partitioned writer wrote {} bytes", during - before);
        assert_eq!(read.load(Ordering::SeqCst), read_before, "bytes crossed a clogged link");
        NetSim::current().unclog_node(pair.client);
        sleep(Duration::from_secs(20)).await;
        assert!(pair.written.load(Ordering::SeqCst) > during + WINDOW, "the writer stayed stuck after the heal");
        assert_eq!(*pair.failed.lock().expect("not poisoned"), None);
    });
}

#[test]
fn a_dropped_reader_fails_the_waiting_writer_as_a_reset() {
    simulate(Some(WINDOW), |handle| async move {
        let pair = pair(&handle, |stream| async move {
            sleep(Duration::from_secs(5)).await; // the writer fills the window and waits
            drop(stream);
            sleep(Duration::from_secs(3600)).await;
        });
        sleep(Duration::from_secs(10)).await;
        assert_eq!(pair.written.load(Ordering::SeqCst), WINDOW);
        assert_eq!(*pair.failed.lock().expect("not poisoned"), Some(std::io::ErrorKind::ConnectionReset));
    });
}

#[test]
fn without_a_window_a_connection_never_fills() {
    simulate(None, |handle| async move {
        let pair = pair(&handle, |stream| async move {
            sleep(Duration::from_secs(3600)).await;
            drop(stream);
        });
        sleep(Duration::from_millis(200)).await;
        assert!(pair.written.load(Ordering::SeqCst) > 4 * WINDOW, "stock madsim's TCP should never fill");
    });
}
