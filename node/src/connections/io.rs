//! Deadlines on streams, on the clock of `tokio::time` (madsim's under `--cfg madsim`).
//!
//! - [`NodeTimer`]: hyper's [`Timer`](hyper::rt::Timer) over `tokio::time`, as hyper documents
//!   one (`hyper::rt::Timer`'s example) and hyper-util's `TokioTimer` is. hyper-util's own
//!   cannot be used: it names the `tokio` crate directly, whose timers panic outside a real
//!   tokio runtime, so the simulator could not run it.
//! - [`WriteDeadline`]: a stream whose writes fail with [`io::ErrorKind::TimedOut`] once one has
//!   stayed blocked (no room in the socket: the peer stopped reading) longer than its timeout.
//!   Reads pass through untouched; each protocol bounds its reads itself, with a deadline per
//!   request rather than per byte, so a client trickling one byte at a time gains nothing.
//! - [`FlushWhenWritten`]: a stream whose flush does nothing unless bytes were written since
//!   the last one. A real TCP socket's flush is a no-op anyway; madsim's sends a message even
//!   when its buffer is empty, and hyper flushes its connection at every poll, so two idle
//!   HTTP/1 peers under the simulator woke each other with empty messages at the network's
//!   latency for as long as the connection stayed open — 15 000 messages per simulated second
//!   in the reference scenario, nearly all of its traffic.
//! - [`abort_when_unacknowledged`]: the kernel's own deadline (`TCP_USER_TIMEOUT`) for a peer
//!   that vanished without a reset (a host powered off, a path cut): what a stream sends it is
//!   never acknowledged, and the connection is aborted. A stream that only sends small frames
//!   (a replication stream's keepalives) would otherwise fill its socket buffer for hours
//!   before any write blocked, holding its listener's place all that while.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// hyper's timer over `tokio::time` (see the module doc).
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeTimer;

/// A `tokio::time::Sleep` as a hyper [`Sleep`](hyper::rt::Sleep).
struct NodeSleep(Pin<Box<Sleep>>);

impl Future for NodeSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for NodeSleep {}

// `tokio::time::Instant` is real tokio's own type, and std's under madsim: the conversions are
// needed in one build and the identity in the other.
#[allow(clippy::useless_conversion)]
impl hyper::rt::Timer for NodeTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(NodeSleep(Box::pin(tokio::time::sleep(duration))))
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(NodeSleep(Box::pin(tokio::time::sleep_until(Instant::from(deadline)))))
    }

    fn now(&self) -> std::time::Instant {
        std::time::Instant::from(Instant::now())
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: std::time::Instant) {
        match sleep.as_mut().downcast_mut_pin::<NodeSleep>() {
            Some(ours) => ours.get_mut().0.as_mut().reset(Instant::from(new_deadline)),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A stream whose blocked writes time out (see the module doc).
#[derive(Debug)]
pub struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    /// Running while a write is blocked; reset when the next one blocks.
    deadline: Option<Pin<Box<Sleep>>>,
    blocked: bool,
    on_timeout: Counter,
}

impl<S> WriteDeadline<S> {
    /// Wraps `inner`; `on_timeout` is incremented each time a write times out.
    pub fn new(inner: S, timeout: Duration, on_timeout: Counter) -> Self {
        WriteDeadline { inner, timeout, deadline: None, blocked: false, on_timeout }
    }

    /// After the inner stream's write answered `poll`: the same answer, unless it is Pending
    /// past the deadline, which becomes a `TimedOut` error.
    fn check<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.blocked = false;
            return poll;
        }
        if !self.blocked {
            self.blocked = true;
            let at = Instant::now() + self.timeout;
            match &mut self.deadline {
                Some(deadline) => deadline.as_mut().reset(at),
                None => self.deadline = Some(Box::pin(tokio::time::sleep_until(at))),
            }
        }
        let deadline = self.deadline.as_mut().expect("set when blocked");
        if deadline.as_mut().poll(cx).is_ready() {
            self.blocked = false;
            self.on_timeout.inc();
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {:?}", self.timeout),
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.check(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.check(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        this.check(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.check(cx, poll)
    }
}

/// A stream that flushes only what was written (see the module doc).
#[derive(Debug)]
pub struct FlushWhenWritten<S> {
    inner: S,
    /// Bytes were written since the last completed flush.
    unflushed: bool,
}

impl<S> FlushWhenWritten<S> {
    pub fn new(inner: S) -> Self {
        FlushWhenWritten { inner, unflushed: false }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FlushWhenWritten<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FlushWhenWritten<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.unflushed |= matches!(poll, Poll::Ready(Ok(n)) if n > 0);
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.unflushed |= matches!(poll, Poll::Ready(Ok(n)) if n > 0);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.unflushed {
            return Poll::Ready(Ok(()));
        }
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        if matches!(poll, Poll::Ready(Ok(()))) {
            this.unflushed = false;
        }
        poll
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Has the kernel abort `stream` once data it sent stays unacknowledged for `after` (Linux's
/// `TCP_USER_TIMEOUT`; see the module doc). A socket that refuses the option is only logged:
/// the stream's own write deadline still ends it, later. No-op where the option does not exist
/// and under the simulator, whose TCP has no retransmissions (a dropped peer's connection is
/// reset there, and a partitioned one fills its window and meets the write deadline).
pub fn abort_when_unacknowledged(stream: &tokio::net::TcpStream, after: Duration) {
    #[cfg(all(target_os = "linux", not(madsim)))]
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_user_timeout(Some(after)) {
        tracing::warn!(error = %e, "could not set TCP_USER_TIMEOUT: a vanished peer is noticed only by the write deadline");
    }
    #[cfg(not(all(target_os = "linux", not(madsim))))]
    let _ = (stream, after);
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// The option reaches the socket (what the kernel then does with it is Linux's), at the
    /// shipped `connections.replication.idle_timeout` and at a small value.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_kernel_is_told_to_abort_a_stream_whose_data_stays_unacknowledged() {
        use crate::connections::settings::REPLICATION_IDLE_TIMEOUT_DEFAULT;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        for after in [REPLICATION_IDLE_TIMEOUT_DEFAULT, Duration::from_millis(250)] {
            let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            assert_eq!(socket2::SockRef::from(&server).tcp_user_timeout().unwrap(), None, "the kernel's default");
            abort_when_unacknowledged(&server, after);
            assert_eq!(socket2::SockRef::from(&server).tcp_user_timeout().unwrap(), Some(after));
            drop(client);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_times_out_and_is_counted() {
        let (client, server) = tokio::io::duplex(64);
        let counter = Counter::default();
        let mut stream = WriteDeadline::new(server, Duration::from_secs(5), counter.clone());
        // 64 bytes fit in the pipe; the rest blocks until the deadline.
        let started = Instant::now();
        let err = stream.write_all(&[7; 1000]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(counter.get(), 1);
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_not_cut() {
        let (mut client, server) = tokio::io::duplex(64);
        let counter = Counter::default();
        let mut stream = WriteDeadline::new(server, Duration::from_secs(5), counter.clone());
        let reader = async move {
            let mut got = Vec::new();
            let mut buf = [0; 64];
            while got.len() < 1000 {
                // Each wait is under the timeout; all of them together are far over it.
                tokio::time::sleep(Duration::from_secs(4)).await;
                let n = client.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            got
        };
        let (written, got) = tokio::join!(stream.write_all(&[7; 1000]), reader);
        written.unwrap();
        assert_eq!(got, vec![7; 1000]);
        assert_eq!(counter.get(), 0);
    }
}
