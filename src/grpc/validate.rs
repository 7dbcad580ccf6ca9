//! Checks of request fields, with limits named after what they protect.

use std::time::Duration;

use super::status::ApiError;

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

pub fn key(field: &str, key: &str) -> Result<(), ApiError> {
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
    Ok(())
}

pub fn keys(keys: &[String]) -> Result<(), ApiError> {
    if keys.is_empty() {
        return Err(ApiError::invalid("keys", "must name at least one key"));
    }
    if keys.len() > MAX_BATCH_KEYS {
        return Err(ApiError::OverLimit { what: "keys in one request", count: keys.len(), limit: MAX_BATCH_KEYS });
    }
    for (i, k) in keys.iter().enumerate() {
        key(&format!("keys[{i}]"), k)?;
    }
    Ok(())
}

pub fn token(token: u64) -> Result<(), ApiError> {
    if token == 0 {
        return Err(ApiError::invalid("token", "must be the token of a lease (non-zero)"));
    }
    Ok(())
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

/// An optional protobuf duration as a std one; negative or malformed is an error.
pub fn duration(field: &str, value: Option<prost_types::Duration>) -> Result<Option<Duration>, ApiError> {
    let Some(value) = value else { return Ok(None) };
    Duration::try_from(value).map(Some).map_err(|_| {
        ApiError::invalid(field, format!("must be a non-negative duration, got {}s {}ns", value.seconds, value.nanos))
    })
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
        let err = keys(&["ok".into(), "".into()]).unwrap_err();
        assert!(err.to_string().starts_with("keys[1]:"), "{err}");
        assert!(matches!(keys(&vec!["k".to_string(); MAX_BATCH_KEYS + 1]), Err(ApiError::OverLimit { .. })));
        assert!(keys(&[]).is_err());
    }

    #[test]
    fn duration_should_refuse_negative_values() {
        let negative = prost_types::Duration { seconds: -1, nanos: 0 };
        assert!(duration("delay", Some(negative)).is_err());
        let half = prost_types::Duration { seconds: 0, nanos: 500_000_000 };
        assert_eq!(duration("delay", Some(half)).unwrap(), Some(Duration::from_millis(500)));
        assert_eq!(duration("delay", None).unwrap(), None);
    }
}
