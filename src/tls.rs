//! TLS for the TCP listener: the server's certificate and key, and optionally a client CA that turns on client-certificate verification (mTLS), read from PEM files with errors that name the file.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

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
}

impl TlsFiles {
    /// Reads every file and builds the acceptor; any problem names its file.
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let certs = read_certs(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|err| TlsError::Read { path: self.key.clone(), problem: err.to_string() })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder =
            ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(
                |err| TlsError::Mismatch { cert: self.cert.clone(), key: self.key.clone(), problem: err.to_string() },
            )?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for ca in read_certs(path)? {
                    roots.add(ca).map_err(|err| TlsError::ClientCa { path: path.clone(), problem: err.to_string() })?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|err| TlsError::ClientCa { path: path.clone(), problem: err.to_string() })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).map_err(|err| TlsError::Mismatch {
            cert: self.cert.clone(),
            key: self.key.clone(),
            problem: err.to_string(),
        })?;
        // gRPC is HTTP/2 only.
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| TlsError::Read { path: path.to_path_buf(), problem: err.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::Empty { path: path.to_path_buf(), what: "certificate" });
    }
    Ok(certs)
}

/// A TLS connection as tonic serves it: the TCP peer's address stays known.
pub struct TlsConnection(pub TlsStream<TcpStream>);

impl Connected for TlsConnection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.0.get_ref().0.connect_info()
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
