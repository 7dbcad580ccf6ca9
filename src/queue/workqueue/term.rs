//! A queue's term handle: named holds on granting, and the bound no lease outlasts (a leader's or a shard member's term).

use tokio::time::Instant;

use crate::queue::key::QueueKey;

use super::WorkQueue;

/// Holds and the term's bound; from [`WorkQueue::term`].
pub struct Term<'a, K> {
    queue: &'a WorkQueue<K>,
}

impl<K: QueueKey + Send + 'static> WorkQueue<K> {
    /// The queue's term handle.
    pub fn term(&self) -> Term<'_, K> {
        Term { queue: self }
    }
}

impl<K: QueueKey + Send + 'static> Term<'_, K> {
    /// Puts a named hold on granting (`held = true`) or lifts it. While any
    /// hold is on, keys are accepted, merged and timed as usual but none is
    /// handed out, and `get` waits; held leases are not affected. The sidecar
    /// holds a queue while its caches sync and while it is not the leader.
    pub fn set_hold(&self, hold: &'static str, held: bool) {
        self.queue.with_state(|state, _| state.set_hold(hold, held));
    }

    /// From `until` on, nothing is granted, and no lease (granted or
    /// extended) lasts past it. Shard terms set it at every renewal, so a
    /// replica that froze and wakes up grants nothing before it learns it
    /// lost its slots. Once set, a queue is never unbounded again.
    pub fn set_grant_until(&self, until: Instant) {
        self.queue.with_state(|state, now| state.set_grant_until(until, now));
    }

    /// Starts or renews a term, in one step under the lock: from now until
    /// `until` keys are granted, no lease outlasts it, and `hold` is lifted.
    /// The bound is in place before the hold lifts, so no waiter that wakes
    /// in between can be granted past it.
    pub fn open(&self, hold: &'static str, until: Instant) {
        self.queue.with_state(|state, now| {
            state.set_grant_until(until, now);
            state.set_hold(hold, false);
        });
    }

    /// Ends the term now, in one step under the lock: `hold` goes on, the
    /// bound moves to now (never later), and every held key is handed back
    /// without counting a failure; their tokens turn stale. How many were
    /// held. No instant between the steps lets a lease be granted or
    /// extended without the bound.
    pub fn close(&self, hold: &'static str) -> usize {
        self.queue.with_state(|state, now| {
            state.set_hold(hold, true);
            state.cut_grant_until(now);
            state.return_all_held(now)
        })
    }

    /// The holds on granting now; empty while keys are handed out.
    pub fn holds(&self) -> Vec<&'static str> {
        self.queue.shared.state.lock().holds()
    }
}
