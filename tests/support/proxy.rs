//! A TCP proxy in front of the API server that a test can slow down, stall, cut or hang: the sidecar's view of a slow, absent or frozen server.
#![allow(dead_code)] // each test binary uses its own subset

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::config::Kubeconfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::control_plane;
use super::informers::wait_until;

/// What the proxy does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Forwards them.
    Open,
    /// Closes them, and refuses new ones: a server that is down.
    Cut,
    /// Keeps them, and new ones, open without forwarding a byte either
    /// way: a server (or a network) that froze. Closed once the mode changes.
    Hang,
    /// Holds what each side sends, and forwards it once the mode is `Open`
    /// again: a server that answers late, but answers.
    Stall,
}

pub struct Proxy {
    pub port: u16,
    /// When each connection was refused while cut: the client's retries.
    refused: Arc<Mutex<Vec<Instant>>>,
    mode: Arc<watch::Sender<Mode>>,
    open_connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Forwards 127.0.0.1:`port` to 127.0.0.1:`upstream`, TLS untouched.
    pub async fn start(upstream: u16) -> Proxy {
        Proxy::start_delayed(upstream, Duration::ZERO).await
    }

    /// Like `start`, but each new connection waits `delay` before it is
    /// forwarded: an API server behind a slow network.
    pub async fn start_delayed(upstream: u16, delay: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(watch::Sender::new(Mode::Open));
        let open_connections = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let (mode2, open2, refused2) = (mode.clone(), open_connections.clone(), refused.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut downstream, _)) = listener.accept().await else { continue };
                let mut mode_rx = mode2.subscribe();
                let accepted_in = *mode_rx.borrow_and_update();
                if accepted_in == Mode::Cut {
                    refused2.lock().unwrap().push(Instant::now());
                    continue; // dropped: the client sees its connection closed
                }
                let open = open2.clone();
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if accepted_in == Mode::Hang {
                        let _ = mode_rx.wait_for(|mode| *mode != Mode::Hang).await;
                    } else {
                        tokio::time::sleep(delay).await;
                        if let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", upstream)).await {
                            let (from_client, to_client) = downstream.split();
                            let (from_server, to_server) = upstream.split();
                            let both_ways = futures_util::future::join(
                                pump(from_client, to_server, mode_rx.clone()),
                                pump(from_server, to_client, mode_rx.clone()),
                            );
                            tokio::select! {
                                _ = both_ways => {}
                                _ = mode_rx.wait_for(|mode| matches!(mode, Mode::Cut | Mode::Hang)) => {}
                            }
                            // Frozen: nothing more either way until the mode changes again.
                            if *mode_rx.borrow() == Mode::Hang {
                                let _ = mode_rx.wait_for(|mode| *mode != Mode::Hang).await;
                            }
                        }
                    }
                    drop(downstream);
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Proxy { port, refused, mode, open_connections, task }
    }

    /// Closes every connection and refuses new ones; returns once all are closed.
    pub async fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
        wait_until("proxy connections closed", Duration::from_secs(10), || {
            self.open_connections.load(Ordering::SeqCst) == 0
        })
        .await;
    }

    /// Stops forwarding on every connection, open or new, and keeps them
    /// open: requests under way and new ones get no answer, and nothing
    /// tells the client so.
    pub fn hang(&self) {
        self.mode.send_replace(Mode::Hang);
    }

    /// Holds every byte either way, on open connections and new ones,
    /// until `restore`, which forwards what was held: requests under way are
    /// answered late.
    pub fn stall(&self) {
        self.mode.send_replace(Mode::Stall);
    }

    /// When connections were refused while cut, in order.
    pub fn refused_at(&self) -> Vec<Instant> {
        self.refused.lock().unwrap().clone()
    }

    /// Forwards again: what a stall held goes on; connections held while
    /// hung are closed.
    pub fn restore(&self) {
        self.mode.send_replace(Mode::Open);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.mode.send_replace(Mode::Cut);
        self.task.abort();
    }
}

/// Copies one direction of a connection, holding each chunk while the proxy
/// is stalled; ends at the end of input or when the proxy cuts or hangs.
async fn pump(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin, mut mode: watch::Receiver<Mode>) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if mode.wait_for(|mode| *mode != Mode::Stall).await.map(|mode| *mode != Mode::Open).unwrap_or(true) {
            return;
        }
        if to.write_all(&chunk[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// The port of the control plane's API server on loopback.
pub fn apiserver_port() -> u16 {
    let kubeconfig = Kubeconfig::read_from(control_plane::kubeconfig_path()).unwrap();
    let server = kubeconfig.clusters[0].cluster.as_ref().unwrap().server.clone().unwrap();
    server.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
}

/// The control plane's kubeconfig with its server moved to `port` on loopback (the API server's
/// certificate names 127.0.0.1, so TLS passes through the proxy untouched), written in `dir`.
pub fn kubeconfig_via(port: u16, dir: &std::path::Path) -> std::path::PathBuf {
    let mut kubeconfig = Kubeconfig::read_from(control_plane::kubeconfig_path()).unwrap();
    for cluster in &mut kubeconfig.clusters {
        if let Some(cluster) = cluster.cluster.as_mut() {
            cluster.server = Some(format!("https://127.0.0.1:{port}"));
        }
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_yaml_ng::to_string(&kubeconfig).unwrap()).unwrap();
    path
}
