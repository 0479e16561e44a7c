//! A connection that is TLS when the node is configured for it and plain TCP otherwise, one
//! type either way for the code that reads and writes it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::observe::NodeObserver;

/// `Plain(S)` or `Tls(T)`, where `T` is a TLS stream over an `S` (boxed: rustls's connection
/// state is a few kilobytes).
#[derive(Debug)]
pub enum Secured<S, T> {
    Plain(S),
    Tls(Box<T>),
}

impl<S: AsyncRead + Unpin, T: AsyncRead + Unpin> AsyncRead for Secured<S, T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Secured::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Secured::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncWrite + Unpin, T: AsyncWrite + Unpin> AsyncWrite for Secured<S, T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Secured::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Secured::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Secured::Plain(s) => Pin::new(s).poll_flush(cx),
            Secured::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Secured::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Secured::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A TLS stream whose reads are shown, decrypted, to the node's observer (under the simulator;
/// with no observer it only passes through): see [`NodeObserver::plaintext_read`].
#[derive(Debug)]
pub struct Tapped<T> {
    inner: T,
    local: SocketAddr,
    peer: SocketAddr,
    observer: Option<Arc<dyn NodeObserver>>,
}

impl<T> Tapped<T> {
    pub fn new(inner: T, local: SocketAddr, peer: SocketAddr, observer: Option<Arc<dyn NodeObserver>>) -> Tapped<T> {
        Tapped { inner, local, peer, observer }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tapped<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(observer)) = (&polled, &this.observer)
            && buf.filled().len() > before
        {
            observer.plaintext_read(this.local, this.peer, &buf.filled()[before..]);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tapped<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
