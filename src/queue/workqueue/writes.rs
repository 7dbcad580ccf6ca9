//! A queue's handle for writes under its leases: a lease does not expire while a write is out, and its key settles until the caches have seen the writes.

use std::borrow::Borrow;
use std::hash::Hash;
use std::time::Duration;

use crate::queue::error::QueueError;
use crate::queue::key::QueueKey;
use crate::queue::lease::LeaseToken;

use super::WorkQueue;

/// Writes under this queue's leases; from [`WorkQueue::writes`].
pub struct LeaseWrites<'a, K> {
    queue: &'a WorkQueue<K>,
}

impl<K: QueueKey + Send + 'static> WorkQueue<K> {
    /// The queue's handle for writes under its leases.
    pub fn writes(&self) -> LeaseWrites<'_, K> {
        LeaseWrites { queue: self }
    }
}

impl<K: QueueKey + Send + 'static> LeaseWrites<'_, K> {
    /// The holder of `key`'s lease `token` sends a write through the
    /// sidecar: when the lease ends the key settles until [`Self::settled`]
    /// (or the queue's `settle_timeout`), and the lease does not expire
    /// before [`Self::end`]. Refused with `StaleToken` when the lease is not
    /// current, so a write under a lost lease is never made.
    pub fn begin<Q>(&self, key: &Q, token: LeaseToken) -> Result<(), QueueError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.queue.with_state(|state, _| state.begin_write(key, token))
    }

    /// The write begun under `key`'s lease `token` was answered, or given
    /// up. Whether the lease was held all along: `false` when it ended while
    /// the write was out (the term ended, the queue handed it back), and
    /// another worker may hold the key by now.
    pub fn end<Q>(&self, key: &Q, token: LeaseToken) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.queue.with_state(|state, now| state.end_write(key, token, now))
    }

    /// The caches have seen every write made under `key`'s leases: a settling
    /// key goes on at once. Whether it was settling.
    pub fn settled<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.queue.with_state(|state, now| state.settled(key, now))
    }

    /// How long a key may settle after a lease whose writes the caches have not seen.
    pub fn settle_timeout(&self) -> Duration {
        self.queue.shared.state.lock().settings().settle_timeout
    }
}
