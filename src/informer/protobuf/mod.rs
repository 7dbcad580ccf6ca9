//! Built-in kinds read as protobuf, as client-go reads them: the API server encodes protobuf faster and smaller than JSON, and each object is written here as the JSON client-go would write of it, so the cache and every reader see JSON as before.
//!
//! - [`schema`], [`generated`]: how each kind's messages map to JSON, read by
//!   `hack/gen-proto-schema` from the Go types' struct tags.
//! - [`wire`]: the protobuf wire format, read without copying.
//! - [`envelope`]: the `k8s\0` prefix, `runtime.Unknown`, lists and watch events.
//! - [`to_json`], [`time_text`]: one message written as JSON.

mod envelope;
mod error;
#[rustfmt::skip]
mod generated;
mod schema;
mod time_text;
mod to_json;
mod wire;

pub use envelope::{ListPage, Unknown, WatchEvent};
pub use error::ProtobufError;

use schema::{Message, Value};

/// The protobuf of one built-in kind, written as JSON.
#[derive(Debug, Clone, Copy)]
pub struct ProtobufKind {
    message: &'static Message,
    /// The kind's name (`ConfigMap`), the end of its Go type's, found once:
    /// every list page and watch event's envelope is checked against it.
    name: &'static str,
    /// Its `metadata` field, found once (`None` for `Status`, which has a
    /// `ListMeta` and is never stored).
    metadata: Option<MetadataOf>,
}

/// Where a kind's `metadata` (an ObjectMeta) is, and its `managedFields`.
#[derive(Debug, Clone, Copy)]
struct MetadataOf {
    number: u32,
    message: &'static Message,
    managed_fields: Option<u32>,
}

/// An object written as JSON from its protobuf, ready to store.
pub struct WrittenObject {
    pub json: Vec<u8>,
    /// Where its `metadata` object is in `json`.
    pub metadata: std::ops::Range<usize>,
}

impl ProtobufKind {
    /// The built-in kind `kind` of `api_version` (`apps/v1`), if the API
    /// server serves it as protobuf; `None` for custom resources and kinds
    /// newer than the table.
    pub fn of(api_version: &str, kind: &str) -> Option<Self> {
        let found = generated::KINDS.binary_search_by(|(v, k, _)| (*v, *k).cmp(&(api_version, kind))).ok()?;
        let message = &generated::MESSAGES[usize::from(generated::KINDS[found].2)];
        Some(ProtobufKind { message, name: kind_name(message), metadata: metadata_of(message) })
    }

    /// `metav1.Status`, what a watch's ERROR event carries.
    pub fn status() -> Self {
        let message = &generated::MESSAGES[usize::from(generated::STATUS)];
        ProtobufKind { message, name: kind_name(message), metadata: None }
    }

    /// Checks the kind an envelope names (`ConfigMap`, or `ConfigMapList`
    /// for a `list`) against this one; an envelope that names none passes,
    /// as there is nothing to check.
    pub fn check_envelope(self, named: &[u8], list: bool) -> Result<(), ProtobufError> {
        let kind = self.name;
        let suffix: &[u8] = if list { b"List" } else { b"" };
        let matches =
            named.len() == kind.len() + suffix.len() && named.starts_with(kind.as_bytes()) && named.ends_with(suffix);
        if named.is_empty() || matches {
            return Ok(());
        }
        let expected = format!("{kind}{}", if list { "List" } else { "" });
        Err(ProtobufError::WrongKind { expected, got: String::from_utf8_lossy(named).into_owned() })
    }

    /// The object whose protobuf is `message` as the JSON to store:
    /// `types` (its `"apiVersion":…,"kind":…`, which protobuf leaves to the
    /// envelope) first, then its metadata, without `managedFields` when
    /// `strip_managed_fields`, then the rest.
    pub fn to_object(
        self,
        message: &[u8],
        types: &[u8],
        strip_managed_fields: bool,
    ) -> Result<WrittenObject, ProtobufError> {
        // Every kind `of` finds has one: the generator takes only kinds with an ObjectMeta.
        let of = self.metadata.unwrap_or_else(|| unreachable!("{} is not an object kind", self.message.name));
        let skip = of.managed_fields.filter(|_| strip_managed_fields);
        let metadata = to_json::MetadataField { number: of.number, message: of.message, skip };
        let mut json = Vec::with_capacity(types.len() + message.len() + message.len() / 2);
        let metadata = to_json::write_object(&mut json, message, self.message, types, &metadata)?;
        Ok(WrittenObject { json, metadata })
    }

    /// The JSON of an object of this kind from its message (without
    /// `apiVersion` and `kind`, which protobuf leaves to the envelope).
    /// The JSON is UTF-8: every string is checked (invalid sequences
    /// replaced) and raw JSON read by serde_json.
    pub fn to_json(self, message: &[u8]) -> Result<Vec<u8>, ProtobufError> {
        let mut out = Vec::with_capacity(message.len() + message.len() / 2);
        to_json::write_message(&mut out, message, self.message)?;
        Ok(out)
    }
}

/// The kind a message is of: its Go type's name (`k8s.io/api/core/v1.ConfigMap`) ends in it.
fn kind_name(message: &'static Message) -> &'static str {
    message.name.rsplit('.').next().unwrap_or(message.name)
}

/// The `metadata` field of a kind's message, if it is an ObjectMeta.
fn metadata_of(message: &'static Message) -> Option<MetadataOf> {
    let field = message.fields.iter().find(|field| field.json == "metadata")?;
    let Value::Message(meta) = field.value else { return None };
    let meta = &generated::MESSAGES[usize::from(meta)];
    let managed_fields = meta.fields.iter().find(|field| field.json == "managedFields").map(|field| field.number);
    Some(MetadataOf { number: field.number, message: meta, managed_fields })
}

#[cfg(test)]
mod conformance_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_should_name_the_kind_asked_for_or_none() {
        let config_map = ProtobufKind::of("v1", "ConfigMap").unwrap();
        assert!(config_map.check_envelope(b"ConfigMap", false).is_ok());
        assert!(config_map.check_envelope(b"ConfigMapList", true).is_ok());
        assert!(config_map.check_envelope(b"", false).is_ok(), "an envelope naming no kind leaves nothing to check");
        for (named, list) in
            [(&b"Secret"[..], false), (b"ConfigMapList", false), (b"ConfigMap", true), (b"SecretList", true)]
        {
            let err = config_map.check_envelope(named, list).unwrap_err();
            assert!(matches!(err, ProtobufError::WrongKind { .. }), "{named:?} (list: {list}): {err}");
        }
        assert!(ProtobufKind::status().check_envelope(b"Status", false).is_ok());
    }

    #[test]
    fn the_kinds_should_be_sorted_for_the_search_and_name_their_messages() {
        assert!(generated::KINDS.windows(2).all(|pair| (pair[0].0, pair[0].1) < (pair[1].0, pair[1].1)));
        for (api_version, kind, _) in generated::KINDS {
            let found = ProtobufKind::of(api_version, kind).unwrap();
            assert!(found.message.name.ends_with(&format!(".{kind}")), "{api_version} {kind}: {}", found.message.name);
            assert_eq!(found.name, *kind);
            let metadata = found.metadata.unwrap_or_else(|| panic!("{api_version} {kind} has no ObjectMeta"));
            assert!(metadata.message.name.ends_with(".ObjectMeta") && metadata.managed_fields.is_some());
        }
        assert!(ProtobufKind::of("v1", "ConfigMap").is_some());
        assert!(ProtobufKind::of("example.com/v1", "User").is_none());
        assert!(ProtobufKind::status().message.name.ends_with(".Status"));
    }

    #[test]
    fn a_field_the_table_does_not_know_should_be_an_error_not_lost() {
        // ObjectMeta with its name (1) and a field 99 no Kubernetes has yet.
        let meta = [&[0x0a, 1, b'n'][..], &[0x9a, 0x06, 1, b'x']].concat();
        let message = [&[0x0a, meta.len() as u8][..], &meta].concat();
        let read = ProtobufKind::of("v1", "ConfigMap").unwrap().to_json(&message);
        assert!(
            matches!(read, Err(ProtobufError::UnknownField { message, number: 99 }) if message.ends_with(".ObjectMeta")),
            "{read:?}"
        );
    }

    /// A ConfigMap as the API server encodes it (by hand: field numbers
    /// from k8s.io/api/core/v1/generated.proto).
    #[test]
    fn a_config_map_should_be_written_as_client_go_writes_it() {
        fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
            let mut out = vec![number << 3 | 2, u8::try_from(bytes.len()).unwrap()];
            out.extend_from_slice(bytes);
            out
        }
        let time = [8u8, 0x80, 0xe6, 0x9b, 0xc9, 0x06]; // seconds: 1764160256
        let meta = [
            field(1, b"settings"),
            field(3, b"apps"),
            field(6, b"7"),
            field(8, &time),
            field(11, &[field(1, b"b"), field(2, b"2")].concat()),
            field(11, &[field(1, b"a"), field(2, b"1")].concat()),
        ]
        .concat();
        let message = [
            field(1, &meta),
            field(2, &[field(1, b"x"), field(2, b"<&>")].concat()),
            field(3, &[field(1, b"bin"), field(2, &[0, 1, 2])].concat()),
        ]
        .concat();
        let json = ProtobufKind::of("v1", "ConfigMap").unwrap().to_json(&message).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "metadata": {
                    "name": "settings", "namespace": "apps", "resourceVersion": "7",
                    "creationTimestamp": "2025-11-26T12:30:56Z",
                    "labels": { "a": "1", "b": "2" }
                },
                "data": { "x": "<&>" },
                "binaryData": { "bin": "AAEC" }
            })
        );
    }
}
