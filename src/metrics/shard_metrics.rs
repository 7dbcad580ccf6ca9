//! What sharding does on this replica: the slots it owns, the slots it gains and gives up, the keys that moved with them, how long each handover to it took, and its term gaps.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone)]
pub struct ShardMetrics {
    /// Slots (of 4096) this replica grants from now.
    pub slots_owned: Gauge,
    /// Slots this replica started granting from.
    pub slots_gained: Counter,
    /// Slots this replica was told to give up.
    pub slots_revoked: Counter,
    /// Leases handed back because their key's slot was given up.
    pub leases_asked_back: Counter,
    /// Queued keys that became grantable here because their slot was gained.
    pub keys_unparked: Counter,
    /// How long each handover of slots to this replica took.
    pub handover_seconds: Histogram,
    /// Renewals acknowledged after the term had ended.
    pub term_gaps: Counter,
}

impl Default for ShardMetrics {
    fn default() -> ShardMetrics {
        ShardMetrics {
            slots_owned: Gauge::default(),
            slots_gained: Counter::default(),
            slots_revoked: Counter::default(),
            leases_asked_back: Counter::default(),
            keys_unparked: Counter::default(),
            // 0.25 s to about 68 min: a join is a few renew rounds, a crash
            // the lease duration and more.
            handover_seconds: Histogram::new(exponential_buckets(0.25, 2.0, 15)),
            term_gaps: Counter::default(),
        }
    }
}

impl ShardMetrics {
    pub fn register(registry: &mut Registry) -> ShardMetrics {
        let metrics = ShardMetrics::default();
        registry.register(
            "workqueue_sidecar_shard_slots_owned",
            "Shard slots (of 4096) this replica grants keys from; 0 when no queue is sharded",
            metrics.slots_owned.clone(),
        );
        registry.register(
            "workqueue_sidecar_shard_slots_gained",
            "Shard slots this replica started granting from",
            metrics.slots_gained.clone(),
        );
        registry.register(
            "workqueue_sidecar_shard_slots_revoked",
            "Shard slots this replica gave up (moved to another replica, or left)",
            metrics.slots_revoked.clone(),
        );
        registry.register(
            "workqueue_sidecar_shard_leases_asked_back",
            "Leases asked back (their holders told to stop) because their key's shard slot was given up; the slot moves once they ended",
            metrics.leases_asked_back.clone(),
        );
        registry.register(
            "workqueue_sidecar_shard_keys_unparked",
            "Queued keys that became grantable on this replica because their shard slot moved here",
            metrics.keys_unparked.clone(),
        );
        registry.register(
            "workqueue_sidecar_shard_handover_seconds",
            "How long each handover of shard slots to this replica took: from when their old owner last renewed \
             its Lease (a crash) or the join or leave was seen, to when this replica may grant from all of them",
            metrics.handover_seconds.clone(),
        );
        registry.register(
            "workqueue_sidecar_shard_term_gaps",
            "Renewals of this replica's shard Lease acknowledged after its term had ended (a pause, a slow or \
             unreachable API server): each time every slot was revoked and had to be checked again",
            metrics.term_gaps.clone(),
        );
        metrics
    }
}
