//! What any one client can make the gRPC server spend: connections, streams, calls in flight, silence.

use std::time::Duration;

/// The server's bounds; every one has a default, a flag or a constant, a
/// metric, and a line in docs/security.md.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Connections open at once over every listener; one more is accepted
    /// and closed at once, so it fails fast instead of waiting in the backlog.
    pub max_connections: usize,
    /// HTTP/2 streams one connection may have open (SETTINGS_MAX_CONCURRENT_STREAMS);
    /// a well-behaved client queues further calls itself.
    pub max_streams_per_connection: u32,
    /// Calls (unary or streams) in flight over every connection; one more
    /// is answered RESOURCE_EXHAUSTED without reaching a handler.
    pub max_calls: usize,
}

impl ServerLimits {
    /// A worker process holds one Work stream and a few unary calls at a
    /// time; 256 streams on a connection is far beyond any client of ours
    /// (Go's HTTP/2 server takes 250).
    pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 256;
    /// Each connection costs a file descriptor and some 100 KiB of buffers
    /// at most; 1,024 stays under the pod's open-file limit with room for
    /// the informers' and the API server's connections.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
    /// An open stream holds about 17 KiB (30,000 streams measured at 515
    /// MiB), so 4,096 calls in flight bound that part to about 70 MiB.
    pub const DEFAULT_MAX_CALLS: usize = 4096;
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_streams_per_connection: Self::DEFAULT_MAX_STREAMS_PER_CONNECTION,
            max_calls: Self::DEFAULT_MAX_CALLS,
        }
    }
}

/// HTTP/2 flow-control windows the server grants: how many bytes a client
/// may send on one stream, and on one connection over all its streams,
/// before the sidecar has read them. Unread bytes are buffered, so the
/// connection window bounds what one connection can park in memory: 256
/// KiB, 256 MiB over `DEFAULT_MAX_CONNECTIONS` (hyper's default was 1 MiB,
/// 1 GiB over as many). Workers send small messages, and a 3 MiB write body
/// still goes through, the window opening again as the sidecar reads it.
/// 64 KiB per stream is HTTP/2's own default and where gRPC-Go starts. Not
/// smaller per connection: h2 sizes its guard against floods of small DATA
/// frames at half this window, and a client whose calls are refused before
/// their bodies are read would have its connection closed sooner.
pub const STREAM_WINDOW_BYTES: u32 = 64 * 1024;
pub const CONNECTION_WINDOW_BYTES: u32 = 256 * 1024;
/// How long a new connection may stay silent (no HTTP/2 preface, no TLS
/// hello) before it is closed: a client that connects means to talk.
pub const FIRST_BYTES_WITHIN: Duration = Duration::from_secs(10);
/// How long a client gets to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 pings on a connection quiet this long find a peer that is gone
/// (a crashed host sends no FIN); the connection closes when one goes
/// unanswered for `KEEPALIVE_TIMEOUT`.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// The first pause after an accept fails for want of resources (EMFILE and
/// the like); it doubles to `ACCEPT_BACKOFF_MAX` while failures go on, so a
/// full file table does not spin a core.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
