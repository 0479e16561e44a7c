//! One client connection: reading request lines within their deadlines, answering them in
//! order, writing replies before waiting for more input, and closing on `quit`, end of input, a
//! passed deadline or the node draining (the guarantees are the module doc's, in
//! [`super`]).

use std::future::Future;
use std::io;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use super::lines::{LineRead, read_line, skip_bytes};
use super::reply::{Step, refuse, respond};
use super::request::{Request, RequestError, parse_request};
use super::{PENDING_REPLY_BYTES_MAX, PlantedReadBugs, READ_BUFFER_BYTES, READ_ONLY_REPLY, ReadBackend, ReadCounters};
use crate::connections::{Lifecycle, reached};

/// How long a connection may keep the server waiting, and when it must stop (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct ConnectionLimits {
    /// The next request line (or a refused write's data block) must arrive within this, and each
    /// reply must be written within it. None: no deadline (an in-memory stream in a test).
    pub idle_timeout: Option<Duration>,
    /// At [`Lifecycle::Draining`] the connection closes once the request in flight is answered.
    /// None: it never drains.
    pub lifecycle: Option<watch::Receiver<Lifecycle>>,
    /// The simulator's planted bugs; none in what ships.
    pub planted: PlantedReadBugs,
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
                    respond(request, backend, counters, limits.planted, &mut out)
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
