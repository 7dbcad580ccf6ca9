//! Config scalars read as their text, even one YAML would read as a number, and parsed by one function whose error says what was wrong.

use std::fmt;

use serde::de::{self, Visitor};

/// A visitor for `deserialize_str`: `parse` reads the text, `expecting`
/// says what a good value looks like.
pub(super) struct ParsedText<T> {
    pub(super) expecting: &'static str,
    pub(super) parse: fn(&str) -> Result<T, String>,
}

impl<T> Visitor<'_> for ParsedText<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        (self.parse)(text).map_err(E::custom)
    }
}
