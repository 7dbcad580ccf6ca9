//! Command-line flags; each can also be set from a `WQS_*` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::server::ServerLimits;

/// A sidecar that hosts a priority workqueue with leases and serves it over
/// gRPC, so reconcilers in any language become remote workers.
#[derive(Debug, Parser)]
#[command(name = "workqueue-sidecar", version, about, long_about = None)]
pub struct Cli {
    /// YAML file with the queues and their settings. Without it, one queue
    /// named "default" with client-go's defaults.
    #[arg(long, env = "WQS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// TCP address for gRPC, or "off". Addresses beyond loopback need --allow-remote.
    #[arg(long, env = "WQS_TCP", value_name = "ADDR", default_value = "127.0.0.1:50051", value_parser = parse_tcp)]
    pub tcp: TcpAddress,

    /// Unix socket path for gRPC (in a pod: a shared emptyDir).
    #[arg(long, env = "WQS_UNIX", value_name = "PATH")]
    pub unix: Option<PathBuf>,

    /// Admin HTTP address for /metrics, /healthz and /readyz, or "off".
    /// Beyond loopback needs --allow-remote.
    #[arg(long, env = "WQS_ADMIN", value_name = "ADDR", default_value = "127.0.0.1:8081", value_parser = parse_tcp)]
    pub admin: TcpAddress,

    /// Allow a --tcp or --admin address that is not loopback. A --tcp
    /// address beyond loopback also needs TLS (--tls-cert, --tls-key) or --insecure.
    #[arg(long, env = "WQS_ALLOW_REMOTE")]
    pub allow_remote: bool,

    /// Serve plaintext gRPC on a --tcp address beyond loopback (with --allow-remote).
    #[arg(long, env = "WQS_INSECURE")]
    pub insecure: bool,

    /// PEM certificate chain: the --tcp listener serves TLS (needs --tls-key).
    #[arg(long, env = "WQS_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "WQS_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// PEM CA certificates: TLS clients must present a certificate they sign (mTLS).
    #[arg(long, env = "WQS_TLS_CLIENT_CA", value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// Let clients call ShutDown, which stops a queue for every worker. Off:
    /// ShutDown is PERMISSION_DENIED; the sidecar drains its queues on SIGTERM.
    #[arg(long, env = "WQS_ALLOW_SHUTDOWN_RPC")]
    pub allow_shutdown_rpc: bool,

    /// On SIGTERM or SIGINT, how long held leases may run before their keys are handed back.
    #[arg(long, env = "WQS_GRACE_PERIOD", value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub grace_period: Duration,

    /// Log format.
    #[arg(long, env = "WQS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter, as tracing's EnvFilter (e.g. "info", "workqueue_sidecar=debug").
    #[arg(long, env = "WQS_LOG", value_name = "FILTER", default_value = "info", value_parser = parse_log_filter)]
    pub log: String,

    /// Kubeconfig for the API server (informers, writes, leader election,
    /// shard Leases). Without it: $KUBECONFIG, ~/.kube/config, or the pod's
    /// service account. Unused when nothing needs the API server.
    #[arg(long, env = "WQS_KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Elect a leader among replicas through a coordination.k8s.io Lease;
    /// followers keep warm caches and hand out no keys.
    #[arg(long, env = "WQS_LEADER_ELECTION")]
    pub leader_election: bool,

    /// Namespace of the election's Lease (in a pod: its own, from POD_NAMESPACE).
    #[arg(long, env = "POD_NAMESPACE", value_name = "NS", default_value = "default")]
    pub leader_election_namespace: String,

    /// Name of the election's Lease.
    #[arg(long, env = "WQS_LEADER_ELECTION_LEASE", value_name = "NAME", default_value = "workqueue-sidecar")]
    pub leader_election_lease: String,

    /// This replica's identity in the Lease, and in its shard Lease (in a pod: its name, from POD_NAME; else the host name).
    #[arg(long, env = "POD_NAME", value_name = "ID")]
    pub leader_election_identity: Option<String>,

    /// How long the Lease stays valid after its last renewal (shard Leases too).
    #[arg(long, env = "WQS_LEADER_ELECTION_LEASE_DURATION", value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,

    /// How long the leader keeps trying to renew before it steps down; a
    /// shard member grants nothing later than this after its last renewal.
    #[arg(long, env = "WQS_LEADER_ELECTION_RENEW_DEADLINE", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: Duration,

    /// How often replicas try to take or renew the Lease (shard Leases too).
    #[arg(long, env = "WQS_LEADER_ELECTION_RETRY_PERIOD", value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub leader_election_retry_period: Duration,

    /// Share the keys of the queues with `shard_by` among the replicas of
    /// this group: each keeps a Lease `<group>-<identity>` in the election's
    /// namespace, with the election's identity and timings, and grants only
    /// the keys of its shard slots. Needed when a queue sets `shard_by`.
    #[arg(long, env = "WQS_SHARD_GROUP", value_name = "GROUP")]
    pub shard_group: Option<String>,

    /// Threads that run the sidecar's tasks. With one, every hand-over between
    /// the informers, the queues and the gRPC streams stays on that thread,
    /// which costs the least CPU at a controller's event rates (see
    /// docs/benchmarks.md). Raise it when one core is not enough: many large
    /// informers syncing at once, or Cache lists of very many objects.
    #[arg(long, env = "WQS_WORKER_THREADS", value_name = "N", default_value = "1", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: u16,

    /// gRPC connections open at once over every listener; one more is
    /// closed at once (metric workqueue_sidecar_grpc_connections_unserved).
    #[arg(long, env = "WQS_MAX_CONNECTIONS", value_name = "N", default_value_t = ServerLimits::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// HTTP/2 streams (calls) one gRPC connection may have open at once; a
    /// client queues further calls itself.
    #[arg(long, env = "WQS_MAX_STREAMS_PER_CONNECTION", value_name = "N", default_value_t = ServerLimits::DEFAULT_MAX_STREAMS_PER_CONNECTION, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams_per_connection: u32,

    /// gRPC calls (unary or streams) in flight at once over every
    /// connection; one more is answered RESOURCE_EXHAUSTED.
    #[arg(long, env = "WQS_MAX_CALLS", value_name = "N", default_value_t = ServerLimits::DEFAULT_MAX_CALLS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_calls: u32,

    /// Check the config file, print a summary and exit (0 when valid).
    #[arg(long)]
    pub check_config: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `--tcp`: an address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpAddress(pub Option<SocketAddr>);

/// A duration flag: humantime's format, at most 366 days, as every duration
/// the config file and the gRPC API take (a unit typo is refused, not kept).
fn parse_duration(value: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(value).map_err(|err| err.to_string())?;
    if duration > crate::queue::MAX_DURATION {
        return Err(format!("must be at most {} days", crate::queue::MAX_DURATION.as_secs() / 86_400));
    }
    Ok(duration)
}

fn parse_tcp(value: &str) -> Result<TcpAddress, String> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(TcpAddress(None));
    }
    value
        .parse()
        .map(|a| TcpAddress(Some(a)))
        .map_err(|_| format!("{value:?} is not an IP:port address (e.g. 127.0.0.1:50051) or \"off\""))
}

/// A tracing filter, checked here so that a typo is refused (exit status 2)
/// rather than quietly replaced by another filter.
fn parse_log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(text).map(|_| text.to_owned()).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_should_be_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_should_be_at_most_366_days() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("366d"), Ok(Duration::from_secs(366 * 86_400)));
        assert_eq!(parse_duration("400d"), Err("must be at most 366 days".to_string()));
        assert!(parse_duration("30 parsecs").is_err());
    }

    #[test]
    fn tcp_should_accept_off_and_reject_nonsense() {
        assert_eq!(parse_tcp("off"), Ok(TcpAddress(None)));
        assert_eq!(parse_tcp("127.0.0.1:0").unwrap().0.unwrap().port(), 0);
        assert!(parse_tcp("localhost").is_err());
    }

    #[test]
    fn worker_threads_should_default_to_one_and_refuse_zero() {
        assert_eq!(Cli::try_parse_from(["workqueue-sidecar"]).unwrap().worker_threads, 1);
        assert_eq!(Cli::try_parse_from(["workqueue-sidecar", "--worker-threads", "4"]).unwrap().worker_threads, 4);
        assert!(Cli::try_parse_from(["workqueue-sidecar", "--worker-threads", "0"]).is_err());
    }
}
