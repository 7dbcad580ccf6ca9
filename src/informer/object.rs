//! One cached object: its JSON as bytes plus the few parsed metadata fields keys, indexes and predicates need.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::labels::Labels;
use super::resource_version::ResourceVersion;
use super::uid::Uid;

/// An object as an informer stores it. Never a `serde_json::Value` tree:
/// the JSON stays serialized, and only the metadata that keys, indexes,
/// selectors and predicates read is parsed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedObject {
    /// `namespace/name`, or `name` when cluster-scoped: the queue key and the store key.
    pub key: Arc<str>,
    pub meta: Meta,
    /// The object as JSON (managedFields stripped unless kept). Owned, not
    /// an `Arc` of its own: the whole object is shared, and a second count
    /// would cost 16 bytes per object.
    pub json: Box<[u8]>,
    pub index_values: IndexValues,
}

/// The values an object is filed under, per index of its informer (in spec
/// order). One pointer wide, and nothing allocated when the informer has no
/// index, which is most of them: 8 bytes per cached object less than the
/// list itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexValues(Option<Box<Box<[ValuesOfOneIndex]>>>);

/// The values an object is filed under in one index.
pub type ValuesOfOneIndex = Box<[Box<str>]>;

impl IndexValues {
    pub fn new(values: Vec<ValuesOfOneIndex>) -> Self {
        IndexValues((!values.is_empty()).then(|| Box::new(values.into_boxed_slice())))
    }

    /// The values of each index, in spec order; empty when there is none.
    pub fn per_index(&self) -> &[ValuesOfOneIndex] {
        self.0.as_deref().map_or(&[], |values| &values[..])
    }
}

/// The parsed part of `metadata`. Its namespace and name are not here: they
/// are the object's key (`CachedObject::namespace`, `CachedObject::name`),
/// which saves two strings per cached object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Meta {
    pub uid: Uid,
    pub resource_version: ResourceVersion,
    /// `metadata.generation`, 0 when absent: the API server starts an
    /// object's generation at 1, so absent and 0 need not differ, and only
    /// whether it changed is ever read.
    pub generation: i64,
    pub labels: Labels,
    /// A hash of the annotations: enough to tell whether they changed.
    pub annotations_hash: u64,
    /// Owners, finalizers and deletionTimestamp, when the object has any.
    /// Many objects have none, so the three share one pointer: 48 bytes
    /// less per cached object than holding them inline.
    lifecycle: Option<Box<Lifecycle>>,
}

/// The parts of `metadata` that tie an object's life to others'.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lifecycle {
    pub owners: Box<[OwnerRef]>,
    /// `metadata.deletionTimestamp`, when the object is being deleted.
    pub deletion_timestamp: Option<std::time::SystemTime>,
    /// `metadata.finalizers`, in order.
    pub finalizers: Box<[Box<str>]>,
}

impl CachedObject {
    /// Empty for a cluster-scoped object.
    pub fn namespace(&self) -> &str {
        self.key.split_once('/').map_or("", |(namespace, _)| namespace)
    }

    pub fn name(&self) -> &str {
        self.key.split_once('/').map_or(&self.key, |(_, name)| name)
    }
}

impl Meta {
    /// Keeps `lifecycle`, allocating only when it holds something.
    pub fn set_lifecycle(&mut self, lifecycle: Lifecycle) {
        let empty =
            lifecycle.owners.is_empty() && lifecycle.deletion_timestamp.is_none() && lifecycle.finalizers.is_empty();
        self.lifecycle = (!empty).then(|| Box::new(lifecycle));
    }

    /// `metadata.ownerReferences`, in order.
    pub fn owners(&self) -> &[OwnerRef] {
        self.lifecycle.as_ref().map_or(&[], |l| &l.owners)
    }

    /// `metadata.deletionTimestamp`, when the object is being deleted.
    pub fn deletion_timestamp(&self) -> Option<std::time::SystemTime> {
        self.lifecycle.as_ref().and_then(|l| l.deletion_timestamp)
    }

    /// `metadata.finalizers`, in order.
    pub fn finalizers(&self) -> &[Box<str>] {
        self.lifecycle.as_ref().map_or(&[], |l| &l.finalizers)
    }

    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers().iter().any(|f| **f == *finalizer)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    /// The resourceVersion as a number, when it is one (it is on etcd-backed servers).
    pub fn numeric_resource_version(&self) -> Option<u64> {
        self.resource_version.number()
    }
}

/// One `metadata.ownerReferences` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: Box<str>,
    pub kind: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    pub controller: bool,
}

impl OwnerRef {
    /// The API group of `api_version` (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(group, _)| group)
    }
}

impl From<kube::api::ObjectMeta> for Meta {
    fn from(metadata: kube::api::ObjectMeta) -> Self {
        meta_of(metadata)
    }
}

fn meta_of(metadata: kube::api::ObjectMeta) -> Meta {
    let labels = Labels::new(metadata.labels.unwrap_or_default());
    let annotations_hash = {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        // A BTreeMap iterates in key order, so equal maps hash equally.
        metadata.annotations.unwrap_or_default().hash(&mut hasher);
        hasher.finish()
    };
    let owners = metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|o| OwnerRef {
            api_version: o.api_version.into(),
            kind: o.kind.into(),
            name: o.name.into(),
            uid: o.uid.into(),
            controller: o.controller.unwrap_or(false),
        })
        .collect();
    let mut meta = Meta {
        uid: Uid::new(metadata.uid.as_deref().unwrap_or_default()),
        resource_version: ResourceVersion::new(metadata.resource_version.as_deref().unwrap_or_default()),
        generation: metadata.generation.unwrap_or(0),
        labels,
        annotations_hash,
        lifecycle: None,
    };
    meta.set_lifecycle(Lifecycle {
        owners,
        deletion_timestamp: metadata.deletion_timestamp.map(|t| std::time::SystemTime::from(t.0)),
        finalizers: metadata.finalizers.unwrap_or_default().into_iter().map(Into::into).collect(),
    });
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_object_should_fit_the_allocators_144_byte_chunk_with_its_arc_counts() {
        // 16 bytes of counts plus the object, plus glibc's 8-byte header,
        // rounded to 16: 144 bytes per object up to 120, 160 beyond.
        assert!(std::mem::size_of::<CachedObject>() <= 120, "{} bytes", std::mem::size_of::<CachedObject>());
    }

    #[test]
    fn an_empty_lifecycle_should_allocate_nothing_and_read_as_empty() {
        let mut meta = Meta::default();
        meta.set_lifecycle(Lifecycle::default());
        assert!(meta.lifecycle.is_none());
        assert!(meta.owners().is_empty() && meta.finalizers().is_empty() && meta.deletion_timestamp().is_none());
        meta.set_lifecycle(Lifecycle { finalizers: vec!["a/b".into()].into(), ..Lifecycle::default() });
        assert!(meta.has_finalizer("a/b") && !meta.has_finalizer("a/c"));
        assert!(meta.owners().is_empty());
    }

    #[test]
    fn index_values_of_an_informer_without_indexes_should_allocate_nothing() {
        assert_eq!(IndexValues::new(Vec::new()), IndexValues::default());
        let values = IndexValues::new(vec![vec!["x".into()].into()]);
        assert_eq!(values.per_index().len(), 1);
        assert!(IndexValues::default().per_index().is_empty());
    }
}
