//! Sizes in bytes in the config file, written as a Kubernetes quantity with a binary suffix: `65536`, `512Ki`, `64Mi`, `1Gi`.

use serde::Deserialize;
use serde::de::Deserializer;

use super::parsed_text::ParsedText;

/// A size in bytes; a bad value says what was wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ByteSize(pub(super) usize);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The scalar's text even when YAML reads it as a number, so `64M`
        // and `64` go through one parser.
        deserializer.deserialize_str(ParsedText {
            expecting: r#"a size in bytes such as "65536", "512Ki", "64Mi" or "1Gi""#,
            parse: |text| parse(text).map(ByteSize),
        })
    }
}

/// The suffixes accepted, as Kubernetes writes memory: powers of 1024.
const SUFFIXES: [(&str, usize); 3] = [("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)];

/// Parses a whole number of bytes with an optional binary suffix; the error
/// quotes the text. Decimal suffixes (`M`, `G`) are refused rather than
/// guessed: `64M` and `64Mi` differ by 5 %.
pub(super) fn parse(text: &str) -> Result<usize, String> {
    let trimmed = text.trim();
    let (digits, unit) = SUFFIXES
        .iter()
        .find_map(|&(suffix, unit)| trimmed.strip_suffix(suffix).map(|digits| (digits, unit)))
        .unwrap_or((trimmed, 1));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            r#"invalid size {text:?}: write a whole number of bytes, or one with Ki, Mi or Gi ("64Mi")"#
        ));
    }
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("invalid size {text:?}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_should_read_plain_bytes_and_binary_suffixes() {
        assert_eq!(parse("65536"), Ok(65_536));
        assert_eq!(parse("512Ki"), Ok(512 * 1024));
        assert_eq!(parse("64Mi"), Ok(64 << 20));
        assert_eq!(parse("1Gi"), Ok(1 << 30));
    }

    #[test]
    fn sizes_should_refuse_decimal_suffixes_fractions_signs_and_overflow() {
        for bad in ["64M", "1.5Gi", "-1", "", "Mi", "64 MiB", "99999999999999999999"] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
        assert!(parse("99999999999Gi").unwrap_err().contains("too large"));
    }
}
