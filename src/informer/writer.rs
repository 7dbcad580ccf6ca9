//! `InformerWriter`: the one writer of an informer's cache, owned by its watch task; it stores what the watch sends and hands each change to the subscribed queues.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube::api::ApiResource;
use tokio::time::Instant;
use tracing::warn;

use super::change::Change;
use super::keying::{Role, Subscriber};
use super::object::CachedObject;
use super::protobuf::{ProtobufError, ProtobufKind};
use super::shaping::Shaping;
use super::shard_watch::{Kept, ShardFilter};
use super::shared::SharedInformer;
use super::spec::InformerSpec;

/// Where the informer is in its list/watch cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Listing for the first time: objects are InitialList events.
    FirstList,
    /// Relisting (after a 410 or a restart): objects are compared with the store.
    Relist,
    Watching,
}

pub struct InformerWriter {
    informer: Arc<SharedInformer>,
    shaping: Shaping,
    phase: Phase,
    /// Queues listening; all subscribed before the watch starts.
    subscribers: Vec<Subscriber>,
    /// For a sharded informer: the objects it keeps, set by its watch.
    shard_filter: Option<ShardFilter>,
}

impl InformerWriter {
    /// A writer for a new, empty cache of `resource`.
    pub fn new(spec: InformerSpec, resource: ApiResource, namespaced: bool) -> Self {
        let shaping = Shaping::new(&resource, spec.strip_managed_fields, spec.indexes.clone());
        InformerWriter {
            informer: Arc::new(SharedInformer::new(spec, resource, namespaced)),
            shaping,
            phase: Phase::FirstList,
            subscribers: Vec::new(),
            shard_filter: None,
        }
    }

    /// The read side, for anyone to share.
    pub fn informer(&self) -> &Arc<SharedInformer> {
        &self.informer
    }

    pub fn subscribe(&mut self, subscriber: Subscriber) {
        self.subscribers.push(subscriber);
    }

    /// Keeps only the objects `filter` keeps, from the next object on.
    pub fn filter_shards(&mut self, filter: ShardFilter) {
        self.shard_filter = Some(filter);
    }

    /// Whether a listed or applied object belongs in this cache.
    fn keeps(&mut self, object: &CachedObject) -> bool {
        let Some(filter) = &mut self.shard_filter else { return true };
        match filter.keeps(&object.meta.uid.as_str(), object.namespace()) {
            Kept::Yes => true,
            Kept::OutsideOwned => false,
            Kept::NotFilteredByServer => {
                warn!(
                    informer = %self.informer.name(),
                    "the API server sent an object outside this replica's shardSelector: it does not filter \
                     (feature gate ShardedListAndWatch off?), so every object is sent and filtered here"
                );
                false
            }
        }
    }

    /// Removes the objects the shard filter no longer keeps (of slots given
    /// up) and hands each to the queues as a deletion, as a relist would:
    /// their keys' tombstones still name their slots. Returns how many.
    pub fn drop_objects_not_kept(&mut self) -> usize {
        let Some(filter) = &self.shard_filter else { return 0 };
        let dropped = self
            .informer
            .store_mut()
            .retain(|object| filter.owns(&object.meta.uid.as_str(), object.namespace()), Instant::now());
        for last in &dropped {
            self.deliver(Change::Deleted { last });
        }
        dropped.len()
    }

    /// A (re)list starts.
    pub fn on_init(&mut self) {
        if self.phase != Phase::FirstList {
            self.phase = Phase::Relist;
        }
        self.informer.store_mut().begin_relist();
    }

    /// One object of a (re)list.
    pub fn on_listed(&mut self, object: CachedObject) {
        if !self.keeps(&object) {
            return;
        }
        let new = Arc::new(object);
        let old = self.informer.store_mut().apply(new.clone());
        self.saw(&new);
        match (&old, self.phase == Phase::FirstList) {
            (_, true) => self.deliver(Change::InitialList { new: &new }),
            (None, false) => self.deliver(Change::Added { new: &new }),
            (Some(old), false) if old.meta.resource_version != new.meta.resource_version => {
                self.deliver(Change::Updated { old, new: &new })
            }
            (Some(_), false) => {}
        }
    }

    /// The (re)list is complete: objects it did not list were deleted meanwhile.
    pub fn on_list_done(&mut self) {
        let deleted = self.informer.store_mut().end_relist(Instant::now());
        for last in &deleted {
            self.deliver(Change::Deleted { last });
        }
        self.phase = Phase::Watching;
        self.informer.counters().lists_done.fetch_add(1, Ordering::Relaxed);
        self.informer.mark_synced();
    }

    /// A watch event: created or changed.
    pub fn on_applied(&mut self, object: CachedObject) {
        if !self.keeps(&object) {
            return;
        }
        let new = Arc::new(object);
        let old = self.informer.store_mut().apply(new.clone());
        self.saw(&new);
        match &old {
            None => self.deliver(Change::Added { new: &new }),
            Some(old) => self.deliver(Change::Updated { old, new: &new }),
        }
    }

    /// A watch event: deleted; `object` is its final state.
    pub fn on_deleted(&mut self, object: CachedObject) {
        if !self.keeps(&object) {
            return;
        }
        let last = Arc::new(object);
        self.informer.store_mut().delete(last.clone(), Instant::now());
        self.saw(&last);
        self.deliver(Change::Deleted { last: &last });
    }

    /// The cache holds every change up to `version`: a watch bookmark's, or
    /// that of a list just finished. A read waiting for that version can go
    /// ahead even if no object of this informer has it.
    pub fn on_current_at(&self, version: &str) {
        if let Ok(version) = version.parse() {
            self.informer.saw_version(version);
        }
    }

    /// Re-enqueues every cached object on the primary queues (reason Resync);
    /// nothing before the first list is done.
    pub fn resync(&self) {
        if !self.informer.is_synced() {
            return;
        }
        let keys = self.informer.keys();
        for subscriber in &self.subscribers {
            if matches!(subscriber.role, Role::Primary) {
                self.note_refused(subscriber.resync(self.informer.name(), &keys));
            }
        }
    }

    /// The object `json` as this informer stores it; `None` (counted as
    /// dropped) when it is not a Kubernetes object's JSON.
    pub fn shape(&self, json: &[u8]) -> Option<CachedObject> {
        self.stored(self.shaping.shape(json))
    }

    /// The object whose protobuf is `message`, of this informer's built-in
    /// kind, as this informer stores it; `None` (counted as dropped) when
    /// its metadata cannot be read. An error is protobuf this sidecar cannot
    /// read in full: the informer must go back to JSON.
    pub fn shape_protobuf(&self, kind: ProtobufKind, message: &[u8]) -> Result<Option<CachedObject>, ProtobufError> {
        let written = kind.to_object(message, self.shaping.types_json(), self.shaping.strip_managed_fields)?;
        Ok(self.stored(self.shaping.shape_written(&written.json, written.metadata)))
    }

    fn stored(&self, shaped: Result<CachedObject, serde_json::Error>) -> Option<CachedObject> {
        match shaped {
            Ok(object) => Some(object),
            Err(err) => {
                self.informer.counters().dropped.fetch_add(1, Ordering::Relaxed);
                warn!(informer = %self.informer.name(), %err, "object not stored: cannot read its JSON");
                None
            }
        }
    }

    /// Records that the cache has `object`'s version. Called only once the
    /// store holds it: a read waiting for that version (read-your-writes)
    /// wakes here and must find the object in the store, not its old state.
    fn saw(&self, object: &CachedObject) {
        if let Some(version) = object.meta.numeric_resource_version() {
            self.informer.saw_version(version);
        }
    }

    /// Delivers a change to every subscriber; called with no store lock held,
    /// since a trigger's index lookup may read this very store.
    fn deliver(&self, change: Change<'_>) {
        let name = self.informer.name();
        let refused: u64 = self.subscribers.iter().map(|subscriber| subscriber.deliver(name, change)).sum();
        self.note_refused(refused);
        // After the loop: a count of N means every queue's Add returned for N
        // changes (refused keys are counted apart, in `refused`).
        self.informer.counters().changes.count(change.kind());
    }

    /// Counts keys the queues refused and warns, on the 1st, 2nd, 4th, 8th,
    /// ... refusal, so a queue shutting down under a flood of events logs a
    /// handful of lines, not one per event.
    fn note_refused(&self, refused: u64) {
        if refused == 0 {
            return;
        }
        let before = self.informer.counters().refused.fetch_add(refused, Ordering::Relaxed);
        let after = before.saturating_add(refused);
        if before.checked_ilog2() != after.checked_ilog2() {
            warn!(
                informer = %self.informer.name(),
                refused_total = after,
                "keys from this informer were refused by a queue that is shutting down (counted in \
                 workqueue_sidecar_informer_keys_refused_total)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::super::change::ChangeKind;
    use super::*;

    fn writer() -> InformerWriter {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        InformerWriter::new(InformerSpec::new("cms", "", "v1", "ConfigMap"), resource, true)
    }

    fn config_map(name: &str, resource_version: &str) -> CachedObject {
        let json =
            serde_json::json!({ "metadata": { "name": name, "namespace": "ns", "resourceVersion": resource_version } });
        writer().shape(json.to_string().as_bytes()).expect("a ConfigMap's JSON")
    }

    #[tokio::test]
    async fn keys_a_shutting_down_queue_refuses_should_be_counted_apart_and_never_by_max_keys() {
        use crate::queue::QueueSettings;
        let mut informer = writer();
        let settings = QueueSettings { max_keys: 1, ..QueueSettings::default() };
        let queue = crate::queue_registry::Queue::new("q", settings).unwrap();
        informer.subscribe(Subscriber {
            queue: queue.clone(),
            role: Role::Primary,
            predicates: Vec::new(),
            priorities: Default::default(),
        });
        informer.on_init();
        for name in ["a", "b", "c"] {
            informer.on_listed(config_map(name, "1"));
        }
        informer.on_list_done();
        assert_eq!(queue.counts().ready, 3, "max_keys 1 refused no key of the list");
        assert_eq!(informer.informer().keys_refused(), 0);
        queue.shut_down();
        informer.on_applied(config_map("d", "2"));
        informer.resync();
        assert_eq!(informer.informer().keys_refused(), 1 + 4, "the event's key, then the resync's four (d is cached)");
        assert_eq!(counts(&informer), [3, 1, 0, 0], "changes still counted as handed over");
    }

    fn counts(writer: &InformerWriter) -> [u64; 4] {
        ChangeKind::ALL.map(|kind| writer.informer().changes(kind))
    }

    #[test]
    fn changes_should_be_counted_by_kind_and_a_relist_only_for_what_changed() {
        let mut informer = writer();
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
        assert_eq!(informer.informer().lists_done(), 2);
    }

    #[test]
    fn a_bookmark_or_a_finished_list_should_make_the_cache_current_at_its_version() {
        let mut informer = writer();
        informer.on_init();
        informer.on_listed(config_map("a", "3"));
        informer.on_list_done();
        assert_eq!(informer.informer().seen_version(), 3, "the newest object's version");
        informer.on_current_at("9");
        assert_eq!(informer.informer().seen_version(), 9, "a version no object has");
        informer.on_current_at("5");
        informer.on_current_at("not-a-number");
        assert_eq!(informer.informer().seen_version(), 9, "never back, and opaque versions ignored");
    }
}
