//! Sharded informers: what they ask the API server for (KEP-5866's `shardSelector` for the owned slots) and what they keep (exactly the owned slots, whatever the server sent).
//!
//! A member owns at most `TOKENS + 1` runs of slots (`shard::assignment`),
//! so the selector names each as one hash range; were there more, it would
//! join the closest into a superset of at most [`MAX_SELECTOR_RANGES`]. The
//! local filter keeps exactly the owned slots, and does all the work on an
//! API server without the `ShardedListAndWatch` gate, which ignores the
//! parameter and sends everything. The requests themselves are made by
//! `list_watch`.

use tokio::sync::watch;

use super::spec::ShardBy;
use crate::shard::{HashRange, SlotSet, TOKENS, shard_hash};

/// Most hash ranges one selector names (a member's most runs of slots);
/// more would be joined into a superset, which the local filter narrows.
pub const MAX_SELECTOR_RANGES: usize = TOKENS + 1;

/// The field KEP-5866 hashes for `by`.
pub fn selector_field(by: ShardBy) -> &'static str {
    match by {
        ShardBy::Uid => "object.metadata.uid",
        ShardBy::Namespace => "object.metadata.namespace",
    }
}

/// The `shardSelector` for `slots`: at most `MAX_SELECTOR_RANGES` ranges
/// covering every owned slot (and, when joined, some others); `None` when
/// no slot is owned.
pub fn shard_selector(by: ShardBy, slots: &SlotSet) -> Option<String> {
    let ranges = cap_ranges(slots.hash_ranges(), MAX_SELECTOR_RANGES);
    let field = selector_field(by);
    (!ranges.is_empty()).then(|| ranges.iter().map(|r| r.selector(field)).collect::<Vec<_>>().join(" || "))
}

/// Joins the two ranges with the smallest gap between them until at most
/// `max` are left; the result covers every input range.
fn cap_ranges(mut ranges: Vec<HashRange>, max: usize) -> Vec<HashRange> {
    while ranges.len() > max.max(1) {
        let closest = (1..ranges.len())
            .min_by_key(|&i| u128::from(ranges[i].start).saturating_sub(ranges[i - 1].end))
            .expect("more than one range");
        let joined = HashRange { start: ranges[closest - 1].start, end: ranges[closest].end };
        ranges.splice(closest - 1..=closest, [joined]);
    }
    ranges
}

/// What a sharded informer's writer keeps: objects of the owned slots only.
pub struct ShardFilter {
    by: ShardBy,
    owned: SlotSet,
    /// What the selector asked the server for (a superset of `owned`).
    selected: Vec<HashRange>,
    /// Whether the server was seen sending an object outside `selected`.
    server_ignores_selector: bool,
}

/// Whether a sharded informer keeps an object it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Yes,
    /// Outside the owned slots, as the selector's superset allows.
    OutsideOwned,
    /// Outside even what the selector asked for: the server did not filter.
    /// Said once per filter.
    NotFilteredByServer,
}

impl ShardFilter {
    pub fn new(by: ShardBy, owned: SlotSet) -> ShardFilter {
        let selected = cap_ranges(owned.hash_ranges(), MAX_SELECTOR_RANGES);
        ShardFilter { by, owned, selected, server_ignores_selector: false }
    }

    /// Whether an object with this uid and namespace is of an owned slot.
    pub fn owns(&self, uid: &str, namespace: &str) -> bool {
        self.owned.contains_hash(self.hash(uid, namespace))
    }

    fn hash(&self, uid: &str, namespace: &str) -> u64 {
        shard_hash(match self.by {
            ShardBy::Uid => uid,
            ShardBy::Namespace => namespace,
        })
    }

    /// Whether to keep an object with this uid and namespace.
    pub fn keeps(&mut self, uid: &str, namespace: &str) -> Kept {
        let hash = self.hash(uid, namespace);
        if self.owned.contains_hash(hash) {
            Kept::Yes
        } else if self.selected.iter().any(|range| range.contains(hash)) || self.server_ignores_selector {
            Kept::OutsideOwned
        } else {
            self.server_ignores_selector = true;
            Kept::NotFilteredByServer
        }
    }
}

/// What a sharded informer's watch follows: the slots this replica owns
/// (`None` until it first owns some).
#[derive(Clone)]
pub struct ShardWatch {
    pub owned: watch::Receiver<Option<SlotSet>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Slot;

    fn slots(indexes: impl IntoIterator<Item = usize>) -> SlotSet {
        indexes.into_iter().filter_map(Slot::new).collect()
    }

    #[test]
    fn a_selector_should_name_at_most_the_cap_of_ranges_and_cover_every_owned_slot() {
        // Every third slot: 1366 runs of one slot each.
        let owned = slots((0..4096).step_by(3));
        let selector = shard_selector(ShardBy::Uid, &owned).unwrap();
        assert_eq!(selector.matches("shardRange(object.metadata.uid, ").count(), MAX_SELECTOR_RANGES);
        let ranges = cap_ranges(owned.hash_ranges(), MAX_SELECTOR_RANGES);
        for slot in owned.iter() {
            let start = (slot.index() as u64) << 52;
            assert!(ranges.iter().any(|r| r.contains(start)), "slot {} is covered", slot.index());
        }
        assert_eq!(shard_selector(ShardBy::Namespace, &SlotSet::EMPTY), None);
        let one_run = shard_selector(ShardBy::Namespace, &slots(0..2048)).unwrap();
        assert_eq!(one_run, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')");
    }
}
