//! Dialling a source's replication port: TCP, then TLS when `[tls]` is set — the one way the
//! client, a snapshot bootstrap and a staleness probe reach another node.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::state::NodeState;
use crate::tls::{Secured, Tapped};

/// A connection to a source, encrypted or not as the node is configured.
pub type SourceStream = Secured<TcpStream, Tapped<tokio_rustls::client::TlsStream<TcpStream>>>;

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("connect timed out after {0:?}")]
    TimedOut(Duration),
    #[error("connect: {0}")]
    Connect(std::io::Error),
    /// The TLS handshake failed; the error says why (see `tls::HandshakeFailure`).
    #[error("{0}")]
    Tls(std::io::Error),
}

/// A TCP connection to `source`, from the local address `from` when one is configured.
async fn connect(from: Option<IpAddr>, source: SocketAddr) -> std::io::Result<TcpStream> {
    // madsim has no `TcpSocket`; a simulated node has one address, which every connection uses.
    #[cfg(not(madsim))]
    if let Some(ip) = from {
        let socket = if ip.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.bind(SocketAddr::new(ip, 0))?;
        return socket.connect(source).await;
    }
    #[cfg(madsim)]
    let _ = from;
    TcpStream::connect(source).await
}

/// Connects to `source` and, with `[tls]` set, completes the handshake — both within
/// `deadline`.
pub async fn dial(state: &NodeState, source: SocketAddr, deadline: Duration) -> Result<SourceStream, DialError> {
    let started = Instant::now();
    let stream = match tokio::time::timeout(deadline, connect(state.config.replication.dial_from, source)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(DialError::Connect(e)),
        Err(_) => return Err(DialError::TimedOut(deadline)),
    };
    let Some(tls) = &state.tls else { return Ok(Secured::Plain(stream)) };
    let left = deadline.saturating_sub(started.elapsed());
    let local = stream.local_addr().map_err(DialError::Connect)?;
    match tls.connect(&state.metrics, source, stream, left).await {
        Ok(stream) => Ok(Secured::Tls(Box::new(Tapped::new(stream, local, source, state.observer())))),
        Err(e) => {
            tracing::warn!(node = %state.config.name, %source, error = %e, "TLS: could not reach a source");
            Err(DialError::Tls(e))
        }
    }
}
