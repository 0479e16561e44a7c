//! TLS: mutual TLS on replication, and HTTPS on the HTTP port as an option (`[tls]`).
//!
//! ```toml
//! [tls]
//! certificate = "/etc/qs-node/tls/edge-1.pem"   # this node's certificate chain (PEM)
//! key = "/etc/qs-node/tls/edge-1.key"           # its private key (PEM: PKCS#8, SEC1 or PKCS#1)
//! ca = "/etc/qs-node/tls/ca.pem"                # the CA certificates a peer's must chain to
//! # reload_interval = "10s"                     # how often the three files are read again
//! # https = false                               # true: the HTTP port serves HTTPS only
//! ```
//!
//! Guarantees, with `[tls]` set:
//!
//! - **Both ends of every replication connection prove who they are.** The server asks for the
//!   client's certificate and refuses a connection without one that chains to `tls.ca`; the
//!   client checks that the server's chains to `tls.ca` and names the IP address it dialled. A
//!   plaintext peer is refused too: a node never speaks unencrypted replication.
//! - **A root group member is who its certificate says** ([`PeerIdentity`]): any certificate
//!   the CA signed may follow the log, but a Raft link is taken only from a peer whose
//!   certificate names the member's replication address.
//! - **A refusal is seen.** Each failed handshake is one log line (the peer, the reason, rustls's
//!   words) and one count in `qs_tls_handshake_failures_total{listener, side, reason}`, the
//!   reason a [`HandshakeFailure`].
//! - **Rotation without a restart.** The three files are read every `reload_interval`; when
//!   their bytes change and the new set is whole (parses, the key is the certificate's), new
//!   connections use it (`qs_tls_reloads_total{outcome="loaded"}`). A set that is not is
//!   logged once, counted (`outcome="refused"`), and the previous one kept: a rotation caught
//!   half-written is picked up on the next read. Open connections keep the certificates they
//!   started with.
//! - **TLS 1.3 only, no resumption**: every connection runs a full handshake, so a rotated CA
//!   or an expired certificate counts from the next connection on.
//!
//! The same code runs under the simulator; `provider.rs` says what it replaces there (the
//! randomness, nothing else) so that handshakes replay from the seed.

pub mod failure;
mod identity;
pub mod issue;
mod material;
pub(crate) mod provider;
mod stream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncWrite};

pub use failure::HandshakeFailure;
pub use identity::PeerIdentity;
pub use material::{MaterialError, TlsFile};
pub use stream::{Secured, Tapped};

use crate::connections::ListenerKind;
use crate::metrics::Metrics;
use material::{FileBytes, Material};

/// `[tls]` in the node's configuration (see the module doc).
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    #[serde(default = "default_reload_interval", with = "humantime_serde")]
    pub reload_interval: Duration,
    /// The HTTP port (the write API and `/metrics`) serves HTTPS with the same certificate,
    /// clients not asked for one (producers authenticate with their tokens).
    #[serde(default)]
    pub https: bool,
}

/// How often the files are read by default: a rotation is in use within ten seconds.
pub const RELOAD_INTERVAL_DEFAULT: Duration = Duration::from_secs(10);
/// Bounds of `tls.reload_interval`: reading three small files each second costs nothing;
/// past an hour a rotation would wait longer than an operator watching it.
pub const RELOAD_INTERVAL_MIN: Duration = Duration::from_secs(1);
pub const RELOAD_INTERVAL_MAX: Duration = Duration::from_secs(3600);

fn default_reload_interval() -> Duration {
    RELOAD_INTERVAL_DEFAULT
}

/// Which end of a connection this node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Side {
    /// It accepted the connection.
    Server,
    /// It dialled it.
    Client,
}

/// The rustls configurations one set of files makes.
#[derive(Debug)]
struct Configs {
    /// Replication's server end: client certificates required.
    replication: Arc<ServerConfig>,
    /// The HTTP port's, when `https` is on: no client certificate asked for.
    https: Option<Arc<ServerConfig>>,
    /// Replication's client end, presenting this node's certificate.
    client: Arc<ClientConfig>,
}

/// What one reading of the files did.
#[derive(Debug)]
pub enum Reload {
    Unchanged,
    Loaded,
    /// The files changed into a set that does not load; the previous one stays in use.
    Refused(MaterialError),
}

/// A node's TLS: the configurations in use, and the file bytes they were made from.
#[derive(Debug)]
pub struct Tls {
    config: TlsConfig,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<Configs>>,
    seen: Mutex<Seen>,
}

#[derive(Debug)]
struct Seen {
    loaded: FileBytes,
    /// The last set refused, so that it is logged once rather than every interval.
    refused: Option<FileBytes>,
}

impl Tls {
    /// Reads and checks the files; a node with a `[tls]` it cannot load does not start.
    pub fn load(config: &TlsConfig) -> Result<Tls, MaterialError> {
        let provider = provider::provider();
        let bytes = FileBytes::read(config)?;
        let configs = Configs::build(config, bytes.parse(config)?, &provider)?;
        Ok(Tls {
            config: config.clone(),
            provider,
            current: RwLock::new(Arc::new(configs)),
            seen: Mutex::new(Seen { loaded: bytes, refused: None }),
        })
    }

    pub fn config(&self) -> &TlsConfig {
        &self.config
    }

    /// Reads the files again and uses them from the next connection on if they changed into
    /// a set that loads; logs and counts what it did.
    pub fn reload(&self, metrics: &Metrics) -> Reload {
        let outcome = self.try_reload();
        let counted = match &outcome {
            Reload::Unchanged => return outcome,
            Reload::Loaded => {
                tracing::info!(certificate = %self.config.certificate.display(), "TLS: new certificates loaded; new connections use them");
                "loaded"
            }
            Reload::Refused(e) => {
                tracing::error!(error = %e, "TLS: the changed certificate files do not load; still using the previous ones");
                "refused"
            }
        };
        metrics.tls_reloads.get_or_create(&Metrics::label("outcome", counted)).inc();
        outcome
    }

    fn try_reload(&self) -> Reload {
        let mut seen = self.seen.lock().expect("the TLS file record is never left poisoned");
        let bytes = match FileBytes::read(&self.config) {
            Ok(bytes) => bytes,
            // A file missing for a moment (replaced by rename) is a refused set like any other.
            Err(e) => return Reload::Refused(e),
        };
        if bytes == seen.loaded || seen.refused.as_ref() == Some(&bytes) {
            return Reload::Unchanged;
        }
        match bytes.parse(&self.config).and_then(|m| Configs::build(&self.config, m, &self.provider)) {
            Ok(configs) => {
                *self.current.write().expect("the TLS configurations are never left poisoned") = Arc::new(configs);
                *seen = Seen { loaded: bytes, refused: None };
                Reload::Loaded
            }
            Err(e) => {
                seen.refused = Some(bytes);
                Reload::Refused(e)
            }
        }
    }

    fn current(&self) -> Arc<Configs> {
        self.current.read().expect("the TLS configurations are never left poisoned").clone()
    }

    /// The server end of a handshake on `listener` (replication, or the HTTP port with
    /// `https`), within `deadline`; a failure is logged and counted, and the stream dropped.
    pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        metrics: &Metrics,
        listener: ListenerKind,
        peer: SocketAddr,
        stream: S,
        deadline: Duration,
    ) -> Option<tokio_rustls::server::TlsStream<S>> {
        let configs = self.current();
        let config = match listener {
            ListenerKind::Replication => configs.replication.clone(),
            ListenerKind::Http => configs.https.clone().expect("the HTTP port accepts TLS only with tls.https on"),
            ListenerKind::Memcached => unreachable!("the memcached port never speaks TLS"),
        };
        let handshake = tokio_rustls::TlsAcceptor::from(config).accept(stream);
        let result = match tokio::time::timeout(deadline, handshake).await {
            Ok(result) => result,
            Err(_) => Err(timed_out(deadline)),
        };
        match result {
            Ok(stream) => {
                count(metrics, listener, Side::Server, None);
                Some(stream)
            }
            Err(e) => {
                let reason = HandshakeFailure::of(&e);
                count(metrics, listener, Side::Server, Some(reason));
                if reason == HandshakeFailure::Disconnected {
                    tracing::debug!(listener = listener.name(), %peer, error = %e, "TLS: peer left during the handshake");
                } else {
                    tracing::warn!(listener = listener.name(), %peer, reason = reason.name(), error = %e, "TLS: refused a peer");
                }
                None
            }
        }
    }

    /// The client end of a replication handshake with the source at `server`, within
    /// `deadline`. The error says why, and is counted; the caller logs it with its context.
    pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        metrics: &Metrics,
        server: SocketAddr,
        stream: S,
        deadline: Duration,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<S>> {
        let connector = tokio_rustls::TlsConnector::from(self.current().client.clone());
        let name = ServerName::IpAddress(server.ip().into());
        let result = match tokio::time::timeout(deadline, connector.connect(name, stream)).await {
            Ok(result) => result,
            Err(_) => Err(timed_out(deadline)),
        };
        let failure = result.as_ref().err().map(HandshakeFailure::of);
        count(metrics, ListenerKind::Replication, Side::Client, failure);
        result.map_err(|e| {
            let reason = failure.map_or("", HandshakeFailure::name);
            std::io::Error::new(e.kind(), format!("TLS handshake with {server} failed ({reason}): {e}"))
        })
    }
}

fn timed_out(deadline: Duration) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no TLS handshake within {deadline:?}"))
}

fn count(metrics: &Metrics, listener: ListenerKind, side: Side, failure: Option<HandshakeFailure>) {
    let side: &'static str = side.into();
    let mut labels =
        vec![("listener".to_string(), listener.name().to_string()), ("side".to_string(), side.to_string())];
    match failure {
        None => metrics.tls_handshakes.get_or_create(&labels).inc(),
        Some(reason) => {
            labels.push(("reason".to_string(), reason.name().to_string()));
            metrics.tls_handshake_failures.get_or_create(&labels).inc()
        }
    };
}

impl Configs {
    fn build(config: &TlsConfig, material: Material, provider: &Arc<CryptoProvider>) -> Result<Configs, MaterialError> {
        let Material { chain, key, roots } = material;
        let invalid =
            |source| MaterialError::Config { certificate: config.certificate.clone(), key: config.key.clone(), source };
        let tls13 = &[&rustls::version::TLS13];
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| invalid(rustls::Error::General(format!("tls.ca: {e}"))))?;
        let server = |verifier| {
            let builder = ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(tls13)
                .expect("ring supports TLS 1.3");
            let builder = match verifier {
                Some(verifier) => builder.with_client_cert_verifier(verifier),
                None => builder.with_no_client_auth(),
            };
            let mut server = builder.with_single_cert(chain.clone(), key.clone_key()).map_err(invalid)?;
            // No tickets: a connection never resumes, so each is checked against the
            // certificates and the CA in use when it opens.
            server.send_tls13_tickets = 0;
            Ok::<_, MaterialError>(Arc::new(server))
        };
        let replication = server(Some(verifier))?;
        let https = if config.https { Some(server(None)?) } else { None };
        let mut client = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(tls13)
            .expect("ring supports TLS 1.3")
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(invalid)?;
        client.resumption = rustls::client::Resumption::disabled();
        Ok(Configs { replication, https, client: Arc::new(client) })
    }
}

#[cfg(all(test, not(madsim)))]
mod tests;
