//! The assignment rule: which member owns which slot, computed alike by every member from the same member set.
//!
//! Rendezvous (highest random weight) hashing over the fixed `SLOTS` slots:
//! slot `s` belongs to the member `m` with the highest `weight(m, s)`, a
//! mix of FNV-1a(`m`) and `s`. It needs no coordination and no history, and
//! a change of one member moves only the slots that member wins or owned:
//! adding a member to `N` moves its share, about `1/(N+1)` of the keys;
//! removing one moves its share, about `1/N`. Equal ranges over the sorted
//! members would give one range each but move a quarter to a half of all
//! keys on every change, since every boundary shifts.

use std::cmp::Ordering;

use super::hash::{fnv1a64, mix64};
use super::observation::MemberId;
use super::slot::{SLOTS, Slot, SlotSet};

/// No owner (no members).
const NONE: u16 = u16::MAX;

/// Slots to owners for one member set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Sorted by identity, each with its FNV-1a hash; at most `u16::MAX - 1`.
    members: Vec<(MemberId, u64)>,
    /// Per slot, the owner's index in `members`, or `NONE`.
    owner: Vec<u16>,
}

/// A member's weight for a slot; the highest wins.
fn weight(member_hash: u64, slot: usize) -> u64 {
    let slot = u64::try_from(slot).unwrap_or(u64::MAX);
    mix64(member_hash ^ mix64(slot.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
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

    /// The assignment of `members`, computed from this one: only slots whose
    /// owner left are scored against every member, the rest only against
    /// the members that joined. Equal to [`Assignment::compute`].
    pub fn update(&self, members: &[MemberId]) -> Assignment {
        let members = Assignment::sorted(members);
        // Old index -> new index; and the members that are new.
        let remap: Vec<Option<u16>> = self
            .members
            .iter()
            .map(|(id, _)| members.binary_search_by(|(m, _)| m.cmp(id)).ok().and_then(|i| u16::try_from(i).ok()))
            .collect();
        let joined: Vec<u16> = (0..members.len())
            .filter(|i| self.members.binary_search_by(|(m, _)| m.cmp(&members[*i].0)).is_err())
            .filter_map(|i| u16::try_from(i).ok())
            .collect();
        let all: Vec<u16> = (0..members.len()).filter_map(|i| u16::try_from(i).ok()).collect();
        let best = |slot: usize, candidates: &mut dyn Iterator<Item = u16>| -> u16 {
            let mut best = NONE;
            let mut best_weight = 0;
            for c in candidates {
                let w = weight(members[usize::from(c)].1, slot);
                // Higher weight wins; on a tie the smaller identity (lower index).
                let better = best == NONE
                    || match w.cmp(&best_weight) {
                        Ordering::Greater => true,
                        Ordering::Equal => c < best,
                        Ordering::Less => false,
                    };
                if better {
                    best = c;
                    best_weight = w;
                }
            }
            best
        };
        let owner = (0..SLOTS)
            .map(|slot| {
                let kept = self.owner.get(slot).and_then(|o| remap.get(usize::from(*o)).copied().flatten());
                match kept {
                    Some(kept) => best(slot, &mut std::iter::once(kept).chain(joined.iter().copied())),
                    None => best(slot, &mut all.iter().copied()),
                }
            })
            .collect();
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
    fn removing_a_member_should_move_only_the_slots_it_owned() {
        let members = ids(50);
        let before = Assignment::compute(&members);
        let after = before.update(&members[1..]);
        assert_eq!(before.moved(&after), before.slots_of(&members[0]));
    }

    proptest! {
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
