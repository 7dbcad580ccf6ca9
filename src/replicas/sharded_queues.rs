//! Sharded queues: each key's shard slot, read from its primary object, and the queues following this replica's share of the slots.
//!
//! The membership (`shard_membership`) says which slots this replica may
//! grant from and until when; this module applies that to every sharded
//! queue. The term end bounds grants and leases (`set_grant_until`), and is
//! set before the slots, so no lease outlives the term it was granted in. A
//! revoke stops the grants from those slots at once and asks their leases
//! back; the membership is told they ended (and releases the slots to their
//! new owner) only once every lease asked back has ended (finished by its
//! worker, or past its deadline, which no Extend moves any more) and every
//! lease handed back at a drain's end is past its deadline.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::informer::{ShardBy, SharedInformer};
use crate::metrics::ShardMetrics;
use crate::queue::{ShardOf, ShardsChanged};
use crate::queue_registry::Queue;
use crate::replicas::shard_membership::ShardEvent;
use crate::shard::{Effect, Slot, SlotSet, shard_hash};

/// The slot of a key of `primary`'s objects, hashed as KEP-5866's
/// `shardRange` hashes the field `by` names.
///
/// By uid, the key's object is looked up in the cache (or among its recent
/// tombstones, so a deletion is granted by the same replica as the object
/// was): a key whose object the cache does not know has no slot and is not
/// granted until it does. By namespace the key says it: `namespace/name`, or
/// a cluster-scoped `name`, whose namespace is empty.
pub fn shard_of(by: ShardBy, primary: Arc<SharedInformer>) -> ShardOf<Arc<str>> {
    match by {
        ShardBy::Namespace => Arc::new(|key: &Arc<str>| {
            let namespace = key.split_once('/').map_or("", |(namespace, _)| namespace);
            Some(Slot::of_hash(shard_hash(namespace)))
        }),
        ShardBy::Uid => Arc::new(move |key: &Arc<str>| {
            let object = primary.get(key).or_else(|| primary.get_deleted(key))?;
            Some(Slot::of_hash(shard_hash(&object.meta.uid.as_str())))
        }),
    }
}

/// Applies the membership's events to `queues` and tells the sharded
/// informers the slots owned (`owned`), until the membership ends; answers
/// each revoke on `leases_ended` once no lease it asked back is held.
pub async fn follow_shards(
    queues: Vec<Queue>,
    owned_slots: watch::Sender<Option<SlotSet>>,
    mut events: mpsc::UnboundedReceiver<ShardEvent>,
    leases_ended: mpsc::UnboundedSender<SlotSet>,
    metrics: ShardMetrics,
) {
    let mut owned = SlotSet::EMPTY;
    let apply = |owned: &SlotSet| {
        let changed =
            queues.iter().map(|queue| queue.shards().set_owned(*owned)).fold(ShardsChanged::default(), |a, b| a + b);
        metrics.slots_owned.set(owned.len() as i64);
        owned_slots.send_if_modified(|listed| {
            let changed = *listed != Some(*owned);
            *listed = Some(*owned);
            changed
        });
        metrics.leases_asked_back.inc_by(changed.leases_asked_back as u64);
        metrics.keys_unparked.inc_by(changed.keys_unparked as u64);
        changed.leases_asked_back
    };
    // Slots revoked whose leases may still be held: released together once
    // none is.
    let mut releasing = SlotSet::EMPTY;
    loop {
        let event = tokio::select! {
            event = events.recv() => match event {
                Some(event) => event,
                None => return,
            },
            () = asked_back_ended(&queues), if !releasing.is_empty() => {
                debug!(slots = releasing.len(), "the leases asked back have ended; their slots are released");
                let _ = leases_ended.send(std::mem::replace(&mut releasing, SlotSet::EMPTY));
                continue;
            }
        };
        match event {
            ShardEvent::Grant(grant) => {
                if let Some(grant) = grant {
                    // The term first: a slot granted now must not outlive it.
                    for queue in &queues {
                        queue.term().set_grant_until(grant.until);
                    }
                }
                owned = grant.map_or(SlotSet::EMPTY, |grant| grant.slots);
                apply(&owned);
            }
            ShardEvent::Effect(Effect::Revoke(slots)) => {
                owned = owned.difference(&slots);
                let asked_back = apply(&owned);
                metrics.slots_revoked.inc_by(slots.len() as u64);
                info!(
                    slots = slots.len(),
                    asked_back, "shard slots given up; the workers holding their keys are asked to stop"
                );
                releasing = releasing.union(&slots);
            }
            ShardEvent::Effect(Effect::Gained(slots)) => {
                metrics.slots_gained.inc_by(slots.len() as u64);
                debug!(slots = slots.len(), "shard slots gained; granted from with the next grant");
            }
            ShardEvent::Effect(Effect::HandedOver(took)) => {
                metrics.handover_seconds.observe(took.as_secs_f64());
                info!(seconds = took.as_secs_f64(), "shard handover to this replica complete");
            }
            ShardEvent::Effect(Effect::TermGap(late)) => {
                metrics.term_gaps.inc();
                warn!(
                    late_seconds = late.as_secs_f64(),
                    "a renewal of the shard Lease was acknowledged after the term had ended; every slot is revoked and checked again"
                );
            }
        }
    }
}

/// Resolves once no queue holds a lease asked back, and the leases the
/// queues handed back themselves (at the end of the drain before a leave)
/// are past their deadlines: until then their workers may still work.
async fn asked_back_ended(queues: &[Queue]) {
    for queue in queues {
        queue.shards().asked_back_ended().await;
    }
    if let Some(until) = queues.iter().filter_map(|queue| queue.holders().handed_back_until()).max() {
        tokio::time::sleep_until(until).await;
    }
}
