//! Sharding in the state machine: grant only keys in the shard slots this replica owns, and park the others.
//!
//! Replicas that share a queue's keys each own some of the `SLOTS` slots of
//! the hash space (`crate::shard`). Every replica may hold every key; only
//! the owner of a key's slot grants it. The check is made where a key is
//! granted, under the queue's lock, so no change of ownership can slip
//! between the check and the grant. A ready key found outside the owned slots
//! is parked; when its slot is owned again it goes back to its lane in its
//! old place. Nothing is dropped: a key leaves the queue only by the usual
//! rules, never because its slot moved. A held key whose slot moves away is
//! asked back: its holder is told to stop, and its lease, whose deadline no
//! longer moves, ends as usual (Done, Finish, expiry); the slot's new owner
//! waits for that before it grants the key.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::hash::Hash;

use tokio::time::Instant;

use super::{Phase, QueueState, ReadyPlace, ShardSlot, Slot, SlotSet};
use crate::queue::key::QueueKey;
use crate::queue::lost_leases::{LeaseLoss, LostLease};

/// A queue's sharding: the slots it grants from, the keys it parked
/// outside them, and the leases it asked back.
#[derive(Debug, Default)]
pub(super) struct Sharding {
    /// The shard slots granted from (`None`: the queue is not sharded, every
    /// key is granted). Boxed: a slot set is 512 bytes.
    pub(super) owned: Option<Box<SlotSet>>,
    /// Ready keys outside `owned`, by shard slot (`None`: unknown) and
    /// arrival order.
    pub(super) parked: BTreeMap<(Option<ShardSlot>, u64), Slot>,
    /// Held leases asked back (`HeldLease::asked_back`).
    pub(super) asked_back: usize,
    /// The last lease asked back ended since `take_asked_back_ended`.
    pub(super) asked_back_ended: bool,
}

/// What a change of the owned slots did to a queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardsChanged {
    /// Leases asked back: their key's slot is no longer owned.
    pub leases_asked_back: usize,
    /// Parked keys back in their lanes: their slot is owned now.
    pub keys_unparked: usize,
}

impl std::ops::Add for ShardsChanged {
    type Output = ShardsChanged;

    fn add(self, other: ShardsChanged) -> ShardsChanged {
        ShardsChanged {
            leases_asked_back: self.leases_asked_back.saturating_add(other.leases_asked_back),
            keys_unparked: self.keys_unparked.saturating_add(other.keys_unparked),
        }
    }
}

impl<K: QueueKey> QueueState<K> {
    /// Records which shard slot `key` falls in (`None`: not known, so never
    /// granted while sharded). A later call wins: a key's slot follows its
    /// object's latest state. No-op for a key the queue does not track.
    pub(crate) fn place_in_shard<Q>(&mut self, key: &Q, shard: Option<ShardSlot>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(slot) = self.slot_of(key) else { return };
        let entry = &mut self.entries[slot];
        if entry.shard == shard {
            return;
        }
        let old = std::mem::replace(&mut entry.shard, shard);
        if let Phase::Parked { place, .. } = entry.phase {
            self.shards.parked.remove(&(old, place.seq));
            if self.may_grant(slot) {
                self.unpark(slot);
            } else {
                self.shards.parked.insert((shard, place.seq), slot);
            }
        }
    }

    /// From now on grants only keys in `owned` (`None`: every key, the queue
    /// is not sharded). Parked keys of slots now owned go back to their lanes;
    /// leases of keys outside the owned slots (given up, or moved there while
    /// held) are asked back: their holders are told to stop, their deadlines
    /// stay where they are, and they end as any lease does. Ending them here
    /// would not stop their holders: a worker that calls `Get` hears of it
    /// only at its next call, and would reconcile the key while the slot's
    /// new owner grants it again.
    pub(crate) fn set_owned_shards(&mut self, owned: Option<SlotSet>) -> ShardsChanged {
        let before = self.shards.owned.as_deref().copied();
        self.shards.owned = owned.map(Box::new);
        let gained = match (before, owned) {
            (_, None) => None,
            (None, Some(_)) => Some(SlotSet::EMPTY),
            (Some(before), Some(owned)) => Some(owned.difference(&before)),
        };
        let to_unpark: Vec<Slot> = match gained {
            None => self.shards.parked.values().copied().collect(),
            Some(gained) => gained
                .iter()
                .flat_map(|shard| {
                    self.shards.parked.range((Some(shard), 0)..=(Some(shard), u64::MAX)).map(|(_, &slot)| slot)
                })
                .collect(),
        };
        let mut keys_unparked: usize = 0;
        for slot in to_unpark {
            if let Phase::Parked { place, .. } = self.entries[slot].phase {
                self.shards.parked.remove(&(self.entries[slot].shard, place.seq));
                self.unpark(slot);
                keys_unparked = keys_unparked.saturating_add(1);
            }
        }
        // No lease is extended past the ownership of its key's slot.
        let mut asked_back = self.held_slots();
        asked_back.retain(|&slot| !self.may_grant(slot) && !self.is_asked_back(slot));
        for &slot in &asked_back {
            self.ask_back(slot);
        }
        ShardsChanged { leases_asked_back: asked_back.len(), keys_unparked }
    }

    fn is_asked_back(&self, slot: Slot) -> bool {
        matches!(self.entries[slot].phase, Phase::Held(held) if self.held_leases[held].asked_back)
    }

    /// Tells the holder of the lease on the key in `slot` to stop, and keeps
    /// its deadline where it is.
    fn ask_back(&mut self, slot: Slot) {
        let held = self.held_lease_mut(slot);
        held.asked_back = true;
        let (holder, token) = (held.holder.clone(), held.token);
        self.shards.asked_back = self.shards.asked_back.saturating_add(1);
        let lost = LostLease { key: self.entries[slot].key.clone(), token, how: LeaseLoss::AskedBack };
        self.lost.push((holder, lost));
    }

    /// Whether keys of shard slot `shard` are granted now (always, unsharded).
    pub(crate) fn owns_shard(&self, shard: ShardSlot) -> bool {
        self.shards.owned.as_ref().is_none_or(|owned| owned.contains(shard))
    }

    /// Whether the key in `slot` may be granted now, as far as sharding goes.
    pub(super) fn may_grant(&self, slot: Slot) -> bool {
        match &self.shards.owned {
            None => true,
            Some(owned) => self.entries[slot].shard.is_some_and(|shard| owned.contains(shard)),
        }
    }

    /// Sets a ready key taken from its lane aside: its slot is not owned.
    pub(super) fn park(&mut self, slot: Slot, place: ReadyPlace, since: Instant) {
        let entry = &mut self.entries[slot];
        self.shards.parked.insert((entry.shard, place.seq), slot);
        entry.phase = Phase::Parked { place, since };
    }

    /// Puts a parked key (already out of `parked`) back in its lane, in its old place.
    fn unpark(&mut self, slot: Slot) {
        let Phase::Parked { place, since } = self.entries[slot].phase else {
            unreachable!("only parked keys are unparked")
        };
        self.ready.push(place, slot, since);
        self.entries[slot].phase = Phase::Ready { place, since };
        self.wakeups = self.wakeups.saturating_add(1);
    }
}
