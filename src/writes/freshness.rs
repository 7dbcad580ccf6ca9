//! The stale-read guard: writes through the sidecar that the informer caches have not seen yet, and the reads and leases that wait for them.
//!
//! A write through `ObjectService` returns a resourceVersion before the
//! sidecar's own watch has delivered it. Until it has, a cache read of that
//! object would answer the state before the write, and a reconcile started
//! then would act on it (create a child twice, say). So every write is noted
//! here with what each cache that holds its kind must see: a resourceVersion
//! at least the written one, or the object gone. Reads of a noted object
//! wait for it (up to [`READ_BOUND`]). A write made under a lease also marks
//! that lease (fenced by its token, so a write under a lost lease is never
//! made), and its key settles in the queue when the lease ends: it is leased
//! again only once every cache has caught up with every write made under
//! it, or after the queue's `settle_timeout`.
//!
//! Cheap when nothing is pending: a read checks one atomic counter.
//!
//! When a cache counts as caught up: the informer's watch delivers events in
//! resourceVersion order, so once it has seen any version at or past the
//! written one, its cache reflects the write (or the object no longer
//! matches its selectors). A cache is asked to see a write only when it can:
//! the written object matches its label selector, or it holds the object now
//! (a write that unselects it arrives as a delete). An informer with a field
//! selector is asked only when it holds the object.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::select_all;
use kube::api::DynamicObject;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_stream::wrappers::WatchStream;

use crate::informer::{CacheReadError, CachedObject, InformerRegistry, LabelSelector, Meta, SharedInformer};
use crate::objects::{KindRef, ObjectRef};
use crate::queue::{LeaseToken, QueueError};
use crate::queue_registry::QueueRegistry;

/// The longest a read waits for the cache to see a write through the
/// sidecar; past it the read fails (DEADLINE_EXCEEDED) rather than answer a
/// state older than the write. A write the caches have not seen in this time
/// is given up on. The API server's watch usually delivers in milliseconds.
pub const READ_BOUND: Duration = Duration::from_secs(10);

/// What one cache must see of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Any event at or past this resourceVersion.
    AtLeast(u64),
    /// The object gone from the cache (a delete that removed it at once):
    /// the cache holds nothing under its key, or an object newer than this
    /// resourceVersion, the deleted one's as the cache held it. The watch is
    /// in order, so a newer object there (one created again under the same
    /// name, by anyone) came after the deletion; waiting for the key to be
    /// empty failed every read of the new object for the whole bound.
    Gone { newer_than: u64 },
}

/// The write a ticket was taken for, once made.
pub struct Written<'a> {
    pub kind: &'a KindRef,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub outcome: WriteOutcome<'a>,
}

impl<'a> Written<'a> {
    /// An object as the API server answered a write of it (created,
    /// applied, patched, or marked for deletion).
    pub fn object(kind: &'a KindRef, object: &'a DynamicObject) -> Self {
        Written {
            kind,
            namespace: object.metadata.namespace.as_deref(),
            name: object.metadata.name.as_deref().unwrap_or_default(),
            outcome: WriteOutcome::Object(object),
        }
    }

    /// An object deleted at once; `version`, its final state's resourceVersion
    /// when the API server answered with it.
    pub fn gone(target: &'a ObjectRef, version: Option<u64>) -> Self {
        Written {
            kind: &target.kind,
            namespace: target.namespace.as_deref(),
            name: &target.name,
            outcome: WriteOutcome::Gone(version),
        }
    }
}

/// What the API server answered.
pub enum WriteOutcome<'a> {
    /// The object as written (created, applied, patched, or marked for deletion).
    Object(&'a DynamicObject),
    /// Deleted at once; its final state's resourceVersion, when answered.
    Gone(Option<u64>),
}

/// A lease a write is made under, parsed.
#[derive(Debug, Clone)]
pub struct LeaseRef {
    pub queue: Arc<str>,
    pub key: Arc<str>,
    pub token: LeaseToken,
}

/// Why a write may not be made.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error("unknown queue {0:?}")]
    UnknownQueue(String),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// One informer, as the guard sees it.
struct Cache {
    informer: Arc<SharedInformer>,
    selector: Option<LabelSelector>,
}

/// The guard: one per sidecar with informers.
pub struct Freshness {
    caches: Vec<Cache>,
    queues: Arc<QueueRegistry>,
    ledger: Mutex<Ledger>,
    /// Writes noted and not yet seen: reads skip the ledger while it is 0.
    pending: AtomicUsize,
}

#[derive(Default)]
struct Ledger {
    next_id: u64,
    writes: HashMap<u64, PendingWrite>,
    /// Writes each object waits for: (cache index, object key).
    by_object: HashMap<(usize, Arc<str>), Vec<u64>>,
    /// Writes under leases not yet seen (or still being made), per queue and key.
    by_key: HashMap<(Arc<str>, Arc<str>), usize>,
}

struct PendingWrite {
    expects: Vec<(usize, Arc<str>, Expect)>,
    lease: Option<(Arc<str>, Arc<str>)>,
    at: Instant,
    /// How long it is waited for: [`READ_BOUND`], or its lease's queue's
    /// `settle_timeout` when longer (its key waits that long).
    bound: Duration,
}

impl Freshness {
    pub fn new(informers: &InformerRegistry, queues: Arc<QueueRegistry>) -> Self {
        let caches = informers
            .all()
            .into_iter()
            .map(|informer| {
                // The config checked the selector when it was read.
                let selector = informer.spec().label_selector.as_deref().and_then(|s| LabelSelector::parse(s).ok());
                Cache { informer, selector }
            })
            .collect();
        Freshness { caches, queues, ledger: Mutex::default(), pending: AtomicUsize::new(0) }
    }

    /// Before a write: a write under `lease` may be made only while the lease
    /// is current, from now on its key will settle when the lease ends, and
    /// the lease does not expire while the ticket lives. The ticket notes the
    /// write once made ([`WriteTicket::written`]); a ticket dropped without
    /// that (the write failed, the caller went away) takes its mark back.
    pub fn begin(self: &Arc<Self>, lease: Option<LeaseRef>) -> Result<WriteTicket, FenceError> {
        let lease = match lease {
            None => None,
            Some(LeaseRef { queue, key, token }) => {
                let q = self.queues.get(&queue).ok_or_else(|| FenceError::UnknownQueue(queue.to_string()))?;
                let mut ledger = self.ledger.lock();
                q.writes().begin(&*key, token)?;
                *ledger.by_key.entry((queue.clone(), key.clone())).or_default() += 1;
                Some(LeaseRef { queue, key, token })
            }
        };
        Ok(WriteTicket { freshness: self.clone(), lease })
    }

    /// Waits until the cache of `informer` has seen every write noted for
    /// `key` (every write of that informer's objects, for `None`: a list).
    pub async fn await_seen(&self, informer: &SharedInformer, key: Option<&str>) -> Result<(), CacheReadError> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let Some(index) = self.caches.iter().position(|c| std::ptr::eq(&*c.informer, informer)) else {
            return Ok(());
        };
        let expects = self.ledger.lock().expects_of(index, key, Instant::now());
        if expects.is_empty() {
            return Ok(());
        }
        let mut versions = informer.version_watch();
        let deadline = Instant::now() + READ_BOUND;
        loop {
            let unseen = expects.iter().find(|(key, expect)| !seen(informer, key, *expect));
            let Some((key, expect)) = unseen else { return Ok(()) };
            if tokio::time::timeout_at(deadline, versions.changed()).await.is_err() {
                return Err(CacheReadError::WriteNotSeen {
                    informer: informer.name().to_string(),
                    key: key.to_string(),
                    expected: match expect {
                        Expect::AtLeast(version) => format!("resourceVersion {version}"),
                        Expect::Gone { .. } => "its deletion".to_owned(),
                    },
                    waited: READ_BOUND,
                });
            }
        }
    }

    /// Follows every cache's progress and lets go of the writes they have
    /// seen (and the keys that waited for them); runs until aborted.
    pub async fn follow_caches(self: Arc<Self>) {
        let mut progress = select_all(self.caches.iter().map(|c| WatchStream::new(c.informer.version_watch())));
        while progress.next().await.is_some() {
            if self.pending.load(Ordering::Acquire) > 0 {
                self.sweep(Instant::now());
            }
        }
    }

    /// Drops the writes every cache has seen, or that are past the bound;
    /// tells the queues of the keys with none left.
    fn sweep(&self, now: Instant) {
        let mut ledger = self.ledger.lock();
        let done: Vec<u64> = ledger
            .writes
            .iter()
            .filter(|(_, w)| {
                now.saturating_duration_since(w.at) >= w.bound
                    || w.expects.iter().all(|(cache, key, expect)| seen(&self.caches[*cache].informer, key, *expect))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some(lease) = ledger.remove(id) {
                self.release(&mut ledger, lease);
            }
        }
        self.pending.store(ledger.writes.len(), Ordering::Release);
    }

    /// One write under a lease is accounted for: with none left for its key,
    /// the queue lets the key go (now, if its lease has ended).
    fn release(&self, ledger: &mut Ledger, lease: (Arc<str>, Arc<str>)) {
        let left = ledger.by_key.get_mut(&lease).map(|n| {
            *n = n.saturating_sub(1);
            *n
        });
        if left == Some(0) {
            ledger.by_key.remove(&lease);
            if let Some(queue) = self.queues.get(&lease.0) {
                queue.writes().settled(&*lease.1);
            }
        }
    }

    /// The write under `lease` is answered or given up: the queue may let
    /// the lease end now. Whether the lease was held all along.
    fn end_write(&self, lease: &LeaseRef) -> bool {
        self.queues.get(&lease.queue).is_some_and(|q| q.writes().end(&*lease.key, lease.token))
    }

    /// What each cache must see of a write, leaving out what it has seen.
    fn expects_of_write(&self, written: &Written<'_>) -> Vec<(usize, Arc<str>, Expect)> {
        let key: Arc<str> = match written.namespace {
            Some(namespace) => Arc::from(format!("{namespace}/{}", written.name)),
            None => Arc::from(written.name),
        };
        // One expectation for every cache, or none for a deletion the API
        // server did not answer with a version: then each cache's own
        // version of the deleted object, below.
        let (expect, meta) = match written.outcome {
            WriteOutcome::Gone(Some(version)) => (Some(Expect::Gone { newer_than: version }), None),
            WriteOutcome::Gone(None) => (None, None),
            WriteOutcome::Object(object) => {
                let Some(version) = object.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()) else {
                    // Not an etcd-backed resource: versions cannot be compared.
                    return Vec::new();
                };
                (Some(Expect::AtLeast(version)), Some(Meta::from(object.metadata.clone())))
            }
        };
        self.caches
            .iter()
            .enumerate()
            .filter(|(_, cache)| holds_kind(&cache.informer, written.kind, written.namespace))
            .filter(|(_, cache)| {
                let holds_it = cache.informer.get(&key).is_some();
                let would_hold_it = cache.informer.spec().field_selector.is_none()
                    && meta.as_ref().is_some_and(|meta| cache.selector.as_ref().is_none_or(|s| s.matches(meta)));
                holds_it || would_hold_it
            })
            .map(|(index, cache)| (index, cache, expect.unwrap_or_else(|| held_version(&cache.informer, &key))))
            .filter(|(_, cache, expect)| !seen(&cache.informer, &key, *expect))
            .map(|(index, _, expect)| (index, key.clone(), expect))
            .collect()
    }
}

/// The lease a write was made under ended before the API server answered
/// the write: the write was made, and the key may be another worker's now.
#[derive(Debug, thiserror::Error)]
#[error(
    "the write was made, but the lease on {key:?} of queue {queue:?} ended before the API server answered it \
     (the sidecar's term as leader or shard owner ended, it handed the lease back at shutdown, or its holder \
     ended it): another worker may hold the key now"
)]
pub struct LeaseEndedDuringWrite {
    pub queue: String,
    pub key: String,
}

/// A write under way: taken before it is made, noted once it is.
pub struct WriteTicket {
    freshness: Arc<Freshness>,
    lease: Option<LeaseRef>,
}

impl WriteTicket {
    /// The write was made: reads of it, and its lease's key, wait for the
    /// caches to see it. Refused when its lease ended while it was out.
    pub fn written(mut self, written: Written<'_>) -> Result<(), LeaseEndedDuringWrite> {
        let freshness = self.freshness.clone();
        let expects = freshness.expects_of_write(&written);
        let lease = self.lease.take();
        let held_throughout = lease.as_ref().is_none_or(|lease| freshness.end_write(lease));
        let fenced = match (&lease, held_throughout) {
            (Some(lease), false) => {
                Err(LeaseEndedDuringWrite { queue: lease.queue.to_string(), key: lease.key.to_string() })
            }
            _ => Ok(()),
        };
        let lease = lease.map(|LeaseRef { queue, key, .. }| (queue, key));
        let mut ledger = freshness.ledger.lock();
        if expects.is_empty() {
            if let Some(lease) = lease {
                freshness.release(&mut ledger, lease);
            }
            return fenced;
        }
        let settle =
            lease.as_ref().and_then(|(queue, _)| freshness.queues.get(queue)).map(|q| q.writes().settle_timeout());
        let bound = settle.map_or(READ_BOUND, |settle| settle.max(READ_BOUND));
        ledger.insert(PendingWrite { expects, lease, at: Instant::now(), bound });
        freshness.pending.store(ledger.writes.len(), Ordering::Release);
        drop(ledger);
        // The watch may have delivered the write while it was being noted,
        // with nothing pending for the follower to check then.
        freshness.sweep(Instant::now());
        fenced
    }
}

impl Drop for WriteTicket {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.freshness.end_write(&lease);
            let mut ledger = self.freshness.ledger.lock();
            self.freshness.release(&mut ledger, (lease.queue, lease.key));
        }
    }
}

impl Ledger {
    fn insert(&mut self, write: PendingWrite) {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        for (cache, key, _) in &write.expects {
            self.by_object.entry((*cache, key.clone())).or_default().push(id);
        }
        self.writes.insert(id, write);
    }

    /// Forgets a write; its lease, if it had one.
    fn remove(&mut self, id: u64) -> Option<(Arc<str>, Arc<str>)> {
        let write = self.writes.remove(&id)?;
        for (cache, key, _) in write.expects {
            let object = (cache, key);
            if let Some(ids) = self.by_object.get_mut(&object) {
                ids.retain(|other| *other != id);
                if ids.is_empty() {
                    self.by_object.remove(&object);
                }
            }
        }
        write.lease
    }

    /// What reads of `key` in cache `index` (of any key, for `None`) wait for,
    /// leaving out writes past the bound.
    fn expects_of(&self, index: usize, key: Option<&str>, now: Instant) -> Vec<(Arc<str>, Expect)> {
        let live = |id: &u64| self.writes.get(id).filter(|w| now.saturating_duration_since(w.at) < READ_BOUND);
        let of_write = |write: &PendingWrite| {
            write
                .expects
                .iter()
                .filter(|(cache, k, _)| *cache == index && key.is_none_or(|key| **k == *key))
                .map(|(_, k, expect)| (k.clone(), *expect))
                .collect::<Vec<_>>()
        };
        match key {
            Some(key) => self
                .by_object
                .get(&(index, Arc::from(key)))
                .into_iter()
                .flatten()
                .filter_map(live)
                .flat_map(of_write)
                .collect(),
            None => self.writes.keys().filter_map(live).flat_map(of_write).collect(),
        }
    }
}

/// Whether `informer` holds objects of `kind` in `namespace` (any version of the kind).
fn holds_kind(informer: &SharedInformer, kind: &KindRef, namespace: Option<&str>) -> bool {
    let resource = informer.resource();
    resource.group == kind.group
        && resource.kind == kind.kind
        && informer.spec().namespace.as_deref().is_none_or(|watched| Some(watched) == namespace)
}

/// Whether the cache has seen what a write expects of it.
fn seen(informer: &SharedInformer, key: &str, expect: Expect) -> bool {
    match expect {
        Expect::AtLeast(version) => informer.seen_version() >= version,
        Expect::Gone { newer_than } => informer.get(key).is_none_or(|object| version_of(&object) > newer_than),
    }
}

/// A deletion the API server did not answer with a version: the version of
/// the object the cache holds now under its key (the deleted one, unless the
/// cache is past it already).
fn held_version(informer: &SharedInformer, key: &str) -> Expect {
    Expect::Gone { newer_than: informer.get(key).map_or(0, |object| version_of(&object)) }
}

/// A cached object's resourceVersion as a number; 0 when it is not one.
fn version_of(object: &CachedObject) -> u64 {
    object.meta.resource_version.number().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_should_be_seen_when_the_name_is_empty_or_holds_a_newer_object() {
        use kube::api::{ApiResource, GroupVersionKind};

        use crate::informer::{InformerSpec, InformerWriter};
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut writer = InformerWriter::new(InformerSpec::new("cms", "", "v1", "ConfigMap"), resource, true);
        let object = |uid: &str, version: &str| {
            let json = serde_json::json!({ "metadata": {
                "name": "a", "namespace": "ns", "uid": uid, "resourceVersion": version } });
            writer.shape(json.to_string().as_bytes()).unwrap()
        };
        let (old, new) = (object("u1", "5"), object("u2", "9"));
        writer.on_init();
        writer.on_list_done();
        writer.on_applied(old.clone());
        // Deleted at version 7 by the sidecar; the cache has not seen it yet.
        let deleted = Expect::Gone { newer_than: 7 };
        assert!(!seen(writer.informer(), "ns/a", deleted), "the deleted object is still cached");
        // The deletion and the creation under the same name came in one read of the watch.
        writer.on_deleted(old);
        writer.on_applied(new);
        assert!(seen(writer.informer(), "ns/a", deleted), "the object there now came after the deletion");
        assert!(seen(writer.informer(), "ns/b", deleted), "nothing under the name");
        // Unanswered with a version: the one the cache holds when the write is noted.
        assert_eq!(held_version(writer.informer(), "ns/a"), Expect::Gone { newer_than: 9 });
    }

    fn write(expects: &[(usize, &str, Expect)], at: Instant) -> PendingWrite {
        PendingWrite {
            expects: expects.iter().map(|(cache, key, expect)| (*cache, Arc::from(*key), *expect)).collect(),
            lease: Some((Arc::from("q"), Arc::from("ns/a"))),
            at,
            bound: READ_BOUND,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ledger_should_answer_each_object_its_own_writes_and_forget_them_whole() {
        let now = Instant::now();
        let mut ledger = Ledger::default();
        ledger.insert(write(&[(0, "ns/a", Expect::AtLeast(5)), (1, "ns/a", Expect::AtLeast(5))], now));
        ledger.insert(write(&[(0, "ns/a", Expect::AtLeast(9)), (0, "ns/b", Expect::Gone { newer_than: 3 })], now));
        let of = |ledger: &Ledger, cache, key| ledger.expects_of(cache, key, now);
        assert_eq!(
            of(&ledger, 0, Some("ns/a")),
            [(Arc::from("ns/a"), Expect::AtLeast(5)), (Arc::from("ns/a"), Expect::AtLeast(9))]
        );
        assert_eq!(of(&ledger, 1, Some("ns/a")), [(Arc::from("ns/a"), Expect::AtLeast(5))]);
        assert_eq!(of(&ledger, 0, Some("ns/b")), [(Arc::from("ns/b"), Expect::Gone { newer_than: 3 })]);
        assert_eq!(of(&ledger, 0, None).len(), 3, "a list waits for every write of its cache");
        assert_eq!(of(&ledger, 2, None), [], "nothing for a cache no write concerns");

        assert!(ledger.remove(1).is_some(), "its lease comes back to be released");
        assert_eq!(of(&ledger, 1, Some("ns/a")), [], "both of its objects' entries go with it");
        assert!(ledger.remove(2).is_some());
        assert!(ledger.writes.is_empty() && ledger.by_object.is_empty(), "nothing left behind");
        assert!(ledger.remove(2).is_none(), "a write is released once");
    }

    #[tokio::test(start_paused = true)]
    async fn reads_should_not_wait_for_writes_past_the_read_bound() {
        let then = Instant::now();
        let mut ledger = Ledger::default();
        ledger.insert(write(&[(0, "ns/a", Expect::AtLeast(5))], then));
        tokio::time::advance(READ_BOUND).await;
        assert_eq!(ledger.expects_of(0, Some("ns/a"), Instant::now()), []);
    }
}
