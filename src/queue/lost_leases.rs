//! Lost leases, pushed to their holder: leases that ended without their holder ending them, or that the queue asked back.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::lease::{Holder, LeaseToken};
use super::observer::LeaseEndKind;

/// A lease its holder should stop working on: it ended without the
/// holder's Done or Finish, or the queue asked for it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostLease<K> {
    pub key: K,
    pub token: LeaseToken,
    pub how: LeaseLoss,
}

/// How a lease was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseLoss {
    /// It ended: `Expired`, or `Returned` (the end of a drain, leadership
    /// lost). Its token is stale.
    Ended(LeaseEndKind),
    /// Its key's shard slot moved to another replica. The lease stays valid
    /// until its holder ends it or its deadline passes, and no Extend moves
    /// that deadline: the new owner grants the key only once this lease can
    /// no longer be held.
    AskedBack,
}

/// Where each watching holder hears of its lost leases.
///
/// The channels are unbounded because a holder can lose at most the leases
/// it holds, each once: the holder's own window bounds them.
pub(crate) struct LostLeaseWatchers<K> {
    by_holder: Mutex<HashMap<Holder, mpsc::UnboundedSender<LostLease<K>>>>,
}

impl<K> Default for LostLeaseWatchers<K> {
    fn default() -> Self {
        LostLeaseWatchers { by_holder: Mutex::default() }
    }
}

impl<K> LostLeaseWatchers<K> {
    fn watch(&self, holder: Holder) -> mpsc::UnboundedReceiver<LostLease<K>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.by_holder.lock().insert(holder, tx);
        rx
    }

    fn unwatch(&self, holder: &Holder) {
        self.by_holder.lock().remove(holder);
    }

    #[cfg(test)]
    pub(crate) fn watching(&self) -> usize {
        self.by_holder.lock().len()
    }

    /// Tells each lease's holder, if it watches; leases of holders that do
    /// not (unary workers learn from their next call) are dropped.
    pub(crate) fn deliver(&self, lost: Vec<(Holder, LostLease<K>)>) {
        let by_holder = self.by_holder.lock();
        for (holder, lease) in lost {
            if let Some(tx) = by_holder.get(&holder) {
                let _ = tx.send(lease);
            }
        }
    }
}

/// What a holder receives its lost leases through; it stops watching when dropped.
pub struct LostLeases<K> {
    holder: Holder,
    rx: mpsc::UnboundedReceiver<LostLease<K>>,
    watchers: Weak<LostLeaseWatchers<K>>,
}

impl<K> LostLeases<K> {
    pub(crate) fn new(holder: Holder, watchers: &Arc<LostLeaseWatchers<K>>) -> Self {
        let rx = watchers.watch(holder.clone());
        LostLeases { holder, rx, watchers: Arc::downgrade(watchers) }
    }

    /// The next lease the holder lost; pending while it loses none. Cancel-safe.
    pub async fn recv(&mut self) -> LostLease<K> {
        match self.rx.recv().await {
            Some(lease) => lease,
            // The queue is gone: nothing more can be lost.
            None => std::future::pending().await,
        }
    }

    #[cfg(test)]
    pub(crate) fn try_recv(&mut self) -> Option<LostLease<K>> {
        self.rx.try_recv().ok()
    }
}

impl<K> Drop for LostLeases<K> {
    fn drop(&mut self) {
        if let Some(watchers) = self.watchers.upgrade() {
            watchers.unwatch(&self.holder);
        }
    }
}
