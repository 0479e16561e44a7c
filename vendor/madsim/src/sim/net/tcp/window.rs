//! qsim's patch: TCP that pushes back.
//!
//! A [`TcpWindow`] is one direction of a connection: the bytes its writer has handed over that
//! its reader's application has not yet taken — the sender's socket buffer, the wire and the
//! receiver's socket buffer together. A writer whose window is full waits; every read frees
//! what it took and wakes the writer; a reader that is gone fails the writer as a reset would.
//! Without a window (`TcpConfig::window_bytes` unset) a stream is unbounded, as published.
//!
//! Where it parts from Linux: one fixed capacity per direction, where Linux autotunes its
//! buffers between their defaults and maxima; bytes a writer still buffers before a flush count
//! as sent; no segment, ack or bandwidth is modelled — room comes back the moment the reader's
//! application takes the bytes.

use std::{
    io,
    task::{Context, Poll, Waker},
};

use spin::Mutex;

/// One direction of a simulated TCP connection (see the module docs).
pub(crate) struct TcpWindow {
    capacity: usize,
    state: Mutex<WindowState>,
}

#[derive(Default)]
struct WindowState {
    /// Bytes written and not yet read; never above the capacity.
    in_flight: usize,
    /// The writer waiting for room, if it is.
    writer: Option<Waker>,
    /// The reading end is dropped: every later write fails.
    reader_gone: bool,
}

impl TcpWindow {
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a TCP window of 0 bytes could never carry a byte");
        TcpWindow { capacity, state: Mutex::new(WindowState::default()) }
    }

    /// Takes room for up to `wanted` bytes: `Ready(Ok(n))` with `1 <= n <= wanted`, `Pending`
    /// (the writer woken when a read frees room) while the window is full, or a reset once the
    /// reader is gone.
    pub(crate) fn poll_reserve(&self, cx: &mut Context<'_>, wanted: usize) -> Poll<io::Result<usize>> {
        let mut state = self.state.lock();
        if state.reader_gone {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionReset, "connection reset")));
        }
        if wanted == 0 {
            return Poll::Ready(Ok(0));
        }
        assert!(state.in_flight <= self.capacity, "a TCP window holds more than its capacity");
        let room = self.capacity - state.in_flight;
        if room == 0 {
            state.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let taken = room.min(wanted);
        state.in_flight += taken;
        Poll::Ready(Ok(taken))
    }

    /// The reader took `bytes`: they leave the window and the writer, if waiting, wakes.
    pub(crate) fn release(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let writer = {
            let mut state = self.state.lock();
            assert!(bytes <= state.in_flight, "a TCP reader took {bytes} bytes of {} in flight", state.in_flight);
            state.in_flight -= bytes;
            state.writer.take()
        };
        if let Some(writer) = writer {
            writer.wake();
        }
    }

    /// The reading end is dropped: the writer, waiting or not, fails from now on.
    pub(crate) fn close_reader(&self) {
        let writer = {
            let mut state = self.state.lock();
            state.reader_gone = true;
            state.writer.take()
        };
        if let Some(writer) = writer {
            writer.wake();
        }
    }
}
