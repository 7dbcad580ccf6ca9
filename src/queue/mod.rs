//! The priority workqueue with leases: generic over the key, free of gRPC and Kubernetes.
//!
//! client-go's contract (a key queued at most once, never held twice, re-added
//! while held means dirty, delays where the earliest ready time wins, rate
//! limited retries, `Forget`, `NumRequeues`, shutdown with drain) plus what
//! remote workers need: priorities with aging, leases with fencing tokens and
//! deadlines, `Finish` outcomes, reasons and introspection.
//!
//! No arithmetic here may overflow or panic: a delay near `i64` seconds from a
//! request once panicked a handler halfway through a `Finish` and lost its
//! key. Time goes through `time::after` (saturating at `MAX_DURATION`) and
//! counters use checked or saturating operations; the lint below enforces it
//! on the code that ships (tests may use plain operators).
#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

mod error;
mod introspect;
mod key;
mod lease;
mod lost_leases;
mod observer;
mod priority;
mod rate_limit;
mod reason;
mod settings;
mod settings_error;
mod state;
mod time;
mod workqueue;

#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod model_tests;

pub use error::QueueError;
pub use introspect::{DirtyStatus, KeyPhase, KeyStatus, QueueCounts};
pub use key::QueueKey;
pub use lease::{FinishOutcome, Holder, Lease, LeaseRenewal, LeaseToken};
pub use lost_leases::{LeaseLoss, LostLease, LostLeases};
pub use observer::{LeaseEndKind, NoObserver, QueueObserver};
pub use rate_limit::RateLimiterSpec;
pub use reason::{Reason, ReasonKind, ReasonSet};
pub use settings::{DEFAULT_MAX_KEYS, DEFAULT_MAX_MEMORY, KEY_ENTRY_BYTES, QueueSettings, key_cost};
pub use settings_error::SettingsError;
pub use state::{AddOutcome, ShardsChanged};
pub use time::MAX_DURATION;
pub use workqueue::{DrainReport, Holders, LeaseWrites, ShardOf, Shards, Term, WorkQueue};

/// Priority of watch events: the fast lane.
pub const PRIORITY_FAST: i32 = 0;
/// Priority of the initial list and resyncs: the slow lane (controller-runtime's value).
pub const PRIORITY_SLOW: i32 = -100;
