//! Writes one message's protobuf as the JSON client-go would write of the Go object it decodes to: members in Go's field order, `omitempty` and `omitzero` as Go applies them, map keys sorted, bytes in base64, and Kubernetes' hand-written types (times, durations, quantities, int-or-strings, raw JSON) as their own JSON methods write them.

use std::ops::Range;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use smallvec::SmallVec;

use super::error::ProtobufError;
use super::generated::MESSAGES;
use super::schema::{Field, INLINE, Message, OMIT_EMPTY, OMIT_ZERO, POINTER, REPEATED, Special, Value};
use super::time_text;
use super::wire::{Fields, WireValue, packed_varints};

/// Appends to `out` the JSON object of `bytes`, a message of kind `message`.
pub fn write_message(out: &mut Vec<u8>, bytes: &[u8], message: &Message) -> Result<(), ProtobufError> {
    out.push(b'{');
    let mut first = true;
    write_members(out, bytes, message, None, &mut first)?;
    out.push(b'}');
    Ok(())
}

/// Where an object's metadata is, and what to leave out of it.
pub struct MetadataField {
    /// The object's field number of `metadata` (an `ObjectMeta`).
    pub number: u32,
    pub message: &'static Message,
    /// A field number of `ObjectMeta` not to write (`managedFields`, when stripped).
    pub skip: Option<u32>,
}

/// Appends to `out` the JSON object of a top-level object: the members
/// `types` (`"apiVersion":…,"kind":…`) first, then `metadata` (less
/// `metadata.skip`), then the rest in Go's order; returns where the
/// metadata's own object is in `out`.
pub fn write_object(
    out: &mut Vec<u8>,
    bytes: &[u8],
    message: &Message,
    types: &[u8],
    metadata: &MetadataField,
) -> Result<Range<usize>, ProtobufError> {
    out.push(b'{');
    out.extend_from_slice(types);
    let mut first = types.is_empty();
    let mut sent_metadata: &[u8] = &[];
    for field in Fields::new(bytes) {
        if let (number, value) = field?
            && number == metadata.number
        {
            sent_metadata = value.bytes()?;
        }
    }
    write_name(out, "metadata", &mut first);
    let start = out.len();
    out.push(b'{');
    write_members(out, sent_metadata, metadata.message, metadata.skip, &mut true)?;
    out.push(b'}');
    let range = start..out.len();
    write_members(out, bytes, message, Some(metadata.number), &mut first)?;
    out.push(b'}');
    Ok(range)
}

/// Most messages have fewer fields than this; beyond it they spill to the heap.
const FIELDS_INLINE: usize = 24;

/// Writes the members of `bytes` (a message of kind `message`), less the
/// field numbered `skip`, into the object being written, after any written
/// already (`first` says whether any was).
fn write_members(
    out: &mut Vec<u8>,
    bytes: &[u8],
    message: &Message,
    skip: Option<u32>,
    first: &mut bool,
) -> Result<(), ProtobufError> {
    let sent: SmallVec<[(u32, WireValue<'_>); FIELDS_INLINE]> = Fields::new(bytes).collect::<Result<_, _>>()?;
    // A field the table does not know would be lost without a word.
    let known = |number: u32| match 1u128.checked_shl(number) {
        Some(bit) => message.mask & bit != 0,
        None => message.fields.iter().any(|field| field.number == number),
    };
    if let Some((number, _)) = sent.iter().find(|(number, _)| !known(*number)) {
        return Err(ProtobufError::UnknownField { message: message.name, number: *number });
    }
    for field in message.fields.iter().filter(|field| Some(field.number) != skip) {
        let mut values = sent.iter().filter(|(number, _)| *number == field.number).map(|(_, value)| *value);
        if field.is(INLINE) {
            let Value::Message(inner) = field.value else { unreachable!("the generator inlines only messages") };
            let inner_bytes = values.next_back().map(WireValue::bytes).transpose()?.unwrap_or_default();
            write_members(out, inner_bytes, &MESSAGES[usize::from(inner)], None, first)?;
        } else if field.is(REPEATED) {
            write_repeated(out, field, values, first)?;
        } else if let Value::StringMap(value) = field.value {
            write_map(out, field, value, values, first)?;
        } else {
            // A field sent twice: the last one wins, as Go's decoder makes it.
            write_single(out, field, values.next_back(), first)?;
        }
    }
    Ok(())
}

/// `,"name":` (no comma before an object's first member).
fn write_name(out: &mut Vec<u8>, name: &str, first: &mut bool) {
    if !std::mem::take(first) {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes()); // Go field names need no escaping
    out.extend_from_slice(b"\":");
}

fn write_repeated<'a>(
    out: &mut Vec<u8>,
    field: &Field,
    values: impl Iterator<Item = WireValue<'a>>,
    first: &mut bool,
) -> Result<(), ProtobufError> {
    let mut values = values.peekable();
    if values.peek().is_none() {
        // Go reads no elements as a nil slice: `null`, unless omitted.
        if !field.is(OMIT_EMPTY) && !field.is(OMIT_ZERO) {
            write_name(out, field.json, first);
            out.extend_from_slice(b"null");
        }
        return Ok(());
    }
    write_name(out, field.json, first);
    out.push(b'[');
    let mut count = 0;
    for value in values {
        match (value, scalar_varint(&field.value)) {
            // A packed run of scalars.
            (WireValue::Bytes(packed), true) => {
                for varint in packed_varints(packed) {
                    comma(out, &mut count);
                    write_varint(out, &field.value, varint?);
                }
            }
            (value, _) => {
                comma(out, &mut count);
                write_value(out, &field.value, Some(value))?;
            }
        }
    }
    out.push(b']');
    Ok(())
}

fn comma(out: &mut Vec<u8>, count: &mut usize) {
    if *count > 0 {
        out.push(b',');
    }
    *count += 1;
}

fn write_map<'a>(
    out: &mut Vec<u8>,
    field: &Field,
    value: &Value,
    entries: impl Iterator<Item = WireValue<'a>>,
    first: &mut bool,
) -> Result<(), ProtobufError> {
    let mut pairs: Vec<(&[u8], Option<WireValue<'a>>)> = Vec::new();
    for entry in entries {
        let mut key: &[u8] = &[];
        let mut entry_value = None;
        for part in Fields::new(entry.bytes()?) {
            match part? {
                (1, part) => key = part.bytes()?,
                (2, part) => entry_value = Some(part),
                _ => {}
            }
        }
        pairs.push((key, entry_value));
    }
    if pairs.is_empty() {
        if !field.is(OMIT_EMPTY) && !field.is(OMIT_ZERO) {
            write_name(out, field.json, first);
            out.extend_from_slice(b"null");
        }
        return Ok(());
    }
    // Go writes a map's keys sorted; a key sent twice keeps its last value.
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    pairs.reverse();
    pairs.dedup_by(|later, kept| later.0 == kept.0);
    pairs.reverse();
    write_name(out, field.json, first);
    out.push(b'{');
    for (i, (key, entry_value)) in pairs.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, key);
        out.push(b':');
        // Go decodes a map entry's missing bytes as empty, not nil.
        let entry_value = entry_value.or(matches!(value, Value::Bytes).then_some(WireValue::Bytes(&[])));
        write_value(out, value, entry_value)?;
    }
    out.push(b'}');
    Ok(())
}

/// A field that is neither repeated nor a map: `sent` is its value if the
/// message had it. Absent, a Go field keeps its zero value (a pointer stays nil).
fn write_single(
    out: &mut Vec<u8>,
    field: &Field,
    sent: Option<WireValue<'_>>,
    first: &mut bool,
) -> Result<(), ProtobufError> {
    if field.is(POINTER) {
        match sent {
            None if field.is(OMIT_EMPTY) || field.is(OMIT_ZERO) => {}
            None => {
                write_name(out, field.json, first);
                out.extend_from_slice(b"null");
            }
            // A set pointer is written even when what it points to is zero.
            Some(sent) => {
                write_name(out, field.json, first);
                write_value(out, &field.value, Some(sent))?;
            }
        }
        return Ok(());
    }
    if (field.is(OMIT_EMPTY) && is_empty(&field.value, sent)?) || (field.is(OMIT_ZERO) && is_zero(&field.value, sent)?)
    {
        return Ok(());
    }
    write_name(out, field.json, first);
    write_value(out, &field.value, sent)
}

/// Whether encoding/json's `omitempty` leaves the value out: "", 0, false
/// and empty bytes; never a struct (every message and special type is one).
fn is_empty(value: &Value, sent: Option<WireValue<'_>>) -> Result<bool, ProtobufError> {
    Ok(match (value, sent) {
        (Value::Message(_) | Value::Special(_) | Value::StringMap(_), _) => false,
        (_, None) => true,
        (Value::String | Value::Bytes, Some(sent)) => sent.bytes()?.is_empty(),
        (_, Some(sent)) => sent.varint()? == 0,
    })
}

/// Whether `omitzero` leaves the value out. The generator allows it only on
/// times, whose zero Kubernetes encodes as an empty message.
fn is_zero(value: &Value, sent: Option<WireValue<'_>>) -> Result<bool, ProtobufError> {
    match value {
        Value::Special(Special::Time | Special::MicroTime) => {
            Ok(sent.map(WireValue::bytes).transpose()?.is_none_or(<[u8]>::is_empty))
        }
        other => is_empty(other, sent),
    }
}

/// Whether values of this kind come as varints (and may come packed).
fn scalar_varint(value: &Value) -> bool {
    matches!(value, Value::Bool | Value::Int32 | Value::Int64)
}

fn write_varint(out: &mut Vec<u8>, value: &Value, varint: u64) {
    let mut number = itoa::Buffer::new();
    let text = match value {
        Value::Bool => {
            out.extend_from_slice(if varint != 0 { b"true" } else { b"false" });
            return;
        }
        // A negative int32 is sent sign-extended to 64 bits.
        Value::Int32 => number.format(varint as i64 as i32),
        _ => number.format(varint as i64),
    };
    out.extend_from_slice(text.as_bytes());
}

/// One value; `None` is the Go zero value of its type.
fn write_value(out: &mut Vec<u8>, value: &Value, sent: Option<WireValue<'_>>) -> Result<(), ProtobufError> {
    match value {
        Value::String => write_string(out, sent.map(WireValue::bytes).transpose()?.unwrap_or_default()),
        Value::Bytes => match sent {
            // Go reads a present bytes field as a non-nil slice, even empty.
            Some(sent) => {
                out.push(b'"');
                let bytes = sent.bytes()?;
                let start = out.len();
                out.resize(start + base64::encoded_len(bytes.len(), true).expect("fits in memory"), 0);
                let written = BASE64.encode_slice(bytes, &mut out[start..]).expect("sized for it");
                out.truncate(start + written);
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        },
        Value::Bool | Value::Int32 | Value::Int64 => {
            let varint = sent.map(WireValue::varint).transpose()?.unwrap_or(0);
            write_varint(out, value, varint);
        }
        Value::Message(index) => write_message(
            out,
            sent.map(WireValue::bytes).transpose()?.unwrap_or_default(),
            &MESSAGES[usize::from(*index)],
        )?,
        Value::StringMap(_) => unreachable!("maps are written by write_map"),
        Value::Special(special) => {
            write_special(out, *special, sent.map(WireValue::bytes).transpose()?.unwrap_or_default())?
        }
    }
    Ok(())
}

/// A JSON string of `bytes`, read as UTF-8 (invalid sequences replaced, as encoding/json does).
fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    // The common case first, in one pass without branches (so it
    // vectorizes): ASCII with nothing to escape, copied whole.
    let plain =
        bytes.iter().fold(true, |plain, &byte| plain & (0x20..0x80).contains(&byte) & (byte != b'"') & (byte != b'\\'));
    if !plain {
        let text = String::from_utf8_lossy(bytes);
        return serde_json::to_writer(&mut *out, &*text).expect("writing to a Vec cannot fail");
    }
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    out.extend_from_slice(bytes);
    out.push(b'"');
}

fn write_special(out: &mut Vec<u8>, special: Special, bytes: &[u8]) -> Result<(), ProtobufError> {
    match special {
        Special::Time | Special::MicroTime => {
            if bytes.is_empty() {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            let (mut seconds, mut nanos) = (0i64, 0i64);
            for field in Fields::new(bytes) {
                match field? {
                    (1, value) => seconds = value.varint()? as i64,
                    (2, value) => nanos = i64::from(value.varint()? as i64 as i32),
                    _ => {}
                }
            }
            // metav1.Time's decoder keeps whole seconds only.
            let micros = special == Special::MicroTime;
            time_text::write_time(out, seconds, if micros { nanos } else { 0 }, micros);
        }
        Special::IntOrString => {
            let (mut kind, mut int, mut string): (i64, i32, &[u8]) = (0, 0, &[]);
            for field in Fields::new(bytes) {
                match field? {
                    (1, value) => kind = value.varint()? as i64,
                    (2, value) => int = value.varint()? as i64 as i32,
                    (3, value) => string = value.bytes()?,
                    _ => {}
                }
            }
            if kind == 1 {
                write_string(out, string);
            } else {
                out.extend_from_slice(itoa::Buffer::new().format(int).as_bytes());
            }
        }
        Special::Quantity => {
            let mut text: &[u8] = &[];
            for field in Fields::new(bytes) {
                if let (1, value) = field? {
                    text = value.bytes()?;
                }
            }
            // The zero Quantity writes itself as "0".
            write_string(out, if text.is_empty() { b"0" } else { text });
        }
        Special::RawJson => {
            let mut raw = None;
            for field in Fields::new(bytes) {
                if let (1, value) = field? {
                    raw = Some(value.bytes()?);
                }
            }
            match raw {
                // Written as is, as their MarshalJSON does, once known to be JSON.
                Some(raw) if !raw.is_empty() => {
                    serde_json::from_slice::<&serde_json::value::RawValue>(raw)
                        .map_err(|source| ProtobufError::RawJson { message: "RawExtension or FieldsV1", source })?;
                    out.extend_from_slice(raw);
                }
                _ => out.extend_from_slice(b"null"),
            }
        }
        Special::StringList => {
            let mut count = 0;
            out.push(b'[');
            for field in Fields::new(bytes) {
                if let (1, value) = field? {
                    comma(out, &mut count);
                    write_string(out, value.bytes()?);
                }
            }
            // No items is `[]`: Go decodes a map's value into a fresh, empty list.
            out.push(b']');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        write_string(&mut out, bytes);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_should_be_escaped_where_json_needs_it_and_invalid_utf8_replaced() {
        assert_eq!(string(b"plain <&> \xc3\xa9"), "\"plain <&> \u{e9}\"");
        assert_eq!(string(b"a\"b\\c\nd\x01"), r#""a\"b\\c\nd\u0001""#);
        assert_eq!(string(b"bad \xff byte"), "\"bad \u{fffd} byte\"");
        assert_eq!(string(b""), "\"\"");
    }
}
