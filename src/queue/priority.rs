//! Ready keys ordered by priority, FIFO within a priority, with aging.
//!
//! Priority is decided when a worker takes a key, never when it enters a
//! buffer (knative's two-lane queue shows why). Each priority has its own lane
//! ordered by the sequence number a key got when it became ready, so a key
//! raised to a higher lane keeps its place in arrival order there. Aging: when
//! the oldest ready key has waited past `max_wait`, it is served first, so a
//! steady stream of high-priority keys cannot starve low ones.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

/// Index of a key's entry in the queue's slab.
pub(crate) type Slot = usize;

/// Where a ready key sits: its lane and its place in arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadyPlace {
    pub priority: i32,
    pub seq: u64,
}

#[derive(Debug, Default)]
pub(crate) struct ReadyLanes {
    /// Lanes by priority, highest first; an empty lane is removed at once.
    lanes: BTreeMap<Reverse<i32>, BTreeMap<u64, (Slot, Instant)>>,
    len: usize,
}

/// A key taken from the lanes, and whether aging chose it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Popped {
    pub slot: Slot,
    pub place: ReadyPlace,
    pub ready_since: Instant,
    pub aged: bool,
}

impl ReadyLanes {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, place: ReadyPlace, slot: Slot, ready_since: Instant) {
        let previous = self.lanes.entry(Reverse(place.priority)).or_default().insert(place.seq, (slot, ready_since));
        debug_assert!(previous.is_none(), "sequence numbers are unique");
        self.len = self.len.saturating_add(1);
    }

    pub(crate) fn remove(&mut self, place: ReadyPlace) -> Option<(Slot, Instant)> {
        let lane = self.lanes.get_mut(&Reverse(place.priority))?;
        let removed = lane.remove(&place.seq)?;
        if lane.is_empty() {
            self.lanes.remove(&Reverse(place.priority));
        }
        self.len = self.len.saturating_sub(1);
        Some(removed)
    }

    /// Moves a ready key to a higher lane, keeping its arrival order.
    pub(crate) fn raise(&mut self, place: ReadyPlace, priority: i32) -> ReadyPlace {
        debug_assert!(priority > place.priority, "keys are never demoted");
        let (slot, since) = self.remove(place).expect("a ready key is in its lane");
        let raised = ReadyPlace { priority, seq: place.seq };
        self.push(raised, slot, since);
        raised
    }

    /// Takes the next key: the oldest if it has waited `max_wait` or more,
    /// otherwise the first of the highest lane.
    pub(crate) fn pop(&mut self, now: Instant, max_wait: Duration) -> Option<Popped> {
        let (lane_key, aged) = match self.oldest() {
            None => return None,
            Some((lane, since)) if now.saturating_duration_since(since) >= max_wait => (lane, true),
            Some(_) => (*self.lanes.keys().next().expect("lanes are not empty"), false),
        };
        let lane = self.lanes.get_mut(&lane_key).expect("the chosen lane exists");
        let (seq, (slot, ready_since)) = lane.pop_first().expect("lanes are never empty");
        if lane.is_empty() {
            self.lanes.remove(&lane_key);
        }
        self.len = self.len.saturating_sub(1);
        Some(Popped { slot, place: ReadyPlace { priority: lane_key.0, seq }, ready_since, aged })
    }

    /// The lane holding the key that became ready first, and when it did.
    ///
    /// Costs one look per distinct priority currently queued, which is a
    /// handful in practice (the fast and slow lanes and a few custom ones).
    fn oldest(&self) -> Option<(Reverse<i32>, Instant)> {
        self.lanes
            .iter()
            .filter_map(|(lane, keys)| keys.first_key_value().map(|(seq, (_, since))| (*seq, *lane, *since)))
            .min_by_key(|(seq, _, _)| *seq)
            .map(|(_, lane, since)| (lane, since))
    }

    /// Ready counts per priority, highest first.
    pub(crate) fn counts(&self) -> Vec<(i32, usize)> {
        self.lanes.iter().map(|(lane, keys)| (lane.0, keys.len())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(priority: i32, seq: u64) -> ReadyPlace {
        ReadyPlace { priority, seq }
    }

    fn drain(lanes: &mut ReadyLanes, now: Instant, max_wait: Duration) -> Vec<Slot> {
        std::iter::from_fn(|| lanes.pop(now, max_wait).map(|p| p.slot)).collect()
    }

    #[test]
    fn lanes_should_serve_higher_priority_first_then_fifo() {
        let now = Instant::now();
        let mut lanes = ReadyLanes::default();
        lanes.push(place(-100, 1), 10, now);
        lanes.push(place(0, 2), 20, now);
        lanes.push(place(-100, 3), 30, now);
        lanes.push(place(0, 4), 40, now);
        assert_eq!(drain(&mut lanes, now, Duration::from_secs(60)), vec![20, 40, 10, 30]);
        assert_eq!(lanes.len(), 0);
        assert!(lanes.lanes.is_empty());
    }

    #[test]
    fn raised_key_should_keep_its_arrival_order_in_the_new_lane() {
        let now = Instant::now();
        let mut lanes = ReadyLanes::default();
        lanes.push(place(-100, 1), 10, now);
        lanes.push(place(0, 2), 20, now);
        lanes.raise(place(-100, 1), 0);
        assert_eq!(drain(&mut lanes, now, Duration::from_secs(60)), vec![10, 20]);
    }

    #[test]
    fn oldest_key_should_be_served_first_once_it_waited_max_wait() {
        let start = Instant::now();
        let mut lanes = ReadyLanes::default();
        lanes.push(place(-100, 1), 10, start);
        lanes.push(place(0, 2), 20, start + Duration::from_secs(5));
        let later = start + Duration::from_secs(10);
        let popped = lanes.pop(later, Duration::from_secs(10)).unwrap();
        assert_eq!((popped.slot, popped.aged), (10, true));
        assert_eq!(lanes.pop(later, Duration::from_secs(10)).unwrap().slot, 20);
    }
}
