//! Listening and serving: the gRPC routes on a TCP address and/or a unix socket, until shut down.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream, UnixListenerStream};
use tonic::service::Routes;
use tonic::transport::Server;
use tracing::{debug, info};

use crate::tls::{ServingTls, TlsConnection};

/// Where the sidecar listens, bound before anything is served.
pub struct Listeners {
    pub tcp: Option<TcpListener>,
    pub unix: Option<(UnixListener, PathBuf)>,
    /// Serves the TCP listener over TLS when set.
    pub tls: Option<ServingTls>,
}

/// What a TCP address beyond loopback needs: `--allow-remote`, and TLS or
/// an explicit `--insecure`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exposure {
    pub allow_remote: bool,
    pub insecure: bool,
}

/// How long a client gets to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections whose handshake finished, waiting for the server to take them.
const HANDSHAKEN_BACKLOG: usize = 64;

/// Why the sidecar could not listen.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("{address} is not a loopback address; pass --allow-remote to listen beyond this machine")]
    NotLoopback { address: SocketAddr },
    #[error("binding tcp {address}: {source}")]
    BindTcp { address: SocketAddr, source: std::io::Error },
    #[error("binding unix socket {path}: {source}")]
    BindUnix { path: PathBuf, source: std::io::Error },
    #[error("nothing to listen on: give --tcp, --unix or both")]
    Nothing,
    #[error(
        "{address} is beyond loopback and would serve plaintext: give --tls-cert and --tls-key, or --insecure to serve plaintext anyway"
    )]
    PlaintextRemote { address: SocketAddr },
}

/// Binds the admin HTTP port; beyond loopback needs `allow_remote`.
pub async fn bind_admin(address: SocketAddr, allow_remote: bool) -> Result<TcpListener, ListenError> {
    if !address.ip().is_loopback() && !allow_remote {
        return Err(ListenError::NotLoopback { address });
    }
    TcpListener::bind(address).await.map_err(|source| ListenError::BindTcp { address, source })
}

impl Listeners {
    /// Binds what was asked, plaintext; a TCP address off the loopback needs `allow_remote`.
    pub async fn bind(tcp: Option<SocketAddr>, unix: Option<&Path>, allow_remote: bool) -> Result<Self, ListenError> {
        Self::bind_with(tcp, unix, Exposure { allow_remote, insecure: false }, None).await
    }

    /// Binds what was asked; the TCP listener serves TLS when `tls` is set.
    /// A TCP address off the loopback needs `allow_remote`, and TLS or `insecure`.
    pub async fn bind_with(
        tcp: Option<SocketAddr>,
        unix: Option<&Path>,
        exposure: Exposure,
        tls: Option<ServingTls>,
    ) -> Result<Self, ListenError> {
        if tcp.is_none() && unix.is_none() {
            return Err(ListenError::Nothing);
        }
        let tcp = match tcp {
            Some(address) if !address.ip().is_loopback() && !exposure.allow_remote => {
                return Err(ListenError::NotLoopback { address });
            }
            Some(address) if !address.ip().is_loopback() && tls.is_none() && !exposure.insecure => {
                return Err(ListenError::PlaintextRemote { address });
            }
            Some(address) => {
                Some(TcpListener::bind(address).await.map_err(|source| ListenError::BindTcp { address, source })?)
            }
            None => None,
        };
        let unix = match unix {
            Some(path) => {
                // A socket file left by a previous run would make bind fail.
                if path.exists() {
                    let _ = std::fs::remove_file(path);
                }
                let listener = UnixListener::bind(path)
                    .map_err(|source| ListenError::BindUnix { path: path.to_path_buf(), source })?;
                Some((listener, path.to_path_buf()))
            }
            None => None,
        };
        Ok(Listeners { tcp, unix, tls })
    }

    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }
}

/// Serves `routes` on every listener until `stop` turns true, then lets
/// in-flight calls finish (HTTP/2 graceful shutdown).
pub async fn serve(
    routes: Routes,
    listeners: Listeners,
    mut stop: watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    let mut servers = tokio::task::JoinSet::new();
    if let Some(listener) = listeners.tcp {
        let address = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let (routes, stop) = (routes.clone(), stopped(stop.clone()));
        match listeners.tls {
            Some(tls) => {
                info!(transport = "tcp", %address, tls = true, "listening");
                let incoming = handshaken(listener, tls);
                servers.spawn(async move {
                    Server::builder().add_routes(routes).serve_with_incoming_shutdown(incoming, stop).await
                });
            }
            None => {
                info!(transport = "tcp", %address, "listening");
                servers.spawn(async move {
                    // We accept the sockets ourselves, so tonic's own nodelay setting
                    // never applies: without it, small replies wait on Nagle's algorithm.
                    let incoming = TcpListenerStream::new(listener).map(|accepted| {
                        accepted.inspect(|stream| {
                            let _ = stream.set_nodelay(true);
                        })
                    });
                    Server::builder().add_routes(routes).serve_with_incoming_shutdown(incoming, stop).await
                });
            }
        }
    }
    if let Some((listener, path)) = listeners.unix {
        info!(transport = "unix", path = %path.display(), "listening");
        let (routes, stop) = (routes.clone(), stopped(stop.clone()));
        servers.spawn(async move {
            let result = Server::builder()
                .add_routes(routes)
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), stop)
                .await;
            let _ = std::fs::remove_file(&path);
            result
        });
    }
    let _ = stop.borrow_and_update();
    while let Some(result) = servers.join_next().await {
        result.expect("server task panicked")?;
    }
    Ok(())
}

/// The TLS connections of `listener`: each accepted socket is handshaken in
/// a task of its own (a slow client holds up no one), and failures are
/// logged and dropped.
fn handshaken(listener: TcpListener, tls: ServingTls) -> ReceiverStream<std::io::Result<TlsConnection>> {
    let (tx, rx) = mpsc::channel(HANDSHAKEN_BACKLOG);
    tokio::spawn(async move {
        loop {
            let (socket, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    debug!(%err, "accepting a TCP connection failed");
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            // Each handshake uses the certificate loaded last.
            let (acceptor, handshaken) = (tls.acceptor(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(socket)).await {
                    Ok(Ok(stream)) => {
                        let _ = handshaken.send(Ok(TlsConnection(stream))).await;
                    }
                    Ok(Err(err)) => debug!(%peer, %err, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                }
            });
            if tx.is_closed() {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}
