//! A queue's `rate_limiter:` in the config file: a map with exactly one limiter key per level.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::duration::HumanDuration;
use crate::queue::RateLimiterSpec;

/// The limiter keys, in the order the messages list them.
const KINDS: &str = "exponential, fast_slow, bucket, max_of or max_delay";

/// A `RateLimiterSpec` read from `{ exponential: { base: 5ms, max: 5m } }` and
/// its siblings. Field names match the paths `RateLimiterSpec::validate` reports.
#[derive(Debug)]
pub(super) struct RateLimiterDoc(pub(super) RateLimiterSpec);

impl<'de> Deserialize<'de> for RateLimiterDoc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RateLimiterVisitor)
    }
}

struct RateLimiterVisitor;

impl<'de> Visitor<'de> for RateLimiterVisitor {
    type Value = RateLimiterDoc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a map with one key: {KINDS}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RateLimiterDoc, A::Error> {
        let Some(kind) = map.next_key::<Kind>()? else {
            return Err(de::Error::custom(format!("empty rate limiter, give one of {KINDS}")));
        };
        let spec = match kind {
            Kind::Exponential => {
                let ExponentialDoc { base, max } = map.next_value()?;
                RateLimiterSpec::Exponential { base: base.0, max: max.0 }
            }
            Kind::FastSlow => {
                let FastSlowDoc { fast, slow, fast_attempts } = map.next_value()?;
                RateLimiterSpec::FastSlow { fast: fast.0, slow: slow.0, fast_attempts }
            }
            Kind::Bucket => {
                let BucketDoc { qps, burst } = map.next_value()?;
                RateLimiterSpec::Bucket { qps, burst }
            }
            Kind::MaxOf => {
                let members: Vec<RateLimiterDoc> = map.next_value()?;
                RateLimiterSpec::MaxOf(members.into_iter().map(|m| m.0).collect())
            }
            Kind::MaxDelay => {
                let MaxDelayDoc { limiter, max } = map.next_value()?;
                RateLimiterSpec::MaxDelay { limiter: Box::new(limiter.0), max: max.0 }
            }
        };
        if let Some(other) = map.next_key::<Kind>()? {
            return Err(de::Error::custom(format!(
                "both `{}` and `{}` given: one limiter per level, combine them under max_of",
                kind.name(),
                other.name()
            )));
        }
        Ok(RateLimiterDoc(spec))
    }
}

/// Which limiter a key names.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Exponential,
    FastSlow,
    Bucket,
    MaxOf,
    MaxDelay,
}

impl Kind {
    const ALL: [Kind; 5] = [Kind::Exponential, Kind::FastSlow, Kind::Bucket, Kind::MaxOf, Kind::MaxDelay];

    fn name(self) -> &'static str {
        match self {
            Kind::Exponential => "exponential",
            Kind::FastSlow => "fast_slow",
            Kind::Bucket => "bucket",
            Kind::MaxOf => "max_of",
            Kind::MaxDelay => "max_delay",
        }
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KindVisitor)
    }
}

struct KindVisitor;

impl Visitor<'_> for KindVisitor {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "one of {KINDS}")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Kind, E> {
        Kind::ALL
            .into_iter()
            .find(|kind| kind.name() == key)
            .ok_or_else(|| E::custom(format!("unknown rate limiter `{key}`, expected one of {KINDS}")))
    }
}

/// `exponential`: `base * 2^failures` per key, capped at `max`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with `base` and `max`")]
struct ExponentialDoc {
    base: HumanDuration,
    max: HumanDuration,
}

/// `fast_slow`: `fast` for the first `fast_attempts` failures of a key, `slow` after.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with `fast`, `slow` and `fast_attempts`")]
struct FastSlowDoc {
    fast: HumanDuration,
    slow: HumanDuration,
    fast_attempts: u32,
}

/// `bucket`: one token bucket over the whole queue.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with `qps` and `burst`")]
struct BucketDoc {
    qps: f64,
    burst: u32,
}

/// `max_delay`: the inner `limiter`'s delay, never more than `max`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with `limiter` and `max`")]
struct MaxDelayDoc {
    limiter: RateLimiterDoc,
    max: HumanDuration,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn parse(yaml: &str) -> Result<RateLimiterSpec, String> {
        let de = serde_yaml_ng::Deserializer::from_str(yaml);
        serde_path_to_error::deserialize::<_, RateLimiterDoc>(de)
            .map(|doc| doc.0)
            .map_err(|e| format!("{} | {}", e.path(), e.inner()))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn rate_limiter_should_read_every_kind() {
        let spec = parse(
            "max_of:
               - exponential: { base: 5ms, max: 1000s }
               - bucket: { qps: 10, burst: 100 }
               - fast_slow: { fast: 10ms, slow: 10s, fast_attempts: 5 }
               - max_delay: { max: 5m, limiter: { exponential: { base: 5ms, max: 1000s } } }",
        )
        .unwrap();
        let exponential = RateLimiterSpec::Exponential { base: ms(5), max: Duration::from_secs(1000) };
        assert_eq!(
            spec,
            RateLimiterSpec::MaxOf(vec![
                exponential.clone(),
                RateLimiterSpec::Bucket { qps: 10.0, burst: 100 },
                RateLimiterSpec::FastSlow { fast: ms(10), slow: Duration::from_secs(10), fast_attempts: 5 },
                RateLimiterSpec::MaxDelay { limiter: Box::new(exponential), max: Duration::from_secs(300) },
            ])
        );
    }

    #[test]
    fn rate_limiter_should_take_a_fractional_qps() {
        assert_eq!(parse("bucket: { qps: 0.5, burst: 1 }").unwrap(), RateLimiterSpec::Bucket { qps: 0.5, burst: 1 });
    }

    #[test]
    fn rate_limiter_should_refuse_two_kinds_at_one_level() {
        let err = parse("exponential: { base: 5ms, max: 1s }\nbucket: { qps: 1, burst: 1 }").unwrap_err();
        assert!(err.contains("both `exponential` and `bucket` given"), "{err}");
    }

    #[test]
    fn rate_limiter_should_refuse_an_empty_map() {
        let err = parse("{}").unwrap_err();
        assert!(err.contains("empty rate limiter"), "{err}");
    }

    #[test]
    fn rate_limiter_should_name_an_unknown_kind_and_list_the_known_ones() {
        let err = parse("expo: { base: 5ms, max: 1s }").unwrap_err();
        assert!(err.contains("unknown rate limiter `expo`, expected one of exponential"), "{err}");
    }

    #[test]
    fn rate_limiter_should_name_a_missing_field() {
        let err = parse("exponential: { base: 5ms }").unwrap_err();
        assert!(err.starts_with("exponential | "), "{err}");
        assert!(err.contains("missing field `max`"), "{err}");
    }
}
