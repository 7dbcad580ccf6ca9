//! Listening and serving: the gRPC routes on a TCP address and/or a unix socket, within the server's limits, until shut down.

mod admission;
mod call_limit;
mod limits;
mod receive_budget;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tonic::service::Routes;
use tonic::transport::Server;
use tracing::info;

pub use limits::{CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES, ServerLimits};
pub use receive_budget::{MESSAGE_WITHIN, RECEIVE_BUDGET_BYTES};

use crate::metrics::ServerMetrics;
use crate::tls::ServingTls;
use admission::Admission;
use call_limit::CallLimitLayer;
use limits::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use receive_budget::ReceiveBudgetLayer;

/// Where the sidecar listens, bound before anything is served.
pub struct Listeners {
    pub tcp: Option<TcpListener>,
    pub unix: Option<(UnixListener, PathBuf)>,
    /// Serves the TCP listener over TLS when set.
    pub tls: Option<ServingTls>,
    /// What clients may make the server spend, over every listener.
    pub limits: ServerLimits,
    /// Where the server counts its connections and calls.
    pub metrics: ServerMetrics,
}

/// The unix socket's mode: the sidecar's user and group may connect (the
/// shipped manifests run both containers in group 65532), nobody else.
pub const UNIX_SOCKET_MODE: u32 = 0o660;

/// What a TCP address beyond loopback needs: `--allow-remote`, and TLS or
/// an explicit `--insecure`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exposure {
    pub allow_remote: bool,
    pub insecure: bool,
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
    #[error("unix socket {path}: will not replace it: {why}")]
    UnixPathTaken { path: PathBuf, why: String },
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
            Some(path) => Some((bind_unix(path)?, path.to_path_buf())),
            None => None,
        };
        Ok(Listeners { tcp, unix, tls, limits: ServerLimits::default(), metrics: ServerMetrics::default() })
    }

    /// These listeners, served within `limits` and counted in `metrics`.
    pub fn within(self, limits: ServerLimits, metrics: ServerMetrics) -> Self {
        Listeners { limits, metrics, ..self }
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
    let Listeners { tcp, unix, tls, limits, metrics } = listeners;
    let admission = Admission::new(limits.max_connections, metrics.clone());
    let budget = ReceiveBudgetLayer::new(RECEIVE_BUDGET_BYTES, metrics.clone());
    let calls = CallLimitLayer::new(limits.max_calls, metrics);
    let server = || {
        Server::builder()
            .max_concurrent_streams(limits.max_streams_per_connection)
            .initial_stream_window_size(STREAM_WINDOW_BYTES)
            .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .layer(calls.clone())
            .layer(budget.clone())
            .add_routes(routes.clone())
    };
    let mut servers = tokio::task::JoinSet::new();
    if let Some(listener) = tcp {
        let address = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let stop = stopped(stop.clone());
        match tls {
            Some(tls) => {
                info!(transport = "tcp", %address, tls = true, "listening");
                let (server, incoming) = (server(), admission.tls(listener, tls));
                servers.spawn(async move { server.serve_with_incoming_shutdown(incoming, stop).await });
            }
            None => {
                info!(transport = "tcp", %address, "listening");
                let (server, incoming) = (server(), admission.tcp(listener));
                servers.spawn(async move { server.serve_with_incoming_shutdown(incoming, stop).await });
            }
        }
    }
    if let Some((listener, path)) = unix {
        info!(transport = "unix", path = %path.display(), "listening");
        let (server, incoming, stop) = (server(), admission.unix(listener), stopped(stop.clone()));
        servers.spawn(async move {
            let result = server.serve_with_incoming_shutdown(incoming, stop).await;
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

/// Binds the unix socket at `path`, readable and writable by its owner and
/// group only (`UNIX_SOCKET_MODE`, whatever the umask). A socket left there
/// by a run that is gone is replaced; anything else at the path (a file, a
/// directory, a socket another process serves) is refused, never deleted.
fn bind_unix(path: &Path) -> Result<UnixListener, ListenError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let refused = |why: &str| ListenError::UnixPathTaken { path: path.to_path_buf(), why: why.to_owned() };
    match std::fs::symlink_metadata(path) {
        Ok(found) if !found.file_type().is_socket() => return Err(refused("it is not a socket")),
        Ok(_) if std::os::unix::net::UnixStream::connect(path).is_ok() => {
            return Err(refused("another process is listening on it"));
        }
        // A socket nobody serves: left by a run that is gone.
        Ok(_) => {
            std::fs::remove_file(path).map_err(|source| ListenError::BindUnix { path: path.to_path_buf(), source })?
        }
        Err(_) => {}
    }
    let bind_error = |source| ListenError::BindUnix { path: path.to_path_buf(), source };
    let listener = UnixListener::bind(path).map_err(bind_error)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(UNIX_SOCKET_MODE)).map_err(bind_error)?;
    Ok(listener)
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}
