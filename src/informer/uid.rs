//! `Uid`: an object's `metadata.uid`, kept as 16 bytes when it is a UUID in the API server's text form.

use std::fmt;
use std::ops::Deref;

/// The length of a UUID's text form: 32 hex digits and 4 dashes.
const TEXT_LEN: usize = 36;

/// Where the dashes of a UUID's text form are.
const DASHES: [usize; 4] = [8, 13, 18, 23];

/// An object's `metadata.uid`. The API server makes every uid a random UUID
/// written in lowercase hex; such a uid is kept as its 16 bytes, 24 bytes in
/// all against 16 plus a 36-byte allocation for the text. Any other text
/// (uppercase, another form, empty) is kept as it came, so the text given
/// back is always the one the server sent: shard slots hash that text.
#[derive(Clone, PartialEq, Eq)]
pub enum Uid {
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Default for Uid {
    fn default() -> Self {
        Uid::Text(Box::default())
    }
}

impl Uid {
    pub fn new(text: &str) -> Uid {
        parse_lowercase_uuid(text).map_or_else(|| Uid::Text(text.into()), Uid::Uuid)
    }

    /// The uid's text, exactly as the API server sent it.
    pub fn as_str(&self) -> UidText<'_> {
        match self {
            Uid::Uuid(bytes) => UidText::Formatted(format_uuid(bytes)),
            Uid::Text(text) => UidText::Borrowed(text),
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.as_str(), f)
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// A uid's text: written out on the stack for a UUID, borrowed otherwise.
pub enum UidText<'a> {
    Formatted([u8; TEXT_LEN]),
    Borrowed(&'a str),
}

impl Deref for UidText<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            // Only `format_uuid` makes these bytes: ASCII hex digits and dashes.
            UidText::Formatted(text) => std::str::from_utf8(text).unwrap_or_default(),
            UidText::Borrowed(text) => text,
        }
    }
}

/// The 16 bytes of `text` when it is a UUID in lowercase hex with its four
/// dashes, the only form `format_uuid` gives back unchanged.
fn parse_lowercase_uuid(text: &str) -> Option<[u8; 16]> {
    let text = text.as_bytes();
    if text.len() != TEXT_LEN || DASHES.iter().any(|&at| text[at] != b'-') {
        return None;
    }
    let mut digits = text.iter().enumerate().filter(|(at, _)| !DASHES.contains(at)).map(|(_, &digit)| digit);
    let mut bytes = [0u8; 16];
    for byte in &mut bytes {
        let high = lowercase_hex_value(digits.next()?)?;
        let low = lowercase_hex_value(digits.next()?)?;
        *byte = (high << 4) | low;
    }
    Some(bytes)
}

fn lowercase_hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

fn format_uuid(bytes: &[u8; 16]) -> [u8; TEXT_LEN] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = [b'-'; TEXT_LEN];
    let mut positions = (0..TEXT_LEN).filter(|at| !DASHES.contains(at));
    for &byte in bytes {
        for nibble in [byte >> 4, byte & 0xf] {
            if let Some(at) = positions.next() {
                text[at] = HEX[usize::from(nibble)];
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowercase_uuid_should_be_kept_as_bytes_and_given_back_unchanged() {
        let text = "0f8e2c1a-7b3d-4e5f-9a0b-c1d2e3f4a5b6";
        let uid = Uid::new(text);
        assert!(matches!(uid, Uid::Uuid(_)), "{uid:?}");
        assert_eq!(&*uid.as_str(), text);
        assert_eq!(uid.to_string(), text);
        assert_eq!(uid, Uid::new(text));
        assert_ne!(uid, Uid::new("0f8e2c1a-7b3d-4e5f-9a0b-c1d2e3f4a5b7"));
    }

    #[test]
    fn any_other_text_should_be_kept_as_it_came() {
        for text in [
            "",
            "0F8E2C1A-7B3D-4E5F-9A0B-C1D2E3F4A5B6",
            "0f8e2c1a7b3d4e5f9a0bc1d2e3f4a5b6",
            "0f8e2c1a-7b3d-4e5f-9a0b-c1d2e3f4a5bg",
            "0f8e2c1a-7b3d-4e5f-9a0b-c1d2e3f4a5b",
            "0f8e2c1a+7b3d-4e5f-9a0b-c1d2e3f4a5b6",
            "not-a-uuid",
            "é0f8e2c1-7b3d-4e5f-9a0b-c1d2e3f4a5b",
        ] {
            let uid = Uid::new(text);
            assert!(matches!(uid, Uid::Text(_)), "{text:?} became {uid:?}");
            assert_eq!(&*uid.as_str(), text);
        }
        assert_eq!(Uid::default(), Uid::new(""));
    }

    #[test]
    fn a_uid_should_take_less_room_than_its_text() {
        assert_eq!(std::mem::size_of::<Uid>(), 24);
    }
}
