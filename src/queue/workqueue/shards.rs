//! A queue's shard handle: which slots of the hash space it grants keys from, and the leases it asked back.

use crate::queue::key::QueueKey;
use crate::queue::state::ShardsChanged;
use crate::shard::{Slot as ShardSlot, SlotSet};

use super::{ShardOf, WorkQueue};

/// What a sharded queue needs from the replica's membership; from [`WorkQueue::shards`].
pub struct Shards<'a, K> {
    queue: &'a WorkQueue<K>,
}

impl<K: QueueKey + Send + 'static> WorkQueue<K> {
    /// The queue's shard handle.
    pub fn shards(&self) -> Shards<'_, K> {
        Shards { queue: self }
    }
}

impl<K: QueueKey + Send + 'static> Shards<'_, K> {
    /// Shards the queue: `shard_of` names each key's slot from now on, and
    /// nothing is granted until `set_owned` says which slots are owned. Keys
    /// already queued have no slot until they are added again. Set once:
    /// whether this call sharded it (false: it already was).
    #[must_use]
    pub fn keys_by(&self, shard_of: ShardOf<K>) -> bool {
        if self.queue.shared.shard_of.set(shard_of).is_err() {
            return false;
        }
        self.queue.with_state(|state, _| state.set_owned_shards(Some(SlotSet::EMPTY)));
        true
    }

    /// Grants only keys in `owned` from now on. Parked keys of slots gained
    /// go back to their lanes; leases of keys in slots lost are asked back
    /// (their holders are told to stop; no Extend moves their deadlines; they
    /// end as leases do), and `asked_back_ended` says when none is left. Only
    /// for a queue sharded with `keys_by`.
    pub fn set_owned(&self, owned: SlotSet) -> ShardsChanged {
        debug_assert!(self.is_sharded(), "set_owned on a queue that is not sharded");
        self.queue.with_state(|state, _| state.set_owned_shards(Some(owned)))
    }

    /// Resolves once no lease asked back by `set_owned` is held (at once if
    /// none is). Cancel-safe. Takes the handle, so the future borrows only
    /// the queue.
    pub async fn asked_back_ended(self) {
        loop {
            let ended = self.queue.shared.asked_back_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.queue.with_state(|state, _| state.asked_back()) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// The shard slot of `key` for a sharded queue (`Some(None)`: not known),
    /// `None` when the queue is not sharded.
    pub fn slot_of(&self, key: &K) -> Option<Option<ShardSlot>> {
        self.queue.shared.shard_of.get().map(|shard_of| shard_of(key))
    }

    /// Whether this queue grants keys of `slot` now.
    pub fn owns(&self, slot: ShardSlot) -> bool {
        self.queue.shared.state.lock().owns_shard(slot)
    }

    /// Whether `keys_by` sharded the queue.
    pub fn is_sharded(&self) -> bool {
        self.queue.shared.shard_of.get().is_some()
    }
}
