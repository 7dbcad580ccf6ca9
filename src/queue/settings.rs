//! Per-queue settings, with validation that names the bad setting.

use std::time::Duration;

use super::rate_limit::RateLimiterSpec;
use super::settings_error::{SettingsError, check_duration};

/// The default `max_keys`: a key costs about 260 bytes plus its text (283
/// bytes per 21-byte key measured by `bench/rust/scale` at 1,000,000 keys), so a
/// full queue takes about 68 MiB, within the deploy's 512 MiB limit with room
/// for the informer caches.
pub const DEFAULT_MAX_KEYS: usize = 250_000;

/// What a tracked key counts against `max_memory` beyond its text: its
/// entry, index slot, lane and timer places, on the high side of the 262
/// bytes `bench/rust/scale` measures.
pub const KEY_ENTRY_BYTES: usize = 288;

/// The default `max_memory`: above what `DEFAULT_MAX_KEYS` keys of a typical
/// length (`namespace/name`, about 25 bytes) count, so those reach
/// `max_keys` first, while 1 KiB keys stop at about 53,000 (about 73 MiB)
/// where `max_keys` alone let them take 327 MiB.
pub const DEFAULT_MAX_MEMORY: usize = 80 << 20;

/// The smallest `max_memory` accepted: room for a few dozen of the longest
/// keys a client may send.
const MIN_MAX_MEMORY: usize = 64 << 10;

/// The bytes one key counts against `max_memory`: its entry, and its text
/// with a quarter more for the allocator's size classes (a 1 KiB key took
/// 1,372 bytes in all, measured with 250,000 of them).
pub fn key_cost(text_bytes: usize) -> usize {
    KEY_ENTRY_BYTES.saturating_add(text_bytes).saturating_add(text_bytes / 4)
}

/// How one queue behaves. Build with `QueueSettings::default()` and change fields.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSettings {
    /// How long a lease lasts when the worker asks for no particular time.
    pub lease_ttl: Duration,
    /// The longest lease a worker may ask for, at grant or on extend; longer asks are cut to it.
    pub max_lease_ttl: Duration,
    /// Aging bound: a ready key that has waited this long is served before
    /// newer keys of higher priority, so low priorities never starve.
    pub max_wait: Duration,
    /// Delays for `AddRateLimited`, retries and lost leases.
    pub rate_limiter: RateLimiterSpec,
    /// Most keys the queue tracks at once (queued, waiting, held or remembered
    /// for their failures); adding a new key past it fails, except a key from
    /// an informer's cache (the cache bounds those).
    pub max_keys: usize,
    /// Most bytes the tracked keys count ([`key_cost`] each); adding a new
    /// key past it fails, with the same exception as `max_keys`.
    pub max_memory: usize,
    /// The longest a key waits, after a lease under which the worker wrote
    /// through the sidecar, for the caches to see those writes before it is
    /// handed out again (it is then queued anyway).
    pub settle_timeout: Duration,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            lease_ttl: Duration::from_secs(30),
            max_lease_ttl: Duration::from_secs(600),
            max_wait: Duration::from_secs(30),
            rate_limiter: RateLimiterSpec::default(),
            max_keys: DEFAULT_MAX_KEYS,
            max_memory: DEFAULT_MAX_MEMORY,
            settle_timeout: Duration::from_secs(10),
        }
    }
}

impl QueueSettings {
    /// Checks every value; errors name the field (`max_wait`, `rate_limiter.bucket.qps`).
    pub fn validate(&self) -> Result<(), SettingsError> {
        check_duration("lease_ttl", self.lease_ttl)?;
        check_duration("max_lease_ttl", self.max_lease_ttl)?;
        check_duration("max_wait", self.max_wait)?;
        check_duration("settle_timeout", self.settle_timeout)?;
        if self.lease_ttl.is_zero() {
            return Err(SettingsError::new("lease_ttl", "must be greater than zero"));
        }
        if self.max_lease_ttl < self.lease_ttl {
            return Err(SettingsError::new(
                "max_lease_ttl",
                format!("must be at least lease_ttl ({:?}), got {:?}", self.lease_ttl, self.max_lease_ttl),
            ));
        }
        if self.max_wait.is_zero() {
            return Err(SettingsError::new("max_wait", "must be greater than zero"));
        }
        if self.max_keys == 0 {
            return Err(SettingsError::new("max_keys", "must be at least 1"));
        }
        if self.max_memory < MIN_MAX_MEMORY {
            return Err(SettingsError::new(
                "max_memory",
                format!("must be at least {MIN_MAX_MEMORY} bytes (64Ki), got {}", self.max_memory),
            ));
        }
        self.rate_limiter.validate().map_err(|err| err.under("rate_limiter"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_settings_should_be_valid() {
        assert_eq!(QueueSettings::default().validate(), Ok(()));
    }

    #[test]
    fn validate_should_name_the_field() {
        let settings = QueueSettings { max_lease_ttl: Duration::from_secs(1), ..Default::default() };
        assert_eq!(settings.validate().unwrap_err().field, "max_lease_ttl");
        let settings = QueueSettings { lease_ttl: Duration::ZERO, ..Default::default() };
        assert_eq!(settings.validate().unwrap_err().field, "lease_ttl");
        let settings =
            QueueSettings { rate_limiter: RateLimiterSpec::Bucket { qps: 1.0, burst: 0 }, ..Default::default() };
        assert_eq!(settings.validate().unwrap_err().field, "rate_limiter.bucket.burst");
    }
}
