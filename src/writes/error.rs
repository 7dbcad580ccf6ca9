//! Why a write under a lease did not happen, or happened with its lease lost.

use super::freshness::{FenceError, LeaseEndedDuringWrite};
use crate::objects::{WriteDenied, WriteError};

/// Why a write failed, at whichever of its steps.
#[derive(Debug, thiserror::Error)]
pub enum WriteFailure {
    /// The config does not declare it: nothing was sent.
    #[error(transparent)]
    Denied(#[from] WriteDenied),
    /// Its lease is not current (or names an unknown queue): nothing was sent.
    #[error(transparent)]
    Fenced(#[from] FenceError),
    /// The API server refused it, could not be reached, or the writes out
    /// are at their bound.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// It was made, but its lease ended before the API server answered.
    #[error(transparent)]
    LeaseEnded(#[from] LeaseEndedDuringWrite),
    /// Its task was cut off before an answer (only a runtime shutting down does that).
    #[error("the write was cut off: {0}")]
    CutOff(String),
}
