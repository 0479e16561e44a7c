//! Why a TLS handshake failed, as an operator acts on it: the peer showed no certificate, one
//! from another CA, an expired one — or was not speaking TLS at all.

use rustls::{AlertDescription, CertificateError, Error};

/// The reason a handshake failed, one label value of `qs_tls_handshake_failures_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "snake_case")]
pub enum HandshakeFailure {
    /// The client sent no certificate (replication requires one).
    NoCertificate,
    /// The peer's certificate does not chain to a CA this node trusts.
    UnknownIssuer,
    /// The peer's certificate has expired.
    Expired,
    /// The peer's certificate is not valid yet (or this node's clock is behind).
    NotYetValid,
    /// The server's certificate does not name the address it was reached at.
    WrongName,
    /// Any other fault in the peer's certificate (bad signature, wrong key usage, ...).
    BadCertificate,
    /// The peer refused this node's certificate or parameters (a fatal alert received).
    RefusedByPeer,
    /// What the peer sent was not TLS (a plaintext client, a port scanner).
    NotTls,
    /// The handshake did not finish within its deadline.
    TimedOut,
    /// The connection closed or broke during the handshake.
    Disconnected,
    /// Anything else rustls refused.
    Other,
}

impl HandshakeFailure {
    /// The reason behind an error from a handshake (tokio-rustls wraps rustls's error in an
    /// `io::Error`).
    pub fn of(error: &std::io::Error) -> HandshakeFailure {
        if error.kind() == std::io::ErrorKind::TimedOut {
            return HandshakeFailure::TimedOut;
        }
        match error.get_ref().and_then(|inner| inner.downcast_ref::<Error>()) {
            Some(tls) => HandshakeFailure::of_tls(tls),
            None => HandshakeFailure::Disconnected,
        }
    }

    /// The reason behind rustls's own error.
    pub fn of_tls(error: &Error) -> HandshakeFailure {
        match error {
            Error::NoCertificatesPresented => HandshakeFailure::NoCertificate,
            Error::InvalidCertificate(certificate) => match certificate {
                CertificateError::UnknownIssuer => HandshakeFailure::UnknownIssuer,
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => HandshakeFailure::Expired,
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    HandshakeFailure::NotYetValid
                }
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                    HandshakeFailure::WrongName
                }
                _ => HandshakeFailure::BadCertificate,
            },
            Error::AlertReceived(AlertDescription::CertificateRequired) => HandshakeFailure::NoCertificate,
            Error::AlertReceived(_) => HandshakeFailure::RefusedByPeer,
            Error::InvalidMessage(_)
            | Error::InappropriateMessage { .. }
            | Error::InappropriateHandshakeMessage { .. }
            | Error::DecryptError => HandshakeFailure::NotTls,
            _ => HandshakeFailure::Other,
        }
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}
