//! One cached object: its JSON as bytes plus the few parsed metadata fields keys, indexes and predicates need.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

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
    /// The object as JSON (managedFields stripped unless kept).
    pub json: Arc<[u8]>,
    /// The values this object is filed under, per index of the informer (in spec order).
    pub index_values: Box<[Box<[Box<str>]>]>,
}

/// The parsed part of `metadata`. Its namespace and name are not here: they
/// are the object's key (`CachedObject::namespace`, `CachedObject::name`),
/// which saves two strings per cached object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Meta {
    pub uid: Uid,
    pub resource_version: ResourceVersion,
    pub generation: Option<i64>,
    /// Sorted by key.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// A hash of the annotations: enough to tell whether they changed.
    pub annotations_hash: u64,
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
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| **f == *finalizer)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.labels[i].1)
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
    let mut labels: Vec<(Box<str>, Box<str>)> =
        metadata.labels.unwrap_or_default().into_iter().map(|(k, v)| (k.into(), v.into())).collect();
    labels.sort();
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
    Meta {
        uid: Uid::new(metadata.uid.as_deref().unwrap_or_default()),
        resource_version: ResourceVersion::new(metadata.resource_version.as_deref().unwrap_or_default()),
        generation: metadata.generation,
        labels: labels.into(),
        annotations_hash,
        owners,
        deletion_timestamp: metadata.deletion_timestamp.map(|t| std::time::SystemTime::from(t.0)),
        finalizers: metadata.finalizers.unwrap_or_default().into_iter().map(Into::into).collect(),
    }
}
