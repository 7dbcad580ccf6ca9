//! One cached object: its JSON as bytes plus the few parsed metadata fields keys, indexes and predicates need.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, TypeMeta};
use serde_json::Value;

use super::spec::{IndexBy, IndexSpec};

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

/// The parsed part of `metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Meta {
    /// Empty for a cluster-scoped object.
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    pub resource_version: Box<str>,
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

impl Meta {
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| **f == *finalizer)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.labels[i].1)
    }

    /// The resourceVersion as a number, when it is one (it is on etcd-backed servers).
    pub fn numeric_resource_version(&self) -> Option<u64> {
        self.resource_version.parse().ok()
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

/// How an informer turns what the API server sent into a `CachedObject`.
#[derive(Debug, Clone)]
pub struct Shaping {
    pub strip_managed_fields: bool,
    /// apiVersion and kind to fill in when the server left them out (list
    /// items of built-in types) or sent `PartialObjectMetadata` (metadata-only).
    pub types: TypeMeta,
    pub indexes: Vec<IndexSpec>,
}

impl Shaping {
    pub fn new(resource: &ApiResource, strip_managed_fields: bool, indexes: Vec<IndexSpec>) -> Self {
        let types = TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() };
        Shaping { strip_managed_fields, types, indexes }
    }

    /// Strips, indexes and serializes one object.
    pub fn shape(&self, mut object: DynamicObject) -> Result<CachedObject, serde_json::Error> {
        if self.strip_managed_fields {
            object.metadata.managed_fields = None;
        }
        match &object.types {
            Some(types) if types.kind == self.types.kind => {}
            _ => object.types = Some(self.types.clone()),
        }
        let index_values = self.indexes.iter().map(|index| index_values(&index.by, &object)).collect();
        let json: Arc<[u8]> = serde_json::to_vec(&object)?.into();
        let meta = meta_of(object.metadata);
        let key: Arc<str> = if meta.namespace.is_empty() {
            Arc::from(&*meta.name)
        } else {
            Arc::from(format!("{}/{}", meta.namespace, meta.name))
        };
        Ok(CachedObject { key, meta, json, index_values })
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
        namespace: metadata.namespace.unwrap_or_default().into(),
        name: metadata.name.unwrap_or_default().into(),
        uid: metadata.uid.unwrap_or_default().into(),
        resource_version: metadata.resource_version.unwrap_or_default().into(),
        generation: metadata.generation,
        labels: labels.into(),
        annotations_hash,
        owners,
        deletion_timestamp: metadata.deletion_timestamp.map(|t| std::time::SystemTime::from(t.0)),
        finalizers: metadata.finalizers.unwrap_or_default().into_iter().map(Into::into).collect(),
    }
}

/// The values `object` is filed under in an index of kind `by`.
fn index_values(by: &IndexBy, object: &DynamicObject) -> Box<[Box<str>]> {
    let mut values: Vec<Box<str>> = Vec::new();
    match by {
        IndexBy::Namespace => values.push(object.metadata.namespace.as_deref().unwrap_or_default().into()),
        IndexBy::Owner => {
            for owner in object.metadata.owner_references.iter().flatten() {
                values.push(owner.uid.as_str().into());
            }
        }
        IndexBy::Field(path) => {
            let mut segments = path.split('.');
            let first = segments.next().unwrap_or_default();
            if first == "metadata" {
                // Rare: metadata is typed, so look it up through a Value of it alone.
                if let Ok(metadata) = serde_json::to_value(&object.metadata) {
                    collect_path(&metadata, segments, &mut values);
                }
            } else if let Some(value) = object.data.get(first) {
                collect_path(value, segments, &mut values);
            }
        }
    }
    values.sort();
    values.dedup();
    values.into()
}

/// Walks `path` from `value`, fanning out over lists; pushes scalars found at its end.
fn collect_path<'p>(value: &Value, mut path: impl Iterator<Item = &'p str> + Clone, out: &mut Vec<Box<str>>) {
    match value {
        Value::Array(items) => {
            for item in items {
                collect_path(item, path.clone(), out);
            }
        }
        _ => match path.next() {
            Some(segment) => {
                if let Some(next) = value.get(segment) {
                    collect_path(next, path, out);
                }
            }
            None => match value {
                Value::String(s) => out.push(s.as_str().into()),
                Value::Number(n) => out.push(n.to_string().into()),
                Value::Bool(b) => out.push(b.to_string().into()),
                _ => {}
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaping(indexes: Vec<IndexSpec>) -> Shaping {
        let resource = ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
        };
        Shaping::new(&resource, true, indexes)
    }

    fn pod() -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "apps", "uid": "u1", "resourceVersion": "42", "generation": 3,
                "labels": { "b": "2", "a": "1" },
                "annotations": { "x": "y" },
                "managedFields": [{ "manager": "kubectl", "operation": "Apply" }],
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs1", "controller": true }]
            },
            "spec": {
                "nodeName": "n1",
                "volumes": [{ "configMap": { "name": "c1" } }, { "secret": {} }, { "configMap": { "name": "c2" } }]
            }
        }))
        .unwrap()
    }

    #[test]
    fn shape_should_strip_managed_fields_fill_types_and_parse_metadata() {
        let object = shaping(vec![]).shape(pod()).unwrap();
        assert_eq!(&*object.key, "apps/web");
        let json: Value = serde_json::from_slice(&object.json).unwrap();
        assert!(json["metadata"].get("managedFields").is_none(), "{json}");
        assert_eq!(json["kind"], "Pod");
        assert_eq!(json["apiVersion"], "v1");
        assert_eq!(json["spec"]["nodeName"], "n1");
        assert_eq!(object.meta.label("a"), Some("1"));
        assert_eq!(object.meta.label("c"), None);
        assert_eq!(object.meta.generation, Some(3));
        assert_eq!(object.meta.numeric_resource_version(), Some(42));
        assert_eq!(object.meta.owners[0].group(), "apps");
        assert!(object.meta.owners[0].controller);
    }

    #[test]
    fn shape_should_file_the_object_under_each_index() {
        let indexes = vec![
            IndexSpec { name: "ns".into(), by: IndexBy::Namespace },
            IndexSpec { name: "owner".into(), by: IndexBy::Owner },
            IndexSpec { name: "node".into(), by: IndexBy::Field("spec.nodeName".into()) },
            IndexSpec { name: "cm".into(), by: IndexBy::Field("spec.volumes.configMap.name".into()) },
            IndexSpec { name: "gen".into(), by: IndexBy::Field("metadata.generation".into()) },
            IndexSpec { name: "none".into(), by: IndexBy::Field("spec.missing".into()) },
        ];
        let object = shaping(indexes).shape(pod()).unwrap();
        let values: Vec<Vec<&str>> = object.index_values.iter().map(|v| v.iter().map(|s| &**s).collect()).collect();
        assert_eq!(values, vec![vec!["apps"], vec!["rs1"], vec!["n1"], vec!["c1", "c2"], vec!["3"], vec![]]);
    }

    #[test]
    fn annotations_hash_should_change_only_with_the_annotations() {
        let a = shaping(vec![]).shape(pod()).unwrap();
        let mut changed = pod();
        changed.metadata.labels.as_mut().unwrap().insert("c".into(), "3".into());
        let b = shaping(vec![]).shape(changed.clone()).unwrap();
        assert_eq!(a.meta.annotations_hash, b.meta.annotations_hash);
        changed.metadata.annotations.as_mut().unwrap().insert("x".into(), "z".into());
        let c = shaping(vec![]).shape(changed).unwrap();
        assert_ne!(a.meta.annotations_hash, c.meta.annotations_hash);
    }
}
