//! A queue's handle on its holders as wholes: every lease of one that went away or stopped, leases never sent, and the losses each is told of.

use tokio::time::Instant;

use crate::queue::error::QueueError;
use crate::queue::key::QueueKey;
use crate::queue::lease::{Holder, Lease};
use crate::queue::lost_leases::LostLeases;

use super::WorkQueue;

/// Leases by holder; from [`WorkQueue::holders`].
pub struct Holders<'a, K> {
    queue: &'a WorkQueue<K>,
}

impl<K: QueueKey + Send + 'static> WorkQueue<K> {
    /// The queue's handle on its holders.
    pub fn holders(&self) -> Holders<'_, K> {
        Holders { queue: self }
    }
}

impl<K: QueueKey + Send + 'static> Holders<'_, K> {
    /// Tells `holder` of each of its leases that ends without its Done or
    /// Finish (expired, handed back), until the returned value is dropped.
    /// Watch before taking leases: a lease lost earlier is not told.
    pub fn watch_lost(&self, holder: &Holder) -> LostLeases<K> {
        LostLeases::new(holder.clone(), &self.queue.shared.lost_lease_watchers)
    }

    /// Returns every lease of `holder` to the queue at once (its worker went
    /// away), counted as failures so a crash-looping key backs off.
    pub fn release(&self, holder: &Holder) -> usize {
        self.queue.with_state(|state, now| state.release_holder(holder, now))
    }

    /// Returns every lease of `holder` to the queue at once without counting
    /// a failure: its worker stopped cleanly (half-closed its stream), and
    /// what it still held it never started or gave up when stopping.
    pub fn return_stopped(&self, holder: &Holder) -> usize {
        self.queue.with_state(|state, now| state.return_holder(holder, now))
    }

    /// Ends `lease`, which never reached its holder (the answer it was to go
    /// in had no room for it): its key is queued again at once as it was
    /// (priority, reasons, queued time), with no failure counted.
    pub fn hand_back_unsent(&self, lease: Lease<K>) -> Result<(), QueueError> {
        self.queue.with_state(|state, now| {
            state.hand_back_unsent(&lease.key, lease.token, lease.reasons, lease.enqueued_at, now)
        })
    }

    /// Whether holders were asked to stop working (a shutdown without drain).
    pub fn cancel_requested(&self) -> bool {
        self.queue.shared.state.lock().cancel_requested()
    }

    /// The latest deadline of the leases this queue handed back itself (the
    /// end of a drain, a term closed): their workers were told, but one that
    /// does not listen may work on until then, so another replica must not
    /// grant those keys before it. `None` if it never handed one back.
    pub fn handed_back_until(&self) -> Option<Instant> {
        self.queue.shared.state.lock().handed_back_until()
    }
}
