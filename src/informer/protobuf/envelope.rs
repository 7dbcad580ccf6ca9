//! Kubernetes' protobuf envelopes: the `k8s\0` prefix and `runtime.Unknown` around every answer, a list's metadata and items, a watch event's type and object.

use super::error::ProtobufError;
use super::wire::Fields;

/// What every protobuf answer (and every watch event's object) starts with.
const PREFIX: &[u8] = b"k8s\0";

/// `runtime.Unknown`: an encoded object and its apiVersion and kind.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unknown<'a> {
    pub api_version: &'a [u8],
    pub kind: &'a [u8],
    pub raw: &'a [u8],
}

impl<'a> Unknown<'a> {
    /// Reads a prefixed `runtime.Unknown`.
    pub fn read(bytes: &'a [u8]) -> Result<Self, ProtobufError> {
        let bytes = bytes.strip_prefix(PREFIX).ok_or(ProtobufError::NoPrefix)?;
        let mut unknown = Unknown::default();
        for field in Fields::new(bytes) {
            match field? {
                (1, type_meta) => {
                    for field in Fields::new(type_meta.bytes()?) {
                        match field? {
                            (1, value) => unknown.api_version = value.bytes()?,
                            (2, value) => unknown.kind = value.bytes()?,
                            _ => {}
                        }
                    }
                }
                (2, raw) => unknown.raw = raw.bytes()?,
                // 3 and 4, contentEncoding and contentType: always empty
                // (the raw object is protobuf) from an API server.
                _ => {}
            }
        }
        Ok(unknown)
    }
}

/// One page of a list: its kind (as its envelope names it), its `ListMeta`
/// and its items, each an object's message.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListPage<'a> {
    pub kind: &'a [u8],
    pub resource_version: String,
    pub continue_token: String,
    pub items: Vec<&'a [u8]>,
}

impl<'a> ListPage<'a> {
    /// Reads a list answer (`k8s\0`, `runtime.Unknown`, then the `…List`).
    pub fn read(answer: &'a [u8]) -> Result<Self, ProtobufError> {
        let Unknown { kind, raw: list, .. } = Unknown::read(answer)?;
        let mut page = ListPage { kind, ..ListPage::default() };
        for field in Fields::new(list) {
            match field? {
                (1, meta) => {
                    for field in Fields::new(meta.bytes()?) {
                        match field? {
                            (2, value) => page.resource_version = text(value.bytes()?),
                            (3, value) => page.continue_token = text(value.bytes()?),
                            _ => {}
                        }
                    }
                }
                (2, item) => page.items.push(item.bytes()?),
                _ => {}
            }
        }
        Ok(page)
    }
}

/// One watch event (`metav1.WatchEvent`): its type and object.
#[derive(Debug, PartialEq, Eq)]
pub struct WatchEvent<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub kind: &'a [u8],
    pub object: Unknown<'a>,
}

impl<'a> WatchEvent<'a> {
    /// Reads one frame of a protobuf watch (without its length prefix).
    pub fn read(frame: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut kind: &[u8] = &[];
        let mut raw: &[u8] = &[];
        for field in Fields::new(frame) {
            match field? {
                (1, value) => kind = value.bytes()?,
                // A runtime.RawExtension whose raw bytes are a prefixed Unknown.
                (2, object) => {
                    for field in Fields::new(object.bytes()?) {
                        if let (1, value) = field? {
                            raw = value.bytes()?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(WatchEvent { kind, object: Unknown::read(raw)? })
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A length-delimited field.
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![number << 3 | 2, u8::try_from(bytes.len()).unwrap()];
        out.extend_from_slice(bytes);
        out
    }

    fn unknown(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
        [PREFIX.to_vec(), field(1, &type_meta), field(2, raw)].concat()
    }

    #[test]
    fn a_list_should_give_its_kind_version_continue_token_and_items() {
        let meta = [field(2, b"42"), field(3, b"next")].concat();
        let list = [field(1, &meta), field(2, b"first"), field(2, b"second")].concat();
        let answer = unknown("v1", "ConfigMapList", &list);
        let page = ListPage::read(&answer).unwrap();
        assert_eq!(page.kind, b"ConfigMapList");
        assert_eq!(page.resource_version, "42");
        assert_eq!(page.continue_token, "next");
        assert_eq!(page.items, [b"first".as_slice(), b"second"]);
    }

    #[test]
    fn a_watch_frame_should_give_its_type_and_wrapped_object() {
        let object = unknown("v1", "ConfigMap", b"object");
        let frame = [field(1, b"ADDED"), field(2, &field(1, &object))].concat();
        let event = WatchEvent::read(&frame).unwrap();
        assert_eq!(event.kind, b"ADDED");
        assert_eq!(event.object, Unknown { api_version: b"v1", kind: b"ConfigMap", raw: b"object" });
    }

    #[test]
    fn an_answer_without_the_prefix_should_be_refused() {
        assert!(matches!(ListPage::read(b"{\"kind\":\"Status\"}"), Err(ProtobufError::NoPrefix)));
        assert!(matches!(WatchEvent::read(&field(1, b"ADDED")), Err(ProtobufError::NoPrefix)));
    }
}
