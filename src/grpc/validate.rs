//! Checks of request fields, with limits named after what they protect.

use std::sync::Arc;
use std::time::Duration;

use super::bounded_text;
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
/// Longest reason label of an add. A key keeps up to 16 reasons and sends
/// them with each lease, so unbounded labels could make a Get's answer too
/// large to send after its keys were leased.
pub const MAX_REASON_BYTES: usize = 512;
/// Longest error text of a Retry kept as a key's `last_error`; the rest is
/// cut (a stack trace's head is what a reader needs), never refused, so a
/// worker's retry always lands.
pub const MAX_ERROR_BYTES: usize = 4096;
/// The shortest lease a worker may ask for: a few round trips, so that an
/// extend can reach the sidecar before the lease ends.
pub const SHORTEST_LEASE_TTL: Duration = Duration::from_millis(100);

/// Longest object name taken (a DNS subdomain's length, the longest any kind has).
pub const MAX_OBJECT_NAME_BYTES: usize = 253;

/// An object's name for a write, which goes into the API server's URL path
/// as it is: nothing there may end the path or escape (`/`, `%`, `?`, `#`,
/// spaces, control and non-ASCII characters), nor be `.` or `..`. Without
/// this, `name#x` wrote the object `name`, and `name?dryRun=All` wrote nothing.
pub fn object_name<'a>(field: &str, name: &'a str) -> Result<&'a str, ApiError> {
    if name.is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if name.len() > MAX_OBJECT_NAME_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("is {} bytes, more than the limit of {MAX_OBJECT_NAME_BYTES}", name.len()),
        ));
    }
    if name == "." || name == ".." || !name.chars().all(|c| c.is_ascii_graphic() && !"/%?#".contains(c)) {
        return Err(ApiError::invalid(
            field,
            "is no object name: printable ASCII without '/', '%', '?', '#' or spaces, and not '.' or '..'",
        ));
    }
    Ok(name)
}

/// A namespace named for a write: a DNS label, as the API server takes one
/// (it too goes into the URL path). Empty is none: a cluster-scoped object.
pub fn namespace<'a>(field: &str, namespace: &'a str) -> Result<Option<&'a str>, ApiError> {
    if namespace.is_empty() {
        return Ok(None);
    }
    if !crate::k8s_names::is_dns_label(namespace) {
        return Err(ApiError::invalid(
            field,
            "is no namespace name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
        ));
    }
    Ok(Some(namespace))
}

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

/// The reason label of an add, checked: at most [`MAX_REASON_BYTES`], no
/// control characters (it is shown in logs and introspection, as keys are).
pub fn reason<'a>(field: &str, reason: &'a str) -> Result<&'a str, ApiError> {
    if reason.len() > MAX_REASON_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("is {} bytes, more than the limit of {MAX_REASON_BYTES}", reason.len()),
        ));
    }
    if reason.chars().any(char::is_control) {
        return Err(ApiError::invalid(field, "must not contain control characters"));
    }
    Ok(reason)
}

/// A Retry's error text as the key keeps it: cut to [`MAX_ERROR_BYTES`] at a
/// character boundary, the cut said at its end.
pub fn error_text(error: String) -> String {
    bounded_text::cut(error, MAX_ERROR_BYTES)
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
    if ttl.is_some_and(|ttl| ttl < SHORTEST_LEASE_TTL) {
        return Err(ApiError::invalid(
            field,
            format!(
                "must be at least {SHORTEST_LEASE_TTL:?}: a shorter lease ends before its worker can extend it, and \
                 each one counts a failure (leave it out for the queue's lease_ttl)"
            ),
        ));
    }
    Ok(ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_and_namespaces_should_be_refused_when_they_would_change_the_url() {
        for name in ["web", "system:controller:x", "a.b-c_d"] {
            assert_eq!(object_name("name", name).unwrap(), name);
        }
        for name in ["", ".", "..", "a/b", "c%31", "c1?dryRun=All", "victim#x", "a b", "a\nb", "é", &"x".repeat(254)] {
            assert!(object_name("name", name).is_err(), "{name:?} should be refused");
        }
        assert_eq!(namespace("namespace", "").unwrap(), None);
        assert_eq!(namespace("namespace", "team-a").unwrap(), Some("team-a"));
        for ns in ["Team", "-a", "a-", "ns/configmaps/x#", "a_b", &"a".repeat(64)] {
            assert!(namespace("namespace", ns).is_err(), "{ns:?} should be refused");
        }
    }

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
    fn reason_should_refuse_oversized_labels_and_control_characters() {
        assert_eq!(reason("reason", "backfill-job").unwrap(), "backfill-job");
        assert_eq!(reason("reason", "").unwrap(), "");
        let err = reason("reason", &"r".repeat(MAX_REASON_BYTES + 1)).unwrap_err();
        assert!(err.to_string().starts_with("reason: is 513 bytes"), "{err}");
        assert!(reason("reason", "a\nb").is_err());
    }

    #[test]
    fn error_text_should_cut_long_text_at_a_character_boundary_and_say_so() {
        assert_eq!(error_text("boom\nat line 3".into()), "boom\nat line 3");
        let long = "é".repeat(MAX_ERROR_BYTES);
        let cut = error_text(long.clone());
        assert!(cut.len() <= MAX_ERROR_BYTES, "{} bytes", cut.len());
        assert!(cut.ends_with(&format!("… (cut: {} bytes in all)", long.len())), "{cut}");
        assert!(long.starts_with(cut.trim_end_matches(|c| c != 'é')));
    }

    #[test]
    fn lease_ttl_should_refuse_zero_and_too_short_and_keep_absent_as_absent() {
        let zero = prost_types::Duration { seconds: 0, nanos: 0 };
        let err = lease_ttl("lease_ttl", Some(zero)).unwrap_err();
        assert!(err.to_string().starts_with("lease_ttl: must be at least 100ms"), "{err}");
        let nanosecond = prost_types::Duration { seconds: 0, nanos: 1 };
        assert!(lease_ttl("lease_ttl", Some(nanosecond)).is_err(), "a lease that expires at once");
        let shortest = prost_types::Duration { seconds: 0, nanos: 100_000_000 };
        assert_eq!(lease_ttl("lease_ttl", Some(shortest)).unwrap(), Some(SHORTEST_LEASE_TTL));
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
