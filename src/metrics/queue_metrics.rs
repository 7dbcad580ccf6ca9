//! The workqueue metrics: client-go's names and buckets, plus lease counters.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::queue::{LeaseEndKind, QueueObserver};
use crate::queue_registry::Queue;

/// client-go labels every workqueue metric with the queue's `name`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    pub name: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// client-go's histogram buckets: 10 ns to 10 s, ten powers of ten.
fn client_go_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

#[derive(Clone)]
pub struct QueueMetrics {
    depth: Family<QueueLabel, Gauge>,
    adds: Family<QueueLabel, Counter>,
    queue_duration: Family<QueueLabel, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabel, Histogram, fn() -> Histogram>,
    unfinished_work: Family<QueueLabel, FloatGauge>,
    longest_running: Family<QueueLabel, FloatGauge>,
    retries: Family<QueueLabel, Counter>,
    waiting: Family<QueueLabel, Gauge>,
    parked: Family<QueueLabel, Gauge>,
    keys: Family<QueueLabel, Gauge>,
    key_bytes: Family<QueueLabel, Gauge>,
    leases_held: Family<QueueLabel, Gauge>,
    leases_expired: Family<QueueLabel, Counter>,
    leases_released: Family<QueueLabel, Counter>,
    leases_returned: Family<QueueLabel, Counter>,
    stale_tokens: Family<QueueLabel, Counter>,
}

impl QueueMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = QueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(client_go_histogram),
            work_duration: Family::new_with_constructor(client_go_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
            waiting: Family::default(),
            parked: Family::default(),
            keys: Family::default(),
            key_bytes: Family::default(),
            leases_held: Family::default(),
            leases_expired: Family::default(),
            leases_released: Family::default(),
            leases_returned: Family::default(),
            stale_tokens: Family::default(),
        };
        // client-go's names (prometheus-client appends `_total` to counters).
        registry.register("workqueue_depth", "Current depth of workqueue (ready keys)", metrics.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", metrics.adds.clone());
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            metrics.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            metrics.longest_running.clone(),
        );
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", metrics.retries.clone());
        // The sidecar's own, for what client-go does not have.
        registry.register("workqueue_sidecar_waiting", "Keys waiting for a delay or backoff", metrics.waiting.clone());
        registry.register(
            "workqueue_sidecar_parked",
            "Ready keys of a sharded queue set aside because their shard slot is another replica's, as found when a worker asked for a key (keys not looked at since count as ready)",
            metrics.parked.clone(),
        );
        registry.register(
            "workqueue_sidecar_keys",
            "Keys the queue tracks (queued, waiting, held, settling, or kept for their failures), bounded by max_keys",
            metrics.keys.clone(),
        );
        registry.register(
            "workqueue_sidecar_key_bytes",
            "Bytes the tracked keys count against max_memory (an entry's fixed cost plus each key's text)",
            metrics.key_bytes.clone(),
        );
        registry.register(
            "workqueue_sidecar_leases_held",
            "Leases currently held by workers",
            metrics.leases_held.clone(),
        );
        registry.register(
            "workqueue_sidecar_leases_expired",
            "Leases that ran past their deadline; their keys went back to the queue",
            metrics.leases_expired.clone(),
        );
        registry.register(
            "workqueue_sidecar_leases_released",
            "Leases returned because their worker's stream broke",
            metrics.leases_released.clone(),
        );
        registry.register(
            "workqueue_sidecar_leases_returned",
            "Leases handed back without a failure: still held at the end of a drain, or by a worker that stopped cleanly",
            metrics.leases_returned.clone(),
        );
        registry.register(
            "workqueue_sidecar_stale_tokens",
            "Done, Finish or Extend calls refused because their token was stale",
            metrics.stale_tokens.clone(),
        );
        metrics
    }

    /// The observer to give the queue called `name`. Its metric handles are
    /// resolved here once: they share their atomics with the families, so an
    /// observation costs no label lookup under the queue's lock.
    pub fn observer(&self, name: &str) -> Arc<dyn QueueObserver> {
        let label = QueueLabel { name: name.to_string() };
        Arc::new(QueueObserverMetrics {
            adds: self.adds.get_or_create(&label).clone(),
            queue_duration: self.queue_duration.get_or_create(&label).clone(),
            work_duration: self.work_duration.get_or_create(&label).clone(),
            retries: self.retries.get_or_create(&label).clone(),
            leases_expired: self.leases_expired.get_or_create(&label).clone(),
            leases_released: self.leases_released.get_or_create(&label).clone(),
            leases_returned: self.leases_returned.get_or_create(&label).clone(),
            stale_tokens: self.stale_tokens.get_or_create(&label).clone(),
        })
    }

    /// Reads the queue's gauges, at scrape time.
    pub fn refresh(&self, name: &str, queue: &Queue) {
        let label = QueueLabel { name: name.to_string() };
        let counts = queue.counts();
        let (unfinished, longest) = queue.processing_ages();
        self.depth.get_or_create(&label).set(counts.ready as i64);
        self.waiting.get_or_create(&label).set(counts.waiting as i64);
        self.parked.get_or_create(&label).set(counts.parked as i64);
        self.leases_held.get_or_create(&label).set(counts.held as i64);
        self.keys.get_or_create(&label).set(counts.tracked as i64);
        self.key_bytes.get_or_create(&label).set(counts.key_bytes as i64);
        self.unfinished_work.get_or_create(&label).set(unfinished);
        self.longest_running.get_or_create(&label).set(longest);
    }
}

/// One queue's metric handles.
struct QueueObserverMetrics {
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
    leases_expired: Counter,
    leases_released: Counter,
    leases_returned: Counter,
    stale_tokens: Counter,
}

impl QueueObserver for QueueObserverMetrics {
    fn added(&self) {
        self.adds.inc();
    }

    fn granted(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }

    fn lease_ended(&self, held: Duration, how: LeaseEndKind) {
        if how == LeaseEndKind::Unsent {
            // Nobody worked on it: not a work duration.
            return;
        }
        self.work_duration.observe(held.as_secs_f64());
        match how {
            LeaseEndKind::Finished | LeaseEndKind::Unsent => {}
            LeaseEndKind::Expired => drop(self.leases_expired.inc()),
            LeaseEndKind::Released => drop(self.leases_released.inc()),
            LeaseEndKind::Returned | LeaseEndKind::Stopped => drop(self.leases_returned.inc()),
        }
    }

    fn retried(&self) {
        self.retries.inc();
    }

    fn stale_token(&self) {
        self.stale_tokens.inc();
    }
}
