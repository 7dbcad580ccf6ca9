//! What sharding does on this replica: the slots it owns, the slots it gains and gives up, and the leases handed back for them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Default)]
pub struct ShardMetrics {
    /// Slots (of 4096) this replica grants from now.
    pub slots_owned: Gauge,
    /// Slots this replica started granting from.
    pub slots_gained: Counter,
    /// Slots this replica was told to give up.
    pub slots_revoked: Counter,
    /// Leases handed back because their key's slot was given up.
    pub leases_handed_back: Counter,
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
            "workqueue_sidecar_shard_leases_handed_back",
            "Leases handed back at once because their key's shard slot was given up",
            metrics.leases_handed_back.clone(),
        );
        metrics
    }
}
