//! `[tls]` loading and reloading on real files, and the failure reasons.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::issue::{Issued, KeySource, Validity, new_ca, node_certificate};
use super::*;

fn validity() -> Validity {
    Validity::days_from(SystemTime::now() - Duration::from_secs(3600), 30)
}

/// A CA and a node certificate `node` in `dir`, and the `[tls]` naming them.
fn issue(dir: &Path, seed: u8) -> (Issued, TlsConfig) {
    let ca = new_ca("test CA", validity(), KeySource::Ed25519Seed([seed; 32])).unwrap();
    ca.write(dir, "ca").unwrap();
    let ip = "127.0.0.1".parse().unwrap();
    node_certificate(&ca, "node", &[ip], &[], validity(), KeySource::Ed25519Seed([seed + 1; 32]))
        .unwrap()
        .write(dir, "node")
        .unwrap();
    let config = TlsConfig {
        certificate: dir.join("node.pem"),
        key: dir.join("node.key"),
        ca: dir.join("ca.pem"),
        reload_interval: RELOAD_INTERVAL_DEFAULT,
        https: true,
    };
    (ca, config)
}

#[test]
fn a_config_that_parses_loads_and_names_its_defaults() {
    let text = "certificate = \"a.pem\"\nkey = \"a.key\"\nca = \"ca.pem\"\n";
    let config: TlsConfig = toml::from_str(text).unwrap();
    assert_eq!(config.reload_interval, RELOAD_INTERVAL_DEFAULT);
    assert!(!config.https);
    assert!(toml::from_str::<TlsConfig>("certificate = \"a.pem\"\nkey = \"a.key\"\n").is_err(), "ca is required");
}

#[test]
fn each_bad_file_is_refused_with_its_field_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let (_, config) = issue(dir.path(), 1);
    Tls::load(&config).expect("a whole set loads");

    let missing = TlsConfig { ca: dir.path().join("nowhere.pem"), ..config.clone() };
    let e = Tls::load(&missing).unwrap_err().to_string();
    assert!(e.starts_with("tls.ca (") && e.contains("nowhere.pem") && e.contains("cannot read"), "{e}");

    std::fs::write(dir.path().join("junk.pem"), "not a certificate\n").unwrap();
    let junk = TlsConfig { certificate: dir.path().join("junk.pem"), ..config.clone() };
    let e = Tls::load(&junk).unwrap_err().to_string();
    assert!(e.starts_with("tls.certificate (") && e.contains("holds no certificate"), "{e}");

    let no_key = TlsConfig { key: dir.path().join("ca.pem"), ..config.clone() };
    let e = Tls::load(&no_key).unwrap_err().to_string();
    assert!(e.starts_with("tls.key (") && e.contains("no private key"), "{e}");

    // Another key than the certificate's.
    let other = tempfile::tempdir().unwrap();
    let (_, other_config) = issue(other.path(), 7);
    let mismatched = TlsConfig { key: other_config.key, ..config };
    let e = Tls::load(&mismatched).unwrap_err().to_string();
    assert!(e.starts_with("tls.certificate and tls.key"), "{e}");
}

#[test]
fn a_reload_uses_a_changed_set_and_keeps_the_old_one_over_a_broken_one_logged_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_, config) = issue(dir.path(), 1);
    let tls = Tls::load(&config).unwrap();
    let metrics = Metrics::default();
    assert!(matches!(tls.reload(&metrics), Reload::Unchanged));

    // Half a certificate: refused, once; the configuration in use stays.
    let before = tls.current();
    let whole = std::fs::read(&config.certificate).unwrap();
    std::fs::write(&config.certificate, &whole[..whole.len() / 2]).unwrap();
    assert!(matches!(tls.reload(&metrics), Reload::Refused(_)));
    assert!(matches!(tls.reload(&metrics), Reload::Unchanged), "the same broken set is reported once");
    assert!(Arc::ptr_eq(&before, &tls.current()), "a refused set replaced the one in use");

    // A new whole set: loaded.
    issue(dir.path(), 3);
    assert!(matches!(tls.reload(&metrics), Reload::Loaded));
    assert!(!Arc::ptr_eq(&before, &tls.current()));
    let count = |outcome| metrics.tls_reloads.get_or_create(&Metrics::label("outcome", outcome)).get();
    assert_eq!((count("loaded"), count("refused")), (1, 1));
}

#[test]
fn failures_are_named_as_an_operator_acts_on_them() {
    use rustls::{AlertDescription, CertificateError, Error};
    let cases = [
        (Error::NoCertificatesPresented, HandshakeFailure::NoCertificate),
        (Error::InvalidCertificate(CertificateError::UnknownIssuer), HandshakeFailure::UnknownIssuer),
        (Error::InvalidCertificate(CertificateError::Expired), HandshakeFailure::Expired),
        (Error::InvalidCertificate(CertificateError::NotValidYet), HandshakeFailure::NotYetValid),
        (Error::InvalidCertificate(CertificateError::NotValidForName), HandshakeFailure::WrongName),
        (Error::InvalidCertificate(CertificateError::BadSignature), HandshakeFailure::BadCertificate),
        (Error::AlertReceived(AlertDescription::UnknownCA), HandshakeFailure::RefusedByPeer),
        (Error::AlertReceived(AlertDescription::CertificateRequired), HandshakeFailure::NoCertificate),
        (Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType), HandshakeFailure::NotTls),
    ];
    for (error, reason) in cases {
        let wrapped = std::io::Error::new(std::io::ErrorKind::InvalidData, error);
        assert_eq!(HandshakeFailure::of(&wrapped), reason);
    }
    let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    assert_eq!(HandshakeFailure::of(&reset), HandshakeFailure::Disconnected);
    assert_eq!(HandshakeFailure::of(&timed_out(Duration::from_secs(1))), HandshakeFailure::TimedOut);
    // Every reason has a distinct label.
    let names: std::collections::BTreeSet<_> =
        <HandshakeFailure as strum::IntoEnumIterator>::iter().map(HandshakeFailure::name).collect();
    assert_eq!(names.len(), <HandshakeFailure as strum::IntoEnumIterator>::iter().count());
}
