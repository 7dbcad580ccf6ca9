//! How long an informer waits before it retries a failed list or watch: doubling from 500 ms, never more than 5 s, so it is back within seconds of the API server.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use kube::runtime::utils::Backoff;

/// The first wait after a failure.
pub const FIRST_RETRY: Duration = Duration::from_millis(500);
/// The longest wait between two attempts: an informer whose API server came
/// back is watching again within this (plus the attempt itself). client-go's
/// reflector and kube-runtime's default grow to 30 s, which left the cache
/// stale for 45-50 s after a 20 s outage.
pub const MAX_RETRY: Duration = Duration::from_secs(5);

/// Doubling waits from [`FIRST_RETRY`] to [`MAX_RETRY`], each shortened by
/// up to a quarter at random so that many sidecars do not retry in step.
/// kube-runtime's `StreamBackoff` resets it on every successful event.
pub struct WatchBackoff {
    next: Duration,
    jitter: u64,
}

impl WatchBackoff {
    pub fn new() -> Self {
        WatchBackoff { next: FIRST_RETRY, jitter: RandomState::new().hash_one(std::process::id()) }
    }
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = self.next;
        self.next = self.next.saturating_mul(2).min(MAX_RETRY);
        // xorshift: a cheap spread, no need for a cryptographic source.
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        let quarter = wait / 4;
        let cut = quarter.mul_f64((self.jitter % 1024) as f64 / 1024.0);
        Some(wait.saturating_sub(cut))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST_RETRY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_should_double_from_the_first_and_never_pass_the_cap() {
        let mut backoff = WatchBackoff::new();
        let waits: Vec<Duration> = backoff.by_ref().take(50).collect();
        assert!(waits[0] <= FIRST_RETRY && waits[0] >= FIRST_RETRY * 3 / 4, "{:?}", waits[0]);
        assert!(waits[1] > FIRST_RETRY, "the second wait is longer: {:?}", waits[1]);
        assert!(waits.iter().all(|w| *w <= MAX_RETRY), "never past the cap: {waits:?}");
        assert!(waits[10..].iter().all(|w| *w >= MAX_RETRY * 3 / 4), "it reaches the cap: {waits:?}");
        backoff.reset();
        assert!(backoff.next().unwrap() <= FIRST_RETRY, "a success starts over");
    }
}
