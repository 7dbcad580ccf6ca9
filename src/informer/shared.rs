//! `SharedInformer`: the read side of one resource's cache, shared by the Cache service, the metrics and the trigger subscribers of other informers; its one writer is the watch task's `InformerWriter`.
//!
//! As kube-runtime's `reflector::store`: the writer owns what only it uses
//! (phase, subscribers, shaping) as plain fields; this half holds what
//! readers see. Two things here have a second writer, each for a reason:
//! the staleness marker, which the client middleware that hears a watch
//! answered also clears, and the counters, atomics so that metrics read them
//! without a lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::api::ApiResource;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::info;

use super::change::{ChangeCounts, ChangeKind};
use super::error::CacheReadError;
use super::object::CachedObject;
use super::spec::InformerSpec;
use super::store::{ListQuery, Page, Store};

pub struct SharedInformer {
    name: Arc<str>,
    spec: InformerSpec,
    resource: ApiResource,
    namespaced: bool,
    store: RwLock<Store>,
    /// True once the first list is done (client-go's HasSynced); stays true across relists.
    synced: watch::Sender<bool>,
    /// The highest numeric resourceVersion seen on any object, for read-your-writes.
    seen_version: watch::Sender<u64>,
    counters: Counters,
    /// Since when the watch has failed without a success since (a list or
    /// watch event, or a watch request answered); `None` while it is current.
    failing_since: Mutex<Option<Instant>>,
}

/// What the writer counts and the metrics read.
#[derive(Default)]
pub(super) struct Counters {
    /// Objects the watch sent that could not be stored (should stay 0).
    pub dropped: AtomicU64,
    /// Lists completed: 1 after the first, one more per relist (after a 410 or an expired watch).
    pub lists_done: AtomicU64,
    /// Objects received in lists: whole (re)lists, and a sharded informer's
    /// lists of the slots it gained.
    pub listed: AtomicU64,
    /// Changes handed to the subscribers, by kind; counted once every queue has them.
    pub changes: ChangeCounts,
    /// Keys a queue refused (it was shutting down).
    pub refused: AtomicU64,
    /// Objects read as protobuf (the rest came as JSON).
    pub protobuf: AtomicU64,
}

impl SharedInformer {
    /// An empty cache; only its writer fills it.
    pub(super) fn new(spec: InformerSpec, resource: ApiResource, namespaced: bool) -> Self {
        SharedInformer {
            name: Arc::from(spec.name.as_str()),
            store: RwLock::new(Store::new(&spec.indexes)),
            spec,
            resource,
            namespaced,
            synced: watch::Sender::new(false),
            seen_version: watch::Sender::new(0),
            counters: Counters::default(),
            failing_since: Mutex::new(None),
        }
    }

    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub fn spec(&self) -> &InformerSpec {
        &self.spec
    }

    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    pub fn is_namespaced(&self) -> bool {
        self.namespaced
    }

    // ---- for the writer ----------------------------------------------------

    pub(super) fn store_mut(&self) -> RwLockWriteGuard<'_, Store> {
        self.store.write()
    }

    pub(super) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The first list is done; a no-op after that.
    pub(super) fn mark_synced(&self) {
        self.synced.send_if_modified(|synced| !std::mem::replace(synced, true));
    }

    /// An object at resourceVersion `version` was seen.
    pub(super) fn saw_version(&self, version: u64) {
        self.seen_version.send_if_modified(|seen| {
            let newer = version > *seen;
            if newer {
                *seen = version;
            }
            newer
        });
    }

    /// The watch delivered something (an event, a list's start or end) or a
    /// watch request was answered: the cache is current again.
    pub fn on_watch_progress(&self) {
        let failed_since = self.failing_since.lock().take();
        // Said once per outage: its failures each logged a warning, and
        // without this line nothing says that they stopped.
        if let Some(since) = failed_since {
            info!(informer = %self.name(), failing_for = ?since.elapsed(), "list and watch answered again");
        }
    }

    /// A list or watch request failed; the watcher retries after its backoff.
    pub fn on_watch_error(&self) {
        self.failing_since.lock().get_or_insert_with(Instant::now);
    }

    // ---- reads --------------------------------------------------------------

    /// Follows `is_synced`, for waiting on it.
    pub fn synced_watch(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Follows `seen_version`: changes with every newer version seen.
    pub fn version_watch(&self) -> watch::Receiver<u64> {
        self.seen_version.subscribe()
    }

    /// The highest resourceVersion seen so far (0 before any object).
    pub fn seen_version(&self) -> u64 {
        *self.seen_version.borrow()
    }

    pub fn len(&self) -> usize {
        self.store.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objects the watch sent that could not be stored.
    pub fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    /// Keys the queues refused so far (they were shutting down).
    pub fn keys_refused(&self) -> u64 {
        self.counters.refused.load(Ordering::Relaxed)
    }

    /// How many changes of `kind` this informer has handed to its queues
    /// (every queue's Add for them has returned). A relist counts the objects
    /// it found added, changed or gone; unchanged ones are not changes.
    pub fn changes(&self, kind: ChangeKind) -> u64 {
        self.counters.changes.get(kind)
    }

    /// How long the watch has been failing without a success since: zero
    /// while it is current. The cache may miss changes made in that time.
    pub fn stale_for(&self) -> Duration {
        self.failing_since.lock().map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// How many lists have completed: 1 after the first, one more per relist.
    pub fn lists_done(&self) -> u64 {
        self.counters.lists_done.load(Ordering::Relaxed)
    }

    /// Objects received in lists so far (before a sharded informer's filter).
    pub fn objects_listed(&self) -> u64 {
        self.counters.listed.load(Ordering::Relaxed)
    }

    /// Objects read as protobuf so far, in lists and watch events: a
    /// built-in kind's, until protobuf this sidecar could not read in full
    /// sent the informer back to JSON.
    pub fn objects_read_as_protobuf(&self) -> u64 {
        self.counters.protobuf.load(Ordering::Relaxed)
    }

    pub(super) fn count_protobuf(&self, objects: usize) {
        self.counters.protobuf.fetch_add(objects as u64, Ordering::Relaxed);
    }

    pub(super) fn count_listed(&self, objects: usize) {
        self.counters.listed.fetch_add(objects as u64, Ordering::Relaxed);
    }

    /// Waits up to `wait` for the first list to finish.
    pub async fn wait_synced(&self, wait: Duration) -> Result<(), CacheReadError> {
        let mut synced = self.synced.subscribe();
        match tokio::time::timeout(wait, synced.wait_for(|s| *s)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(CacheReadError::NotSynced { informer: self.name.to_string(), waited: wait }),
        }
    }

    /// Waits up to `wait` until an object with resourceVersion >= `min` has been seen.
    pub async fn wait_version(&self, min: u64, wait: Duration) -> Result<(), CacheReadError> {
        let mut seen = self.seen_version.subscribe();
        match tokio::time::timeout(wait, seen.wait_for(|v| *v >= min)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(CacheReadError::VersionNotReached {
                informer: self.name.to_string(),
                wanted: min,
                seen: self.seen_version(),
                waited: wait,
            }),
        }
    }

    /// The cached object `namespace/name` (or `name`), if any.
    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.store.read().get(key)
    }

    /// The last known state of a deleted object, while its tombstone lasts.
    pub fn get_deleted(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.store.read().get_deleted(key, Instant::now())
    }

    pub fn list(&self, query: &ListQuery<'_>) -> Result<Page, CacheReadError> {
        let store = self.store.read();
        if let Some((index, _)) = query.index
            && !store.has_index(index)
        {
            return Err(CacheReadError::UnknownIndex { informer: self.name.to_string(), index: index.to_owned() });
        }
        Ok(store.list(query))
    }

    /// Keys filed under `value` in `index`; `None` when there is no such index.
    pub fn index_keys(&self, index: &str, value: &str) -> Option<Vec<Arc<str>>> {
        self.store.read().index_keys(index, value)
    }

    pub fn tombstone_count(&self) -> usize {
        self.store.read().tombstone_count()
    }

    /// Every cached key, in namespace/name order.
    pub fn keys(&self) -> Vec<Arc<str>> {
        self.store.read().keys()
    }
}
