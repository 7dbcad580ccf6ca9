//! `SharedInformer`: one resource's cache, fed by one watch, read by the Cache service and delivered to every subscribed queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::warn;

use super::error::CacheReadError;
use super::keying::{Change, ChangeCounts, ChangeKind, Subscriber};
use super::object::{CachedObject, Shaping};
use super::spec::InformerSpec;
use super::store::{ListQuery, Page, Store};

/// Where the informer is in its list/watch cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Listing for the first time: objects are InitialList events.
    FirstList,
    /// Relisting (after a 410 or a restart): objects are compared with the store.
    Relist,
    Watching,
}

pub struct SharedInformer {
    name: Arc<str>,
    spec: InformerSpec,
    resource: ApiResource,
    namespaced: bool,
    shaping: Shaping,
    store: RwLock<Store>,
    /// Queues listening; set before the watch starts.
    subscribers: RwLock<Vec<Subscriber>>,
    phase: Mutex<Phase>,
    /// True once the first list is done (client-go's HasSynced); stays true across relists.
    synced: watch::Sender<bool>,
    /// The highest numeric resourceVersion seen on any object, for read-your-writes.
    seen_version: watch::Sender<u64>,
    /// Objects the watch sent that could not be stored (should stay 0).
    dropped: AtomicU64,
    /// Lists completed: 1 after the first, one more per relist (after a 410 or an expired watch).
    lists_done: AtomicU64,
    /// Changes handed to the subscribers, by kind; counted once every queue has them.
    changes: ChangeCounts,
    /// Keys a queue refused (it was shutting down), counted and warned about.
    refused: AtomicU64,
    /// Since when the watch has failed without a success since (a list or
    /// watch event); `None` while it is current.
    failing_since: Mutex<Option<Instant>>,
}

impl SharedInformer {
    pub fn new(spec: InformerSpec, resource: ApiResource, namespaced: bool) -> Self {
        let shaping = Shaping::new(&resource, spec.strip_managed_fields, spec.indexes.clone());
        SharedInformer {
            name: Arc::from(spec.name.as_str()),
            store: RwLock::new(Store::new(&spec.indexes)),
            spec,
            resource,
            namespaced,
            shaping,
            subscribers: RwLock::new(Vec::new()),
            phase: Mutex::new(Phase::FirstList),
            synced: watch::Sender::new(false),
            seen_version: watch::Sender::new(0),
            dropped: AtomicU64::new(0),
            lists_done: AtomicU64::new(0),
            changes: ChangeCounts::default(),
            failing_since: Mutex::new(None),
            refused: AtomicU64::new(0),
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

    pub fn subscribe(&self, subscriber: Subscriber) {
        self.subscribers.write().push(subscriber);
    }

    // ---- fed by the watch task --------------------------------------------

    /// The watch delivered something (an event, a list's start or end): the
    /// cache is current again.
    pub fn on_watch_progress(&self) {
        *self.failing_since.lock() = None;
    }

    /// A list or watch request failed; the watcher retries after its backoff.
    pub fn on_watch_error(&self) {
        self.failing_since.lock().get_or_insert_with(Instant::now);
    }

    /// A (re)list starts.
    pub fn on_init(&self) {
        let mut phase = self.phase.lock();
        if *phase != Phase::FirstList {
            *phase = Phase::Relist;
        }
        self.store.write().begin_relist();
    }

    /// One object of a (re)list.
    pub fn on_listed(&self, object: DynamicObject) {
        let Some(new) = self.shape(object) else { return };
        let old = self.store.write().apply(new.clone());
        let first = *self.phase.lock() == Phase::FirstList;
        match (&old, first) {
            (_, true) => self.deliver(Change::InitialList { new: &new }),
            (None, false) => self.deliver(Change::Added { new: &new }),
            (Some(old), false) if old.meta.resource_version != new.meta.resource_version => {
                self.deliver(Change::Updated { old, new: &new })
            }
            (Some(_), false) => {}
        }
    }

    /// The (re)list is complete: objects it did not list were deleted meanwhile.
    pub fn on_list_done(&self) {
        let deleted = self.store.write().end_relist(Instant::now());
        for last in &deleted {
            self.deliver(Change::Deleted { last });
        }
        *self.phase.lock() = Phase::Watching;
        self.lists_done.fetch_add(1, Ordering::Relaxed);
        self.synced.send_if_modified(|synced| !std::mem::replace(synced, true));
    }

    /// A watch event: created or changed.
    pub fn on_applied(&self, object: DynamicObject) {
        let Some(new) = self.shape(object) else { return };
        let old = self.store.write().apply(new.clone());
        match &old {
            None => self.deliver(Change::Added { new: &new }),
            Some(old) => self.deliver(Change::Updated { old, new: &new }),
        }
    }

    /// A watch event: deleted; `object` is its final state.
    pub fn on_deleted(&self, object: DynamicObject) {
        let Some(last) = self.shape(object) else { return };
        self.store.write().delete(last.clone(), Instant::now());
        self.deliver(Change::Deleted { last: &last });
    }

    fn shape(&self, object: DynamicObject) -> Option<Arc<CachedObject>> {
        match self.shaping.shape(object) {
            Ok(object) => {
                if let Some(version) = object.meta.numeric_resource_version() {
                    self.seen_version.send_if_modified(|seen| {
                        let newer = version > *seen;
                        if newer {
                            *seen = version;
                        }
                        newer
                    });
                }
                Some(Arc::new(object))
            }
            Err(err) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                warn!(informer = %self.name, %err, "object not stored: cannot serialize it");
                None
            }
        }
    }

    /// Delivers a change to every subscriber; called with no store lock held,
    /// since a trigger's index lookup may read this very store.
    fn deliver(&self, change: Change<'_>) {
        let refused: u64 =
            self.subscribers.read().iter().map(|subscriber| subscriber.deliver(&self.name, change)).sum();
        self.note_refused(refused);
        // After the loop: a count of N means every queue's Add returned for N
        // changes (refused keys are counted apart, in `refused`).
        self.changes.count(change.kind());
    }

    /// Counts keys the queues refused and warns, on the 1st, 2nd, 4th, 8th,
    /// ... refusal, so a queue shutting down under a flood of events logs a
    /// handful of lines, not one per event.
    fn note_refused(&self, refused: u64) {
        if refused == 0 {
            return;
        }
        let before = self.refused.fetch_add(refused, Ordering::Relaxed);
        let after = before.saturating_add(refused);
        if before.checked_ilog2() != after.checked_ilog2() {
            warn!(
                informer = %self.name,
                refused_total = after,
                "keys from this informer were refused by a queue that is shutting down (counted in \
                 workqueue_sidecar_informer_keys_refused_total)"
            );
        }
    }

    /// Keys the queues refused so far (they were shutting down).
    pub fn keys_refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Re-enqueues every object on the primary queues (reason Resync).
    pub fn resync(&self) {
        if !self.is_synced() {
            return;
        }
        let keys = self.store.read().keys();
        for subscriber in self.subscribers.read().iter() {
            if matches!(subscriber.role, super::keying::Role::Primary) {
                self.note_refused(subscriber.resync(&self.name, &keys));
            }
        }
    }

    // ---- reads --------------------------------------------------------------

    /// Follows `is_synced`, for waiting on it.
    pub fn synced_watch(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
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

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// How many changes of `kind` this informer has handed to its queues
    /// (every queue's Add for them has returned). A relist counts the objects
    /// it found added, changed or gone; unchanged ones are not changes.
    pub fn changes(&self, kind: ChangeKind) -> u64 {
        self.changes.get(kind)
    }

    /// How long the watch has been failing without a success since: zero
    /// while it is current. The cache may miss changes made in that time.
    pub fn stale_for(&self) -> Duration {
        self.failing_since.lock().map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// How many lists have completed: 1 after the first, one more per relist.
    pub fn lists_done(&self) -> u64 {
        self.lists_done.load(Ordering::Relaxed)
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

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::super::keying::Subscriber;
    use super::*;

    fn informer() -> SharedInformer {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        SharedInformer::new(InformerSpec::new("cms", "", "v1", "ConfigMap"), resource, true)
    }

    fn config_map(name: &str, resource_version: &str) -> DynamicObject {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut object = DynamicObject::new(name, &resource).within("ns");
        object.metadata.resource_version = Some(resource_version.into());
        object
    }

    #[tokio::test]
    async fn keys_a_shutting_down_queue_refuses_should_be_counted_apart_and_never_by_max_keys() {
        use crate::queue::QueueSettings;
        let informer = informer();
        let settings = QueueSettings { max_keys: Some(1), ..QueueSettings::default() };
        let queue = crate::queue_registry::Queue::new("q", settings).unwrap();
        informer.subscribe(Subscriber {
            queue: queue.clone(),
            role: super::super::keying::Role::Primary,
            predicates: Vec::new(),
            priorities: Default::default(),
        });
        informer.on_init();
        for name in ["a", "b", "c"] {
            informer.on_listed(config_map(name, "1"));
        }
        informer.on_list_done();
        assert_eq!(queue.counts().ready, 3, "max_keys 1 refused no key of the list");
        assert_eq!(informer.keys_refused(), 0);
        queue.shut_down();
        informer.on_applied(config_map("d", "2"));
        informer.resync();
        assert_eq!(informer.keys_refused(), 1 + 4, "the event's key, then the resync's four (d is cached)");
        assert_eq!(counts(&informer), [3, 1, 0, 0], "changes still counted as handed over");
    }

    fn counts(informer: &SharedInformer) -> [u64; 4] {
        ChangeKind::ALL.map(|kind| informer.changes(kind))
    }

    #[test]
    fn changes_should_be_counted_by_kind_and_a_relist_only_for_what_changed() {
        let informer = informer();
        informer.on_init();
        informer.on_listed(config_map("a", "1"));
        informer.on_listed(config_map("b", "2"));
        informer.on_list_done();
        assert_eq!(counts(&informer), [2, 0, 0, 0], "[initial_list, added, updated, deleted]");

        informer.on_applied(config_map("c", "3"));
        informer.on_applied(config_map("a", "4"));
        informer.on_applied(config_map("a", "5"));
        informer.on_deleted(config_map("b", "6"));
        assert_eq!(counts(&informer), [2, 1, 2, 1]);

        // A relist: "a" unchanged, "c" changed, "d" new, and nothing deleted meanwhile.
        informer.on_init();
        informer.on_listed(config_map("a", "5"));
        informer.on_listed(config_map("c", "7"));
        informer.on_listed(config_map("d", "8"));
        informer.on_list_done();
        assert_eq!(counts(&informer), [2, 2, 3, 1]);
        assert_eq!(informer.lists_done(), 2);
    }
}
