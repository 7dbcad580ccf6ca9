//! Ready keys ordered by priority, FIFO within a priority, with aging.
//!
//! Priority is decided when a worker takes a key, never when it enters a
//! buffer (knative's two-lane queue shows why). Each priority has its own lane
//! ordered by the sequence number a key got when it became ready, so a key
//! raised to a higher lane keeps its place in arrival order there. Aging: when
//! the oldest ready key has waited past `max_wait`, it is served first, so a
//! steady stream of high-priority keys cannot starve low ones.
//!
//! Keys almost always become ready in sequence order, so a lane is a ring
//! buffer appended at the back and taken from the front (no allocation and no
//! tree walk per key, which a B-tree per lane cost: about a tenth of an
//! add + get + done). The rare key that arrives out of order (raised from a
//! lower lane, or unparked when its shard slot is owned again) goes to a small
//! ordered side map instead, so no insert ever shifts a long buffer. A key
//! raised out of the middle of a buffer leaves a hole that is skipped when
//! the front reaches it.

use std::collections::{BTreeMap, VecDeque};
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

/// Empty lanes kept for reuse (their buffers stay allocated); past this many
/// lanes an emptied lane is dropped, so a client cycling through priorities
/// cannot make the queue keep a lane per priority it ever used. Two named
/// lanes are the default, plus room for a few custom ones.
const KEPT_LANES: usize = 4;

/// Holes a lane's buffer may hold beyond twice its live keys before it is
/// compacted: bounds the memory of keys raised out of a lane that is not
/// being served.
const HOLE_SLACK: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct ReadyLanes {
    /// Lanes by priority, highest first.
    lanes: Vec<Lane>,
    len: usize,
}

#[derive(Debug)]
struct Lane {
    priority: i32,
    /// Keys that arrived in sequence order, ascending; never starts or ends with a hole.
    fifo: VecDeque<Queued>,
    /// Keys that arrived behind a later one (raised, unparked), by sequence number.
    late: BTreeMap<u64, (Slot, Instant)>,
    /// Keys in `fifo` and `late`, holes not counted.
    live: usize,
    holes: usize,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    seq: u64,
    /// `HOLE` once the key left the lane from the middle of the buffer.
    slot: Slot,
    since: Instant,
}

const HOLE: Slot = Slot::MAX;

/// A key taken from the lanes, and whether aging chose it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Popped {
    pub slot: Slot,
    pub place: ReadyPlace,
    pub ready_since: Instant,
    pub aged: bool,
}

impl Lane {
    fn new(priority: i32) -> Self {
        Lane { priority, fifo: VecDeque::new(), late: BTreeMap::new(), live: 0, holes: 0 }
    }

    fn push(&mut self, seq: u64, slot: Slot, since: Instant) {
        if self.fifo.back().is_none_or(|last| last.seq < seq) {
            self.fifo.push_back(Queued { seq, slot, since });
        } else {
            let previous = self.late.insert(seq, (slot, since));
            debug_assert!(previous.is_none(), "sequence numbers are unique");
        }
        self.live = self.live.saturating_add(1);
    }

    /// The first key in arrival order: its sequence number and when it became ready.
    fn first(&self) -> Option<(u64, Instant)> {
        let fifo = self.fifo.front().map(|q| (q.seq, q.since));
        let late = self.late.first_key_value().map(|(&seq, &(_, since))| (seq, since));
        match (fifo, late) {
            (Some(f), Some(l)) => Some(if l.0 < f.0 { l } else { f }),
            (f, l) => f.or(l),
        }
    }

    fn pop_first(&mut self) -> Option<(u64, Slot, Instant)> {
        let from_late = match (self.fifo.front(), self.late.first_key_value()) {
            (None, None) => return None,
            (Some(f), Some((&l, _))) => l < f.seq,
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        let popped = if from_late {
            self.late.pop_first().map(|(seq, (slot, since))| (seq, slot, since))
        } else {
            self.fifo.pop_front().map(|q| (q.seq, q.slot, q.since))
        };
        self.live = self.live.saturating_sub(1);
        self.trim();
        popped
    }

    fn remove(&mut self, seq: u64) -> Option<(Slot, Instant)> {
        let removed = match self.late.remove(&seq) {
            Some(found) => found,
            None => {
                let at = self.fifo.partition_point(|q| q.seq < seq);
                let queued = self.fifo.get_mut(at).filter(|q| q.seq == seq && q.slot != HOLE)?;
                let found = (queued.slot, queued.since);
                queued.slot = HOLE;
                self.holes = self.holes.saturating_add(1);
                found
            }
        };
        self.live = self.live.saturating_sub(1);
        self.trim();
        Some(removed)
    }

    /// Keeps holes off both ends of the buffer and their number bounded.
    fn trim(&mut self) {
        if self.live == 0 {
            self.fifo.clear();
            self.late.clear();
            self.holes = 0;
            return;
        }
        while self.fifo.front().is_some_and(|q| q.slot == HOLE) {
            self.fifo.pop_front();
            self.holes = self.holes.saturating_sub(1);
        }
        while self.fifo.back().is_some_and(|q| q.slot == HOLE) {
            self.fifo.pop_back();
            self.holes = self.holes.saturating_sub(1);
        }
        if self.holes > self.live.saturating_mul(2).saturating_add(HOLE_SLACK) {
            self.fifo.retain(|q| q.slot != HOLE);
            self.holes = 0;
        }
    }
}

impl ReadyLanes {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The lane of `priority`, made if missing (kept in priority order).
    fn lane_mut(&mut self, priority: i32) -> &mut Lane {
        let at = self.lanes.partition_point(|lane| lane.priority > priority);
        if self.lanes.get(at).is_none_or(|lane| lane.priority != priority) {
            self.lanes.insert(at, Lane::new(priority));
        }
        &mut self.lanes[at]
    }

    fn lane_index(&self, priority: i32) -> Option<usize> {
        let at = self.lanes.partition_point(|lane| lane.priority > priority);
        self.lanes.get(at).filter(|lane| lane.priority == priority).map(|_| at)
    }

    /// Drops lane `at` if it is empty and more than `KEPT_LANES` exist.
    fn drop_if_spare(&mut self, at: usize) {
        if self.lanes.len() > KEPT_LANES && self.lanes[at].live == 0 {
            self.lanes.remove(at);
        }
    }

    pub(crate) fn push(&mut self, place: ReadyPlace, slot: Slot, ready_since: Instant) {
        self.lane_mut(place.priority).push(place.seq, slot, ready_since);
        self.len = self.len.saturating_add(1);
    }

    pub(crate) fn remove(&mut self, place: ReadyPlace) -> Option<(Slot, Instant)> {
        let at = self.lane_index(place.priority)?;
        let removed = self.lanes[at].remove(place.seq)?;
        self.drop_if_spare(at);
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
        let (at, aged) = match self.oldest() {
            None => return None,
            Some((at, since)) if now.saturating_duration_since(since) >= max_wait => (at, true),
            Some(_) => (self.lanes.iter().position(|lane| lane.live > 0).expect("a lane has keys"), false),
        };
        let lane = &mut self.lanes[at];
        let priority = lane.priority;
        let (seq, slot, ready_since) = lane.pop_first().expect("the chosen lane has keys");
        self.drop_if_spare(at);
        self.len = self.len.saturating_sub(1);
        Some(Popped { slot, place: ReadyPlace { priority, seq }, ready_since, aged })
    }

    /// The lane holding the key that became ready first, and when it did.
    ///
    /// Costs one look per lane, which is a handful in practice (the fast and
    /// slow lanes and a few custom ones).
    fn oldest(&self) -> Option<(usize, Instant)> {
        self.lanes
            .iter()
            .enumerate()
            .filter_map(|(at, lane)| lane.first().map(|(seq, since)| (seq, at, since)))
            .min_by_key(|(seq, _, _)| *seq)
            .map(|(_, at, since)| (at, since))
    }

    /// Ready counts per priority, highest first.
    pub(crate) fn counts(&self) -> Vec<(i32, usize)> {
        self.lanes.iter().filter(|lane| lane.live > 0).map(|lane| (lane.priority, lane.live)).collect()
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
        assert!(lanes.counts().is_empty());
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

    #[test]
    fn keys_arriving_out_of_order_should_be_served_in_sequence_order() {
        let now = Instant::now();
        let mut lanes = ReadyLanes::default();
        lanes.push(place(0, 5), 50, now);
        lanes.push(place(0, 7), 70, now);
        // Unparked or raised keys come back with their old, smaller numbers.
        lanes.push(place(0, 6), 60, now);
        lanes.push(place(0, 2), 20, now);
        lanes.push(place(0, 9), 90, now);
        assert_eq!(drain(&mut lanes, now, Duration::from_secs(60)), vec![20, 50, 60, 70, 90]);
    }

    #[test]
    fn a_lane_should_not_keep_the_holes_of_keys_raised_out_of_it() {
        let now = Instant::now();
        let mut lanes = ReadyLanes::default();
        for seq in 0..10_000 {
            lanes.push(place(-100, seq), seq as Slot, now);
        }
        for seq in (1..9_999).filter(|seq| seq % 100 != 0) {
            lanes.raise(place(-100, seq), 0);
        }
        let slow = &lanes.lanes.iter().find(|lane| lane.priority == -100).unwrap();
        assert!(slow.fifo.len() <= 3 * slow.live + HOLE_SLACK, "{} slots for {} keys", slow.fifo.len(), slow.live);
        assert_eq!(lanes.counts(), vec![(0, 9_998 - 99), (-100, 101)]);
        let order = drain(&mut lanes, now, Duration::from_secs(60));
        assert_eq!(order.len(), 10_000);
        assert!(order[..9_899].windows(2).all(|w| w[0] < w[1]));
        assert!(order[9_899..].windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn emptied_lanes_past_the_kept_few_should_be_dropped() {
        let now = Instant::now();
        let mut lanes = ReadyLanes::default();
        for priority in 0..100 {
            lanes.push(place(priority, priority as u64), priority as Slot, now);
            lanes.pop(now, Duration::from_secs(60)).unwrap();
        }
        assert!(lanes.lanes.len() <= KEPT_LANES);
        assert_eq!(lanes.len(), 0);
    }
}
