//! Checks of request fields, with limits named after what they protect.

use std::sync::Arc;
use std::time::Duration;

use super::status::ApiError;
use crate::queue::{LeaseToken, MAX_DURATION};

/// Longest key accepted: Kubernetes keys are at most 253 + 1 + 253 bytes; 1 KiB leaves room.
pub const MAX_KEY_BYTES: usize = 1024;
/// Most keys in one Add, AddAfter or AddRateLimited call: bounds the work done under one request.
pub const MAX_BATCH_KEYS: usize = 10_000;
/// Most leases one unary Get returns.
pub const MAX_GET_KEYS: usize = 1_000;
/// Longest long poll a unary Get may ask for; longer waits are cut to it.
pub const MAX_GET_WAIT: Duration = Duration::from_secs(60);
/// Longest worker name kept for introspection.
pub const MAX_WORKER_NAME_BYTES: usize = 256;

/// A key named in a request, checked: returned as given.
pub fn key<'a>(field: &str, key: &'a str) -> Result<&'a str, ApiError> {
    if key.is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("is {} bytes, more than the limit of {MAX_KEY_BYTES}", key.len()),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(ApiError::invalid(field, "must not contain control characters"));
    }
    Ok(key)
}

/// A batch's keys, checked, as the queue holds them.
pub fn keys(keys: Vec<String>) -> Result<Vec<Arc<str>>, ApiError> {
    if keys.is_empty() {
        return Err(ApiError::invalid("keys", "must name at least one key"));
    }
    if keys.len() > MAX_BATCH_KEYS {
        return Err(ApiError::OverLimit { what: "keys in one request", count: keys.len(), limit: MAX_BATCH_KEYS });
    }
    for (i, k) in keys.iter().enumerate() {
        key(&format!("keys[{i}]"), k)?;
    }
    Ok(keys.into_iter().map(Arc::from).collect())
}

/// The lease token a request presents: never 0.
pub fn token(token: u64) -> Result<LeaseToken, ApiError> {
    LeaseToken::new(token).ok_or_else(|| ApiError::invalid("token", "must be the token of a lease (non-zero)"))
}

pub fn worker(name: &str) -> Result<(), ApiError> {
    if name.len() > MAX_WORKER_NAME_BYTES {
        return Err(ApiError::invalid("worker", format!("is longer than {MAX_WORKER_NAME_BYTES} bytes")));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid("worker", "must not contain control characters"));
    }
    Ok(())
}

/// Largest `seconds` of a valid `google.protobuf.Duration` (about 10,000 years).
const PROTO_DURATION_MAX_SECONDS: i64 = 315_576_000_000;

/// An optional protobuf duration as a std one. Refused with the field's name:
/// a value outside `google.protobuf.Duration`'s own range (seconds beyond
/// ±315,576,000,000, nanos beyond ±999,999,999 or of the other sign), a
/// negative one, and one longer than the queue works with ([`MAX_DURATION`]).
pub fn duration(field: &str, value: Option<prost_types::Duration>) -> Result<Option<Duration>, ApiError> {
    let Some(value) = value else { return Ok(None) };
    let prost_types::Duration { seconds, nanos } = value;
    let described = || format!("{seconds}s {nanos}ns");
    let in_range = seconds.unsigned_abs() <= PROTO_DURATION_MAX_SECONDS.unsigned_abs()
        && nanos.unsigned_abs() < 1_000_000_000
        && (seconds == 0 || nanos == 0 || (seconds > 0) == (nanos > 0));
    if !in_range {
        return Err(ApiError::invalid(field, format!("is not a valid google.protobuf.Duration: {}", described())));
    }
    let duration = Duration::try_from(value)
        .map_err(|_| ApiError::invalid(field, format!("must be a non-negative duration, got {}", described())))?;
    if duration > MAX_DURATION {
        return Err(ApiError::invalid(
            field,
            format!("must be at most {} days, got {}", MAX_DURATION.as_secs() / 86_400, described()),
        ));
    }
    Ok(Some(duration))
}

/// An optional lease time to live: as [`duration`], and not zero (a lease
/// that ends as it begins is a mistake; leaving the field out means the
/// queue's own `lease_ttl`).
pub fn lease_ttl(field: &str, value: Option<prost_types::Duration>) -> Result<Option<Duration>, ApiError> {
    let ttl = duration(field, value)?;
    if ttl.is_some_and(|ttl| ttl.is_zero()) {
        return Err(ApiError::invalid(field, "must be greater than zero (leave it out for the queue's lease_ttl)"));
    }
    Ok(ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_should_refuse_empty_oversized_and_control_characters() {
        assert!(key("key", "default/app").is_ok());
        assert!(key("key", "").is_err());
        assert!(key("key", &"x".repeat(MAX_KEY_BYTES + 1)).is_err());
        assert!(key("key", "a\nb").is_err());
    }

    #[test]
    fn keys_should_name_the_bad_entry_and_limit_the_batch() {
        let err = keys(vec!["ok".into(), "".into()]).unwrap_err();
        assert!(err.to_string().starts_with("keys[1]:"), "{err}");
        assert!(matches!(keys(vec!["k".to_string(); MAX_BATCH_KEYS + 1]), Err(ApiError::OverLimit { .. })));
        assert!(keys(Vec::new()).is_err());
    }

    #[test]
    fn duration_should_refuse_negative_values() {
        let negative = prost_types::Duration { seconds: -1, nanos: 0 };
        assert!(duration("delay", Some(negative)).is_err());
        let half = prost_types::Duration { seconds: 0, nanos: 500_000_000 };
        assert_eq!(duration("delay", Some(half)).unwrap(), Some(Duration::from_millis(500)));
        assert_eq!(duration("delay", None).unwrap(), None);
    }

    #[test]
    fn lease_ttl_should_refuse_zero_and_keep_absent_as_absent() {
        let zero = prost_types::Duration { seconds: 0, nanos: 0 };
        let err = lease_ttl("lease_ttl", Some(zero)).unwrap_err();
        assert!(err.to_string().starts_with("lease_ttl: must be greater than zero"), "{err}");
        assert_eq!(lease_ttl("lease_ttl", None).unwrap(), None);
        let second = prost_types::Duration { seconds: 1, nanos: 0 };
        assert_eq!(lease_ttl("lease_ttl", Some(second)).unwrap(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn duration_should_refuse_values_outside_protobufs_range_and_past_the_maximum() {
        let cases = [
            (i64::MAX, 0),
            (i64::MIN, 0),
            (PROTO_DURATION_MAX_SECONDS + 1, 0),
            (0, 1_000_000_000),
            (0, i32::MIN),
            (1, -1),
            (MAX_DURATION.as_secs() as i64, 1),
        ];
        for (seconds, nanos) in cases {
            let err = duration("delay", Some(prost_types::Duration { seconds, nanos })).unwrap_err();
            assert!(matches!(err, ApiError::InvalidArgument { .. }), "{seconds}s {nanos}ns: {err}");
        }
        let longest = prost_types::Duration { seconds: MAX_DURATION.as_secs() as i64, nanos: 0 };
        assert_eq!(duration("delay", Some(longest)).unwrap(), Some(MAX_DURATION));
    }
}
