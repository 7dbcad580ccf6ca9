//! `ResourceVersion`: an object's `metadata.resourceVersion`, kept as a number when it is one.

use std::fmt;

/// An object's `metadata.resourceVersion`. An etcd-backed API server's are
/// decimal numbers; such a version is kept as its `u64`, 24 bytes against 16
/// plus an allocation for the text. Any other text is kept as it came, so
/// the text given back is always the one the server sent.
#[derive(Clone, PartialEq, Eq)]
pub enum ResourceVersion {
    Number(u64),
    Text(Box<str>),
}

impl Default for ResourceVersion {
    fn default() -> Self {
        ResourceVersion::Text(Box::default())
    }
}

impl ResourceVersion {
    pub fn new(text: &str) -> ResourceVersion {
        match text.parse::<u64>() {
            // Only the number's own spelling: "007" or "+7" must come back as sent.
            Ok(number) if is_plain_decimal(text) => ResourceVersion::Number(number),
            _ => ResourceVersion::Text(text.into()),
        }
    }

    /// The version as a number, when it is one (it is on etcd-backed servers).
    pub fn number(&self) -> Option<u64> {
        match self {
            ResourceVersion::Number(number) => Some(*number),
            ResourceVersion::Text(text) => text.parse().ok(),
        }
    }
}

/// Digits only, with no leading zero unless the number is zero.
fn is_plain_decimal(text: &str) -> bool {
    text.bytes().all(|digit| digit.is_ascii_digit()) && (text == "0" || !text.starts_with('0'))
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceVersion::Number(number) => write!(f, "{number}"),
            ResourceVersion::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_number_should_be_kept_as_one_and_given_back_unchanged() {
        for text in ["0", "7", "18446744073709551615", "123456"] {
            let version = ResourceVersion::new(text);
            assert!(matches!(version, ResourceVersion::Number(_)), "{text:?} became {version:?}");
            assert_eq!(version.to_string(), text);
            assert_eq!(version.number(), text.parse().ok());
        }
    }

    #[test]
    fn any_other_text_should_be_kept_as_it_came_and_read_as_a_number_as_before() {
        for (text, number) in
            [("", None), ("007", Some(7)), ("+7", Some(7)), ("18446744073709551616", None), ("a1", None), ("1.5", None)]
        {
            let version = ResourceVersion::new(text);
            assert!(matches!(version, ResourceVersion::Text(_)), "{text:?} became {version:?}");
            assert_eq!(version.to_string(), text);
            assert_eq!(version.number(), number, "{text:?}");
        }
        assert_eq!(ResourceVersion::default(), ResourceVersion::new(""));
    }
}
