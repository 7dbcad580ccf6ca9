//! Hooks through which a queue reports what happens to it, for metrics, without knowing any metrics library.

use std::time::Duration;

/// How a lease ended, as an observer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseEndKind {
    /// The holder ended it: Done or Finish.
    Finished,
    /// Its deadline passed.
    Expired,
    /// Its holder went away (a broken stream).
    Released,
    /// Still held at the end of a drain; handed back.
    Returned,
    /// Never reached its holder (its answer had no room for it): queued
    /// again as it was, at once.
    Unsent,
    /// Its holder stopped cleanly (half-closed its stream) while holding it:
    /// queued again at once, no failure counted.
    Stopped,
}

/// Called by the queue under its lock: implementations must be quick and
/// must not call back into the queue. Every method has a no-op default.
pub trait QueueObserver: Send + Sync + 'static {
    /// A key entered the queue: ready now, or at the end of its delay (an
    /// AddAfter, a backoff), not when the delayed add was made. As in
    /// client-go, merges into an already queued key are not counted, and a
    /// key added while held counts once, when it goes back to the queue.
    fn added(&self) {}
    /// A key was leased after waiting `waited` since it entered the queue.
    fn granted(&self, _waited: Duration) {}
    /// A lease ended after `held` since it was granted.
    fn lease_ended(&self, _held: Duration, _how: LeaseEndKind) {}
    /// A failure was counted and the key delayed by the rate limiter.
    fn retried(&self) {}
    /// A call presented a token that is not the key's current lease.
    fn stale_token(&self) {}
    /// A settling key was queued because its settle timeout passed before
    /// the caches saw the writes made under its lease.
    fn settle_timed_out(&self) {}
}

/// The observer of a queue nobody watches.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl QueueObserver for NoObserver {}
