//! TLS for the TCP listener: the server's certificate and key, and optionally a client CA that turns on client-certificate verification (mTLS), read from PEM files with errors that name the file.

mod connection;
mod reload;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

pub use connection::TlsConnection;
pub use reload::{ReloadCounters, ServingTls};

/// Where the TLS material is.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// PEM certificate chain, the server's first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates; when set, a client must present a certificate they sign.
    pub client_ca: Option<PathBuf>,
}

/// Why the TLS material cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {problem}")]
    Read { path: PathBuf, problem: String },
    #[error("{path}: no {what} in the file")]
    Empty { path: PathBuf, what: &'static str },
    #[error("{cert} and {key}: {problem}")]
    Mismatch { cert: PathBuf, key: PathBuf, problem: String },
    #[error("{path}: the client CA cannot verify certificates: {problem}")]
    ClientCa { path: PathBuf, problem: String },
    #[error("watching {path} for certificate changes: {problem}")]
    Watch { path: PathBuf, problem: String },
}

/// The bytes of the TLS files at one moment: what a configuration is built
/// from, and what tells a real change from a touch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

impl TlsFiles {
    fn read(&self) -> Result<Material, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|err| TlsError::Read { path: path.to_path_buf(), problem: err.to_string() })
        };
        Ok(Material {
            cert: read(&self.cert)?,
            key: read(&self.key)?,
            client_ca: self.client_ca.as_deref().map(read).transpose()?,
        })
    }

    fn build(&self, material: &Material) -> Result<Arc<ServerConfig>, TlsError> {
        let certs = parse_certs(&self.cert, &material.cert)?;
        let key = PrivateKeyDer::from_pem_slice(&material.key)
            .map_err(|err| TlsError::Read { path: self.key.clone(), problem: err.to_string() })?;
        let mismatch = |problem: String| TlsError::Mismatch { cert: self.cert.clone(), key: self.key.clone(), problem };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|err| mismatch(err.to_string()))?;
        let builder = match (&self.client_ca, &material.client_ca) {
            (Some(path), Some(pem)) => {
                let client_ca = |problem: String| TlsError::ClientCa { path: path.clone(), problem };
                let mut roots = RootCertStore::empty();
                for ca in parse_certs(path, pem)? {
                    roots.add(ca).map_err(|err| client_ca(err.to_string()))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|err| client_ca(err.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        let mut config = builder.with_single_cert(certs, key).map_err(|err| mismatch(err.to_string()))?;
        // gRPC is HTTP/2 only.
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }

    /// Every file, in the order given.
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(self.cert.as_path()), Some(self.key.as_path()), self.client_ca.as_deref()].into_iter().flatten()
    }
}

fn parse_certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::Read { path: path.to_path_buf(), problem: err.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::Empty { path: path.to_path_buf(), what: "certificate" });
    }
    Ok(certs)
}
