//! The assignment rule: which member owns which slot, computed alike by every member from the same member set.
//!
//! Consistent hashing on the ring of `SLOTS` slots: each member places
//! `TOKENS` tokens at `mix(FNV-1a(member), i)`, and a slot belongs to the
//! member of the first token at or after the slot's start, wrapping around.
//! It needs no coordination and no history. A change of one member moves
//! only the arcs before that member's tokens: adding a member to `N` moves
//! its share, about `1/(N+1)` of the keys, all to it; removing one moves its
//! share, about `1/N`, all from it. And a member owns at most `TOKENS + 1`
//! runs of slots, so a server-side shard selector naming its hash ranges
//! stays short (`informer::shard_watch`). Per-slot rendezvous hashing would
//! move as little and balance slightly better, but scatters a member's
//! slots over hundreds of short runs; equal ranges over the sorted members
//! give one run each but move a quarter to a half of all keys on every
//! change, since every boundary shifts.

use super::hash::{fnv1a64, mix64};
use super::observation::MemberId;
use super::slot::{SLOTS, Slot, SlotSet};

/// No owner (no members).
const NONE: u16 = u16::MAX;

/// Tokens per member. A member's share is about `1/N` within roughly
/// `1/sqrt(TOKENS)` (6 %) of itself (a one-off script, not kept: over 50
/// groups of 3 random identities the largest share was 1.04 times the fair
/// one at the median, 1.14 at most; the test below only bounds it within
/// 0.5 to 1.6). Its slots form at most `TOKENS + 1`
/// runs, so its selector names at most 257 ranges (about 27 KB in a URL,
/// which the API server takes).
pub const TOKENS: usize = 256;

/// Slots to owners for one member set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Sorted by identity, each with its FNV-1a hash; at most `u16::MAX - 1`.
    members: Vec<(MemberId, u64)>,
    /// Per slot, the owner's index in `members`, or `NONE`.
    owner: Vec<u16>,
}

/// Where a member's `i`th token sits on the 64-bit ring.
fn token(member_hash: u64, i: usize) -> u64 {
    let i = u64::try_from(i).unwrap_or(u64::MAX);
    mix64(member_hash ^ mix64(i.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
}

impl Assignment {
    /// The assignment of no members: every slot unowned.
    pub fn empty() -> Assignment {
        Assignment { members: Vec::new(), owner: vec![NONE; SLOTS] }
    }

    fn sorted(members: &[MemberId]) -> Vec<(MemberId, u64)> {
        let mut sorted: Vec<(MemberId, u64)> = members.iter().map(|m| (m.clone(), fnv1a64(m.as_bytes()))).collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        sorted.dedup_by(|a, b| a.0 == b.0);
        sorted.truncate(usize::from(NONE));
        sorted
    }

    /// The assignment of `members` (any order; duplicates count once).
    pub fn compute(members: &[MemberId]) -> Assignment {
        Assignment::empty().update(members)
    }

    /// The assignment of `members`; the same as [`Assignment::compute`]
    /// (the rule has no history), kept for callers that update one.
    pub fn update(&self, members: &[MemberId]) -> Assignment {
        let members = Assignment::sorted(members);
        // The first token of each slot's range, if any: the slot's owner is
        // the member of the first token at or after its start, so the first
        // token of the nearest nonempty range from the slot on, wrapping
        // around. A tie goes to the smaller identity. No sort: every member
        // recomputes this on each change of the view, 100 members in the
        // simulation.
        let mut first: Vec<Option<(u64, u16)>> = vec![None; SLOTS];
        for m in (0..members.len()).filter_map(|m| u16::try_from(m).ok()) {
            for i in 0..TOKENS {
                let at = token(members[usize::from(m)].1, i);
                let range = &mut first[usize::try_from(at >> (64 - super::slot::SLOT_BITS)).unwrap_or(0)];
                if range.is_none_or(|earlier| (at, m) < earlier) {
                    *range = Some((at, m));
                }
            }
        }
        let wrapped = first.iter().flatten().next().map_or(NONE, |(_, m)| *m);
        let mut owner = vec![NONE; SLOTS];
        let mut next = wrapped;
        for (slot, range) in first.iter().enumerate().rev() {
            if let Some((_, m)) = range {
                next = *m;
            }
            owner[slot] = next;
        }
        Assignment { members, owner }
    }

    pub fn members(&self) -> impl Iterator<Item = &MemberId> {
        self.members.iter().map(|(id, _)| id)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn owner(&self, slot: Slot) -> Option<&MemberId> {
        let index = *self.owner.get(slot.index())?;
        self.members.get(usize::from(index)).map(|(id, _)| id)
    }

    /// The slots `member` owns.
    pub fn slots_of(&self, member: &str) -> SlotSet {
        let Ok(index) = self.members.binary_search_by(|(m, _)| (**m).cmp(member)) else {
            return SlotSet::EMPTY;
        };
        Slot::all().filter(|slot| usize::from(self.owner[slot.index()]) == index).collect()
    }

    /// The slots whose owner differs between the two assignments.
    pub fn moved(&self, other: &Assignment) -> SlotSet {
        Slot::all().filter(|slot| self.owner(*slot) != other.owner(*slot)).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;

    fn ids(n: usize) -> Vec<MemberId> {
        (0..n).map(|i| Arc::from(format!("sidecar-{i}"))).collect()
    }

    #[test]
    fn every_slot_should_have_exactly_one_owner_among_the_members() {
        let members = ids(7);
        let assignment = Assignment::compute(&members);
        let mut union = SlotSet::EMPTY;
        for m in &members {
            let mine = assignment.slots_of(m);
            assert!(!union.intersects(&mine));
            union = union.union(&mine);
        }
        assert_eq!(union, SlotSet::FULL);
    }

    #[test]
    fn the_order_of_the_members_should_not_change_the_assignment() {
        let mut members = ids(10);
        let a = Assignment::compute(&members);
        members.reverse();
        members.push(members[0].clone());
        assert_eq!(a, Assignment::compute(&members));
    }

    #[test]
    fn no_members_should_own_nothing() {
        let a = Assignment::compute(&[]);
        assert!(a.owner(Slot::of_hash(0)).is_none());
        assert!(a.is_empty());
    }

    #[test]
    fn adding_a_member_should_move_only_the_slots_it_now_owns() {
        let members = ids(100);
        let before = Assignment::compute(&members[..99]);
        let after = before.update(&members);
        let moved = before.moved(&after);
        assert_eq!(moved, after.slots_of(&members[99]));
        let share = moved.len() as f64 / SLOTS as f64;
        assert!(share < 1.0 / 99.0 + 0.05, "moved {share}");
    }

    #[test]
    fn a_member_should_own_few_runs_of_slots_and_about_its_share() {
        for n in [1, 2, 3, 10, 100] {
            let members = ids(n);
            let assignment = Assignment::compute(&members);
            for m in &members {
                let mine = assignment.slots_of(m);
                assert!(mine.hash_ranges().len() <= TOKENS + 1, "N = {n}: {} runs", mine.hash_ranges().len());
                let share = mine.len() as f64 * n as f64 / SLOTS as f64;
                assert!((0.5..1.6).contains(&share), "N = {n}: {m} owns {share:.2} of its fair share");
            }
        }
    }

    #[test]
    fn removing_a_member_should_move_only_the_slots_it_owned() {
        let members = ids(50);
        let before = Assignment::compute(&members);
        let after = before.update(&members[1..]);
        assert_eq!(before.moved(&after), before.slots_of(&members[0]));
    }

    /// The rule as first written: every token sorted on the ring, each slot
    /// owned by the first token at or after its start.
    fn owners_by_sorted_tokens(members: &[MemberId]) -> Vec<Option<MemberId>> {
        let mut tokens: Vec<(u64, MemberId)> = Assignment::sorted(members)
            .into_iter()
            .flat_map(|(m, hash)| (0..TOKENS).map(move |i| (token(hash, i), m.clone())))
            .collect();
        tokens.sort();
        Slot::all()
            .map(|slot| {
                let start = (slot.index() as u64) << (64 - crate::shard::SLOT_BITS);
                let next = tokens.partition_point(|(at, _)| *at < start);
                tokens.get(next).or(tokens.first()).map(|(_, m)| m.clone())
            })
            .collect()
    }

    proptest! {
        #[test]
        fn each_slot_should_belong_to_the_first_token_at_or_after_its_start(
            picked in proptest::collection::vec(0usize..200, 0..30),
        ) {
            let all = ids(200);
            let members: Vec<MemberId> = picked.iter().map(|i| all[*i].clone()).collect();
            let assignment = Assignment::compute(&members);
            let owners: Vec<Option<MemberId>> = Slot::all().map(|s| assignment.owner(s).cloned()).collect();
            prop_assert_eq!(owners, owners_by_sorted_tokens(&members));
        }

        #[test]
        fn an_updated_assignment_should_equal_one_computed_from_scratch(
            before in proptest::collection::vec(0usize..40, 0..20),
            after in proptest::collection::vec(0usize..40, 0..20),
        ) {
            let all = ids(40);
            let pick = |v: &[usize]| -> Vec<MemberId> { v.iter().map(|i| all[*i].clone()).collect() };
            let incremental = Assignment::compute(&pick(&before)).update(&pick(&after));
            prop_assert_eq!(incremental, Assignment::compute(&pick(&after)));
        }
    }
}
