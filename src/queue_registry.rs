//! The sidecar's named queues, built once from the config and looked up by name.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use tracing::warn;

use crate::queue::{DrainReport, NoObserver, QueueObserver, QueueSettings, SettingsError, WorkQueue};
use crate::replicas::leader::{Leadership, NOT_LEADER};
use crate::shard::ShardView;

/// Keys on the wire are strings (`namespace/name`); the queue keeps them as
/// `Arc<str>` so that storing a key twice or handing it out costs a
/// reference count, not an allocation under the queue's lock.
pub type Queue = WorkQueue<Arc<str>>;

/// Every queue of this sidecar, by name.
pub struct QueueRegistry {
    queues: HashMap<String, Queue>,
    /// Names in config order, for listings and orderly shutdown.
    names: Vec<String>,
    /// Who owns which shard slot, once this replica is in a shard group.
    shard_view: OnceLock<ShardView>,
}

/// A queue that could not be created: one of its settings is unusable.
#[derive(Debug, thiserror::Error)]
#[error("queue {queue}: {source}")]
pub struct QueueCreateError {
    pub queue: String,
    #[source]
    pub source: SettingsError,
}

impl QueueRegistry {
    /// Creates each queue (and its timer task); needs a tokio runtime.
    pub fn new(queues: impl IntoIterator<Item = (String, QueueSettings)>) -> Result<Self, QueueCreateError> {
        Self::observed(queues, |_| Arc::new(NoObserver))
    }

    /// Like `new`, giving each queue the observer `observer_for(name)` returns (metrics).
    pub fn observed(
        queues: impl IntoIterator<Item = (String, QueueSettings)>,
        observer_for: impl Fn(&str) -> Arc<dyn QueueObserver>,
    ) -> Result<Self, QueueCreateError> {
        let mut registry = QueueRegistry { queues: HashMap::new(), names: Vec::new(), shard_view: OnceLock::new() };
        for (name, settings) in queues {
            let queue = WorkQueue::with_observer(name.as_str(), settings, observer_for(&name))
                .map_err(|source| QueueCreateError { queue: name.clone(), source })?;
            registry.names.push(name.clone());
            registry.queues.insert(name, queue);
        }
        Ok(registry)
    }

    pub fn get(&self, name: &str) -> Option<&Queue> {
        self.queues.get(name)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Drains every queue at once, each within `grace`; reports per queue.
    pub async fn drain_all(&self, grace: Duration) -> Vec<(String, DrainReport)> {
        let drains = self.names.iter().map(|name| async move {
            let report = self.queues[name].shut_down_with_drain(grace).await;
            (name.clone(), report)
        });
        futures_util::future::join_all(drains).await
    }

    /// Holds every queue that is not sharded until leadership is won: a
    /// replica that runs an election hands out nothing before it leads.
    /// Sharded queues follow their shard slots instead.
    pub fn follow_election(&self) {
        for queue in self.queues.values().filter(|queue| !queue.shards().is_sharded()) {
            queue.term().set_hold(NOT_LEADER, true);
        }
    }

    /// Tells `KeyState` who owns which slot (set once, with the membership).
    pub fn follow_shard_view(&self, view: ShardView) {
        let _ = self.shard_view.set(view);
    }

    /// Who owns which shard slot, when this replica is in a shard group.
    pub fn shard_view(&self) -> Option<&ShardView> {
        self.shard_view.get()
    }

    /// The latest deadline of the leases any queue handed back itself: until
    /// then a worker that was not listening may still work on its key, so no
    /// other replica may be let grant it (`Holders::handed_back_until`).
    pub fn handed_back_until(&self) -> Option<Instant> {
        self.queues.values().filter_map(|queue| queue.holders().handed_back_until()).max()
    }

    /// The queues whose keys replicas share by shard slot.
    pub fn sharded(&self) -> Vec<Queue> {
        self.names.iter().map(|name| self.queues[name].clone()).filter(|queue| queue.shards().is_sharded()).collect()
    }

    /// Applies a change of leadership to every queue: a leader grants leases
    /// that end with its term; a follower grants none and revokes the ones
    /// it held at once (their keys stay queued here).
    pub fn apply(&self, leadership: Leadership) {
        let term_ends = match leadership {
            Leadership::Leader { term_ends } => Some(term_ends),
            Leadership::Follower => None,
        };
        for name in &self.names {
            let queue = &self.queues[name];
            if queue.shards().is_sharded() {
                continue;
            }
            // One step of the queue each: were the bound and the hold set
            // apart, a worker asking in between would be granted a lease of
            // the full time to live, past the term.
            match term_ends {
                Some(until) => queue.term().open(NOT_LEADER, until),
                None => {
                    let revoked = queue.term().close(NOT_LEADER);
                    if revoked > 0 {
                        warn!(%name, revoked, "not the leader: held leases revoked, their keys stay queued here");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use tokio::time::Instant;

    use super::*;
    use crate::queue::{Reason, ReasonKind};

    /// Every moment of a change of leadership must leave the queue capped:
    /// a worker that asks between two steps of `apply` must never get a lease
    /// that outlives the newest term. One worker takes and hands back keys
    /// as fast as it can while leadership flips thousands of times.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_lease_should_outlive_the_term_across_changes_of_leadership() {
        const FLIPS: usize = 20_000;
        const GRANTS: usize = 1_000;
        // Only a safety net: on a loaded machine the worker may be starved
        // for a while, so the flipper waits for grants rather than a clock.
        const GIVE_UP_AFTER: Duration = Duration::from_secs(120);
        let registry = Arc::new(QueueRegistry::new([("default".to_string(), QueueSettings::default())]).unwrap());
        registry.follow_election();
        let queue = registry.get("default").unwrap().clone();
        for i in 0..8 {
            queue.add(Arc::from(format!("key-{i}")), 0, Reason::of(ReasonKind::Manual)).unwrap();
        }
        let newest_term = Arc::new(Mutex::new(Instant::now()));
        let flipping = Arc::new(AtomicBool::new(true));
        let granted = Arc::new(AtomicUsize::new(0));
        let worker = tokio::spawn({
            let (queue, newest_term, flipping, granted) =
                (queue.clone(), newest_term.clone(), flipping.clone(), granted.clone());
            async move {
                let holder: crate::queue::Holder = Arc::from("worker");
                let mut outlived = Vec::new();
                while flipping.load(Ordering::Relaxed) {
                    let Ok(Some(leases)) = queue.try_get_many(&holder, 8, None) else {
                        tokio::task::yield_now().await;
                        continue;
                    };
                    let term = *newest_term.lock().unwrap();
                    for lease in leases {
                        granted.fetch_add(1, Ordering::Relaxed);
                        if lease.deadline > term {
                            outlived.push(lease.deadline - term);
                        }
                        // Done may find the lease revoked already; the key goes round again either way.
                        let _ = queue.done(&lease.key, lease.token);
                        queue.add(lease.key, 0, Reason::of(ReasonKind::Manual)).unwrap();
                    }
                }
                outlived
            }
        });
        let flipper = tokio::task::spawn_blocking({
            let (registry, granted) = (registry.clone(), granted.clone());
            move || {
                let started = std::time::Instant::now();
                let mut flips = 0;
                while (flips < FLIPS || granted.load(Ordering::Relaxed) < GRANTS) && started.elapsed() < GIVE_UP_AFTER {
                    let term_ends = Instant::now() + Duration::from_millis(50);
                    *newest_term.lock().unwrap() = term_ends;
                    registry.apply(Leadership::Leader { term_ends });
                    // Now and then a term long enough for a starved worker to be granted keys in it.
                    if flips % 64 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    registry.apply(Leadership::Follower);
                    flips += 1;
                }
                flipping.store(false, Ordering::Relaxed);
            }
        });
        flipper.await.unwrap();
        let outlived = worker.await.unwrap();
        let granted = granted.load(Ordering::Relaxed);
        assert!(
            granted >= GRANTS,
            "the worker was granted only {granted} keys in {GIVE_UP_AFTER:?}: the test proves little"
        );
        assert!(
            outlived.is_empty(),
            "{} leases outlived the term, the first by {:?}",
            outlived.len(),
            outlived.first()
        );
    }
}
