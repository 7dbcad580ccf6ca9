//! The gRPC server's own spending: connections open and closed unserved, calls in flight and refused, accept failures.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Handles the server updates; clones share their values. The default is
/// registered nowhere (for tests that build a server alone).
#[derive(Clone, Debug, Default)]
pub struct ServerMetrics {
    /// gRPC connections open now, over every listener.
    pub connections: Gauge,
    /// Connections closed before they were served, by why: over
    /// `--max-connections`, silent past their first-bytes deadline, or a
    /// failed TLS handshake.
    pub over_limit: Counter,
    pub silent: Counter,
    pub handshake_failed: Counter,
    /// Accepts that failed (EMFILE and the like), each followed by a pause.
    pub accept_errors: Counter,
    /// Calls (unary or streams) in flight now.
    pub calls: Gauge,
    /// Calls answered RESOURCE_EXHAUSTED because `--max-calls` were in flight.
    pub calls_refused: Counter,
    /// Bytes of the receive budget held by messages being received
    /// (`server::RECEIVE_BUDGET_BYTES`), and messages refused for want of it.
    pub receiving_bytes: Gauge,
    pub receiving_refused: Counter,
}

impl ServerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let unserved = Family::<ReasonLabel, Counter>::default();
        let counter = |reason| unserved.get_or_create(&ReasonLabel { reason }).clone();
        let metrics = ServerMetrics {
            over_limit: counter("over_limit"),
            silent: counter("silent"),
            handshake_failed: counter("handshake_failed"),
            ..ServerMetrics::default()
        };
        registry.register(
            "workqueue_sidecar_grpc_connections",
            "gRPC connections open now, over every listener",
            metrics.connections.clone(),
        );
        registry.register(
            "workqueue_sidecar_grpc_connections_unserved",
            "gRPC connections closed before they were served: over_limit (--max-connections), silent (no bytes within 10 s), handshake_failed (TLS)",
            unserved.clone(),
        );
        registry.register(
            "workqueue_sidecar_grpc_accept_errors",
            "Accepts of a gRPC connection that failed (e.g. out of file descriptors), each followed by a pause of 5 ms doubling to 1 s",
            metrics.accept_errors.clone(),
        );
        registry.register(
            "workqueue_sidecar_grpc_calls",
            "gRPC calls (unary or streams) in flight now, over every connection",
            metrics.calls.clone(),
        );
        registry.register(
            "workqueue_sidecar_grpc_calls_refused",
            "gRPC calls answered RESOURCE_EXHAUSTED because --max-calls were in flight",
            metrics.calls_refused.clone(),
        );
        registry.register(
            "workqueue_sidecar_grpc_receiving_bytes",
            "Bytes of gRPC messages being received now, reserved from the 64 MiB receive budget when each message's length prefix arrives",
            metrics.receiving_bytes.clone(),
        );
        registry.register(
            "workqueue_sidecar_grpc_receiving_refused",
            "gRPC messages refused RESOURCE_EXHAUSTED because the receive budget could not hold them when their length prefix came",
            metrics.receiving_refused.clone(),
        );
        metrics
    }
}
