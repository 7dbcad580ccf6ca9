//! Time arithmetic that cannot overflow: every deadline the queue computes goes through here.

use std::time::Duration;

use tokio::time::Instant;

/// The longest delay, lease or timeout the queue works with: 366 days.
///
/// Longer durations are cut to it inside the queue, and refused at the edges
/// (gRPC requests, the config file) so that a unit typo is noticed. A year
/// past any reading of the monotonic clock is representable, so deadlines
/// computed from a bounded duration never overflow, and every duration the
/// queue answers with (a rate limiter's delay, say) fits protobuf's
/// `Duration`.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// `now + delay`, with `delay` cut to [`MAX_DURATION`]: never panics.
pub(crate) fn after(now: Instant, delay: Duration) -> Instant {
    // The fallback is unreachable (a year fits past any monotonic reading);
    // it keeps the function total without a panic path.
    now.checked_add(delay.min(MAX_DURATION)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_should_cut_a_huge_delay_to_the_maximum_instead_of_overflowing() {
        let now = Instant::now();
        assert_eq!(after(now, Duration::MAX), after(now, MAX_DURATION));
        assert!(after(now, Duration::MAX) > now);
        assert_eq!(after(now, Duration::from_millis(5)), now.checked_add(Duration::from_millis(5)).unwrap());
    }
}
