//! A setting the queue cannot work with, named by its path in the config.

use std::time::Duration;

use super::time::MAX_DURATION;

/// Refuses a duration longer than the queue works with ([`MAX_DURATION`]).
pub(crate) fn check_duration(setting: &str, value: Duration) -> Result<(), SettingsError> {
    if value > MAX_DURATION {
        return Err(SettingsError::new(
            setting,
            format!("must be at most {} days, got {value:?}", MAX_DURATION.as_secs() / 86_400),
        ));
    }
    Ok(())
}

/// A setting with a value the queue cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct SettingsError {
    /// Where the setting is, as a dotted path (`queues.default.rate_limiter.bucket.qps`).
    pub setting: String,
    /// What is wrong with its value.
    pub problem: String,
}

impl SettingsError {
    pub fn new(setting: impl Into<String>, problem: impl Into<String>) -> Self {
        SettingsError { setting: setting.into(), problem: problem.into() }
    }
}
