//! Rate limiters: how long a key waits before its next retry.
//!
//! The same family as client-go's `workqueue` rate limiters. The per-key
//! failure count lives in the queue's entry for the key (so `Forget` and
//! memory bounds have one place to look); a limiter turns that count, plus its
//! own shared state (the token bucket), into a delay.

use std::time::Duration;

use tokio::time::Instant;

use super::settings_error::{SettingsError, check_duration};
use super::time::MAX_DURATION;

/// A rate limiter's settings, as configured per queue.
#[derive(Debug, Clone, PartialEq)]
pub enum RateLimiterSpec {
    /// `base * 2^failures`, capped at `max` (client-go's ItemExponentialFailureRateLimiter).
    Exponential { base: Duration, max: Duration },
    /// `fast` for the first `fast_attempts` failures, `slow` after (client-go's ItemFastSlowRateLimiter).
    FastSlow { fast: Duration, slow: Duration, fast_attempts: u32 },
    /// One token bucket over all keys of the queue (client-go's BucketRateLimiter).
    Bucket { qps: f64, burst: u32 },
    /// The longest delay of its members (client-go's MaxOfRateLimiter).
    MaxOf(Vec<RateLimiterSpec>),
    /// The inner limiter's delay, but never more than `max` (client-go's WithMaxWaitRateLimiter).
    MaxDelay { limiter: Box<RateLimiterSpec>, max: Duration },
}

impl Default for RateLimiterSpec {
    /// client-go's `DefaultControllerRateLimiter`: the longer of a per-key
    /// exponential backoff from 5 ms to 1000 s and a 10 qps, burst 100 bucket.
    fn default() -> Self {
        RateLimiterSpec::MaxOf(vec![
            RateLimiterSpec::Exponential { base: Duration::from_millis(5), max: Duration::from_secs(1000) },
            RateLimiterSpec::Bucket { qps: 10.0, burst: 100 },
        ])
    }
}

impl RateLimiterSpec {
    /// Checks every value; the error names the field (`exponential.max`, `max_of[1].bucket.qps`).
    pub fn validate(&self) -> Result<(), SettingsError> {
        match self {
            RateLimiterSpec::Exponential { base, max } => {
                check_duration("exponential.base", *base)?;
                check_duration("exponential.max", *max)?;
                if base.is_zero() {
                    return Err(SettingsError::new("exponential.base", "must be greater than zero"));
                }
                if max < base {
                    return Err(SettingsError::new(
                        "exponential.max",
                        format!("must be at least base ({base:?}), got {max:?}"),
                    ));
                }
            }
            RateLimiterSpec::FastSlow { fast, slow, fast_attempts: _ } => {
                check_duration("fast_slow.fast", *fast)?;
                check_duration("fast_slow.slow", *slow)?;
                if slow < fast {
                    return Err(SettingsError::new(
                        "fast_slow.slow",
                        format!("must be at least fast ({fast:?}), got {slow:?}"),
                    ));
                }
            }
            RateLimiterSpec::Bucket { qps, burst } => {
                if !qps.is_finite() || *qps <= 0.0 {
                    return Err(SettingsError::new(
                        "bucket.qps",
                        format!("must be a finite number greater than zero, got {qps}"),
                    ));
                }
                if *burst == 0 {
                    return Err(SettingsError::new("bucket.burst", "must be at least 1"));
                }
            }
            RateLimiterSpec::MaxOf(members) => {
                if members.is_empty() {
                    return Err(SettingsError::new("max_of", "needs at least one limiter"));
                }
                for (i, member) in members.iter().enumerate() {
                    member.validate().map_err(|err| err.under(&format!("max_of[{i}]")))?;
                }
            }
            RateLimiterSpec::MaxDelay { limiter, max } => {
                check_duration("max_delay.max", *max)?;
                if max.is_zero() {
                    return Err(SettingsError::new("max_delay.max", "must be greater than zero"));
                }
                limiter.validate().map_err(|err| err.under("max_delay.limiter"))?;
            }
        }
        Ok(())
    }
}

/// A running rate limiter: the spec plus the state the bucket needs.
#[derive(Debug)]
pub(crate) enum RateLimiter {
    Exponential { base: Duration, max: Duration },
    FastSlow { fast: Duration, slow: Duration, fast_attempts: u32 },
    Bucket(TokenBucket),
    MaxOf(Vec<RateLimiter>),
    MaxDelay { limiter: Box<RateLimiter>, max: Duration },
}

impl RateLimiter {
    pub(crate) fn new(spec: &RateLimiterSpec, now: Instant) -> Self {
        match spec {
            RateLimiterSpec::Exponential { base, max } => RateLimiter::Exponential { base: *base, max: *max },
            RateLimiterSpec::FastSlow { fast, slow, fast_attempts } => {
                RateLimiter::FastSlow { fast: *fast, slow: *slow, fast_attempts: *fast_attempts }
            }
            RateLimiterSpec::Bucket { qps, burst } => RateLimiter::Bucket(TokenBucket::new(*qps, *burst, now)),
            RateLimiterSpec::MaxOf(members) => {
                RateLimiter::MaxOf(members.iter().map(|m| RateLimiter::new(m, now)).collect())
            }
            RateLimiterSpec::MaxDelay { limiter, max } => {
                RateLimiter::MaxDelay { limiter: Box::new(RateLimiter::new(limiter, now)), max: *max }
            }
        }
    }

    /// The delay for a key that had `previous_failures` failures before this one.
    ///
    /// As in client-go, the first failure waits `base * 2^0`; the caller
    /// increments the key's count afterwards.
    pub(crate) fn delay(&mut self, previous_failures: u32, now: Instant) -> Duration {
        self.delay_with(previous_failures, Some(now))
    }

    /// The delay of the per-key limiters alone: the queue-wide bucket is
    /// neither asked nor charged. For a lease that expired or whose worker
    /// went away: that key backs off, but one hung worker must not spend the
    /// bucket every other key of the queue shares.
    pub(crate) fn per_key_delay(&mut self, previous_failures: u32) -> Duration {
        self.delay_with(previous_failures, None)
    }

    /// `bucket_now`: when to charge the bucket, or `None` to leave it out.
    fn delay_with(&mut self, previous_failures: u32, bucket_now: Option<Instant>) -> Duration {
        match self {
            RateLimiter::Exponential { base, max } => exponential(*base, *max, previous_failures),
            RateLimiter::FastSlow { fast, slow, fast_attempts } => {
                if previous_failures < *fast_attempts {
                    *fast
                } else {
                    *slow
                }
            }
            RateLimiter::Bucket(bucket) => bucket_now.map_or(Duration::ZERO, |now| bucket.reserve(now)),
            RateLimiter::MaxOf(members) => {
                members.iter_mut().map(|m| m.delay_with(previous_failures, bucket_now)).max().unwrap_or_default()
            }
            RateLimiter::MaxDelay { limiter, max } => limiter.delay_with(previous_failures, bucket_now).min(*max),
        }
    }
}

fn exponential(base: Duration, max: Duration, failures: u32) -> Duration {
    // 2^failures overflows u32 from 32 on, and any base times 2^32 is past
    // every sensible cap, so the cap applies.
    1u32.checked_shl(failures).and_then(|factor| base.checked_mul(factor)).map_or(max, |delay| delay.min(max))
}

/// A token bucket shared by all keys: `burst` tokens, refilled at `qps`.
///
/// A reservation may drive the balance negative; the delay is then the time
/// until the bucket refills to zero, as golang.org/x/time/rate's `Reserve`.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    fn new(qps: f64, burst: u32, now: Instant) -> Self {
        TokenBucket { qps, burst: f64::from(burst), tokens: f64::from(burst), updated: now }
    }

    fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.updated = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            return Duration::ZERO;
        }
        // A tiny qps or a deep debt gives seconds past what `Duration` holds:
        // cut to the queue's longest delay instead of panicking.
        Duration::try_from_secs_f64(-self.tokens / self.qps).map_or(MAX_DURATION, |delay| delay.min(MAX_DURATION))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn exponential_should_double_from_base_and_stop_at_max() {
        let mut limiter =
            RateLimiter::new(&RateLimiterSpec::Exponential { base: ms(5), max: ms(1000) }, Instant::now());
        let delays: Vec<_> = (0..10).map(|n| limiter.delay(n, Instant::now())).collect();
        assert_eq!(delays[0], ms(5));
        assert_eq!(delays[1], ms(10));
        assert_eq!(delays[7], ms(640));
        assert_eq!(delays[8], ms(1000));
        assert_eq!(limiter.delay(u32::MAX, Instant::now()), ms(1000));
    }

    #[test]
    fn default_exponential_should_reach_its_cap_at_the_nineteenth_failure() {
        let now = Instant::now();
        let mut limiter =
            RateLimiter::new(&RateLimiterSpec::Exponential { base: ms(5), max: Duration::from_secs(1000) }, now);
        // 5 ms * 2^17 = 655 s, 5 ms * 2^18 = 1310 s: the 19th failure (18 before it) is capped.
        assert_eq!(limiter.delay(17, now), ms(5 << 17));
        assert_eq!(limiter.delay(18, now), Duration::from_secs(1000));
    }

    #[test]
    fn fast_slow_should_switch_after_the_fast_attempts() {
        let mut limiter = RateLimiter::new(
            &RateLimiterSpec::FastSlow { fast: ms(1), slow: ms(100), fast_attempts: 2 },
            Instant::now(),
        );
        let now = Instant::now();
        assert_eq!([limiter.delay(0, now), limiter.delay(1, now), limiter.delay(2, now)], [ms(1), ms(1), ms(100)]);
    }

    #[test]
    fn bucket_should_allow_the_burst_then_space_by_qps() {
        let start = Instant::now();
        let mut limiter = RateLimiter::new(&RateLimiterSpec::Bucket { qps: 10.0, burst: 2 }, start);
        assert_eq!(limiter.delay(0, start), Duration::ZERO);
        assert_eq!(limiter.delay(0, start), Duration::ZERO);
        assert_eq!(limiter.delay(0, start), ms(100));
        assert_eq!(limiter.delay(0, start), ms(200));
        // A second later ten tokens came back, which pays the debt of two and leaves eight... capped at burst 2.
        let later = start + Duration::from_secs(1);
        assert_eq!(limiter.delay(0, later), Duration::ZERO);
    }

    #[test]
    fn max_of_should_take_the_longest_member() {
        let now = Instant::now();
        let mut limiter = RateLimiter::new(&RateLimiterSpec::default(), now);
        assert_eq!(limiter.delay(0, now), ms(5));
        assert_eq!(limiter.delay(30, now), Duration::from_secs(1000));
    }

    #[test]
    fn per_key_delay_should_neither_ask_nor_charge_the_bucket() {
        let now = Instant::now();
        let spec = RateLimiterSpec::MaxOf(vec![
            RateLimiterSpec::Exponential { base: ms(5), max: ms(1000) },
            RateLimiterSpec::Bucket { qps: 1.0, burst: 1 },
        ]);
        let mut limiter = RateLimiter::new(&spec, now);
        for failures in 0..100 {
            assert_eq!(limiter.per_key_delay(failures % 3), ms(5 << (failures % 3)));
        }
        // The bucket's one token is still there for the next charged delay.
        assert_eq!(limiter.delay(0, now), ms(5));
        assert_eq!(limiter.delay(0, now), Duration::from_secs(1));
    }

    #[test]
    fn bucket_should_cut_a_delay_past_what_duration_holds() {
        let now = Instant::now();
        let mut limiter = RateLimiter::new(&RateLimiterSpec::Bucket { qps: 1e-300, burst: 1 }, now);
        assert_eq!(limiter.delay(0, now), Duration::ZERO);
        assert_eq!(limiter.delay(0, now), MAX_DURATION);
    }

    #[test]
    fn validate_should_refuse_durations_past_the_maximum() {
        let spec = RateLimiterSpec::Exponential { base: Duration::from_secs(3600 * 1_000_000_000), max: Duration::MAX };
        assert_eq!(spec.validate().unwrap_err().field, "exponential.base");
    }

    #[test]
    fn max_delay_should_cap_the_inner_limiter() {
        let spec = RateLimiterSpec::MaxDelay {
            limiter: Box::new(RateLimiterSpec::Exponential { base: ms(5), max: Duration::from_secs(1000) }),
            max: Duration::from_secs(60),
        };
        let now = Instant::now();
        assert_eq!(RateLimiter::new(&spec, now).delay(25, now), Duration::from_secs(60));
    }

    #[test]
    fn validate_should_name_the_bad_setting() {
        let spec = RateLimiterSpec::MaxOf(vec![
            RateLimiterSpec::Exponential { base: ms(5), max: ms(10) },
            RateLimiterSpec::Bucket { qps: -1.0, burst: 10 },
        ]);
        let err = spec.validate().unwrap_err();
        assert_eq!(err.field, "max_of[1].bucket.qps");
        assert!(RateLimiterSpec::default().validate().is_ok());
        let err = RateLimiterSpec::Exponential { base: ms(10), max: ms(5) }.validate().unwrap_err();
        assert_eq!(err.field, "exponential.max");
    }
}
