//! What the state machine tells about one key and about itself.

use std::borrow::Borrow;
use std::hash::Hash;

use tokio::time::Instant;

use super::{Phase, QueueState};
use crate::queue::introspect::{DirtyStatus, KeyPhase, KeyStatus, QueueCounts};
use crate::queue::key::QueueKey;
use crate::queue::reason::ReasonSet;

impl<K: QueueKey> QueueState<K> {
    // ----- introspection -----

    /// `Len`: keys ready to be handed out (client-go counts only these).
    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }

    pub(crate) fn held(&self) -> usize {
        self.leases.len()
    }

    /// How long held leases have run: the sum and the longest, in seconds
    /// (client-go's unfinished work and longest running processor).
    pub(crate) fn processing_ages(&self, now: Instant) -> (f64, f64) {
        self.held_slots().into_iter().fold((0.0, 0.0), |(sum, longest), slot| match self.entries[slot].phase {
            Phase::Held(held) => {
                let age = now.saturating_duration_since(self.held_leases[held].granted_at).as_secs_f64();
                (sum + age, f64::max(longest, age))
            }
            _ => (sum, longest),
        })
    }

    pub(crate) fn counts(&self) -> QueueCounts {
        let dirty = self
            .held_slots()
            .iter()
            .chain(self.settling.by_deadline.values())
            .chain(self.settling.writes.keys())
            .filter(|&&slot| match &self.entries[slot].phase {
                Phase::Held(held) => self.held_leases[*held].pending.is_some(),
                Phase::Settling { pending, .. } => pending.is_some(),
                _ => false,
            })
            .count();
        QueueCounts {
            ready_by_priority: self.ready.counts(),
            ready: self.ready.len(),
            waiting: self.waiting.len(),
            parked: self.shards.parked.len(),
            held: self.leases.len(),
            settling: self.settling.by_deadline.len().saturating_add(self.settling.writes.len()),
            dirty,
            tracked: self.entries.len(),
            key_bytes: self.key_bytes,
        }
    }

    pub(crate) fn key_status<Q>(&self, key: &Q) -> KeyStatus
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(slot) = self.slot_of(key) else {
            return KeyStatus {
                phase: KeyPhase::Absent,
                priority: 0,
                failures: 0,
                last_error: None,
                reasons: ReasonSet::new(),
                enqueued_at: None,
            };
        };
        let entry = &self.entries[slot];
        let phase = match &entry.phase {
            Phase::Idle => KeyPhase::Absent,
            // Parked keys are queued; only the owner of their slot grants them.
            Phase::Ready { since, .. } | Phase::Parked { since, .. } => KeyPhase::Queued { since: *since },
            Phase::Waiting { until, .. } => KeyPhase::Waiting { until: *until },
            &Phase::Held(held) => {
                let held = &self.held_leases[held];
                KeyPhase::Held {
                    holder: held.holder.clone(),
                    deadline: held.deadline,
                    granted_at: held.granted_at,
                    dirty: held.pending.as_deref().map(DirtyStatus::from),
                }
            }
            Phase::Settling { until, pending, .. } => {
                KeyPhase::Settling { until: *until, dirty: pending.as_deref().map(DirtyStatus::from) }
            }
        };
        KeyStatus {
            phase,
            priority: entry.priority,
            failures: entry.failures,
            last_error: entry.last_error.clone(),
            reasons: entry.reasons.clone(),
            enqueued_at: entry.enqueued_at,
        }
    }

    /// Sizes of every internal collection, to prove memory returns to zero.
    #[cfg(test)]
    pub(crate) fn internal_sizes(&self) -> [usize; 7] {
        [
            self.index.len(),
            self.entries.len(),
            self.held_leases.len(),
            self.ready.len(),
            self.waiting.len(),
            self.leases.stored(),
            self.settling.by_deadline.len().saturating_add(self.settling.writes.len()),
        ]
    }
}

impl From<&super::Pending> for DirtyStatus {
    fn from(pending: &super::Pending) -> Self {
        DirtyStatus { priority: pending.priority, reasons: pending.reasons.clone(), ready_at: pending.ready_at }
    }
}
