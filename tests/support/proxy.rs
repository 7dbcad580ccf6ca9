//! A TCP proxy in front of the API server that a test can slow down or cut: the informer's view of a slow or absent server.
#![allow(dead_code)] // each test binary uses its own subset

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::informers::wait_until;

pub struct Proxy {
    pub port: u16,
    /// When each connection was refused while cut: the client's retries.
    refused: Arc<Mutex<Vec<Instant>>>,
    cut: Arc<watch::Sender<bool>>,
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
        let cut = Arc::new(watch::Sender::new(false));
        let open_connections = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let (cut2, open2, refused2) = (cut.clone(), open_connections.clone(), refused.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut downstream, _)) = listener.accept().await else { continue };
                if *cut2.borrow() {
                    refused2.lock().unwrap().push(Instant::now());
                    continue; // dropped: the client sees its connection closed
                }
                let mut cut_rx = cut2.subscribe();
                let open = open2.clone();
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    if let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut downstream, &mut upstream) => {}
                            _ = cut_rx.wait_for(|cut| *cut) => {}
                        }
                    }
                    drop(downstream);
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Proxy { port, refused, cut, open_connections, task }
    }

    /// Closes every connection and refuses new ones; returns once all are closed.
    pub async fn cut(&self) {
        self.cut.send_replace(true);
        wait_until("proxy connections closed", Duration::from_secs(10), || {
            self.open_connections.load(Ordering::SeqCst) == 0
        })
        .await;
    }

    /// When connections were refused while cut, in order.
    pub fn refused_at(&self) -> Vec<Instant> {
        self.refused.lock().unwrap().clone()
    }

    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut.send_replace(true);
        self.task.abort();
    }
}
