//! Whether a queue hands keys out now: named holds, the term's bound (no lease outlives it), and shutdown.

use smallvec::SmallVec;
use tokio::time::Instant;

use crate::queue::time;

/// The queue's gate: granting happens only while it is open.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// Why keys are not handed out right now (caches still syncing, not the
    /// leader, ...): granting happens only while this is empty.
    holds: SmallVec<[&'static str; 2]>,
    /// Nothing is granted from this instant on, and no lease outlives it:
    /// the end of the leader's current term when leader election is on.
    grant_until: Option<Instant>,
    shutting_down: bool,
    /// Set by a shutdown without drain: extends tell workers to stop.
    cancel_held: bool,
}

impl Gate {
    /// Whether a key may be granted now.
    pub(super) fn is_open(&self, now: Instant) -> bool {
        !self.shutting_down && self.holds.is_empty() && self.grant_until.is_none_or(|until| now < until)
    }

    /// `deadline`, cut to the term's bound: no lease outlives it.
    pub(super) fn bound(&self, deadline: Instant) -> Instant {
        self.grant_until.map_or(deadline, |until| deadline.min(until))
    }

    /// The term's bound, or `None` while there is none.
    pub(super) fn grant_until(&self) -> Option<Instant> {
        self.grant_until
    }

    /// The term's bound, or far in the future while there is none.
    pub(super) fn grant_until_or_never(&self, now: Instant) -> Instant {
        self.grant_until.unwrap_or_else(|| time::after(now, time::MAX_DURATION))
    }

    /// Whether the term's bound has not passed (or there is none).
    pub(super) fn in_term(&self, now: Instant) -> bool {
        self.grant_until.is_none_or(|until| now < until)
    }

    /// Puts a named hold on, or lifts it. Whether this lifted the last one.
    pub(super) fn set_hold(&mut self, hold: &'static str, held: bool) -> bool {
        let was_granting = self.holds.is_empty();
        if held {
            if !self.holds.contains(&hold) {
                self.holds.push(hold);
            }
        } else {
            self.holds.retain(|h| *h != hold);
        }
        !was_granting && self.holds.is_empty()
    }

    /// Sets the term's bound. Whether this moved a passed bound into the future.
    pub(super) fn set_grant_until(&mut self, until: Instant, now: Instant) -> bool {
        let was_open = self.in_term(now);
        self.grant_until = Some(until);
        !was_open && now < until
    }

    /// Moves the bound to `now` unless it is earlier already.
    pub(super) fn cut_grant_until(&mut self, now: Instant) {
        self.grant_until = Some(self.grant_until.map_or(now, |until| until.min(now)));
    }

    pub(super) fn holds(&self) -> Vec<&'static str> {
        self.holds.to_vec()
    }

    /// Stops granting for good; `cancel_held` also tells holders to stop.
    pub(super) fn shut_down(&mut self, cancel_held: bool) {
        self.shutting_down = true;
        self.cancel_held |= cancel_held;
    }

    pub(super) fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Whether holders were asked to stop (a shutdown without drain).
    pub(super) fn cancel_held(&self) -> bool {
        self.cancel_held
    }
}
