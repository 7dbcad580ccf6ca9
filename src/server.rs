//! Listening and serving: the gRPC routes on a TCP address and/or a unix socket, until shut down.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tonic::service::Routes;
use tonic::transport::Server;
use tracing::info;

/// Where the sidecar listens, bound before anything is served.
pub struct Listeners {
    pub tcp: Option<TcpListener>,
    pub unix: Option<(UnixListener, PathBuf)>,
}

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
}

/// Binds the admin HTTP port; beyond loopback needs `allow_remote`.
pub async fn bind_admin(address: SocketAddr, allow_remote: bool) -> Result<TcpListener, ListenError> {
    if !address.ip().is_loopback() && !allow_remote {
        return Err(ListenError::NotLoopback { address });
    }
    TcpListener::bind(address).await.map_err(|source| ListenError::BindTcp { address, source })
}

impl Listeners {
    /// Binds what was asked; a TCP address off the loopback needs `allow_remote`.
    pub async fn bind(tcp: Option<SocketAddr>, unix: Option<&Path>, allow_remote: bool) -> Result<Self, ListenError> {
        if tcp.is_none() && unix.is_none() {
            return Err(ListenError::Nothing);
        }
        let tcp = match tcp {
            Some(address) if !address.ip().is_loopback() && !allow_remote => {
                return Err(ListenError::NotLoopback { address });
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
        Ok(Listeners { tcp, unix })
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
        info!(transport = "tcp", %address, "listening");
        let (routes, stop) = (routes.clone(), stopped(stop.clone()));
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

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}
