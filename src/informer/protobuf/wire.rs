//! The protobuf wire format, read without copying: a message's fields as (number, value) in the order sent.

use super::error::ProtobufError;

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    Varint(u64),
    Fixed64(u64),
    /// Strings, bytes, messages, map entries and packed repeated scalars.
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl<'a> WireValue<'a> {
    /// The bytes of a length-delimited field.
    pub fn bytes(self) -> Result<&'a [u8], ProtobufError> {
        match self {
            WireValue::Bytes(bytes) => Ok(bytes),
            _ => Err(ProtobufError::WireType { expected: "length-delimited" }),
        }
    }

    pub fn varint(self) -> Result<u64, ProtobufError> {
        match self {
            WireValue::Varint(v) => Ok(v),
            _ => Err(ProtobufError::WireType { expected: "varint" }),
        }
    }
}

/// The fields of one message.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn new(message: &'a [u8]) -> Self {
        Fields { rest: message }
    }

    fn field(&mut self) -> Result<(u32, WireValue<'a>), ProtobufError> {
        let tag = read_varint(&mut self.rest)?;
        let number = u32::try_from(tag >> 3).map_err(|_| ProtobufError::FieldNumber(tag >> 3))?;
        let value = match tag & 7 {
            0 => WireValue::Varint(read_varint(&mut self.rest)?),
            1 => WireValue::Fixed64(u64::from_le_bytes(take(&mut self.rest, 8)?.try_into().expect("8 bytes"))),
            2 => {
                let length = read_varint(&mut self.rest)?;
                let length = usize::try_from(length).map_err(|_| ProtobufError::Truncated)?;
                WireValue::Bytes(take(&mut self.rest, length)?)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(take(&mut self.rest, 4)?.try_into().expect("4 bytes"))),
            other => return Err(ProtobufError::UnknownWireType(other as u8)),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, WireValue<'a>), ProtobufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.rest = &[]; // one error ends the message
        }
        Some(field)
    }
}

/// The varints of a packed repeated scalar field.
pub fn packed_varints(mut bytes: &[u8]) -> impl Iterator<Item = Result<u64, ProtobufError>> + '_ {
    std::iter::from_fn(move || (!bytes.is_empty()).then(|| read_varint(&mut bytes)))
}

fn read_varint(bytes: &mut &[u8]) -> Result<u64, ProtobufError> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            *bytes = &bytes[i + 1..];
            return Ok(value);
        }
    }
    Err(if bytes.len() < 10 { ProtobufError::Truncated } else { ProtobufError::VarintTooLong })
}

fn take<'a>(bytes: &mut &'a [u8], length: usize) -> Result<&'a [u8], ProtobufError> {
    if bytes.len() < length {
        return Err(ProtobufError::Truncated);
    }
    let (taken, rest) = bytes.split_at(length);
    *bytes = rest;
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(bytes: &[u8]) -> Vec<(u32, WireValue<'_>)> {
        Fields::new(bytes).collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn every_wire_type_should_be_read_in_order() {
        // 1: varint 150; 2: "hi"; 3: fixed64 1; 4: fixed32 2; 1 again: 0.
        let bytes = [0x08, 0x96, 0x01, 0x12, 2, b'h', b'i', 0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x25, 2, 0, 0, 0, 0x08, 0];
        assert_eq!(
            fields(&bytes),
            [
                (1, WireValue::Varint(150)),
                (2, WireValue::Bytes(b"hi")),
                (3, WireValue::Fixed64(1)),
                (4, WireValue::Fixed32(2)),
                (1, WireValue::Varint(0)),
            ]
        );
    }

    #[test]
    fn a_negative_int32_should_come_as_ten_bytes_of_varint() {
        let bytes = [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let value = fields(&bytes)[0].1.varint().unwrap();
        assert_eq!(value as i64 as i32, -1);
    }

    #[test]
    fn a_cut_message_should_be_an_error_not_a_short_read() {
        for bytes in [&[0x12, 5, b'a'][..], &[0x08][..], &[0x08, 0x80][..], &[0x19, 1, 2][..]] {
            let read: Result<Vec<_>, _> = Fields::new(bytes).collect();
            assert!(matches!(read, Err(ProtobufError::Truncated)), "{bytes:?}: {read:?}");
        }
        let groups: Result<Vec<_>, _> = Fields::new(&[0x0b]).collect();
        assert!(matches!(groups, Err(ProtobufError::UnknownWireType(3))), "{groups:?}");
        let long = [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(matches!(Fields::new(&long).next(), Some(Err(ProtobufError::VarintTooLong))));
    }

    #[test]
    fn packed_varints_should_be_read_one_by_one() {
        let values: Vec<u64> = packed_varints(&[1, 0x96, 0x01, 0]).collect::<Result<_, _>>().unwrap();
        assert_eq!(values, [1, 150, 0]);
    }
}
