//! `[tls]` loading and reloading on real files, and the failure reasons.

use std::path::Path;
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;

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

/// A root member is who its certificate says: a certificate the CA signed for one address
/// speaks for that address only; a plaintext peer, for the address it came from.
#[test]
fn a_peer_identity_names_only_the_addresses_its_certificate_does() {
    let ca = new_ca("test CA", validity(), KeySource::Ed25519Seed([7; 32])).unwrap();
    let member: std::net::IpAddr = "10.0.0.2".parse().unwrap();
    let replica: std::net::IpAddr = "10.0.1.1".parse().unwrap();
    let issued = node_certificate(&ca, "mid-1", &[replica], &[], validity(), KeySource::Ed25519Seed([8; 32])).unwrap();
    let der = rustls::pki_types::CertificateDer::from_pem_slice(issued.certificate_pem.as_bytes()).unwrap();
    let identity = PeerIdentity::Certified(der);
    assert!(identity.names(replica).is_ok());
    let refused = identity.names(member).expect_err("a replica's certificate does not speak for a member");
    assert!(refused.contains("does not name 10.0.0.2"), "{refused}");
    assert!(PeerIdentity::Unauthenticated(member).names(member).is_ok());
    let refused = PeerIdentity::Unauthenticated(replica).names(member).expect_err("another source address");
    assert!(refused.contains("connected from 10.0.1.1"), "{refused}");
}

/// Every key `qs-node certs` writes is a version-1 PKCS#8 Ed25519 key, which OpenSSL 3.0 reads
/// (ring's own version-2 keys it refuses as "unsupported"); where `openssl` is installed, it
/// reads the key and finds the certificate's public key in it.
#[test]
fn generated_keys_are_pkcs8_version_1_and_openssl_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let ca = new_ca("test CA", validity(), KeySource::Generated).unwrap();
    let node =
        node_certificate(&ca, "node", &["127.0.0.1".parse().unwrap()], &[], validity(), KeySource::Generated).unwrap();
    for (stem, issued) in [("ca", &ca), ("node", &node)] {
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap();
        let der = der.secret_pkcs8_der();
        // SEQUENCE of 46 bytes, INTEGER 0 (version 1), the Ed25519 OID, the 32-byte seed.
        assert_eq!(der.len(), 48, "{stem}: a version-1 Ed25519 PKCS#8 is 48 bytes");
        assert_eq!(&der[..5], &[0x30, 0x2e, 0x02, 0x01, 0x00], "{stem}: version 1");
        issued.write(dir.path(), stem).unwrap();
    }
    let Ok(version) = std::process::Command::new("openssl").arg("version").output() else {
        eprintln!("openssl is not installed: the key format is checked above, OpenSSL's reading skipped");
        return;
    };
    assert!(version.status.success());
    let key = dir.path().join("node.key");
    let read = std::process::Command::new("openssl").args(["pkey", "-pubout", "-in"]).arg(&key).output().unwrap();
    assert!(read.status.success(), "openssl pkey: {}", String::from_utf8_lossy(&read.stderr));
    let certificate = dir.path().join("node.pem");
    let public = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-pubkey", "-in"])
        .arg(&certificate)
        .output()
        .unwrap();
    assert!(public.status.success(), "openssl x509: {}", String::from_utf8_lossy(&public.stderr));
    assert_eq!(read.stdout, public.stdout, "the key is the certificate's");
}
