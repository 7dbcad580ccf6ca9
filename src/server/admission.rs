//! Taking connections in: accepts that back off when the process runs out of descriptors, a cap on connections open, and a deadline for a new connection's first bytes (or its TLS handshake), each checked off the accept loop.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::{debug, warn};

use super::limits::{ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_MIN, FIRST_BYTES_WITHIN, HANDSHAKE_TIMEOUT};
use crate::metrics::ServerMetrics;
use crate::tls::{ServingTls, TlsConnection};

/// Connections ready to serve, waiting for the server to take them.
const ADMITTED_BACKLOG: usize = 64;

/// The connection slots every listener shares, and where they are counted.
#[derive(Clone)]
pub struct Admission {
    slots: Arc<Semaphore>,
    metrics: ServerMetrics,
}

impl Admission {
    pub fn new(max_connections: usize, metrics: ServerMetrics) -> Self {
        Admission { slots: Arc::new(Semaphore::new(max_connections)), metrics }
    }

    /// The plaintext connections of a TCP listener, admitted.
    pub fn tcp(&self, listener: TcpListener) -> ReceiverStream<io::Result<Admitted<TcpStream>>> {
        self.admit(listener, |socket: TcpStream| async move {
            // We accept the sockets ourselves, so tonic's own nodelay setting
            // never applies: without it, small replies wait on Nagle's algorithm.
            let _ = socket.set_nodelay(true);
            first_bytes(socket).await
        })
    }

    /// The TLS connections of a TCP listener, admitted once handshaken;
    /// each handshake uses the certificate loaded last.
    pub fn tls(&self, listener: TcpListener, tls: ServingTls) -> ReceiverStream<io::Result<Admitted<TlsConnection>>> {
        self.admit(listener, move |socket: TcpStream| {
            let _ = socket.set_nodelay(true);
            let acceptor = tls.acceptor();
            async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(socket)).await {
                    Ok(Ok(stream)) => Ok(Talking { io: TlsConnection(stream), first: Vec::new() }),
                    Ok(Err(err)) => Err(Unserved::Handshake(err)),
                    Err(_) => Err(Unserved::Silent),
                }
            }
        })
    }

    /// The connections of a unix socket, admitted.
    pub fn unix(&self, listener: UnixListener) -> ReceiverStream<io::Result<Admitted<UnixStream>>> {
        self.admit(listener, first_bytes)
    }

    /// Accepts from `listener` until the stream is dropped: a connection
    /// beyond the slots is closed at once, every other one is `prepare`d in
    /// a task of its own (a slow client holds up no one) and handed on.
    fn admit<L, P, F, Io>(&self, listener: L, prepare: P) -> ReceiverStream<io::Result<Admitted<Io>>>
    where
        L: Listener,
        P: Fn(L::Socket) -> F + Send + 'static,
        F: Future<Output = Result<Talking<Io>, Unserved>> + Send + 'static,
        Io: Send + 'static,
    {
        let (tx, rx) = mpsc::channel(ADMITTED_BACKLOG);
        let admission = self.clone();
        tokio::spawn(async move {
            let mut backoff = Backoff::default();
            // The server drops its end when it stops: the listener closes with
            // this task, at once, not at the next accept.
            loop {
                let accepted = tokio::select! {
                    () = tx.closed() => return,
                    accepted = listener.accept() => accepted,
                };
                let socket = match accepted {
                    Ok(socket) => {
                        backoff.reset();
                        socket
                    }
                    Err(err) => {
                        admission.metrics.accept_errors.inc();
                        if let Some(pause) = backoff.after(&err) {
                            tokio::select! {
                                () = tx.closed() => return,
                                () = tokio::time::sleep(pause) => {}
                            }
                        }
                        continue;
                    }
                };
                let Ok(slot) = admission.slots.clone().try_acquire_owned() else {
                    admission.metrics.over_limit.inc();
                    debug!("closed a gRPC connection at once: --max-connections are open");
                    continue;
                };
                let (prepared, admitted, metrics) = (prepare(socket), tx.clone(), admission.metrics.clone());
                // Self-ending: the first bytes and the handshake have deadlines.
                tokio::spawn(async move {
                    match prepared.await {
                        Ok(Talking { io, first }) => {
                            metrics.connections.inc();
                            let slot = Slot { _permit: slot, metrics };
                            let _ = admitted.send(Ok(Admitted { io, first, replayed: 0, _slot: slot })).await;
                        }
                        Err(Unserved::Silent) => {
                            metrics.silent.inc();
                            debug!("closed a gRPC connection that sent nothing within its deadline");
                        }
                        Err(Unserved::Handshake(err)) => {
                            metrics.handshake_failed.inc();
                            debug!(%err, "TLS handshake failed");
                        }
                    }
                });
            }
        });
        ReceiverStream::new(rx)
    }
}

/// A connection that has talked: its first bytes, read to see it does, or
/// a finished TLS handshake.
struct Talking<Io> {
    io: Io,
    /// Read already; served before the rest.
    first: Vec<u8>,
}

/// Why a connection was closed before it was served.
enum Unserved {
    Silent,
    Handshake(io::Error),
}

/// The connection with its first bytes read, waiting at most
/// `FIRST_BYTES_WITHIN` for them; a connection closed before it sent any
/// counts as silent too.
async fn first_bytes<Io: AsyncRead + Unpin>(mut socket: Io) -> Result<Talking<Io>, Unserved> {
    let mut first = vec![0; FIRST_READ_BYTES];
    match tokio::time::timeout(FIRST_BYTES_WITHIN, socket.read(&mut first)).await {
        Ok(Ok(read)) if read > 0 => {
            first.truncate(read);
            Ok(Talking { io: socket, first })
        }
        _ => Err(Unserved::Silent),
    }
}

/// How much of a connection is read before it is served: the HTTP/2 preface's length.
const FIRST_READ_BYTES: usize = 24;

/// A listener of either kind, as the accept loop uses it.
trait Listener: Send + 'static {
    type Socket: Send + 'static;
    fn accept(&self) -> impl Future<Output = io::Result<Self::Socket>> + Send;
}

impl Listener for TcpListener {
    type Socket = TcpStream;
    async fn accept(&self) -> io::Result<TcpStream> {
        TcpListener::accept(self).await.map(|(socket, _)| socket)
    }
}

impl Listener for UnixListener {
    type Socket = UnixStream;
    async fn accept(&self) -> io::Result<UnixStream> {
        UnixListener::accept(self).await.map(|(socket, _)| socket)
    }
}

/// The pause after a failed accept. Running out of descriptors or memory
/// fails every accept until something closes, so those pause, doubling;
/// a connection reset before it was taken is the peer's and does not.
#[derive(Default)]
struct Backoff {
    next: Option<Duration>,
}

impl Backoff {
    fn after(&mut self, err: &io::Error) -> Option<Duration> {
        if matches!(err.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset) {
            return None;
        }
        let pause = self.next.unwrap_or(ACCEPT_BACKOFF_MIN);
        if self.next.is_none() {
            warn!(%err, "accepting a gRPC connection failed; pausing accepts, {pause:?} doubling to {ACCEPT_BACKOFF_MAX:?}");
        }
        self.next = Some(pause.saturating_mul(2).min(ACCEPT_BACKOFF_MAX));
        Some(pause)
    }

    fn reset(&mut self) {
        self.next = None;
    }
}

/// A connection's slot, given back (and the gauge lowered) when the connection closes.
struct Slot {
    _permit: OwnedSemaphorePermit,
    metrics: ServerMetrics,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.metrics.connections.dec();
    }
}

/// A served connection, holding its slot until it closes; the bytes read
/// before it was admitted are read again first.
pub struct Admitted<Io> {
    io: Io,
    first: Vec<u8>,
    replayed: usize,
    _slot: Slot,
}

impl<Io: Connected> Connected for Admitted<Io> {
    type ConnectInfo = Io::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for Admitted<Io> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(rest) = this.first.get(this.replayed..).filter(|rest| !rest.is_empty()) {
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.replayed += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for Admitted<Io> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_out_of_descriptors_should_pause_doubling_to_a_second_and_a_success_should_reset() {
        let emfile = io::Error::from_raw_os_error(24);
        let mut backoff = Backoff::default();
        let pauses: Vec<_> = (0..10).map(|_| backoff.after(&emfile).unwrap()).collect();
        assert_eq!(pauses[0], ACCEPT_BACKOFF_MIN);
        assert_eq!(pauses[1], ACCEPT_BACKOFF_MIN * 2);
        assert_eq!(pauses[9], ACCEPT_BACKOFF_MAX);
        backoff.reset();
        assert_eq!(backoff.after(&emfile), Some(ACCEPT_BACKOFF_MIN));
        assert_eq!(backoff.after(&io::Error::from(io::ErrorKind::ConnectionAborted)), None);
    }
}
