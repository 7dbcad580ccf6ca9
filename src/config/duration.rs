//! Durations in the config file, written as humantime text: `5ms`, `30s`, `10m`, `1h 30m`.

use std::time::Duration;

use serde::Deserialize;
use serde::de::Deserializer;

use super::parsed_text::ParsedText;
use crate::queue::MAX_DURATION;

/// A `Duration` read from humantime text; a bad value says what was wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HumanDuration(pub(super) Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The scalar's text even when YAML would read it as a number, so
        // `30` gets "time unit needed" rather than a type error.
        deserializer.deserialize_str(ParsedText {
            expecting: r#"a duration such as "5ms", "30s", "10m" or "1h 30m""#,
            parse: |text| parse(text).map(HumanDuration),
        })
    }
}

/// Parses humantime text; the error quotes the text and says what is wrong.
/// Every duration of the config is at most [`MAX_DURATION`] (366 days), so a
/// unit typo such as `1000000000h` is refused here, with its position.
pub(super) fn parse(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|error| {
        let why = match error {
            humantime::DurationError::UnknownUnit { unit, .. } if !unit.is_empty() => {
                format!("unknown time unit {unit:?}, use one of ns, us, ms, s, m, h, d")
            }
            other => other.to_string(),
        };
        format!("invalid duration {text:?}: {why}")
    })?;
    if duration > MAX_DURATION {
        return Err(format!("duration {text:?} is longer than the most allowed, {}d", MAX_DURATION.as_secs() / 86_400));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_should_read_humantime_text() {
        assert_eq!(parse("5ms"), Ok(Duration::from_millis(5)));
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn parse_should_refuse_a_duration_past_the_maximum() {
        assert_eq!(parse("366d"), Ok(MAX_DURATION));
        assert_eq!(
            parse("1000000000h"),
            Err(r#"duration "1000000000h" is longer than the most allowed, 366d"#.to_owned())
        );
    }

    #[test]
    fn parse_should_name_an_unknown_unit() {
        assert_eq!(
            parse("30 parsecs"),
            Err(r#"invalid duration "30 parsecs": unknown time unit "parsecs", use one of ns, us, ms, s, m, h, d"#
                .to_owned())
        );
    }

    #[test]
    fn parse_should_ask_for_a_unit_on_a_bare_number() {
        assert_eq!(
            parse("30"),
            Err(r#"invalid duration "30": time unit needed, for example 30sec or 30ms"#.to_owned())
        );
    }
}
