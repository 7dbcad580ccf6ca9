//! The timings of the sharding protocol, and the one inequality between them that keeps it safe.

use std::time::Duration;

/// How members renew, and how far their clocks may drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSettings {
    /// How long a member's Lease stays valid, as others judge it, after they
    /// saw it change.
    pub lease_duration: Duration,
    /// A member grants nothing later than this after sending the renewal
    /// that its current term rests on.
    pub renew_deadline: Duration,
    /// How often a member renews its Lease.
    pub retry_period: Duration,
    /// The largest rate difference of any member's clock from real time, in
    /// parts per million. Offsets do not matter: no member compares its
    /// clock with a time another member wrote.
    pub max_drift_ppm: u32,
}

impl Default for ShardSettings {
    /// The leader election's timings (client-go's), and 1 % drift, a
    /// hundred times what quartz clocks show.
    fn default() -> Self {
        ShardSettings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            max_drift_ppm: 10_000,
        }
    }
}

impl ShardSettings {
    /// The longest a member's term can run past an instant after its last
    /// renewal was sent, on another member's clock: `R (1 + d) / (1 - d)`.
    pub fn term_bound(&self) -> Duration {
        let drift = f64::from(self.max_drift_ppm) / 1e6;
        self.renew_deadline.mul_f64((1.0 + drift) / (1.0 - drift).max(f64::EPSILON))
    }

    /// Refuses timings under which two members could grant one key at once:
    /// a term measured on the slowest clock must end before a Lease measured
    /// on the fastest clock expires, `R / (1 - d) < L / (1 + d)`.
    pub fn validate(&self) -> Result<(), ShardSettingsError> {
        if self.retry_period.is_zero() {
            return Err(ShardSettingsError::ZeroRetryPeriod);
        }
        if self.renew_deadline <= self.retry_period {
            return Err(ShardSettingsError::RenewDeadlineNotAfterRetry);
        }
        let drift = f64::from(self.max_drift_ppm) / 1e6;
        if drift >= 1.0 {
            return Err(ShardSettingsError::DriftTooLarge);
        }
        let term = self.renew_deadline.as_secs_f64() / (1.0 - drift);
        let lease = self.lease_duration.as_secs_f64() / (1.0 + drift);
        if term >= lease {
            return Err(ShardSettingsError::LeaseNotLongerThanTerm);
        }
        Ok(())
    }
}

/// Timings that cannot keep the protocol safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShardSettingsError {
    #[error("the retry period must be greater than zero")]
    ZeroRetryPeriod,
    #[error("the renew deadline must be longer than the retry period")]
    RenewDeadlineNotAfterRetry,
    #[error("the clock drift bound must be below 100 %")]
    DriftTooLarge,
    #[error("the lease duration must exceed the renew deadline by more than the clock drift allows")]
    LeaseNotLongerThanTerm,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_timings_should_be_safe() {
        assert_eq!(ShardSettings::default().validate(), Ok(()));
    }

    #[test]
    fn a_renew_deadline_too_close_to_the_lease_duration_for_the_drift_should_be_refused() {
        let settings = ShardSettings { max_drift_ppm: 250_000, ..ShardSettings::default() };
        assert_eq!(settings.validate(), Err(ShardSettingsError::LeaseNotLongerThanTerm));
        let settings = ShardSettings { renew_deadline: Duration::from_secs(15), ..ShardSettings::default() };
        assert_eq!(settings.validate(), Err(ShardSettingsError::LeaseNotLongerThanTerm));
    }

    #[test]
    fn a_zero_retry_period_should_be_refused() {
        let settings = ShardSettings { retry_period: Duration::ZERO, ..ShardSettings::default() };
        assert_eq!(settings.validate(), Err(ShardSettingsError::ZeroRetryPeriod));
    }
}
