//! The shape of the generated table: each message's fields as protobuf numbers them and as client-go's JSON names and omits them.

/// One Go struct that is a protobuf message.
#[derive(Debug)]
pub struct Message {
    /// The Go type (`k8s.io/api/core/v1.ConfigMap`), for errors.
    pub name: &'static str,
    /// In Go's field order, which is the order encoding/json writes them in.
    pub fields: &'static [Field],
    /// Bit n set when field number n (below 128) is one of `fields`: a
    /// field sent is checked against it without a search.
    pub mask: u128,
}

impl Message {
    pub const fn new(name: &'static str, fields: &'static [Field]) -> Self {
        let mut mask = 0u128;
        let mut i = 0;
        while i < fields.len() {
            if fields[i].number < 128 {
                mask |= 1 << fields[i].number;
            }
            i += 1;
        }
        Message { name, fields, mask }
    }
}

/// One struct field.
#[derive(Debug)]
pub struct Field {
    pub number: u32,
    /// Empty for an inline field, whose members are written into its parent's object.
    pub json: &'static str,
    /// The element's value, for a repeated field or a map.
    pub value: Value,
    flags: u8,
}

/// A Go slice: a JSON array (`null` when empty and not omitted).
pub const REPEATED: u8 = 1;
/// `omitempty`: left out when "", 0, false, nil or of length 0 (never a struct).
pub const OMIT_EMPTY: u8 = 1 << 1;
/// `omitzero`: left out when its value is the zero value.
pub const OMIT_ZERO: u8 = 1 << 2;
/// A Go pointer: present in protobuf only when set, and then written even when zero.
pub const POINTER: u8 = 1 << 3;
/// `json:",inline"`: its members are its parent's.
pub const INLINE: u8 = 1 << 4;

impl Field {
    pub const fn new(number: u32, json: &'static str, value: Value, flags: u8) -> Self {
        Field { number, json, value, flags }
    }

    pub fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// What one value is in both encodings.
#[derive(Debug)]
pub enum Value {
    String,
    /// A JSON string of the bytes in base64.
    Bytes,
    Bool,
    Int32,
    Int64,
    /// A message: index into the table's `MESSAGES`.
    Message(u16),
    /// A Go map with string keys: a JSON object, keys sorted.
    StringMap(&'static Value),
    Special(Special),
}

/// Types whose protobuf and JSON Kubernetes writes by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `metav1.Time`: `{seconds, nanos}`; RFC 3339 in whole seconds, `null` when zero.
    Time,
    /// `metav1.MicroTime`: as `Time`, with microseconds.
    MicroTime,
    /// `intstr.IntOrString`: `{type, intVal, strVal}`; a JSON number or string.
    IntOrString,
    /// `resource.Quantity`: `{string}`; the JSON string.
    Quantity,
    /// `runtime.RawExtension`, `metav1.FieldsV1`: `{raw}`, JSON bytes written as they are.
    RawJson,
    /// A named `[]string` that is a message of its own (`ExtraValue`): `{repeated items}`.
    StringList,
}
