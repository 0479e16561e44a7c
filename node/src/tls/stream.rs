//! A connection that is TLS when the node is configured for it and plain TCP otherwise, one
//! type either way for the code that reads and writes it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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
