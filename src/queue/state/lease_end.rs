//! How leases end: Done, Finish, Extend, release, hand-back and expiry, the settling after writes, and the failure bookkeeping that follows.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lease_deadlines::LeaseDeadline;
use super::{HeldLease, LeaseEnd, Pending, Phase, QueueState};
use crate::queue::error::QueueError;
use crate::queue::key::QueueKey;
use crate::queue::lease::{FinishOutcome, Holder, LeaseRenewal, LeaseToken};
use crate::queue::lost_leases::{LeaseLoss, LostLease};
use crate::queue::observer::LeaseEndKind;
use crate::queue::priority::Slot;
use crate::queue::reason::{Reason, ReasonKind, ReasonSet};
use crate::queue::time;

impl<K: QueueKey> QueueState<K> {
    // ----- ending leases -----

    /// `Done`: the holder finished; a key added meanwhile is queued again.
    pub(crate) fn done<Q>(&mut self, key: &Q, token: LeaseToken, now: Instant) -> Result<(), QueueError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.held_slot(key, token).inspect_err(|_| self.observer.stale_token())?;
        self.end_lease(slot, LeaseEnd::Done, now);
        Ok(())
    }

    /// `Finish`: `Done` plus what the outcome asks for.
    pub(crate) fn finish<Q>(
        &mut self,
        key: &Q,
        token: LeaseToken,
        outcome: FinishOutcome,
        now: Instant,
    ) -> Result<(), QueueError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.held_slot(key, token).inspect_err(|_| self.observer.stale_token())?;
        let end = match outcome {
            FinishOutcome::Success => LeaseEnd::Success,
            FinishOutcome::Retry { error } => LeaseEnd::Retry(error),
            FinishOutcome::RequeueAfter(delay) => LeaseEnd::RequeueAfter(delay),
        };
        self.end_lease(slot, end, now);
        Ok(())
    }

    /// Ends a lease its holder never received (its answer had no room for
    /// it): the key is queued again at once with the lease's priority,
    /// reasons and queued time, no failure is counted and nobody is told.
    pub(crate) fn hand_back_unsent<Q>(
        &mut self,
        key: &Q,
        token: LeaseToken,
        reasons: ReasonSet,
        enqueued_at: Instant,
        now: Instant,
    ) -> Result<(), QueueError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.held_slot(key, token)?;
        self.end_lease(slot, LeaseEnd::Unsent { reasons, enqueued_at }, now);
        Ok(())
    }

    /// `Extend`: moves the lease's deadline to `now + ttl`; without a `ttl`,
    /// by the lease's own (what it was granted or last extended with).
    pub(crate) fn extend<Q>(
        &mut self,
        key: &Q,
        token: LeaseToken,
        ttl: Option<Duration>,
        now: Instant,
    ) -> Result<LeaseRenewal, QueueError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.held_slot(key, token).inspect_err(|_| self.observer.stale_token())?;
        let held = self.held_lease_mut(slot);
        if held.asked_back {
            // Its slot's new owner waits for this deadline: it stays.
            return Ok(LeaseRenewal { deadline: held.deadline, cancel: true });
        }
        let ttl = match ttl {
            Some(asked) => self.lease_ttl(Some(asked)),
            None => self.held_lease_mut(slot).ttl,
        };
        let deadline = self.lease_deadline(ttl, now).max(now);
        let record = self.next_seq();
        let held = self.held_lease_mut(slot);
        held.ttl = ttl;
        // An unchanged deadline (cut to the leader's term) has its record already.
        if held.deadline != deadline {
            held.deadline = deadline;
            held.deadline_record = record;
            self.leases.insert(LeaseDeadline { deadline, token, record, slot });
            // The record of the old deadline is stale now.
            self.lease_ended();
            self.note_deadline(deadline);
        }
        // A deadline that cannot move forward (the leader's term ended) means stop.
        Ok(LeaseRenewal { deadline, cancel: self.gate.cancel_held() || deadline <= now })
    }

    /// The holder of the lease sends a write through the sidecar: when the
    /// lease ends, the key settles (is not handed out) until `settled` is
    /// called or the queue's `settle_timeout` passes, and until the write is
    /// answered (`end_write`) the lease does not expire. Refused, as `Done`
    /// is, when `token` is not the key's current lease: a write under a lost
    /// lease must not be made.
    pub(crate) fn begin_write<Q>(&mut self, key: &Q, token: LeaseToken) -> Result<(), QueueError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.held_slot(key, token).inspect_err(|_| self.observer.stale_token())?;
        let held = self.held_lease_mut(slot);
        held.unsettled = true;
        held.writing = held.writing.saturating_add(1);
        Ok(())
    }

    /// A write begun under `key`'s lease `token` was answered (or given up):
    /// a lease past its deadline with no other write out ends now, as
    /// expired; a key settling after that lease starts its settle bound once
    /// its last write is answered. Whether the lease was held from the
    /// write's start until now: `false` when it ended meanwhile (the term
    /// ended, the queue handed it back, its holder ended it).
    pub(crate) fn end_write<Q>(&mut self, key: &Q, token: LeaseToken, now: Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(slot) = self.slot_of(key) else { return false };
        match self.entries[slot].phase {
            Phase::Held(held) if self.held_leases[held].token == token => {
                let held = &mut self.held_leases[held];
                held.writing = held.writing.saturating_sub(1);
                if held.writing == 0 && held.deadline <= now {
                    self.end_lease(slot, LeaseEnd::Lost(ReasonKind::LeaseExpired), now);
                }
                true
            }
            Phase::Settling { until: None, .. } => {
                let Some(writes) = self.settling.writes.get_mut(&slot).filter(|(of, _)| *of == token) else {
                    return false;
                };
                writes.1 = writes.1.saturating_sub(1);
                if writes.1 == 0 {
                    self.settling.writes.remove(&slot);
                    self.start_settle_bound(slot, now);
                }
                false
            }
            _ => false,
        }
    }

    /// A lease past its deadline with writes still unanswered stays held: its
    /// deadline record moves to the end of the term (or out of reach without
    /// one), where it is looked at again; the deadline the holder was told
    /// stays, so the last answer ends it.
    pub(super) fn keep_while_writing(&mut self, lease: LeaseDeadline, now: Instant) {
        let until = self.gate.grant_until_or_never(now);
        let record = self.next_seq();
        self.held_lease_mut(lease.slot).deadline_record = record;
        self.leases.insert(LeaseDeadline { deadline: until, record, ..lease });
        self.lease_ended();
        self.note_deadline(until);
    }

    /// The caches have seen every write made under the key's leases: a held
    /// key will not settle when its lease ends, a settling key is queued now
    /// (if it was added meanwhile or its outcome asked for it). Whether a
    /// settling key was let go.
    pub(crate) fn settled<Q>(&mut self, key: &Q, now: Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(slot) = self.slot_of(key) else { return false };
        match self.entries[slot].phase {
            Phase::Held(held) => {
                self.held_leases[held].unsettled = false;
                false
            }
            // A write still unanswered cannot have been seen: its answer
            // starts the bound, and the caches are asked again after it.
            Phase::Settling { until: None, .. } => false,
            Phase::Settling { .. } => {
                self.end_settling(slot, now);
                true
            }
            _ => false,
        }
    }

    /// A settling key goes on: queued as its lease's outcome and the adds
    /// since asked, or idle.
    pub(super) fn end_settling(&mut self, slot: Slot, now: Instant) {
        let Phase::Settling { until, seq, pending } = std::mem::replace(&mut self.entries[slot].phase, Phase::Idle)
        else {
            unreachable!("only settling keys are in the settling set")
        };
        match until {
            Some(until) => _ = self.settling.by_deadline.remove(&(until, seq)),
            None => _ = self.settling.writes.remove(&slot),
        }
        if let Some(pending) = pending {
            self.enqueue_slot(slot, pending.priority, pending.reasons, pending.ready_at, now);
            self.entries[slot].enqueued_at = Some(pending.enqueued_at);
        }
        self.remove_if_idle(slot);
    }

    /// A settling key is let go at the latest `settle_timeout` from now.
    fn start_settle_bound(&mut self, slot: Slot, now: Instant) {
        let until = time::after(now, self.settings.settle_timeout);
        let seq = self.next_seq();
        self.settling.by_deadline.insert((until, seq), slot);
        self.note_deadline(until);
        if let Phase::Settling { until: bound, seq: of, .. } = &mut self.entries[slot].phase {
            (*bound, *of) = (Some(until), seq);
        }
    }

    /// Returns every lease of `holder` to the queue, as failures; how many.
    pub(crate) fn release_holder(&mut self, holder: &Holder, now: Instant) -> usize {
        let mut slots = self.held_slots();
        slots.retain(
            |&slot| matches!(self.entries[slot].phase, Phase::Held(held) if self.held_leases[held].holder == *holder),
        );
        for &slot in &slots {
            self.end_lease(slot, LeaseEnd::Lost(ReasonKind::LeaseReleased), now);
        }
        slots.len()
    }

    /// Returns every lease of `holder` to the queue at once without counting
    /// a failure: its worker stopped cleanly, and what it still holds it
    /// never started or gave up at its stop. How many.
    pub(crate) fn return_holder(&mut self, holder: &Holder, now: Instant) -> usize {
        let mut slots = self.held_slots();
        slots.retain(
            |&slot| matches!(self.entries[slot].phase, Phase::Held(held) if self.held_leases[held].holder == *holder),
        );
        for &slot in &slots {
            self.end_lease(slot, LeaseEnd::Stopped, now);
        }
        slots.len()
    }

    /// Returns every held key to the queue without counting a failure (the
    /// end of a drain); how many.
    pub(crate) fn return_all_held(&mut self, now: Instant) -> usize {
        let slots = self.held_slots();
        for &slot in &slots {
            self.end_lease(slot, LeaseEnd::Returned, now);
        }
        slots.len()
    }

    /// Whether `token` is still the current lease of `key`.
    pub(crate) fn is_current<Q>(&self, key: &Q, token: LeaseToken) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.held_slot(key, token).is_ok()
    }

    /// Whether holders were asked to stop (a shutdown without drain).
    pub(crate) fn cancel_requested(&self) -> bool {
        self.gate.cancel_held()
    }

    fn held_slot<Q>(&self, key: &Q, token: LeaseToken) -> Result<Slot, QueueError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let current = self.slot_of(key).filter(
            |&slot| matches!(self.entries[slot].phase, Phase::Held(held) if self.held_leases[held].token == token),
        );
        current.ok_or(QueueError::StaleToken { token })
    }

    /// The one place a lease ends: bookkeeping of failures, then the key is
    /// queued again (if the outcome or a dirty add asks) or forgotten.
    pub(super) fn end_lease(&mut self, slot: Slot, end: LeaseEnd, now: Instant) {
        let held = self.take_held(slot);
        let how = end.kind();
        self.tell_lease_ended(slot, &held, how, now);
        let priority = self.entries[slot].priority;
        let unsent_since = match &end {
            LeaseEnd::Unsent { enqueued_at, .. } => Some(*enqueued_at),
            _ => None,
        };
        // A key asked back stays queued here (parked) whatever the outcome,
        // as when its lease was handed back: this replica may own its slot
        // again before the new owner finished it.
        let requeue = match self.apply_outcome(slot, end, now) {
            None if held.asked_back => Some((ReasonSet::from(Reason::of(ReasonKind::ShutdownReturned)), now)),
            requeue => requeue,
        };
        if held.unsettled || held.writing > 0 {
            self.settle(slot, held, priority, requeue, now);
        } else {
            self.requeue_after_lease(slot, held.pending, priority, requeue, unsent_since, now);
        }
    }

    /// Takes the lease of the key in `slot` off the held leases (the key is
    /// idle until the outcome says otherwise), and counts an asked-back one
    /// as ended.
    fn take_held(&mut self, slot: Slot) -> HeldLease {
        let entry = &mut self.entries[slot];
        let Phase::Held(held) = std::mem::replace(&mut entry.phase, Phase::Idle) else {
            unreachable!("only held keys have leases")
        };
        let held = self.held_leases.remove(held);
        self.lease_ended();
        if held.asked_back {
            self.shards.asked_back = self.shards.asked_back.saturating_sub(1);
            self.shards.asked_back_ended |= self.shards.asked_back == 0;
        }
        held
    }

    /// Tells whoever must hear that a lease ended: the observer, the drain's
    /// count of leases handed back, and its holder when the holder did not
    /// end it and may still be working.
    fn tell_lease_ended(&mut self, slot: Slot, held: &HeldLease, how: LeaseEndKind, now: Instant) {
        self.observer.lease_ended(now.saturating_duration_since(held.granted_at), how);
        if how == LeaseEndKind::Returned {
            // A lease with a write out is worked under until the write is
            // answered: at most until the term ends, when there is one.
            let until = if held.writing > 0 { self.gate.grant_until().unwrap_or(held.deadline) } else { held.deadline };
            self.handed_back.until = self.handed_back.until.max(Some(until));
            self.handed_back.count = self.handed_back.count.saturating_add(1);
        }
        if matches!(how, LeaseEndKind::Expired | LeaseEndKind::Returned) {
            let lost = LostLease { key: self.entries[slot].key.clone(), token: held.token, how: LeaseLoss::Ended(how) };
            self.lost.push((held.holder.clone(), lost));
        }
    }

    /// What the lease's outcome does to its key's failures and error, and
    /// when (and why) the key is to be queued again: `None` for not at all.
    fn apply_outcome(&mut self, slot: Slot, end: LeaseEnd, now: Instant) -> Option<(ReasonSet, Instant)> {
        let entry = &mut self.entries[slot];
        entry.reasons = ReasonSet::new();
        entry.enqueued_at = None;
        match end {
            LeaseEnd::Done => None,
            LeaseEnd::Success => {
                entry.failures = 0;
                entry.last_error = None;
                None
            }
            LeaseEnd::RequeueAfter(delay) => {
                entry.failures = 0;
                entry.last_error = None;
                self.observer.retried();
                Some((ReasonSet::from(Reason::of(ReasonKind::RequeueAfter)), time::after(now, delay)))
            }
            LeaseEnd::Retry(error) => {
                entry.last_error = Some(Arc::from(error));
                let delay = self.count_failure(slot, now);
                Some((ReasonSet::from(Reason::of(ReasonKind::Retry)), time::after(now, delay)))
            }
            LeaseEnd::Lost(kind) => {
                entry.last_error = Some(Arc::from(match kind {
                    ReasonKind::LeaseExpired => "lease expired before the worker finished",
                    _ => "the worker holding the lease went away",
                }));
                let delay = self.count_lost_lease(slot);
                Some((ReasonSet::from(Reason::of(kind)), time::after(now, delay)))
            }
            LeaseEnd::Returned => Some((ReasonSet::from(Reason::of(ReasonKind::ShutdownReturned)), now)),
            LeaseEnd::Stopped => Some((ReasonSet::from(Reason::of(ReasonKind::LeaseReleased)), now)),
            LeaseEnd::Unsent { reasons, .. } => Some((reasons, now)),
        }
    }

    /// Writes under the ended lease are not in every cache yet (or not even
    /// answered): what would be queued now waits, merged, until they are.
    fn settle(
        &mut self,
        slot: Slot,
        held: HeldLease,
        priority: i32,
        requeue: Option<(ReasonSet, Instant)>,
        now: Instant,
    ) {
        let mut pending = held.pending;
        if let Some((reasons, ready_at)) = requeue {
            Pending::merge_into(&mut pending, Pending { priority, reasons, ready_at, enqueued_at: ready_at.max(now) });
        }
        self.entries[slot].phase = Phase::Settling { until: None, seq: 0, pending };
        if held.writing > 0 {
            self.settling.writes.insert(slot, (held.token, held.writing));
        } else {
            self.start_settle_bound(slot, now);
        }
    }

    /// Queues the key again as its lease's outcome asks, and as adds made
    /// while it was held (`pending`) ask, or forgets it when neither does.
    /// A lease never sent keeps the queued time it took (`unsent_since`).
    fn requeue_after_lease(
        &mut self,
        slot: Slot,
        pending: Option<Box<Pending>>,
        priority: i32,
        requeue: Option<(ReasonSet, Instant)>,
        unsent_since: Option<Instant>,
        now: Instant,
    ) {
        let requeued = requeue.is_some();
        if let Some((reasons, ready_at)) = requeue {
            self.enqueue_slot(slot, priority, reasons, ready_at, now);
        }
        if let Some(since) = unsent_since {
            self.entries[slot].enqueued_at = Some(since);
        }
        if let Some(pending) = pending {
            self.enqueue_slot(slot, pending.priority, pending.reasons, pending.ready_at, now);
            if !requeued {
                self.entries[slot].enqueued_at = Some(pending.enqueued_at);
            }
        }
        self.remove_if_idle(slot);
    }

    /// The lease of the key in `slot`, which the caller checked is held.
    pub(super) fn held_lease_mut(&mut self, slot: Slot) -> &mut HeldLease {
        let Phase::Held(held) = self.entries[slot].phase else { unreachable!("held_slot checked the phase") };
        &mut self.held_leases[held]
    }

    fn remove_if_idle(&mut self, slot: Slot) {
        let entry = &self.entries[slot];
        if matches!(entry.phase, Phase::Idle) && entry.failures == 0 {
            self.remove_entry(slot);
        }
    }

    // ----- failures -----

    /// `Forget`: clears the key's failure count and last error.
    pub(crate) fn forget<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(slot) = self.slot_of(key) {
            let entry = &mut self.entries[slot];
            entry.failures = 0;
            entry.last_error = None;
            self.remove_if_idle(slot);
        }
    }

    /// `NumRequeues`: failures since the key was last forgotten.
    pub(crate) fn num_requeues<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.slot_of(key).map_or(0, |slot| self.entries[slot].failures)
    }
}

impl LeaseEnd {
    /// How the lease ended, as observers and holders hear it.
    fn kind(&self) -> LeaseEndKind {
        match self {
            LeaseEnd::Lost(ReasonKind::LeaseExpired) => LeaseEndKind::Expired,
            LeaseEnd::Lost(_) => LeaseEndKind::Released,
            LeaseEnd::Returned => LeaseEndKind::Returned,
            LeaseEnd::Unsent { .. } => LeaseEndKind::Unsent,
            LeaseEnd::Stopped => LeaseEndKind::Stopped,
            LeaseEnd::Done | LeaseEnd::Success | LeaseEnd::Retry(_) | LeaseEnd::RequeueAfter(_) => {
                LeaseEndKind::Finished
            }
        }
    }
}
