//! Declared finalizers at a lease's two ends: added to a live primary before its lease goes out, and removed when the worker finishes a deleting primary's lease with success.
//!
//! Both writes are made under the lease (fenced by its token, noted by the
//! stale-read guard, carried to the API server's answer when the session
//! stops waiting), so the key's next lease waits until the cache has seen
//! them. A finalizer that cannot be added sends the lease back as a
//! retry instead of to the worker: nothing is reconciled unguarded. One
//! that cannot be removed turns the success into a retry, so the worker
//! cleans up again (cleanup must be idempotent, as every reconcile).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use tracing::warn;

use super::carried;
use super::error::WriteFailure;
use super::freshness::{Freshness, LeaseRef, Written};
use crate::informer::{InformerRegistry, SharedInformer};
use crate::objects::{FinalizerChange, KindRef, ObjectRef, ObjectWriter, WriteError};
use crate::queue::{FinishOutcome, Lease, LeaseToken};
use crate::queue_registry::Queue;

/// Leases marked deleting that are remembered; past it, those no longer
/// current are forgotten (they expired or were handed back unfinished).
const MARKED_LEASES_CHECKED_AT: usize = 10_000;

/// A lease sent marked deleting: its queue and token (the value is its key).
type MarkedLease = (Arc<str>, LeaseToken);

/// Every queue's declared finalizer, with what writing it needs.
pub struct DeclaredFinalizers {
    writer: Arc<ObjectWriter>,
    freshness: Arc<Freshness>,
    by_queue: HashMap<String, QueueFinalizer>,
    /// Leases sent marked `deleting`, by queue and token: only their
    /// successful Finish removes the finalizer. A lease sent for a live
    /// object whose deletion reached the cache before its Finish does not:
    /// its worker never saw the deletion, so never cleaned up.
    marked: Mutex<HashMap<MarkedLease, Arc<str>>>,
}

struct QueueFinalizer {
    name: String,
    primary: Arc<SharedInformer>,
    kind: KindRef,
}

impl DeclaredFinalizers {
    /// `declared` names each queue's finalizer; queues without a primary
    /// informer have none (the config refuses that).
    pub fn new<'a>(
        declared: impl IntoIterator<Item = (&'a str, &'a str)>,
        informers: &InformerRegistry,
        writer: Arc<ObjectWriter>,
        freshness: Arc<Freshness>,
    ) -> Self {
        let by_queue = declared
            .into_iter()
            .filter_map(|(queue, name)| {
                let primary = informers.primary_of(queue)?.clone();
                let resource = primary.resource();
                let kind = KindRef {
                    api_version: resource.api_version.clone(),
                    group: resource.group.clone(),
                    version: resource.version.clone(),
                    kind: resource.kind.clone(),
                };
                Some((queue.to_owned(), QueueFinalizer { name: name.to_owned(), primary, kind }))
            })
            .collect();
        DeclaredFinalizers { writer, freshness, by_queue, marked: Mutex::default() }
    }

    /// The lease was sent marked `deleting`: remembered for its Finish.
    pub fn sent_deleting(&self, queue: &Queue, key: &Arc<str>, token: LeaseToken) {
        if !self.by_queue.contains_key(&**queue.name()) {
            return;
        }
        let mut marked = self.marked.lock();
        if marked.len() >= MARKED_LEASES_CHECKED_AT {
            marked.retain(|(name, token), key| name != queue.name() || queue.is_current(&**key, *token));
        }
        marked.insert((queue.name().clone(), token), key.clone());
    }

    /// Whether `key`'s lease must wait for its finalizer to be added: the
    /// queue declares one and the cached object is live and lacks it.
    pub fn must_add(&self, queue: &Queue, key: &str) -> bool {
        self.by_queue.get(&**queue.name()).is_some_and(|f| {
            f.primary.get(key).is_some_and(|o| o.meta.deletion_timestamp().is_none() && !o.meta.has_finalizer(&f.name))
        })
    }

    /// Adds the finalizer under the fresh lease. `false` when it could not:
    /// the lease was then finished as a retry and must not be sent.
    pub async fn add(&self, queue: &Queue, lease: &Lease<Arc<str>>) -> bool {
        let Some(declared) = self.by_queue.get(&**queue.name()) else { return true };
        let target = declared.target(&lease.key);
        let result = self.write(queue, &lease.key, lease.token, &target, true, &declared.name).await;
        match result {
            Ok(()) => true,
            Err(err) => {
                warn!(queue = %queue.name(), key = %lease.key, finalizer = %declared.name, %err, "could not add the finalizer: retrying the key");
                let retry = FinishOutcome::Retry { error: format!("adding finalizer {}: {err}", declared.name) };
                let _ = queue.finish(&*lease.key, lease.token, retry);
                false
            }
        }
    }

    /// Whether a successful Finish of lease `token` of `key` must first
    /// remove the queue's finalizer: the lease was sent marked deleting and
    /// the cached object still has the finalizer.
    pub fn must_remove(&self, queue: &Queue, key: &str, token: LeaseToken) -> bool {
        let Some(declared) = self.by_queue.get(&**queue.name()) else { return false };
        self.marked.lock().remove(&(queue.name().clone(), token)).is_some()
            && declared.primary.get(key).is_some_and(|o| o.meta.has_finalizer(&declared.name))
    }

    /// Removes the finalizer under the lease, and says what the Finish then
    /// is: the worker's success, or a retry when the removal failed. A lease
    /// no longer current is refused (FAILED_PRECONDITION) and nothing is written.
    pub async fn remove(
        &self,
        queue: &Queue,
        key: &Arc<str>,
        token: LeaseToken,
    ) -> Result<FinishOutcome, WriteFailure> {
        let Some(declared) = self.by_queue.get(&**queue.name()) else { return Ok(FinishOutcome::Success) };
        let target = declared.target(key);
        match self.write(queue, key, token, &target, false, &declared.name).await {
            Ok(()) => Ok(FinishOutcome::Success),
            Err(Fenced::Refused(err)) => Err(err),
            Err(Fenced::Write(err)) => {
                warn!(queue = %queue.name(), %key, finalizer = %declared.name, %err, "could not remove the finalizer: retrying the key");
                Ok(FinishOutcome::Retry { error: format!("removing finalizer {}: {err}", declared.name) })
            }
        }
    }

    async fn write(
        &self,
        queue: &Queue,
        key: &Arc<str>,
        token: LeaseToken,
        target: &ObjectRef,
        adding: bool,
        finalizer: &str,
    ) -> Result<(), Fenced> {
        let lease = LeaseRef { queue: queue.name().clone(), key: key.clone(), token };
        let ticket = self.freshness.begin(Some(lease)).map_err(|err| Fenced::Refused(err.into()))?;
        let (writer, target, finalizer) = (self.writer.clone(), target.clone(), finalizer.to_owned());
        let written = carried(async move {
            let change = match adding {
                true => writer.add_finalizer(&target, &finalizer).await,
                false => writer.remove_finalizer(&target, &finalizer).await,
            };
            let fenced = match change.map_err(Fenced::Write)? {
                FinalizerChange::Changed(object) => ticket.written(Written::object(&target.kind, &object)),
                FinalizerChange::Gone => ticket.written(Written::gone(&target, None)),
                FinalizerChange::Unchanged => Ok(()),
            };
            fenced.map_err(|err| Fenced::Refused(err.into()))
        });
        written.await.map_err(Fenced::Refused)?
    }
}

/// Why a finalizer write under a lease did not happen.
#[derive(Debug, thiserror::Error)]
enum Fenced {
    /// The lease is not current: nothing was written.
    #[error(transparent)]
    Refused(WriteFailure),
    #[error(transparent)]
    Write(WriteError),
}

impl From<Fenced> for WriteFailure {
    fn from(err: Fenced) -> Self {
        match err {
            Fenced::Refused(err) => err,
            Fenced::Write(err) => WriteFailure::Write(err),
        }
    }
}

impl QueueFinalizer {
    /// The primary object of `key` (`namespace/name`, or `name`).
    fn target(&self, key: &str) -> ObjectRef {
        let (namespace, name) = match key.split_once('/') {
            Some((namespace, name)) if self.primary.is_namespaced() => (Some(namespace.to_owned()), name),
            _ => (None, key),
        };
        ObjectRef { kind: self.kind.clone(), namespace, name: name.to_owned() }
    }
}
