//! A setting the queue cannot work with, named by its field in the queue's settings (the config adds where they are in the file).

use std::time::Duration;

use super::time::MAX_DURATION;

/// Refuses a duration longer than the queue works with ([`MAX_DURATION`]).
pub(crate) fn check_duration(field: &str, value: Duration) -> Result<(), SettingsError> {
    if value > MAX_DURATION {
        return Err(SettingsError::new(
            field,
            format!("must be at most {} days, got {value:?}", MAX_DURATION.as_secs() / 86_400),
        ));
    }
    Ok(())
}

/// A setting with a value the queue cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct SettingsError {
    /// The setting, as a dotted path from the settings it was checked in
    /// (`rate_limiter.bucket.qps` in a queue's, `bucket.qps` in a limiter's).
    pub field: String,
    /// What is wrong with its value.
    pub problem: String,
}

impl SettingsError {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        SettingsError { field: field.into(), problem: problem.into() }
    }

    /// The same error seen from the settings that hold these under `parent`.
    pub fn under(self, parent: &str) -> Self {
        SettingsError { field: format!("{parent}.{}", self.field), problem: self.problem }
    }
}
