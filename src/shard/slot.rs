//! Slots: the hash space cut into `SLOTS` equal ranges, sets of them, and their KEP-5866 hex ranges.
//!
//! Slot `i` holds the hashes `[i << SLOT_SHIFT, (i + 1) << SLOT_SHIFT)`. A
//! `SlotSet` is a fixed bitset, so the member state machine and the
//! simulation work on 64 slots per machine word.

/// log2 of the number of slots.
pub const SLOT_BITS: u32 = 12;
/// How many equal ranges the 64-bit hash space is cut into: enough that each
/// of 100 members gets about 41, few enough that a member's set is 512 bytes.
pub const SLOTS: usize = 1 << SLOT_BITS;
/// A hash's slot is its top `SLOT_BITS` bits.
const SLOT_SHIFT: u32 = 64 - SLOT_BITS;
const WORDS: usize = SLOTS / 64;

/// One of the `SLOTS` equal ranges of the hash space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(u16);

impl Slot {
    /// The slot of `index`, if it is below `SLOTS`.
    pub fn new(index: usize) -> Option<Slot> {
        (index < SLOTS).then(|| Slot(u16::try_from(index).unwrap_or(u16::MAX)))
    }

    /// The slot a shard hash falls in.
    pub fn of_hash(hash: u64) -> Slot {
        // The top 12 bits always fit a u16.
        Slot(u16::try_from(hash >> SLOT_SHIFT).unwrap_or(u16::MAX))
    }

    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    pub fn all() -> impl Iterator<Item = Slot> {
        (0..SLOTS).filter_map(Slot::new)
    }
}

/// A half-open range `[start, end)` of the 64-bit hash space. `end` is a
/// `u128` because the whole space ends at 2^64, which KEP-5866 writes as
/// `0x10000000000000000` (17 hex digits; every other bound has 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashRange {
    pub start: u64,
    pub end: u128,
}

impl HashRange {
    pub fn contains(&self, hash: u64) -> bool {
        hash >= self.start && u128::from(hash) < self.end
    }

    /// The KEP-5866 selector term for this range over `field`
    /// (`object.metadata.uid` or `object.metadata.namespace`).
    pub fn selector(&self, field: &str) -> String {
        format!("shardRange({field}, '0x{:016x}', '0x{:016x}')", self.start, self.end)
    }
}

/// A set of slots.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlotSet {
    words: [u64; WORDS],
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet::EMPTY
    }
}

impl SlotSet {
    pub const EMPTY: SlotSet = SlotSet { words: [0; WORDS] };
    pub const FULL: SlotSet = SlotSet { words: [u64::MAX; WORDS] };

    pub fn insert(&mut self, slot: Slot) {
        self.words[slot.index() / 64] |= 1 << (slot.index() % 64);
    }

    pub fn remove(&mut self, slot: Slot) {
        self.words[slot.index() / 64] &= !(1 << (slot.index() % 64));
    }

    pub fn contains(&self, slot: Slot) -> bool {
        self.words[slot.index() / 64] & (1 << (slot.index() % 64)) != 0
    }

    pub fn contains_hash(&self, hash: u64) -> bool {
        self.contains(Slot::of_hash(hash))
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn union(&self, other: &SlotSet) -> SlotSet {
        self.zip(other, |a, b| a | b)
    }

    pub fn intersection(&self, other: &SlotSet) -> SlotSet {
        self.zip(other, |a, b| a & b)
    }

    pub fn difference(&self, other: &SlotSet) -> SlotSet {
        self.zip(other, |a, b| a & !b)
    }

    pub fn intersects(&self, other: &SlotSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    fn zip(&self, other: &SlotSet, f: impl Fn(u64, u64) -> u64) -> SlotSet {
        let mut words = [0; WORDS];
        for (out, (a, b)) in words.iter_mut().zip(self.words.iter().zip(&other.words)) {
            *out = f(*a, *b);
        }
        SlotSet { words }
    }

    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        Slot::all().filter(|slot| self.contains(*slot))
    }

    /// Runs of adjacent slots as `(first, end)` slot indexes, end exclusive.
    pub(super) fn runs(&self) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for slot in self.iter() {
            match runs.last_mut() {
                Some((_, end)) if *end == slot.index() => *end = slot.index() + 1,
                _ => runs.push((slot.index(), slot.index() + 1)),
            }
        }
        runs
    }

    /// The set as the fewest half-open hash ranges (adjacent slots merged).
    pub fn hash_ranges(&self) -> Vec<HashRange> {
        self.runs()
            .into_iter()
            .map(|(first, end)| HashRange {
                start: u64::try_from(first).unwrap_or(u64::MAX) << SLOT_SHIFT,
                end: u128::try_from(end).unwrap_or(u128::MAX) << SLOT_SHIFT,
            })
            .collect()
    }

    /// The KEP-5866 selector for these slots over `field`: the ranges OR-ed
    /// with `||`; `None` for the empty set, which no selector expresses.
    pub fn selector(&self, field: &str) -> Option<String> {
        let terms: Vec<String> = self.hash_ranges().iter().map(|r| r.selector(field)).collect();
        (!terms.is_empty()).then(|| terms.join(" || "))
    }
}

#[cfg(test)]
impl SlotSet {
    /// The set of these slot indexes (those below `SLOTS`).
    pub(crate) fn of(indexes: &[usize]) -> SlotSet {
        indexes.iter().filter_map(|i| Slot::new(*i)).collect()
    }
}

impl FromIterator<Slot> for SlotSet {
    fn from_iter<I: IntoIterator<Item = Slot>>(iter: I) -> Self {
        let mut set = SlotSet::EMPTY;
        for slot in iter {
            set.insert(slot);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::hash::shard_hash;

    #[test]
    fn a_hash_should_fall_in_the_slot_of_its_top_bits() {
        assert_eq!(Slot::of_hash(0).index(), 0);
        assert_eq!(Slot::of_hash(u64::MAX).index(), SLOTS - 1);
        assert_eq!(Slot::of_hash(1 << 52).index(), 1);
    }

    #[test]
    fn the_full_set_should_be_one_range_ending_at_two_to_the_sixty_fourth() {
        let ranges = SlotSet::FULL.hash_ranges();
        assert_eq!(ranges, vec![HashRange { start: 0, end: 1 << 64 }]);
        assert_eq!(
            SlotSet::FULL.selector("object.metadata.uid").unwrap(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
    }

    #[test]
    fn adjacent_slots_should_merge_into_one_range_and_gaps_split_them() {
        let ranges = SlotSet::of(&[1, 2, 3, 7]).hash_ranges();
        assert_eq!(ranges.len(), 2);
        assert_eq!(ranges[0], HashRange { start: 1 << 52, end: 4 << 52 });
        assert_eq!(ranges[1].selector("f"), "shardRange(f, '0x0070000000000000', '0x0080000000000000')");
    }

    #[test]
    fn a_slot_set_and_its_ranges_should_agree_on_every_object_hash() {
        let mine = SlotSet::of(&[0, 5, 6, 100, 4095]);
        let ranges = mine.hash_ranges();
        for i in 0..20_000 {
            let hash = shard_hash(&format!("uid-{i}"));
            assert_eq!(mine.contains_hash(hash), ranges.iter().any(|r| r.contains(hash)), "hash {hash:#x}");
        }
    }

    #[test]
    fn set_operations_should_work_word_by_word() {
        let a = SlotSet::of(&[1, 64, 65]);
        let b = SlotSet::of(&[64, 200]);
        assert_eq!(a.union(&b), SlotSet::of(&[1, 64, 65, 200]));
        assert_eq!(a.intersection(&b), SlotSet::of(&[64]));
        assert_eq!(a.difference(&b), SlotSet::of(&[1, 65]));
        assert!(a.intersects(&b));
        assert_eq!(a.len(), 3);
        assert!(SlotSet::EMPTY.is_empty());
        assert_eq!(SlotSet::FULL.len(), SLOTS);
    }
}
