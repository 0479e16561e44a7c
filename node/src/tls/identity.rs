//! Who the peer of a replication connection proved to be, and whether that is a given root
//! group member.
//!
//! Guarantees:
//! - **A member is who its certificate says.** With `[tls]`, a peer is a root group member
//!   only when the certificate it presented in the handshake (already checked to chain to
//!   `tls.ca`) names that member's replication address in its subject alternative names — the
//!   same check a member makes of the server it dials (`Tls::connect`), so both ends of a Raft
//!   link are checked, each by the address the configuration gives the other. Any certificate
//!   the CA signed (every replica's) is enough to follow the log; only a member's speaks Raft.
//! - Without `[tls]` there is nothing to prove: the peer is taken to be whoever holds the
//!   connection's source address. That stops a misconfigured replica, not an attacker who can
//!   choose its source address; a root group that must keep its Raft port to its members runs
//!   with `[tls]`.
//! - Members that share an IP address (several on one host, on different ports) share an
//!   identity: a certificate names addresses, not ports.

use std::net::IpAddr;

use rustls::pki_types::{CertificateDer, ServerName};

/// What the peer of one connection proved.
#[derive(Clone, Debug)]
pub enum PeerIdentity {
    /// Its end-entity certificate, which chains to `tls.ca` (rustls checked it in the handshake).
    Certified(CertificateDer<'static>),
    /// A plaintext connection (no `[tls]`): only the address it came from.
    Unauthenticated(IpAddr),
}

impl PeerIdentity {
    /// The identity of a TLS server-side connection's client, from the certificate it
    /// presented; None when it presented none (never, on a listener that requires one).
    pub fn of_client<S>(tls: &tokio_rustls::server::TlsStream<S>) -> Option<PeerIdentity> {
        let certificate = tls.get_ref().1.peer_certificates()?.first()?;
        Some(PeerIdentity::Certified(certificate.clone().into_owned()))
    }

    /// Ok when this peer may speak for the holder of `address`; otherwise why not, in words
    /// an operator can act on.
    pub fn names(&self, address: IpAddr) -> Result<(), String> {
        match self {
            PeerIdentity::Certified(der) => {
                let certificate = webpki::EndEntityCert::try_from(der)
                    .map_err(|e| format!("its certificate cannot be read ({e})"))?;
                certificate
                    .verify_is_valid_for_subject_name(&ServerName::IpAddress(address.into()))
                    .map_err(|_| format!("its certificate does not name {address} among its addresses"))
            }
            PeerIdentity::Unauthenticated(from) if *from == address => Ok(()),
            PeerIdentity::Unauthenticated(from) => {
                Err(format!("it connected from {from}, not {address} (plaintext: no certificate to prove more)"))
            }
        }
    }
}
