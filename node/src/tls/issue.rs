//! Issuing certificates: a CA of the operator's own for the nodes of one deployment, and each
//! node's certificate signed by it — what `qs-node certs` writes, what the tests use, and what
//! the simulator gives its nodes.
//!
//! A node certificate serves both ends of a replication connection (extended key usage
//! `serverAuth` and `clientAuth`) and names the addresses peers dial it at: a replica checks
//! that its source's certificate names the IP address it connected to, as a browser checks a
//! host name. Keys are Ed25519 unless given: small, fast, and signed deterministically, which
//! is what lets the simulator reproduce a handshake from its seed.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ED25519, SanType,
};
use rustls::pki_types::PrivatePkcs8KeyDer;

/// Where a certificate's key comes from.
#[derive(Clone, Copy, Debug)]
pub enum KeySource {
    /// A new Ed25519 key from the operating system's randomness. Written, as every key here,
    /// as a version-1 PKCS#8 (RFC 8410), which OpenSSL and every other tool reads.
    Generated,
    /// The Ed25519 key with this 32-byte seed (RFC 8032's private key): the simulator derives
    /// its nodes' keys from the run's seed.
    Ed25519Seed([u8; 32]),
}

/// When a certificate is valid.
#[derive(Clone, Copy, Debug)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Validity {
    /// From `now` for `days` days.
    pub fn days_from(now: SystemTime, days: u32) -> Validity {
        Validity { not_before: now, not_after: now + std::time::Duration::from_secs(u64::from(days) * 86_400) }
    }

    /// From the first of January of `from` to the first of January of `to`, UTC: what the
    /// simulator issues, wide enough for any simulated clock.
    pub fn years(from: i32, to: i32) -> Validity {
        let new_year = |year| SystemTime::from(rcgen::date_time_ymd(year, 1, 1));
        Validity { not_before: new_year(from), not_after: new_year(to) }
    }
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct Issued {
    pub certificate_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("the CA's key: {0}")]
    CaKey(rcgen::Error),
    #[error("the CA's certificate: {0}")]
    CaCertificate(rcgen::Error),
    #[error("{0}")]
    Certificate(#[from] rcgen::Error),
}

/// A self-signed CA certificate named `common_name`, which may sign node certificates only
/// (path length 0).
pub fn new_ca(common_name: &str, validity: Validity, key: KeySource) -> Result<Issued, IssueError> {
    let key = key_pair(key)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = name(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    set_validity(&mut params, validity);
    let certificate = params.self_signed(&key)?;
    Ok(Issued { certificate_pem: certificate.pem(), key_pem: key.serialize_pem() })
}

/// A node certificate for `node` at `addresses` (and `dns_names`), signed by `ca`.
pub fn node_certificate(
    ca: &Issued,
    node: &str,
    addresses: &[IpAddr],
    dns_names: &[String],
    validity: Validity,
    key: KeySource,
) -> Result<Issued, IssueError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(IssueError::CaKey)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.certificate_pem, ca_key).map_err(IssueError::CaCertificate)?;
    let key = key_pair(key)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = name(node);
    params.subject_alt_names = addresses.iter().map(|&ip| SanType::IpAddress(ip)).collect();
    for dns in dns_names {
        params.subject_alt_names.push(SanType::DnsName(dns.as_str().try_into()?));
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    set_validity(&mut params, validity);
    let certificate = params.signed_by(&key, &issuer)?;
    Ok(Issued { certificate_pem: certificate.pem(), key_pem: key.serialize_pem() })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

fn set_validity(params: &mut CertificateParams, validity: Validity) {
    params.not_before = validity.not_before.into();
    params.not_after = validity.not_after.into();
}

fn key_pair(source: KeySource) -> Result<KeyPair, rcgen::Error> {
    match source {
        // A fresh seed written the way a seeded key is (a version-1 PKCS#8), not ring's own
        // generated key: ring writes PKCS#8 version 2 (the public key inside), which OpenSSL
        // 3.0 cannot read ("unsupported"), so an operator could not hand the key to
        // `openssl s_client` or any other tool.
        KeySource::Generated => key_pair(KeySource::Ed25519Seed(rand::random())),
        KeySource::Ed25519Seed(seed) => {
            // RFC 8410 §7: a version-1 PKCS#8 of an Ed25519 key is this fixed prefix, then the
            // 32-byte seed.
            const PREFIX: [u8; 16] =
                [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
            let der = [&PREFIX[..], &seed[..]].concat();
            KeyPair::from_pkcs8_der_and_sign_algo(&PrivatePkcs8KeyDer::from(der), &PKCS_ED25519)
        }
    }
}

impl Issued {
    /// Reads `<stem>.pem` and `<stem>.key` from `dir` (a CA written by [`Issued::write`]).
    pub fn read(dir: &Path, stem: &str) -> std::io::Result<Issued> {
        let read = |path: PathBuf| {
            std::fs::read_to_string(&path)
                .map_err(|e| std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))
        };
        Ok(Issued {
            certificate_pem: read(dir.join(format!("{stem}.pem")))?,
            key_pem: read(dir.join(format!("{stem}.key")))?,
        })
    }

    /// Writes `<stem>.key` (readable by its owner only) and `<stem>.pem` into `dir`, each
    /// through a temporary file and a rename, so that a node reading them meanwhile sees the
    /// old file or the new one, never half of one. The key goes first: a reader that sees the
    /// new key beside the old certificate refuses the pair and tries again at its next read.
    pub fn write(&self, dir: &Path, stem: &str) -> std::io::Result<(PathBuf, PathBuf)> {
        std::fs::create_dir_all(dir)?;
        let key = dir.join(format!("{stem}.key"));
        let certificate = dir.join(format!("{stem}.pem"));
        replace(&key, self.key_pem.as_bytes(), 0o600)?;
        replace(&certificate, self.certificate_pem.as_bytes(), 0o644)?;
        Ok((certificate, key))
    }
}

fn replace(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let context = |e: std::io::Error| std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display()));
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&temporary)
        .map_err(context)?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(context)?;
    std::fs::rename(&temporary, path).map_err(context)
}
