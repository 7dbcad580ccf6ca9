//! `Shaping`: turns one object's JSON text, as the API server sent it, into a `CachedObject`, parsing only its metadata and copying the rest through as text.
//!
//! No tree of the object is ever built: its top-level members and those of
//! its `metadata` are read as raw JSON values (borrowed from the text), the
//! few metadata fields keys, indexes and predicates need are parsed, and the
//! stored JSON is written back member by member: `apiVersion` and `kind`
//! first (filled in when the server left them out, as it does for list items
//! of built-in kinds), then `metadata` without `managedFields` when they are
//! stripped, then every other member as it came.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ApiResource;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::labels::Labels;
use super::object::{CachedObject, IndexValues, Lifecycle, Meta, OwnerRef};
use super::resource_version::ResourceVersion;
use super::spec::{IndexBy, IndexSpec};
use super::uid::Uid;

/// How an informer turns what the API server sent into a `CachedObject`.
#[derive(Debug, Clone)]
pub struct Shaping {
    pub strip_managed_fields: bool,
    /// The informer's kind: an object of another (`PartialObjectMetadata`,
    /// metadata-only) is stored under the informer's apiVersion and kind.
    kind: String,
    /// `"apiVersion":…,"kind":…` of the informer's resource, written once
    /// here: filled in when the server left them out (list items of
    /// built-in types) or sent another kind.
    types_json: Box<[u8]>,
    pub indexes: Vec<IndexSpec>,
}

impl Shaping {
    pub fn new(resource: &ApiResource, strip_managed_fields: bool, indexes: Vec<IndexSpec>) -> Self {
        let types_json =
            format!(r#""apiVersion":{},"kind":{}"#, json_string(&resource.api_version), json_string(&resource.kind));
        Shaping {
            strip_managed_fields,
            kind: resource.kind.clone(),
            types_json: types_json.into_bytes().into(),
            indexes,
        }
    }

    /// Parses the metadata of the object `json`, strips and indexes it, and
    /// writes the JSON to store.
    pub fn shape(&self, json: &[u8]) -> Result<CachedObject, serde_json::Error> {
        let Members(members) = serde_json::from_slice(json)?;
        let mut api_version = None;
        let mut kind = None;
        let mut metadata = None;
        for (name, value) in &members {
            match &**name {
                "apiVersion" => api_version = Some(*value),
                "kind" => kind = Some(*value),
                "metadata" => metadata = Some(*value),
                _ => {}
            }
        }
        let metadata_members = match metadata {
            Some(metadata) => serde_json::from_str::<Members>(metadata.get())?.0,
            None => Vec::new(),
        };
        let (meta, Names { namespace, name }) = parse_meta(&metadata_members)?;

        let mut out = Vec::with_capacity(json.len());
        out.push(b'{');
        // The object's own apiVersion and kind when it is of the informer's
        // kind; else (left out, or PartialObjectMetadata) the informer's.
        let own_kind = kind.map(|kind| serde_json::from_str::<Text>(kind.get())).transpose()?;
        match (api_version, kind, own_kind) {
            (Some(api_version), Some(kind), Some(Text(own))) if own == self.kind => {
                write_member(&mut out, "apiVersion", api_version.get().as_bytes())?;
                write_member(&mut out, "kind", kind.get().as_bytes())?;
            }
            _ => out.extend_from_slice(&self.types_json),
        }
        write_key(&mut out, "metadata")?;
        out.push(b'{');
        for (name, value) in &metadata_members {
            if !(self.strip_managed_fields && name == "managedFields") {
                write_member(&mut out, name, value.get().as_bytes())?;
            }
        }
        out.push(b'}');
        for (name, value) in &members {
            if !matches!(&**name, "apiVersion" | "kind" | "metadata") {
                write_member(&mut out, name, value.get().as_bytes())?;
            }
        }
        out.push(b'}');
        self.cached(meta, &namespace, &name, metadata, &members, &out)
    }

    /// The informer's `"apiVersion":…,"kind":…`, for a writer that puts
    /// them first itself (see `shape_written`).
    pub fn types_json(&self) -> &[u8] {
        &self.types_json
    }

    /// Like `shape`, for JSON already written in the stored form (the
    /// informer's types first, managedFields stripped as configured, as
    /// protobuf is written): only its `metadata` object, at `metadata` in
    /// `json`, is parsed; the whole object only for an index by field.
    pub fn shape_written(&self, json: &[u8], metadata: Range<usize>) -> Result<CachedObject, serde_json::Error> {
        let metadata_text =
            json.get(metadata).ok_or_else(|| serde::de::Error::custom("no metadata at the range given"))?;
        let metadata_members = serde_json::from_slice::<Members>(metadata_text)?.0;
        let (meta, Names { namespace, name }) = parse_meta(&metadata_members)?;
        let by_field = self.indexes.iter().any(|index| matches!(index.by, IndexBy::Field(_)));
        let members = if by_field { serde_json::from_slice::<Members>(json)?.0 } else { Vec::new() };
        let metadata = members.iter().find(|(name, _)| name == "metadata").map(|(_, value)| *value);
        self.cached(meta, &namespace, &name, metadata, &members, json)
    }

    /// The cached object: its key, parsed metadata, index values and JSON.
    fn cached(
        &self,
        meta: Meta,
        namespace: &str,
        name: &str,
        metadata: Option<&RawValue>,
        members: &[(Cow<'_, str>, &RawValue)],
        json: &[u8],
    ) -> Result<CachedObject, serde_json::Error> {
        let index_values = self
            .indexes
            .iter()
            .map(|index| index_values(&index.by, &meta, namespace, metadata, members))
            .collect::<Result<_, _>>()
            .map(IndexValues::new)?;
        let key: Arc<str> =
            if namespace.is_empty() { Arc::from(name) } else { Arc::from(format!("{namespace}/{name}")) };
        Ok(CachedObject { key, meta, json: json.into(), index_values })
    }
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string always serializes")
}

/// `,"name":` (no comma before the first member, which follows `{`).
fn write_key(out: &mut Vec<u8>, name: &str) -> Result<(), serde_json::Error> {
    if out.last() != Some(&b'{') {
        out.push(b',');
    }
    serde_json::to_writer(&mut *out, name)?;
    out.push(b':');
    Ok(())
}

fn write_member(out: &mut Vec<u8>, name: &str, value: &[u8]) -> Result<(), serde_json::Error> {
    write_key(out, name)?;
    out.extend_from_slice(value);
    Ok(())
}

/// `metadata.namespace` and `metadata.name`, borrowed from the text unless
/// escaped: they go into the object's key, not into its `Meta`.
#[derive(Default)]
struct Names<'a> {
    namespace: Cow<'a, str>,
    name: Cow<'a, str>,
}

/// The fields of `Meta`, and the names, from the members of `metadata`.
fn parse_meta<'a>(members: &[(Cow<'_, str>, &'a RawValue)]) -> Result<(Meta, Names<'a>), serde_json::Error> {
    let mut meta = Meta::default();
    let mut names = Names::default();
    let mut lifecycle = Lifecycle::default();
    let mut annotations = BTreeMap::<Box<str>, Box<str>>::new();
    for (name, value) in members {
        let text = value.get();
        match &**name {
            "name" => names.name = borrowed_string(text)?,
            "namespace" => names.namespace = borrowed_string(text)?,
            "uid" => meta.uid = Uid::new(&borrowed_string(text)?),
            "resourceVersion" => meta.resource_version = ResourceVersion::new(&borrowed_string(text)?),
            "generation" => meta.generation = serde_json::from_str::<Option<i64>>(text)?.unwrap_or(0),
            "labels" => {
                let labels: Option<BTreeMap<Box<str>, Box<str>>> = serde_json::from_str(text)?;
                meta.labels = Labels::new(labels.unwrap_or_default());
            }
            "annotations" => annotations = serde_json::from_str::<Option<_>>(text)?.unwrap_or_default(),
            "ownerReferences" => {
                let owners: Option<Vec<OwnerWire>> = serde_json::from_str(text)?;
                lifecycle.owners = owners.unwrap_or_default().into_iter().map(OwnerRef::from).collect();
            }
            "deletionTimestamp" => {
                let at: Option<Time> = serde_json::from_str(text)?;
                lifecycle.deletion_timestamp = at.map(|t| std::time::SystemTime::from(t.0));
            }
            "finalizers" => {
                let finalizers: Option<Vec<Box<str>>> = serde_json::from_str(text)?;
                lifecycle.finalizers = finalizers.unwrap_or_default().into();
            }
            _ => {}
        }
    }
    // Hashed as `Meta::from(ObjectMeta)` hashes its map, so both agree.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    annotations.hash(&mut hasher);
    meta.annotations_hash = hasher.finish();
    meta.set_lifecycle(lifecycle);
    Ok((meta, names))
}

/// A JSON string member (or null, read as empty), borrowed unless escaped.
fn borrowed_string(text: &str) -> Result<Cow<'_, str>, serde_json::Error> {
    Ok(serde_json::from_str::<Option<Text>>(text)?.map(|Text(s)| s).unwrap_or_default())
}

/// One `metadata.ownerReferences` entry as sent.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerWire {
    api_version: Box<str>,
    kind: Box<str>,
    name: Box<str>,
    uid: Box<str>,
    #[serde(default)]
    controller: Option<bool>,
}

impl From<OwnerWire> for OwnerRef {
    fn from(o: OwnerWire) -> Self {
        OwnerRef {
            api_version: o.api_version,
            kind: o.kind,
            name: o.name,
            uid: o.uid,
            controller: o.controller.unwrap_or(false),
        }
    }
}

/// The values an object is filed under in an index of kind `by`.
fn index_values(
    by: &IndexBy,
    meta: &Meta,
    namespace: &str,
    metadata: Option<&RawValue>,
    members: &[(Cow<'_, str>, &RawValue)],
) -> Result<Box<[Box<str>]>, serde_json::Error> {
    let mut values: Vec<Box<str>> = Vec::new();
    match by {
        IndexBy::Namespace => values.push(namespace.into()),
        IndexBy::Owner => values.extend(meta.owners().iter().map(|owner| owner.uid.clone())),
        IndexBy::Field(path) => {
            let mut segments = path.split('.');
            let first = segments.next().unwrap_or_default();
            let member = if first == "metadata" {
                metadata
            } else {
                members.iter().find(|(name, _)| name == first).map(|(_, value)| *value)
            };
            if let Some(member) = member {
                // Only for field indexes: parse the one member they walk into.
                let value: Value = serde_json::from_str(member.get())?;
                collect_path(&value, segments, &mut values);
            }
        }
    }
    values.sort();
    values.dedup();
    Ok(values.into())
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

/// A JSON object's members in order, each value left as text borrowed from
/// the input.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((Text(name), value)) = map.next_entry::<Text<'de>, &'de RawValue>()? {
                    members.push((name, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// A JSON string, borrowed from the input unless it had escapes to undo.
/// (serde's own `Cow<str>` always copies.)
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
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

    fn pod() -> Value {
        serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "apps", "uid": "u1", "resourceVersion": "42", "generation": 3,
                "labels": { "b": "2", "a": "1" },
                "annotations": { "x": "y" },
                "managedFields": [{ "manager": "kubectl", "operation": "Apply" }],
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs1", "controller": true }],
                "finalizers": ["a/b"],
                "deletionTimestamp": "2026-11-25T10:00:00Z"
            },
            "spec": {
                "nodeName": "n1",
                "volumes": [{ "configMap": { "name": "c1" } }, { "secret": {} }, { "configMap": { "name": "c2" } }]
            },
            "status": { "phase": "Running" }
        })
    }

    fn shape(shaping: &Shaping, object: &Value) -> CachedObject {
        shaping.shape(object.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn shape_should_strip_managed_fields_fill_types_and_parse_metadata() {
        let object = shape(&shaping(vec![]), &pod());
        assert_eq!(&*object.key, "apps/web");
        let json: Value = serde_json::from_slice(&object.json).unwrap();
        assert!(json["metadata"].get("managedFields").is_none(), "{json}");
        assert_eq!(json["kind"], "Pod");
        assert_eq!(json["apiVersion"], "v1");
        assert_eq!(json["spec"]["nodeName"], "n1");
        assert_eq!(object.meta.label("a"), Some("1"));
        assert_eq!(object.meta.label("c"), None);
        assert_eq!(object.meta.generation, 3);
        assert_eq!(object.meta.numeric_resource_version(), Some(42));
        assert_eq!(object.meta.owners()[0].group(), "apps");
        assert!(object.meta.owners()[0].controller);
        assert!(object.meta.has_finalizer("a/b"));
        assert!(object.meta.deletion_timestamp().is_some());
    }

    #[test]
    fn the_stored_json_should_be_the_sent_object_less_managed_fields_with_types_first() {
        let mut expected = pod();
        expected["metadata"].as_object_mut().unwrap().remove("managedFields");
        expected["apiVersion"] = "v1".into();
        expected["kind"] = "Pod".into();
        let object = shape(&shaping(vec![]), &pod());
        let json: Value = serde_json::from_slice(&object.json).unwrap();
        assert_eq!(json, expected);
        let text = std::str::from_utf8(&object.json).unwrap();
        assert!(text.starts_with(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"#), "{text}");

        let keep = Shaping { strip_managed_fields: false, ..shaping(vec![]) };
        let json: Value = serde_json::from_slice(&shape(&keep, &pod()).json).unwrap();
        assert_eq!(json["metadata"]["managedFields"][0]["manager"], "kubectl");
    }

    #[test]
    fn an_object_of_another_kind_should_be_stored_under_the_informers_types() {
        let mut partial = pod();
        partial["apiVersion"] = "meta.k8s.io/v1".into();
        partial["kind"] = "PartialObjectMetadata".into();
        let json: Value = serde_json::from_slice(&shape(&shaping(vec![]), &partial).json).unwrap();
        assert_eq!((&json["apiVersion"], &json["kind"]), (&"v1".into(), &"Pod".into()));

        let mut own = pod();
        own["apiVersion"] = "v1".into();
        own["kind"] = "Pod".into();
        let text = String::from_utf8(shape(&shaping(vec![]), &own).json.to_vec()).unwrap();
        assert_eq!(text.matches(r#""kind":"Pod""#).count(), 1, "{text}");
    }

    #[test]
    fn escaped_names_and_values_should_be_read_and_written_back_intact() {
        let text =
            r#"{"metadata":{"name":"a\"b","namespace":"n\u00e9","labels":{"k\\":"v\n"}},"data":{"x\"y":"\u0000"}}"#;
        let object = shaping(vec![]).shape(text.as_bytes()).unwrap();
        assert_eq!(&*object.key, "n\u{e9}/a\"b");
        assert_eq!(object.meta.label("k\\"), Some("v\n"));
        let json: Value = serde_json::from_slice(&object.json).unwrap();
        assert_eq!(json["data"]["x\"y"], "\u{0}");
        assert_eq!(json["metadata"]["name"], "a\"b");
    }

    #[test]
    fn what_is_not_an_object_should_be_refused() {
        for text in ["[]", "\"pod\"", r#"{"metadata":[]}"#, r#"{"metadata":{"name":1}}"#, "{"] {
            assert!(shaping(vec![]).shape(text.as_bytes()).is_err(), "{text}");
        }
        let bare = shaping(vec![]).shape(b"{}").unwrap();
        assert_eq!(std::str::from_utf8(&bare.json).unwrap(), r#"{"apiVersion":"v1","kind":"Pod","metadata":{}}"#);
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
        let object = shape(&shaping(indexes), &pod());
        let values: Vec<Vec<&str>> =
            object.index_values.per_index().iter().map(|v| v.iter().map(|s| &**s).collect()).collect();
        assert_eq!(values, vec![vec!["apps"], vec!["rs1"], vec!["n1"], vec!["c1", "c2"], vec!["3"], vec![]]);
    }

    #[test]
    fn annotations_hash_should_change_only_with_the_annotations_and_match_meta_from_object_meta() {
        let a = shape(&shaping(vec![]), &pod());
        let mut changed = pod();
        changed["metadata"]["labels"]["c"] = "3".into();
        let b = shape(&shaping(vec![]), &changed);
        assert_eq!(a.meta.annotations_hash, b.meta.annotations_hash);
        changed["metadata"]["annotations"]["x"] = "z".into();
        let c = shape(&shaping(vec![]), &changed);
        assert_ne!(a.meta.annotations_hash, c.meta.annotations_hash);

        let typed: kube::api::ObjectMeta = serde_json::from_value(pod()["metadata"].clone()).unwrap();
        assert_eq!(Meta::from(typed), a.meta, "the same metadata parsed either way");
    }
}
