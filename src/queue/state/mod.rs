//! The queue's state machine: every rule of the queue, synchronous, with time passed in.
//!
//! Each key has one entry in a slab, found through `index`, in exactly one
//! phase: idle (only its failures remembered), ready (in a priority lane),
//! waiting (in the timer set), held (in the lease set, possibly dirty) or
//! settling (after a lease under which the worker wrote, until the caches
//! have seen the writes; in the settling set, possibly dirty). The
//! async `WorkQueue` wraps this in a mutex; tests drive it directly with
//! explicit instants.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasher;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashTable;
use slab::Slab;
use tokio::time::Instant;

use super::error::QueueError;
use super::key::QueueKey;
use super::lease::{Holder, Lease, LeaseToken, TokenSource};
use super::lost_leases::LostLease;
use super::observer::QueueObserver;
use super::priority::{ReadyLanes, ReadyPlace, Slot};
use super::rate_limit::RateLimiter;
use super::reason::{Reason, ReasonKind, ReasonSet};
use super::settings::{QueueSettings, key_cost};
use super::time;
use crate::shard::{Slot as ShardSlot, SlotSet};
use gate::Gate;
use lease_deadlines::{LeaseDeadline, LeaseDeadlines};

mod gate;
mod inspect;
mod lease_deadlines;
mod lease_end;
mod shards;

use shards::Sharding;
pub use shards::ShardsChanged;

/// What an add did to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// The key was not queued: it is now ready or waiting.
    Queued,
    /// The key was already queued or waiting; priority, time and reasons merged.
    Merged,
    /// The key is held, or settling: it goes back to the queue when its lease ends or it settles.
    MarkedDirty,
}

#[derive(Debug)]
struct Entry<K> {
    key: K,
    /// The key's hash in `index`, kept so that removing the key or growing
    /// the index never hashes it again.
    hash: u64,
    phase: Phase,
    failures: u32,
    last_error: Option<Arc<str>>,
    /// Priority while ready or waiting; the lease's priority while held.
    priority: i32,
    /// Reasons while ready or waiting; empty while held (the lease took them).
    reasons: ReasonSet,
    /// When the key became ready since it was last granted (`None` while
    /// it waits out a delay: its lane then says when it became ready).
    enqueued_at: Option<Instant>,
    /// The shard slot the key falls in, when the queue is sharded and the
    /// slot is known (`place_in_shard`); a key without one is never granted
    /// while the queue grants only from some slots.
    shard: Option<ShardSlot>,
}

#[derive(Debug)]
enum Phase {
    Idle,
    Ready {
        place: ReadyPlace,
        since: Instant,
    },
    Waiting {
        until: Instant,
        seq: u64,
    },
    /// Ready, but in a shard slot this replica does not own now: set aside
    /// (in `parked`) until it does, keeping its place in arrival order.
    Parked {
        place: ReadyPlace,
        since: Instant,
    },
    /// Leased: its lease is `held_leases[_]`. Kept aside, not inline,
    /// because a lease's fields are most of an entry's size while few keys
    /// are held at once (40 bytes less per tracked key).
    Held(HeldSlot),
    /// Its lease ended after writes the caches have not seen yet: not handed
    /// out until they have (`settled`) or `until` passes. `None` while writes
    /// under that lease are still unanswered (`settling_writes`): the bound
    /// starts once the last one is.
    Settling {
        until: Option<Instant>,
        seq: u64,
        pending: Option<Box<Pending>>,
    },
}

/// Index of a held key's lease in `QueueState::held_leases`.
type HeldSlot = usize;

#[derive(Debug)]
struct HeldLease {
    token: LeaseToken,
    holder: Holder,
    deadline: Instant,
    /// Names the deadline heap's record of `deadline`; an extend makes a new
    /// one, so a record left from before cannot pass for current if the
    /// deadline moves back to its old value.
    deadline_record: u64,
    /// Its time to live: what it was granted, or last extended, with. An
    /// extend that names none renews it by this, so a heartbeat keeps a
    /// lease as long as it was asked for.
    ttl: Duration,
    granted_at: Instant,
    /// Added again while held (client-go's dirty set).
    pending: Option<Box<Pending>>,
    /// The worker wrote through the sidecar under this lease, and the caches
    /// have not all seen it yet: the key settles when the lease ends.
    unsettled: bool,
    /// Writes under this lease sent to the API server and not answered yet.
    /// While any is, the lease does not expire: its deadline passing only
    /// ends it once the last one is answered (or the term ends), so no other
    /// worker gets the key while a write of this one may still land.
    writing: u32,
    /// Its key's shard slot moved away: its holder was asked to stop, and its
    /// deadline no longer moves.
    asked_back: bool,
}

#[derive(Debug)]
struct Pending {
    priority: i32,
    reasons: ReasonSet,
    ready_at: Instant,
    enqueued_at: Instant,
}

impl Pending {
    /// Merges an add into what is pending, as an add merges into a queued
    /// key: the higher priority and the earlier ready time win. Boxed: a
    /// dirty add is the exception, and inline it would make every entry in
    /// the slab 64 bytes larger.
    fn merge_into(pending: &mut Option<Box<Pending>>, add: Pending) {
        match pending {
            Some(pending) => {
                pending.priority = pending.priority.max(add.priority);
                pending.reasons.merge(add.reasons);
                pending.ready_at = pending.ready_at.min(add.ready_at);
                pending.enqueued_at = pending.enqueued_at.min(add.enqueued_at);
            }
            None => *pending = Some(Box::new(add)),
        }
    }
}

/// How a lease ended, for the bookkeeping that follows.
enum LeaseEnd {
    Done,
    Success,
    Retry(String),
    RequeueAfter(Duration),
    Lost(ReasonKind),
    /// Handed back at shutdown: queued again as it was, not counted as a failure.
    Returned,
    /// Its holder stopped cleanly without finishing it: queued again at once
    /// (reason `LeaseReleased`), no failure counted, nobody told.
    Stopped,
    /// Never reached its holder: queued again at once with the reasons and
    /// the queued time the lease took, no failure counted, nobody told.
    Unsent {
        reasons: ReasonSet,
        enqueued_at: Instant,
    },
}

pub(crate) struct QueueState<K> {
    settings: QueueSettings,
    observer: Arc<dyn QueueObserver>,
    limiter: RateLimiter,
    /// Each key's slot. The table holds slots only and compares through the
    /// entries, so a key is stored (and its `Arc` counted) once, not twice.
    index: HashTable<Slot>,
    /// Keys come from clients; foldhash is seeded per process and several
    /// times faster than SipHash on short keys like `namespace/name`.
    hasher: foldhash::fast::RandomState,
    entries: Slab<Entry<K>>,
    /// What the tracked keys count against `max_memory` (`key_cost` each).
    key_bytes: usize,
    /// The lease of each held key, named by its entry's `Phase::Held`.
    held_leases: Slab<HeldLease>,
    ready: ReadyLanes,
    /// Delayed keys by ready time; the sequence number breaks ties.
    waiting: BTreeMap<(Instant, u64), Slot>,
    /// Held keys by lease deadline.
    leases: LeaseDeadlines,
    /// Keys settling after writes under their leases.
    settling: Settling,
    next_seq: u64,
    tokens: TokenSource,
    /// Whether keys are handed out now: holds, the term's bound, shutdown.
    gate: Gate,
    /// The shard slots granted from, the keys parked outside them, and the
    /// leases asked back.
    shards: Sharding,
    /// Keys that became ready since the last `take_wakeups`.
    wakeups: usize,
    /// The earliest deadline the timer task is sleeping towards, if any.
    timer_target: Option<Instant>,
    /// A deadline earlier than `timer_target` was added: the timer must wake.
    timer_stale: bool,
    /// Leases that ended without their holder, or were asked back, since the
    /// last `take_lost`, for their holders to hear of.
    lost: Vec<(Holder, LostLease<K>)>,
    /// The leases this queue handed back itself (`LeaseEnd::Returned`).
    handed_back: HandedBack,
}

/// Keys settling after writes under their leases.
#[derive(Debug, Default)]
struct Settling {
    /// By the latest instant each settles.
    by_deadline: BTreeMap<(Instant, u64), Slot>,
    /// Those whose lease ended while writes under it were unanswered: that
    /// lease's token and how many writes are still out.
    writes: HashMap<Slot, (LeaseToken, u32)>,
}

/// The leases a queue handed back itself (`LeaseEnd::Returned`).
#[derive(Debug, Default)]
struct HandedBack {
    /// The latest of their deadlines: their workers, told or not, may work
    /// on until then, so no other replica may grant those keys before it.
    until: Option<Instant>,
    /// How many, ever, at the ends of drains: each drain reads what it saw
    /// from it, whichever drain handed them back.
    count: usize,
}

impl<K: QueueKey> QueueState<K> {
    #[cfg(test)]
    pub(crate) fn new(settings: QueueSettings, now: Instant) -> Self {
        Self::with_observer(settings, Arc::new(super::observer::NoObserver), now)
    }

    pub(crate) fn with_observer(settings: QueueSettings, observer: Arc<dyn QueueObserver>, now: Instant) -> Self {
        let limiter = RateLimiter::new(&settings.rate_limiter, now);
        QueueState {
            settings,
            observer,
            limiter,
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            entries: Slab::new(),
            key_bytes: 0,
            held_leases: Slab::new(),
            ready: ReadyLanes::default(),
            waiting: BTreeMap::new(),
            leases: LeaseDeadlines::default(),
            settling: Settling::default(),
            next_seq: 0,
            tokens: TokenSource::new(),
            gate: Gate::default(),
            shards: Sharding::default(),
            wakeups: 0,
            timer_target: None,
            timer_stale: false,
            lost: Vec::new(),
            handed_back: HandedBack::default(),
        }
    }

    pub(crate) fn settings(&self) -> &QueueSettings {
        &self.settings
    }

    // ----- adding -----

    /// `Add`: ready now.
    pub(crate) fn add(
        &mut self,
        key: K,
        priority: i32,
        reason: Reason,
        now: Instant,
    ) -> Result<AddOutcome, QueueError> {
        self.enqueue_key(key, priority, reason, now, now)
    }

    /// `AddAfter`: ready after `delay`; an earlier ready time already set wins.
    pub(crate) fn add_after(
        &mut self,
        key: K,
        delay: Duration,
        priority: i32,
        reason: Reason,
        now: Instant,
    ) -> Result<AddOutcome, QueueError> {
        let kind = reason.kind;
        let added = self.enqueue_key(key, priority, reason, time::after(now, delay), now);
        if added.is_ok() {
            self.count_requeue(kind);
        }
        added
    }

    /// `AddRateLimited`: counts a failure and delays the key by the rate limiter.
    /// Returns the delay chosen and the new failure count.
    pub(crate) fn add_rate_limited(
        &mut self,
        key: K,
        priority: i32,
        reason: Reason,
        now: Instant,
    ) -> Result<(Duration, u32), QueueError> {
        self.check_room(std::slice::from_ref(&key), reason.kind)?;
        Ok(self.rate_limit_key(key, priority, reason, now))
    }

    /// `Add` or `AddAfter` of a batch: every key is added, or none is (the
    /// queue is shutting down, or the new keys do not all fit in `max_keys`).
    pub(crate) fn add_all(
        &mut self,
        keys: Vec<K>,
        delay: Duration,
        priority: i32,
        reason: Reason,
        now: Instant,
    ) -> Result<(), QueueError> {
        self.check_room(&keys, reason.kind)?;
        let ready_at = time::after(now, delay);
        for key in keys {
            self.count_requeue(reason.kind);
            let slot = self.slot_or_insert(key);
            self.enqueue_slot(slot, priority, ReasonSet::from(reason.clone()), ready_at, now);
        }
        Ok(())
    }

    /// `AddRateLimited` of a batch, all or none as `add_all`; a key named
    /// twice counts one failure. Returns each distinct key, in the order
    /// given, with its delay and new failure count.
    pub(crate) fn add_rate_limited_all(
        &mut self,
        keys: Vec<K>,
        priority: i32,
        reason: Reason,
        now: Instant,
    ) -> Result<Vec<(K, Duration, u32)>, QueueError> {
        self.check_room(&keys, reason.kind)?;
        let mut seen: HashSet<K, foldhash::fast::RandomState> = HashSet::default();
        let mut limited = Vec::with_capacity(keys.len());
        for key in keys {
            if seen.insert(key.clone()) {
                let (delay, failures) = self.rate_limit_key(key.clone(), priority, reason.clone(), now);
                limited.push((key, delay, failures));
            }
        }
        Ok(limited)
    }

    /// Counts a failure of `key` and queues it after the limiter's delay.
    fn rate_limit_key(&mut self, key: K, priority: i32, reason: Reason, now: Instant) -> (Duration, u32) {
        let slot = self.slot_or_insert(key);
        let delay = self.count_failure(slot, now);
        self.enqueue_slot(slot, priority, ReasonSet::from(reason), time::after(now, delay), now);
        (delay, self.entries[slot].failures)
    }

    /// Refuses adds while shutting down, and new keys that would take the
    /// queue past `max_keys` or `max_memory`, unless they come from an
    /// informer's cache (which bounds them itself). Keys already tracked, or
    /// named twice, take no extra room.
    fn check_room(&self, keys: &[K], kind: ReasonKind) -> Result<(), QueueError> {
        if self.gate.is_shutting_down() {
            return Err(QueueError::ShuttingDown);
        }
        if kind.is_from_cache() {
            return Ok(());
        }
        // Cheap first: even if every key were new, would they fit?
        if self.fits(room_for(keys)).is_ok() {
            return Ok(());
        }
        let new: HashSet<&K, foldhash::fast::RandomState> =
            keys.iter().filter(|key| self.slot_of(*key).is_none()).collect();
        self.fits(room_for(new))
    }

    /// Whether `count` more keys counting `bytes` fit in `max_keys` and `max_memory`.
    fn fits(&self, (count, bytes): (usize, usize)) -> Result<(), QueueError> {
        let QueueSettings { max_keys, max_memory, .. } = self.settings;
        if self.entries.len().saturating_add(count) > max_keys {
            return Err(QueueError::Full { limit: max_keys });
        }
        if self.key_bytes.saturating_add(bytes) > max_memory {
            return Err(QueueError::MemoryFull { limit: max_memory });
        }
        Ok(())
    }

    fn enqueue_key(
        &mut self,
        key: K,
        priority: i32,
        reason: Reason,
        ready_at: Instant,
        now: Instant,
    ) -> Result<AddOutcome, QueueError> {
        self.check_room(std::slice::from_ref(&key), reason.kind)?;
        let slot = self.slot_or_insert(key);
        Ok(self.enqueue_slot(slot, priority, ReasonSet::from(reason), ready_at, now))
    }

    /// The slot of `key`'s entry, if the queue tracks the key.
    pub(super) fn slot_of<Q>(&self, key: &Q) -> Option<Slot>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        self.index.find(hash, |&slot| self.entries[slot].key.borrow() == key).copied()
    }

    fn slot_or_insert(&mut self, key: K) -> Slot {
        let hash = self.hasher.hash_one(&key);
        if let Some(&slot) = self.index.find(hash, |&slot| self.entries[slot].key == key) {
            return slot;
        }
        self.key_bytes = self.key_bytes.saturating_add(key_cost(key.text_bytes()));
        let slot = self.entries.insert(Entry {
            key,
            hash,
            phase: Phase::Idle,
            failures: 0,
            last_error: None,
            priority: 0,
            reasons: ReasonSet::new(),
            enqueued_at: None,
            shard: None,
        });
        let entries = &self.entries;
        self.index.insert_unique(hash, slot, |&slot| entries[slot].hash);
        slot
    }

    /// Forgets the entry in `slot`: out of the slab and the index.
    fn remove_entry(&mut self, slot: Slot) {
        let entry = self.entries.remove(slot);
        self.key_bytes = self.key_bytes.saturating_sub(key_cost(entry.key.text_bytes()));
        if let Ok(found) = self.index.find_entry(entry.hash, |&s| s == slot) {
            found.remove();
        }
    }

    /// The one place that merges an add into a key's phase.
    fn enqueue_slot(
        &mut self,
        slot: Slot,
        priority: i32,
        reasons: ReasonSet,
        ready_at: Instant,
        now: Instant,
    ) -> AddOutcome {
        let entry = &mut self.entries[slot];
        match &mut entry.phase {
            Phase::Idle => {
                entry.priority = priority;
                entry.reasons = reasons;
                // Queue time starts when the key is ready: a delay is not
                // time spent waiting for a worker (client-go's metrics start
                // at a delay's end too). A waiting key gets it from its lane.
                entry.enqueued_at = (ready_at <= now).then_some(now);
                if ready_at <= now {
                    self.observer.added();
                    self.make_ready(slot, now);
                } else {
                    self.make_waiting(slot, ready_at);
                }
                AddOutcome::Queued
            }
            Phase::Ready { place, .. } => {
                let place = *place;
                entry.reasons.merge(reasons);
                if priority > place.priority {
                    entry.priority = priority;
                    let raised = self.ready.raise(place, priority);
                    if let Phase::Ready { place, .. } = &mut self.entries[slot].phase {
                        *place = raised;
                    }
                }
                AddOutcome::Merged
            }
            Phase::Parked { place, .. } => {
                // Set aside, not in a lane: only the priority it will have
                // when its slot is owned again changes.
                entry.reasons.merge(reasons);
                entry.priority = entry.priority.max(priority);
                place.priority = entry.priority;
                AddOutcome::Merged
            }
            Phase::Waiting { until, seq } => {
                let (until, seq) = (*until, *seq);
                entry.reasons.merge(reasons);
                entry.priority = entry.priority.max(priority);
                if ready_at < until {
                    self.waiting.remove(&(until, seq));
                    if ready_at <= now {
                        self.observer.added();
                        self.make_ready(slot, now);
                    } else {
                        self.make_waiting(slot, ready_at);
                    }
                }
                AddOutcome::Merged
            }
            Phase::Held(lease) => {
                let add = Pending { priority, reasons, ready_at, enqueued_at: ready_at.max(now) };
                mark_dirty(&mut self.held_leases[*lease].pending, add)
            }
            Phase::Settling { pending, .. } => {
                let add = Pending { priority, reasons, ready_at, enqueued_at: ready_at.max(now) };
                mark_dirty(pending, add)
            }
        }
    }

    fn make_ready(&mut self, slot: Slot, now: Instant) {
        let place = ReadyPlace { priority: self.entries[slot].priority, seq: self.next_seq() };
        self.ready.push(place, slot, now);
        self.entries[slot].phase = Phase::Ready { place, since: now };
        self.wakeups = self.wakeups.saturating_add(1);
    }

    fn make_waiting(&mut self, slot: Slot, until: Instant) {
        let seq = self.next_seq();
        self.waiting.insert((until, seq), slot);
        self.entries[slot].phase = Phase::Waiting { until, seq };
        self.note_deadline(until);
    }

    /// The slots of the held keys, earliest deadline first.
    fn held_slots(&self) -> Vec<Slot> {
        self.leases.current_slots(|lease| lease_is_current(&self.entries, &self.held_leases, lease))
    }

    /// Tells the deadline heap that a lease it recorded is no longer current.
    fn lease_ended(&mut self) {
        let (entries, held_leases) = (&self.entries, &self.held_leases);
        self.leases.ended(|lease| lease_is_current(entries, held_leases, lease));
    }

    fn next_seq(&mut self) -> u64 {
        self.next_seq = self.next_seq.wrapping_add(1);
        self.next_seq
    }

    fn note_deadline(&mut self, at: Instant) {
        if self.timer_target.is_none_or(|target| at < target) {
            self.timer_stale = true;
        }
    }

    /// Counts one failure of the key and returns the delay before its retry,
    /// charged to every limiter of the queue (the worker asked for a retry).
    fn count_failure(&mut self, slot: Slot, now: Instant) -> Duration {
        let delay = self.limiter.delay(self.entries[slot].failures, now);
        self.note_failure(slot);
        delay
    }

    /// Counts one failure of a key whose lease was lost (expired, or its
    /// worker went away) and returns its per-key delay: the queue-wide bucket
    /// is left alone, so one hung worker cannot delay every other key.
    fn count_lost_lease(&mut self, slot: Slot) -> Duration {
        let delay = self.limiter.per_key_delay(self.entries[slot].failures);
        self.note_failure(slot);
        delay
    }

    /// A key queued again on purpose after a delay (`AddAfter`, a Finish's
    /// `requeue_after`) counts as a retry, as client-go's `AddAfter` does,
    /// so `workqueue_retries_total` means what dashboards expect.
    fn count_requeue(&self, kind: ReasonKind) {
        if kind == ReasonKind::RequeueAfter {
            self.observer.retried();
        }
    }

    fn note_failure(&mut self, slot: Slot) {
        let entry = &mut self.entries[slot];
        entry.failures = entry.failures.saturating_add(1);
        self.observer.retried();
    }

    // ----- granting -----

    /// Takes the next ready key and leases it to `holder`, if any is ready and
    /// the queue is still granting.
    pub(crate) fn grant(&mut self, holder: &Holder, ttl: Option<Duration>, now: Instant) -> Option<Lease<K>> {
        if !self.gate.is_open(now) {
            return None;
        }
        let popped = loop {
            let popped = self.ready.pop(now, self.settings.max_wait)?;
            if self.may_grant(popped.slot) {
                break popped;
            }
            self.park(popped.slot, popped.place, popped.ready_since);
        };
        let slot = popped.slot;
        let token = self.tokens.next();
        let ttl = self.lease_ttl(ttl);
        let deadline = self.lease_deadline(ttl, now);
        let deadline_record = self.next_seq();
        self.leases.insert(LeaseDeadline { deadline, token, record: deadline_record, slot });
        self.note_deadline(deadline);
        let entry = &mut self.entries[slot];
        let enqueued_at = entry.enqueued_at.unwrap_or(popped.ready_since);
        self.observer.granted(now.saturating_duration_since(enqueued_at));
        entry.phase = Phase::Held(self.held_leases.insert(HeldLease {
            token,
            holder: holder.clone(),
            deadline,
            deadline_record,
            ttl,
            granted_at: now,
            pending: None,
            unsettled: false,
            writing: 0,
            asked_back: false,
        }));
        Some(Lease {
            key: entry.key.clone(),
            token,
            deadline,
            priority: entry.priority,
            failures: entry.failures,
            last_error: entry.last_error.clone(),
            // The reasons travel with the lease; re-adds while held collect in `pending`.
            reasons: std::mem::take(&mut entry.reasons),
            enqueued_at,
            granted_at: now,
        })
    }

    /// When a lease granted or extended now for `ttl` ends: never past `grant_until`.
    fn lease_deadline(&self, ttl: Duration, now: Instant) -> Instant {
        let deadline = time::after(now, ttl);
        self.gate.bound(deadline)
    }

    /// The time to live of a lease asked for `asked` (`None`: the queue's default).
    fn lease_ttl(&self, asked: Option<Duration>) -> Duration {
        asked.filter(|ttl| !ttl.is_zero()).unwrap_or(self.settings.lease_ttl).min(self.settings.max_lease_ttl)
    }

    // ----- time -----

    /// Makes due waiting keys ready and ends expired leases.
    pub(crate) fn advance(&mut self, now: Instant) {
        while let Some((&(until, seq), &slot)) = self.waiting.first_key_value() {
            if until > now {
                break;
            }
            self.waiting.remove(&(until, seq));
            self.observer.added();
            self.make_ready(slot, now);
        }
        while let Some(lease) = self.leases.first() {
            if lease.deadline > now {
                break;
            }
            if self.held_lease_mut(lease.slot).writing > 0 && self.gate.in_term(now) {
                self.keep_while_writing(lease, now);
                continue;
            }
            self.end_lease(lease.slot, LeaseEnd::Lost(ReasonKind::LeaseExpired), now);
        }
        while let Some((&(until, _), &slot)) = self.settling.by_deadline.first_key_value() {
            if until > now {
                break;
            }
            self.observer.settle_timed_out();
            self.end_settling(slot, now);
        }
    }

    /// The next instant at which `advance` has something to do.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let waiting = self.waiting.first_key_value().map(|(&(until, _), _)| until);
        let lease = self.leases.first().map(|lease| lease.deadline);
        let settling = self.settling.by_deadline.first_key_value().map(|(&(until, _), _)| until);
        [waiting, lease, settling].into_iter().flatten().min()
    }

    /// Records what the timer now sleeps towards.
    pub(crate) fn set_timer_target(&mut self, target: Option<Instant>) {
        self.timer_target = target;
        self.timer_stale = false;
    }

    /// Whether a deadline earlier than the timer's target appeared since it last looked.
    pub(crate) fn take_timer_stale(&mut self) -> bool {
        std::mem::take(&mut self.timer_stale)
    }

    /// The leases that ended without their holder, or were asked back, since
    /// the last call.
    pub(crate) fn take_lost(&mut self) -> Vec<(Holder, LostLease<K>)> {
        std::mem::take(&mut self.lost)
    }

    /// Whether the last lease asked back ended since the last call.
    pub(crate) fn take_asked_back_ended(&mut self) -> bool {
        std::mem::take(&mut self.shards.asked_back_ended)
    }

    /// How many held leases were asked back and have not ended.
    pub(crate) fn asked_back(&self) -> usize {
        self.shards.asked_back
    }

    /// The latest deadline of the leases this queue handed back itself.
    pub(crate) fn handed_back_until(&self) -> Option<Instant> {
        self.handed_back.until
    }

    /// How many leases drains have handed back so far.
    pub(crate) fn handed_back(&self) -> usize {
        self.handed_back.count
    }

    /// How many keys became ready since the last call, to wake that many waiters.
    pub(crate) fn take_wakeups(&mut self) -> usize {
        std::mem::take(&mut self.wakeups)
    }

    // ----- shutdown -----

    pub(crate) fn shut_down(&mut self, cancel_held: bool) {
        self.gate.shut_down(cancel_held);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.gate.is_shutting_down()
    }

    /// Puts a named hold on granting, or lifts it; lifting the last hold
    /// wakes a waiter per ready key.
    pub(crate) fn set_hold(&mut self, hold: &'static str, held: bool) {
        if self.gate.set_hold(hold, held) {
            self.wakeups = self.wakeups.saturating_add(self.ready.len());
        }
    }

    /// Sets the instant from which nothing is granted and past which no
    /// lease lasts; moving it later wakes a waiter per ready key.
    pub(crate) fn set_grant_until(&mut self, until: Instant, now: Instant) {
        if self.gate.set_grant_until(until, now) {
            self.wakeups = self.wakeups.saturating_add(self.ready.len());
        }
    }

    /// Moves the bound to `now` unless it is earlier already: nothing is
    /// granted from now on, and nothing granted so far is lengthened.
    pub(crate) fn cut_grant_until(&mut self, now: Instant) {
        self.gate.cut_grant_until(now);
    }

    pub(crate) fn holds(&self) -> Vec<&'static str> {
        self.gate.holds()
    }
}

/// Merges an add into what a held or settling key has pending. It counts as
/// an add when the key goes back to the queue with it, once.
fn mark_dirty(pending: &mut Option<Box<Pending>>, add: Pending) -> AddOutcome {
    Pending::merge_into(pending, add);
    AddOutcome::MarkedDirty
}

/// Whether a recorded lease deadline is still that of a held key.
fn lease_is_current<K>(entries: &Slab<Entry<K>>, held_leases: &Slab<HeldLease>, lease: &LeaseDeadline) -> bool {
    match entries.get(lease.slot).map(|entry| &entry.phase) {
        Some(&Phase::Held(held)) => {
            let held = &held_leases[held];
            held.token == lease.token && held.deadline_record == lease.record
        }
        _ => false,
    }
}

/// How many keys there are, and what they count against `max_memory`.
fn room_for<'a, K: QueueKey + 'a>(keys: impl IntoIterator<Item = &'a K>) -> (usize, usize) {
    keys.into_iter().fold((0, 0), |(count, bytes): (usize, usize), key| {
        (count.saturating_add(1), bytes.saturating_add(key_cost(key.text_bytes())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tracked key costs one entry, held or not: a lease's fields
    /// inline would take it back to 184 bytes.
    #[test]
    fn an_entry_should_not_carry_a_lease_inline() {
        assert_eq!(std::mem::size_of::<Phase>(), 40);
        assert!(std::mem::size_of::<Entry<Arc<str>>>() <= 144, "{} bytes", std::mem::size_of::<Entry<Arc<str>>>());
    }
}
