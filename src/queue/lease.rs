//! Leases: what a worker holds while it works on a key, and how it ends.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::reason::ReasonSet;

/// Who holds a lease: a worker's name, or a stream's identity.
pub type Holder = Arc<str>;

/// A fencing token: unique per grant, never reused by this process.
///
/// Tokens start at a random point so that a worker which outlived a sidecar
/// restart cannot present an old token that happens to equal a new grant's.
/// Never zero, which the wire uses for "no token".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseToken(NonZeroU64);

impl LeaseToken {
    /// The token a worker presented; `None` for 0, which no lease has.
    pub fn new(value: u64) -> Option<LeaseToken> {
        NonZeroU64::new(value).map(LeaseToken)
    }

    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Hands out tokens: a counter that starts at a random value.
#[derive(Debug)]
pub(crate) struct TokenSource {
    next: NonZeroU64,
}

impl TokenSource {
    pub(crate) fn new() -> Self {
        // The std hasher is seeded randomly per process; hashing nothing with a
        // fresh state is a cheap random number without another dependency.
        // Starting below 2^62 leaves room for 2^62 grants before wrapping.
        let seed = RandomState::new().hash_one(std::process::id());
        TokenSource { next: NonZeroU64::new(seed >> 2).unwrap_or(NonZeroU64::MIN) }
    }

    pub(crate) fn next(&mut self) -> LeaseToken {
        let token = LeaseToken(self.next);
        self.next = self.next.checked_add(1).unwrap_or(NonZeroU64::MIN);
        token
    }
}

/// A key handed to a worker, to be ended by `Done`, `Finish` or expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease<K> {
    pub key: K,
    /// Must be presented to `Done`, `Extend` and `Finish`.
    pub token: LeaseToken,
    /// When the lease expires unless extended; the key then goes back to the queue.
    pub deadline: Instant,
    /// The priority the key had when it was taken.
    pub priority: i32,
    /// How many times this key failed since it was last forgotten.
    pub failures: u32,
    /// The error text of the last failure, if any.
    pub last_error: Option<Arc<str>>,
    /// Why the key was queued.
    pub reasons: ReasonSet,
    /// When the key became ready to hand out, the first time since its last
    /// grant (a delay's end, not the add that asked for it).
    pub enqueued_at: Instant,
    /// When this lease was granted.
    pub granted_at: Instant,
}

/// How a worker ends a lease in one call (controller-runtime's `Result`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishOutcome {
    /// Reconciled: forget the failures and release the key (Forget + Done).
    Success,
    /// Failed: back off by the rate limiter and keep the error (AddRateLimited + Done).
    Retry { error: String },
    /// Reconciled, but look again after this delay (Forget + Done + AddAfter).
    RequeueAfter(Duration),
}

/// The answer to `Extend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRenewal {
    pub deadline: Instant,
    /// The worker should stop working on the key: the queue is shutting down
    /// without drain or the sidecar lost leadership.
    pub cancel: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_should_never_repeat_within_a_source() {
        let mut source = TokenSource::new();
        let first = source.next();
        let second = source.next();
        assert_ne!(first, second);
        assert!(second > first);
    }
}
