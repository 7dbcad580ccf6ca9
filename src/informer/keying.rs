//! Event-to-key mapping: which keys a change of one object puts on which queue, why, and at what priority.
//!
//! A queue subscribes to its primary informer (the object's own key) and to
//! its trigger informers (keys of primary objects found through owner
//! references, a label's value or an index of the primary). Updates pass
//! through the subscription's predicates; the initial list and resyncs take
//! the slow lane, watch events the fast one (both configurable).

use std::sync::Arc;

use tracing::debug;

use super::change::Change;
use super::object::{CachedObject, Meta};
use super::shared::SharedInformer;
use super::spec::{IndexValue, LanePriorities, Predicate, TriggerMap};
use crate::queue::{Reason, ReasonKind};
use crate::queue_registry::Queue;

/// One queue listening to one informer.
pub struct Subscriber {
    pub queue: Queue,
    pub role: Role,
    /// Update filters: an update passes when any of them says so; empty passes all.
    pub predicates: Vec<Predicate>,
    pub priorities: LanePriorities,
}

/// How the subscribing queue relates to the informer.
pub enum Role {
    /// The informer's objects are the queue's keys.
    Primary,
    /// The informer's objects name keys of the queue's primary informer,
    /// found through a reader of the primary's cache (its index, its kind).
    Trigger { map: TriggerMap, primary: Arc<SharedInformer> },
}

impl Subscriber {
    /// Adds the keys `change` maps to; `source` is the informer's name.
    /// Returns how many keys the queue refused (it is shutting down: the
    /// queue's `max_keys` never refuses keys from a cache).
    pub fn deliver(&self, source: &Arc<str>, change: Change<'_>) -> u64 {
        if let Change::Updated { old, new } = change
            && !passes(&self.predicates, &old.meta, &new.meta)
        {
            return 0;
        }
        let (kind, priority) = match (&self.role, change) {
            (Role::Primary, Change::InitialList { .. }) => (ReasonKind::InitialList, self.priorities.initial_list),
            (Role::Primary, Change::Added { .. }) => (ReasonKind::Added, self.priorities.events),
            (Role::Primary, Change::Updated { .. }) => (ReasonKind::Updated, self.priorities.events),
            (Role::Primary, Change::Deleted { .. }) => (ReasonKind::Deleted, self.priorities.events),
            (Role::Trigger { .. }, Change::InitialList { .. }) => (ReasonKind::Trigger, self.priorities.initial_list),
            (Role::Trigger { .. }, _) => (ReasonKind::Trigger, self.priorities.triggers),
        };
        let reason = Reason::new(kind, source.clone());
        let mut refused = 0;
        for key in self.keys(change) {
            if let Err(err) = self.queue.add(key.clone(), priority, reason.clone()) {
                debug!(queue = %self.queue.name(), %key, %err, "informer event not queued");
                refused += 1;
            }
        }
        refused
    }

    /// The primary keys `change` maps to, each once.
    fn keys(&self, change: Change<'_>) -> Vec<Arc<str>> {
        match &self.role {
            Role::Primary => vec![object_of(change).key.clone()],
            Role::Trigger { map, primary } => {
                let mut keys = Vec::new();
                // An update maps both states: a label or owner that moved
                // away must still wake the primary it left.
                if let Change::Updated { old, .. } = change {
                    trigger_keys(map, primary, old, &mut keys);
                }
                trigger_keys(map, primary, object_of(change), &mut keys);
                keys.sort();
                keys.dedup();
                keys
            }
        }
    }

    /// Adds every key at the resync priority with reason Resync: bypasses
    /// predicates and, being a plain add, keeps a failing key's backoff count.
    /// Returns how many keys the queue refused (it is shutting down).
    pub fn resync(&self, source: &Arc<str>, keys: &[Arc<str>]) -> u64 {
        let reason = Reason::new(ReasonKind::Resync, source.clone());
        for (done, key) in keys.iter().enumerate() {
            if let Err(err) = self.queue.add(key.clone(), self.priorities.resync, reason.clone()) {
                // A refusal means the queue shuts down: the rest would be refused too.
                debug!(queue = %self.queue.name(), %key, %err, "resync key not queued");
                return (keys.len() - done) as u64;
            }
        }
        0
    }
}

fn object_of(change: Change<'_>) -> &CachedObject {
    match change {
        Change::InitialList { new } | Change::Added { new } | Change::Updated { new, .. } => new,
        Change::Deleted { last } => last,
    }
}

/// Whether an update passes the predicates (any of them; all pass when there are none).
pub fn passes(predicates: &[Predicate], old: &Meta, new: &Meta) -> bool {
    predicates.is_empty()
        || predicates.iter().any(|p| match p {
            Predicate::GenerationChanged => old.generation != new.generation,
            Predicate::LabelsChanged => old.labels != new.labels,
            Predicate::AnnotationsChanged => old.annotations_hash != new.annotations_hash,
        })
}

/// The primary keys one state of a trigger object names.
fn trigger_keys(map: &TriggerMap, primary: &SharedInformer, object: &CachedObject, out: &mut Vec<Arc<str>>) {
    let meta = &object.meta;
    let primary_key = |name: &str| -> Option<Arc<str>> {
        if name.is_empty() {
            None
        } else if !primary.is_namespaced() {
            Some(Arc::from(name))
        } else if !object.namespace().is_empty() {
            Some(Arc::from(format!("{}/{name}", object.namespace())))
        } else {
            // A cluster-scoped object cannot say which namespace's primary it means.
            None
        }
    };
    match map {
        TriggerMap::Owner { controller_only } => {
            for owner in meta.owners() {
                if (!controller_only || owner.controller)
                    && *owner.kind == *primary.resource().kind
                    && owner.group() == primary.resource().group
                {
                    out.extend(primary_key(&owner.name));
                }
            }
        }
        TriggerMap::Label(label) => {
            if let Some(value) = meta.label(label) {
                out.extend(primary_key(value));
            }
        }
        TriggerMap::Index { index, value } => {
            // Written out only when the index is by uid: a UUID is kept as bytes.
            let uid;
            let value = match value {
                IndexValue::Name => object.name(),
                IndexValue::Key => &*object.key,
                IndexValue::Uid => {
                    uid = meta.uid.as_str();
                    &*uid
                }
            };
            let same_namespace = primary.is_namespaced() && !object.namespace().is_empty();
            for key in primary.index_keys(index, value).unwrap_or_default() {
                let in_namespace = key.split_once('/').is_some_and(|(ns, _)| ns == object.namespace());
                if !same_namespace || in_namespace {
                    out.push(key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(generation: i64, labels: &[(&str, &str)], annotations_hash: u64) -> Meta {
        let mut meta = Meta::default();
        meta.generation = generation;
        meta.labels = crate::informer::labels::Labels::new(labels.iter().copied());
        meta.annotations_hash = annotations_hash;
        meta
    }

    #[test]
    fn predicates_should_pass_an_update_when_any_says_so() {
        use Predicate::*;
        let base = meta(1, &[("a", "1")], 7);
        let status_only = meta(1, &[("a", "1")], 7);
        let spec = meta(2, &[("a", "1")], 7);
        let label = meta(1, &[("a", "2")], 7);
        let annotation = meta(1, &[("a", "1")], 8);
        assert!(passes(&[], &base, &status_only), "no predicate: everything passes");
        let all = [GenerationChanged, LabelsChanged, AnnotationsChanged];
        assert!(!passes(&all, &base, &status_only));
        assert!(passes(&all, &base, &spec));
        assert!(passes(&all, &base, &label));
        assert!(passes(&all, &base, &annotation));
        assert!(!passes(&[GenerationChanged], &base, &label));
        assert!(passes(&[LabelsChanged], &base, &label));
        assert!(!passes(&[AnnotationsChanged], &base, &spec));
    }
}
