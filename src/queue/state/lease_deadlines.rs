//! Held leases by deadline: a min-heap from which an ended lease is dropped lazily.
//!
//! Every grant adds a deadline and almost every lease ends by Done long
//! before it, so an ordered tree paid an insert and a remove per key (about a
//! tenth of a key's time under the queue's lock). Here a grant is a heap push
//! (deadlines mostly grow, so it rarely sifts) and an ended or extended
//! lease just stops being current: the heap drops it when it reaches the top,
//! or when stale records outnumber current ones (the heap is then rebuilt),
//! so its size stays within twice the leases held plus a constant. Whether a
//! record is current is the state's to say (its key is still held under that
//! token, and that record is the lease's latest); the heap asks through
//! `is_current`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tokio::time::Instant;

use crate::queue::lease::LeaseToken;
use crate::queue::priority::Slot;

/// Stale records the heap may hold beyond the current ones before it is rebuilt.
const STALE_SLACK: usize = 64;

/// One lease's deadline, as it was when recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct LeaseDeadline {
    pub deadline: Instant,
    /// Breaks ties between equal deadlines, as the tree's key did.
    pub token: LeaseToken,
    /// Unique per record: a lease extended back to an old deadline gets a
    /// new record, and the old one stays stale.
    pub record: u64,
    pub slot: Slot,
}

#[derive(Debug, Default)]
pub(super) struct LeaseDeadlines {
    /// Earliest on top; the top is always current (or the heap is empty).
    heap: BinaryHeap<Reverse<LeaseDeadline>>,
    /// Current records: leases held.
    current: usize,
}

impl LeaseDeadlines {
    /// Leases held.
    pub(super) fn len(&self) -> usize {
        self.current
    }

    /// Records kept, stale ones included: what the heap costs in memory.
    #[cfg(test)]
    pub(super) fn stored(&self) -> usize {
        self.heap.len()
    }

    pub(super) fn insert(&mut self, lease: LeaseDeadline) {
        self.heap.push(Reverse(lease));
        self.current = self.current.saturating_add(1);
    }

    /// One recorded lease stopped being current (ended, or its deadline
    /// moved and was recorded again).
    pub(super) fn ended(&mut self, is_current: impl Fn(&LeaseDeadline) -> bool) {
        self.current = self.current.saturating_sub(1);
        while self.heap.peek().is_some_and(|Reverse(top)| !is_current(top)) {
            self.heap.pop();
        }
        if self.heap.len() > self.current.saturating_mul(2).saturating_add(STALE_SLACK) {
            self.heap.retain(|Reverse(lease)| is_current(lease));
        }
    }

    /// The lease that ends first.
    pub(super) fn first(&self) -> Option<LeaseDeadline> {
        self.heap.peek().map(|Reverse(lease)| *lease)
    }

    /// The slots of the leases held, earliest deadline first.
    pub(super) fn current_slots(&self, is_current: impl Fn(&LeaseDeadline) -> bool) -> Vec<Slot> {
        let mut current: Vec<LeaseDeadline> =
            self.heap.iter().map(|Reverse(lease)| *lease).filter(|lease| is_current(lease)).collect();
        current.sort_unstable();
        current.into_iter().map(|lease| lease.slot).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::Duration;

    use super::*;

    fn lease(start: Instant, ms: u64, token: u64) -> LeaseDeadline {
        LeaseDeadline {
            deadline: start + Duration::from_millis(ms),
            token: LeaseToken::new(token).unwrap(),
            record: token,
            slot: token as Slot,
        }
    }

    #[test]
    fn heap_should_stay_within_twice_the_leases_held_while_leases_end_out_of_order() {
        let start = Instant::now();
        let mut deadlines = LeaseDeadlines::default();
        let mut held = HashSet::new();
        // One long lease stays at the top while thousands of others come and go.
        deadlines.insert(lease(start, 1, 1));
        held.insert(1);
        for token in 2..10_000u64 {
            deadlines.insert(lease(start, 1000 + token, token));
            held.insert(token);
            if token % 3 != 0 {
                held.remove(&token);
                deadlines.ended(|l| held.contains(&l.token.get()));
            }
            assert!(deadlines.stored() <= 2 * deadlines.len() + STALE_SLACK);
        }
        assert_eq!(deadlines.len(), held.len());
        assert_eq!(deadlines.first().unwrap().token.get(), 1);
        let slots = deadlines.current_slots(|l| held.contains(&l.token.get()));
        let mut expected: Vec<Slot> = held.iter().map(|&t| t as Slot).collect();
        expected.sort();
        assert_eq!(slots, expected);
    }

    #[test]
    fn heap_should_be_empty_once_no_lease_is_held() {
        let start = Instant::now();
        let mut deadlines = LeaseDeadlines::default();
        for token in 1..100 {
            deadlines.insert(lease(start, 100 - token, token));
        }
        for token in 1..100 {
            deadlines.ended(|l| l.token.get() > token);
        }
        assert_eq!((deadlines.len(), deadlines.stored()), (0, 0));
    }
}
