//! Reading a node's TLS files: its certificate chain, its private key, and the CA certificates
//! it trusts — each read whole, so that what is loaded is exactly what was fingerprinted, and
//! each refused with the file and what was wrong in it.

use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsConfig;

/// The three files' contents, parsed.
#[derive(Debug)]
pub(super) struct Material {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub roots: RootCertStore,
}

/// Which of the three files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::Display)]
pub enum TlsFile {
    #[strum(serialize = "tls.certificate")]
    Certificate,
    #[strum(serialize = "tls.key")]
    Key,
    #[strum(serialize = "tls.ca")]
    Ca,
}

#[derive(Debug, thiserror::Error)]
pub enum MaterialError {
    #[error("{file} ({path}): cannot read it: {source}")]
    Read {
        file: TlsFile,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file} ({path}): {problem}")]
    Invalid { file: TlsFile, path: PathBuf, problem: String },
    /// The files parse but do not make a configuration (the key is not the certificate's, say).
    #[error("tls.certificate and tls.key ({certificate}, {key}): {source}")]
    Config {
        certificate: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

/// The three files' bytes, as read.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FileBytes {
    pub certificate: Vec<u8>,
    pub key: Vec<u8>,
    pub ca: Vec<u8>,
}

impl FileBytes {
    pub fn read(config: &TlsConfig) -> Result<FileBytes, MaterialError> {
        let read = |file, path: &Path| {
            std::fs::read(path).map_err(|source| MaterialError::Read { file, path: path.to_path_buf(), source })
        };
        Ok(FileBytes {
            certificate: read(TlsFile::Certificate, &config.certificate)?,
            key: read(TlsFile::Key, &config.key)?,
            ca: read(TlsFile::Ca, &config.ca)?,
        })
    }

    pub fn parse(&self, config: &TlsConfig) -> Result<Material, MaterialError> {
        let invalid =
            |file, path: &Path, problem: String| MaterialError::Invalid { file, path: path.to_path_buf(), problem };
        let certificates = |file, path: &Path, bytes: &[u8]| {
            let certs = CertificateDer::pem_slice_iter(bytes)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid(file, path, format!("not PEM certificates: {e}")))?;
            if certs.is_empty() {
                return Err(invalid(file, path, "holds no certificate (no BEGIN CERTIFICATE section)".into()));
            }
            Ok(certs)
        };
        let chain = certificates(TlsFile::Certificate, &config.certificate, &self.certificate)?;
        let key = PrivateKeyDer::from_pem_slice(&self.key).map_err(|e| {
            invalid(TlsFile::Key, &config.key, format!("no private key (PKCS#8, SEC1 or PKCS#1 PEM): {e}"))
        })?;
        let mut roots = RootCertStore::empty();
        for (n, ca) in certificates(TlsFile::Ca, &config.ca, &self.ca)?.into_iter().enumerate() {
            roots.add(ca).map_err(|e| {
                invalid(TlsFile::Ca, &config.ca, format!("certificate {} is not one a peer can chain to: {e}", n + 1))
            })?;
        }
        Ok(Material { chain, key, roots })
    }
}
