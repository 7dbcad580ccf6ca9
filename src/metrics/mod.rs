//! Prometheus metrics: client-go's workqueue metric names, plus leases, informers and gRPC requests.
//!
//! Queue metrics use client-go's names and its `name` label so existing
//! workqueue dashboards work unchanged. Counters and histograms are fed by
//! the queue's observer hooks; gauges are read from the queues at scrape time.

mod grpc_layer;
mod informer_metrics;
mod queue_metrics;
mod server_metrics;
mod shard_metrics;

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use grpc_layer::GrpcMetricsLayer;
pub use informer_metrics::InformerCollector;
pub use queue_metrics::QueueMetrics;
pub use server_metrics::ServerMetrics;
pub use shard_metrics::ShardMetrics;

use crate::informer::SharedInformer;
use crate::queue_registry::QueueRegistry;
use crate::tls::ReloadCounters;

/// The `result` label of a count of attempts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// Every metric of the process, and the registry they are encoded from.
pub struct Metrics {
    registry: Mutex<Registry>,
    pub queues: QueueMetrics,
    pub grpc: GrpcMetricsLayer,
    /// The gRPC server's connections and calls in flight, and what it refused.
    pub server: ServerMetrics,
    /// 1 while this replica hands out keys: the leader, or the only replica
    /// when leader election is off.
    pub leader: Gauge,
    pub shards: ShardMetrics,
    /// Reloads of the TLS files, by result.
    pub tls_reloads: ReloadCounters,
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::default();
        let queues = QueueMetrics::register(&mut registry);
        let grpc = GrpcMetricsLayer::register(&mut registry);
        let server = ServerMetrics::register(&mut registry);
        let leader = Gauge::default();
        registry.register(
            "workqueue_sidecar_leader",
            "1 while this replica hands out keys (the leader, or leader election is off)",
            leader.clone(),
        );
        let shards = ShardMetrics::register(&mut registry);
        let by_result = Family::<ResultLabel, Counter>::default();
        let counter = |result| by_result.get_or_create(&ResultLabel { result }).clone();
        let tls_reloads = ReloadCounters { loaded: counter("loaded"), refused: counter("refused") };
        registry.register(
            "workqueue_sidecar_tls_reloads",
            "Changed TLS files: loaded, or refused (unreadable or unusable; the previous certificate stays)",
            by_result.clone(),
        );
        Arc::new(Metrics { registry: Mutex::new(registry), queues, grpc, server, leader, shards, tls_reloads })
    }

    /// Adds the informers' counters (events by type, lists) to what is
    /// encoded; once, after the informers are built.
    pub fn register_informers(&self, informers: Vec<Arc<SharedInformer>>) {
        self.registry.lock().register_collector(Box::new(InformerCollector::new(informers)));
    }

    /// Reads the gauges from the queues, then encodes everything in the
    /// Prometheus text format.
    pub fn render(&self, queues: &QueueRegistry) -> String {
        for name in queues.names() {
            if let Some(queue) = queues.get(name) {
                self.queues.refresh(name, queue);
            }
        }
        let mut text = String::new();
        encode(&mut text, &self.registry.lock()).expect("writing to a String cannot fail");
        text
    }
}

/// Wraps every gRPC route in the request metrics layer; `methods` are the
/// paths (`/service/Method`) the routes serve, each counted under its name.
pub fn instrument(
    routes: tonic::service::Routes,
    methods: impl IntoIterator<Item = String>,
    metrics: &Metrics,
) -> tonic::service::Routes {
    tonic::service::Routes::from(routes.into_axum_router().layer(metrics.grpc.serving(methods)))
}
