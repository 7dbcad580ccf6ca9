//! Model-based property test: random operation sequences run against the
//! state machine and a plain reference model, with the invariants checked
//! after every step.
//!
//! The model is written independently of `state.rs`: plain maps and linear
//! scans. After each step the whole observable state of every key must agree
//! (phase, priority, ready time, deadline, dirty add, failures, last error),
//! and the key chosen by a grant must be one the rules allow: the oldest
//! ready key once it waited `max_wait`, otherwise a key of the highest
//! priority that became ready first. Sharding is part of it: each key falls
//! in one of three shard slots (or none), and once the queue owns only some
//! slots, only their keys may be granted and leases in slots it gives up are
//! handed back at once.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::QueueError;
use super::introspect::KeyPhase;
use super::lease::{FinishOutcome, Holder, LeaseToken};
use super::rate_limit::RateLimiterSpec;
use super::reason::{Reason, ReasonKind};
use super::settings::QueueSettings;
use super::state::QueueState;
use super::time::MAX_DURATION;
use crate::shard::{Slot as ShardSlot, SlotSet};

const KEYS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const HOLDERS: [&str; 3] = ["w1", "w2", "w3"];
const BASE_MS: u64 = 4;
const MAX_MS: u64 = 64;
const TTL_MS: u64 = 50;
const MAX_TTL_MS: u64 = 200;
const MAX_WAIT_MS: u64 = 30;
const SETTLE_MS: u64 = 40;

/// Shard slots the keys fall in: slot indexes 0, 1 and 2.
const SHARDS: usize = 3;

/// Most keys tracked: below the six keys, so adds meet a full queue.
const MAX_KEYS: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    /// One key through `add`, several through `add_all` (names may repeat).
    Add {
        keys: Vec<usize>,
        priority: i32,
        from_cache: bool,
    },
    AddAfter {
        keys: Vec<usize>,
        delay: Delay,
        priority: i32,
    },
    AddRateLimited {
        keys: Vec<usize>,
        priority: i32,
    },
    Get {
        holder: usize,
        ttl_ms: Option<u64>,
    },
    Done {
        key: usize,
        stale: bool,
    },
    Finish {
        key: usize,
        stale: bool,
        outcome: Outcome,
    },
    Extend {
        key: usize,
        stale: bool,
        ttl_ms: Option<u64>,
    },
    Forget {
        key: usize,
    },
    Release {
        holder: usize,
    },
    /// The holder sends a write through the sidecar under its lease (or a stale one).
    BeginWrite {
        key: usize,
        stale: bool,
    },
    /// One of the writes begun and not yet answered is answered (picked by
    /// index among them).
    EndWrite {
        pick: usize,
    },
    /// The caches have seen the key's writes.
    Settled {
        key: usize,
    },
    Advance {
        ms: u64,
    },
    /// The key's shard slot changes (its object was recreated with another
    /// uid) or becomes unknown; it applies now if the key is tracked, and to
    /// its later adds.
    MoveShard {
        key: usize,
        shard: Option<usize>,
    },
    /// The queue grants from these of the three slots (a bit each) or, with
    /// `None`, from every key (not sharded).
    SetOwned {
        owned: Option<u8>,
    },
    ShutDown,
}

#[derive(Debug, Clone)]
enum Outcome {
    Success,
    Retry,
    RequeueAfter(Delay),
}

/// A delay a worker asks for: short, or far past what the queue works with.
#[derive(Debug, Clone, Copy)]
enum Delay {
    Ms(u64),
    Huge,
}

impl Delay {
    fn asked(self) -> Duration {
        match self {
            Delay::Ms(n) => ms(n),
            Delay::Huge => Duration::MAX,
        }
    }

    /// What the queue makes of it: cut to `MAX_DURATION`.
    fn applied(self) -> Duration {
        self.asked().min(MAX_DURATION)
    }
}

fn delay() -> impl Strategy<Value = Delay> {
    prop_oneof![20 => (0..40u64).prop_map(Delay::Ms), 1 => Just(Delay::Huge)]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let keys = prop_oneof![4 => key.clone().prop_map(|k| vec![k]), 1 => prop::collection::vec(key.clone(), 2..5)];
    let priority = prop_oneof![Just(-100), Just(0), Just(5)];
    prop_oneof![
        6 => (keys.clone(), priority.clone(), prop::bool::weighted(0.3)).prop_map(|(keys, priority, from_cache)| Op::Add { keys, priority, from_cache }),
        3 => (keys.clone(), delay(), priority.clone()).prop_map(|(keys, delay, priority)| Op::AddAfter { keys, delay, priority }),
        2 => (keys, priority).prop_map(|(keys, priority)| Op::AddRateLimited { keys, priority }),
        6 => (0..HOLDERS.len(), prop::option::of(1..300u64)).prop_map(|(holder, ttl_ms)| Op::Get { holder, ttl_ms }),
        3 => (key.clone(), prop::bool::weighted(0.2)).prop_map(|(key, stale)| Op::Done { key, stale }),
        3 => (key.clone(), prop::bool::weighted(0.2), prop_oneof![Just(Outcome::Success), Just(Outcome::Retry), delay().prop_map(Outcome::RequeueAfter)])
            .prop_map(|(key, stale, outcome)| Op::Finish { key, stale, outcome }),
        2 => (key.clone(), prop::bool::weighted(0.3), prop::option::of(1..300u64)).prop_map(|(key, stale, ttl_ms)| Op::Extend { key, stale, ttl_ms }),
        1 => key.clone().prop_map(|key| Op::Forget { key }),
        1 => (0..HOLDERS.len()).prop_map(|holder| Op::Release { holder }),
        3 => (key.clone(), prop::bool::weighted(0.2)).prop_map(|(key, stale)| Op::BeginWrite { key, stale }),
        3 => (0..8usize).prop_map(|pick| Op::EndWrite { pick }),
        2 => key.clone().prop_map(|key| Op::Settled { key }),
        5 => (0..60u64).prop_map(|ms| Op::Advance { ms }),
        1 => (key, prop::option::weighted(0.8, 0..SHARDS)).prop_map(|(key, shard)| Op::MoveShard { key, shard }),
        2 => prop::option::weighted(0.85, 0..8u8).prop_map(|owned| Op::SetOwned { owned }),
    ]
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[derive(Debug, Clone, PartialEq)]
enum MPhase {
    Idle,
    Ready {
        since: Instant,
    },
    Waiting {
        until: Instant,
    },
    Held {
        token: LeaseToken,
        holder: usize,
        deadline: Instant,
        /// What an extend without a ttl renews it by.
        ttl: Duration,
        dirty: Option<(i32, Instant)>,
        unsettled: bool,
        /// Writes under it not answered yet: it does not expire while any is.
        writing: u32,
        /// Its key's slot stopped being owned while held: its deadline no
        /// longer moves.
        asked_back: bool,
    },
    /// After a lease with unseen writes: queued at `pending` when settled or
    /// at `until`, which is unset while `writes` (that lease's token and its
    /// writes not answered yet) are out.
    Settling {
        until: Option<Instant>,
        pending: Option<(i32, Instant)>,
        writes: Option<(LeaseToken, u32)>,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct MKey {
    phase: MPhase,
    priority: i32,
    failures: u32,
    last_error: Option<String>,
}

impl MKey {
    fn idle() -> Self {
        MKey { phase: MPhase::Idle, priority: 0, failures: 0, last_error: None }
    }
}

/// The reference model: one record per key, no indexes.
struct Model {
    keys: BTreeMap<usize, MKey>,
    shutting_down: bool,
    /// Each key's shard slot, as the queue's `shard_of` would say now.
    shard: [Option<usize>; KEYS.len()],
    /// The slots granted from (a bit each); `None`: not sharded.
    owned: Option<u8>,
}

fn shard_slot(shard: Option<usize>) -> Option<ShardSlot> {
    shard.and_then(ShardSlot::new)
}

fn slot_set(mask: u8) -> SlotSet {
    (0..SHARDS).filter(|s| mask & (1 << s) != 0).filter_map(ShardSlot::new).collect()
}

impl Model {
    fn key(&mut self, k: usize) -> &mut MKey {
        self.keys.entry(k).or_insert_with(MKey::idle)
    }

    fn backoff(failures_before: u32) -> Duration {
        ms((BASE_MS << failures_before.min(20)).min(MAX_MS))
    }

    fn enqueue(&mut self, k: usize, priority: i32, ready_at: Instant, now: Instant) {
        let key = self.key(k);
        match &mut key.phase {
            MPhase::Idle => {
                key.priority = priority;
                key.phase =
                    if ready_at <= now { MPhase::Ready { since: now } } else { MPhase::Waiting { until: ready_at } };
            }
            MPhase::Ready { .. } => key.priority = key.priority.max(priority),
            MPhase::Waiting { until } => {
                key.priority = key.priority.max(priority);
                if ready_at <= now {
                    key.phase = MPhase::Ready { since: now };
                } else if ready_at < *until {
                    *until = ready_at;
                }
            }
            MPhase::Held { dirty, .. } | MPhase::Settling { pending: dirty, .. } => {
                *dirty = Some(match *dirty {
                    Some((p, at)) => (p.max(priority), at.min(ready_at)),
                    None => (priority, ready_at),
                });
            }
        }
    }

    /// A settling key goes on: queued as its merged adds ask, or idle.
    fn release_settling(&mut self, k: usize, now: Instant) {
        let key = self.key(k);
        let MPhase::Settling { pending, .. } = key.phase.clone() else { panic!("model: {k} not settling") };
        key.phase = MPhase::Idle;
        if let Some((p, at)) = pending {
            self.enqueue(k, p, at, now);
        }
    }

    fn fail(&mut self, k: usize, error: &str) -> Duration {
        let key = self.key(k);
        let delay = Self::backoff(key.failures);
        key.failures += 1;
        key.last_error = Some(error.to_string());
        delay
    }

    /// Ends the lease of `k`; `requeue` is the extra add the outcome asks for.
    fn end_lease(&mut self, k: usize, requeue: Option<Instant>, now: Instant) {
        let key = self.key(k);
        let MPhase::Held { token, dirty, unsettled, writing, asked_back, .. } = key.phase.clone() else {
            panic!("model: {k} not held")
        };
        let priority = key.priority;
        // A key asked back stays queued whatever the outcome.
        let requeue = requeue.or(asked_back.then_some(now));
        if unsettled || writing > 0 {
            let pending = match (requeue, dirty) {
                (Some(at), Some((p, dat))) => Some((priority.max(p), at.min(dat))),
                (Some(at), None) => Some((priority, at)),
                (None, dirty) => dirty,
            };
            key.phase = match writing {
                0 => MPhase::Settling { until: Some(now + ms(SETTLE_MS)), pending, writes: None },
                n => MPhase::Settling { until: None, pending, writes: Some((token, n)) },
            };
            return;
        }
        key.phase = MPhase::Idle;
        if let Some(at) = requeue {
            self.enqueue(k, priority, at, now);
        }
        if let Some((p, at)) = dirty {
            self.enqueue(k, p, at, now);
        }
    }

    fn advance(&mut self, now: Instant) {
        let due: Vec<usize> = self
            .keys
            .iter()
            .filter(|(_, key)| matches!(key.phase, MPhase::Waiting { until } if until <= now))
            .map(|(k, _)| *k)
            .collect();
        for k in due {
            self.key(k).phase = MPhase::Ready { since: now };
        }
        let mut expired: Vec<(Instant, LeaseToken, usize)> = self
            .keys
            .iter()
            .filter_map(|(k, key)| match key.phase {
                MPhase::Held { deadline, token, writing: 0, .. } if deadline <= now => Some((deadline, token, *k)),
                _ => None,
            })
            .collect();
        expired.sort();
        for (_, _, k) in expired {
            let delay = self.fail(k, "lease expired before the worker finished");
            self.end_lease(k, Some(now + delay), now);
        }
        let settled: Vec<usize> = self
            .keys
            .iter()
            .filter(|(_, key)| matches!(key.phase, MPhase::Settling { until: Some(until), .. } if until <= now))
            .map(|(k, _)| *k)
            .collect();
        for k in settled {
            self.release_settling(k, now);
        }
    }

    /// A write under lease `token` of `k` is answered: whether the lease was
    /// held until then.
    fn end_write(&mut self, k: usize, token: LeaseToken, now: Instant) -> bool {
        match &mut self.key(k).phase {
            MPhase::Held { token: held, writing, deadline, .. } if *held == token => {
                *writing -= 1;
                if *writing == 0 && *deadline <= now {
                    let delay = self.fail(k, "lease expired before the worker finished");
                    self.end_lease(k, Some(now + delay), now);
                }
                true
            }
            MPhase::Settling { until, writes: writes @ Some(_), .. } => {
                let (of, out) = writes.as_mut().unwrap();
                if *of == token {
                    *out -= 1;
                    if *out == 0 {
                        (*until, *writes) = (Some(now + ms(SETTLE_MS)), None);
                    }
                }
                false
            }
            _ => false,
        }
    }

    fn held_token(&self, k: usize) -> Option<LeaseToken> {
        match self.keys.get(&k)?.phase {
            MPhase::Held { token, .. } => Some(token),
            _ => None,
        }
    }

    /// Whether key `k` may be granted, as far as sharding goes.
    fn in_owned_shard(&self, k: usize) -> bool {
        self.owned.is_none_or(|mask| self.shard[k].is_some_and(|s| mask & (1 << s) != 0))
    }

    /// Keys a grant may choose at `now`: the rules, among keys of owned slots.
    fn allowed_grants(&self, now: Instant) -> Vec<usize> {
        let ready: Vec<(usize, i32, Instant)> = self
            .keys
            .iter()
            .filter(|(k, _)| self.in_owned_shard(**k))
            .filter_map(|(k, key)| match key.phase {
                MPhase::Ready { since } => Some((*k, key.priority, since)),
                _ => None,
            })
            .collect();
        let Some(oldest) = ready.iter().map(|r| r.2).min() else { return vec![] };
        if now - oldest >= ms(MAX_WAIT_MS) {
            return ready.iter().filter(|r| r.2 == oldest).map(|r| r.0).collect();
        }
        let top = ready.iter().map(|r| r.1).max().unwrap();
        let first = ready.iter().filter(|r| r.1 == top).map(|r| r.2).min().unwrap();
        ready.iter().filter(|r| r.1 == top && r.2 == first).map(|r| r.0).collect()
    }

    /// Whether adding `keys` may proceed: not shutting down, and the new
    /// ones fit under `MAX_KEYS` unless they come from an informer's cache.
    fn admits(&self, keys: &[usize], from_cache: bool) -> Result<(), QueueError> {
        if self.shutting_down {
            return Err(QueueError::ShuttingDown);
        }
        let new: HashSet<usize> = keys.iter().copied().filter(|k| !self.keys.contains_key(k)).collect();
        if !from_cache && self.keys.len() + new.len() > MAX_KEYS {
            return Err(QueueError::Full { limit: MAX_KEYS });
        }
        Ok(())
    }

    fn gc(&mut self) {
        self.keys.retain(|_, key| !(key.phase == MPhase::Idle && key.failures == 0));
    }
}

fn settings() -> QueueSettings {
    QueueSettings {
        lease_ttl: ms(TTL_MS),
        max_lease_ttl: ms(MAX_TTL_MS),
        max_wait: ms(MAX_WAIT_MS),
        rate_limiter: RateLimiterSpec::Exponential { base: ms(BASE_MS), max: ms(MAX_MS) },
        max_keys: MAX_KEYS,
        max_memory: crate::queue::DEFAULT_MAX_MEMORY,
        settle_timeout: ms(SETTLE_MS),
    }
}

fn ttl(asked: Option<u64>) -> Duration {
    ms(asked.unwrap_or(TTL_MS).min(MAX_TTL_MS))
}

/// Compares every key of the model with the queue's view of it.
fn check_agreement(queue: &QueueState<String>, model: &Model) {
    let asked_back =
        model.keys.values().filter(|key| matches!(key.phase, MPhase::Held { asked_back: true, .. })).count();
    assert_eq!(queue.asked_back(), asked_back, "leases asked back and not ended");
    for (k, name) in KEYS.iter().enumerate() {
        let status = queue.key_status(&name.to_string());
        let expected = model.keys.get(&k).cloned().unwrap_or_else(MKey::idle);
        assert_eq!(status.failures, expected.failures, "failures of {name}");
        assert_eq!(status.last_error.as_deref(), expected.last_error.as_deref(), "last error of {name}");
        match (&status.phase, &expected.phase) {
            (KeyPhase::Absent, MPhase::Idle) => {}
            (KeyPhase::Queued { since }, MPhase::Ready { since: m }) => {
                assert_eq!(since, m, "ready since of {name}");
                assert_eq!(status.priority, expected.priority, "priority of {name}");
            }
            (KeyPhase::Waiting { until }, MPhase::Waiting { until: m }) => {
                assert_eq!(until, m, "ready time of {name}");
                assert_eq!(status.priority, expected.priority, "priority of {name}");
            }
            (
                KeyPhase::Held { holder, deadline, dirty, .. },
                MPhase::Held { holder: mh, deadline: md, dirty: mdirty, .. },
            ) => {
                assert_eq!(&**holder, HOLDERS[*mh], "holder of {name}");
                assert_eq!(deadline, md, "deadline of {name}");
                assert_eq!(dirty.as_ref().map(|d| (d.priority, d.ready_at)), *mdirty, "dirty add of {name}");
            }
            (KeyPhase::Settling { until, dirty }, MPhase::Settling { until: mu, pending, .. }) => {
                assert_eq!(until, mu, "settling until of {name}");
                assert_eq!(dirty.as_ref().map(|d| (d.priority, d.ready_at)), *pending, "what {name} settles into");
            }
            (got, want) => panic!("{name}: queue says {got:?}, model says {want:?}"),
        }
    }
    let counts = queue.counts();
    let held = model.keys.values().filter(|k| matches!(k.phase, MPhase::Held { .. })).count();
    assert_eq!(counts.held, held, "no lease is lost or duplicated");
    let settling = model.keys.values().filter(|k| matches!(k.phase, MPhase::Settling { .. })).count();
    assert_eq!(counts.settling, settling, "settling keys");
    assert_eq!(counts.tracked, model.keys.len(), "no key is lost or kept past its use");
}

fn run(ops: Vec<Op>) {
    let start = Instant::now();
    let mut now = start;
    let mut queue = QueueState::<String>::new(settings(), now);
    let mut model = Model { keys: BTreeMap::new(), shutting_down: false, shard: [Some(0); KEYS.len()], owned: None };
    for k in 0..KEYS.len() {
        model.shard[k] = Some(k % SHARDS);
    }
    let mut granted: HashSet<LeaseToken> = HashSet::new();
    let mut past_tokens: Vec<(usize, LeaseToken)> = Vec::new();
    // Writes begun and not answered yet: (key, lease token).
    let mut in_flight: Vec<(usize, LeaseToken)> = Vec::new();
    let holders: Vec<Holder> = HOLDERS.iter().map(|h| Arc::from(*h)).collect();
    let reason = Reason::of(ReasonKind::Manual);
    let cache_reason = Reason::new(ReasonKind::Added, "informer");
    let names = |keys: &[usize]| -> Vec<String> { keys.iter().map(|&k| KEYS[k].to_string()).collect() };

    for op in ops {
        queue.advance(now);
        model.advance(now);
        model.gc();
        check_agreement(&queue, &model);

        // A token for `key`: its current lease's, or a stale one.
        let token_for = |model: &Model, k: usize, stale: bool| -> LeaseToken {
            match (stale, model.held_token(k)) {
                (false, Some(token)) => token,
                _ => past_tokens
                    .iter()
                    .rev()
                    .find(|(pk, t)| *pk == k && Some(*t) != model.held_token(k))
                    .map(|(_, t)| *t)
                    .unwrap_or(LeaseToken::new(7).unwrap()),
            }
        };

        match op {
            Op::Add { keys, priority, from_cache } => {
                let reason = if from_cache { cache_reason.clone() } else { reason.clone() };
                let result = match keys.as_slice() {
                    [one] => queue.add(KEYS[*one].into(), priority, reason, now).map(|_| ()),
                    many => queue.add_all(names(many), Duration::ZERO, priority, reason, now),
                };
                let expected = model.admits(&keys, from_cache);
                assert_eq!(result, expected, "add of {keys:?}");
                if expected.is_ok() {
                    for k in keys {
                        model.enqueue(k, priority, now, now);
                    }
                }
            }
            Op::AddAfter { keys, delay, priority } => {
                let result = match keys.as_slice() {
                    [one] => {
                        queue.add_after(KEYS[*one].into(), delay.asked(), priority, reason.clone(), now).map(|_| ())
                    }
                    many => queue.add_all(names(many), delay.asked(), priority, reason.clone(), now),
                };
                let expected = model.admits(&keys, false);
                assert_eq!(result, expected, "add after of {keys:?}");
                if expected.is_ok() {
                    for k in keys {
                        model.enqueue(k, priority, now + delay.applied(), now);
                    }
                }
            }
            Op::AddRateLimited { keys, priority } => {
                let result = queue.add_rate_limited_all(names(&keys), priority, reason.clone(), now);
                let expected = model.admits(&keys, false);
                match (result, expected) {
                    (Err(got), Err(want)) => assert_eq!(got, want, "rate limited add of {keys:?}"),
                    (Ok(limited), Ok(())) => {
                        let mut seen = HashSet::new();
                        let distinct: Vec<usize> = keys.into_iter().filter(|k| seen.insert(*k)).collect();
                        assert_eq!(limited.len(), distinct.len(), "one answer per distinct key");
                        for (k, (name, delay, failures)) in distinct.into_iter().zip(limited) {
                            assert_eq!(name, KEYS[k]);
                            let before = model.key(k).failures;
                            let want = Model::backoff(before);
                            model.key(k).failures += 1;
                            assert_eq!((delay, failures), (want, before + 1), "{name}");
                            model.enqueue(k, priority, now + delay, now);
                        }
                    }
                    (got, want) => panic!("rate limited add of {keys:?}: queue {got:?}, model {want:?}"),
                }
            }
            Op::Get { holder, ttl_ms } => {
                let allowed = if model.shutting_down { vec![] } else { model.allowed_grants(now) };
                match queue.grant(&holders[holder], ttl_ms.map(ms), now) {
                    None => assert!(allowed.is_empty(), "a ready key was not handed out: {allowed:?}"),
                    Some(lease) => {
                        let k = KEYS.iter().position(|n| *n == lease.key).unwrap();
                        assert!(allowed.contains(&k), "granted {} but the rules allow {allowed:?}", lease.key);
                        assert!(granted.insert(lease.token), "token {} was reused", lease.token);
                        assert_eq!(lease.deadline, now + ttl(ttl_ms));
                        let key = model.key(k);
                        assert_eq!((lease.priority, lease.failures), (key.priority, key.failures));
                        key.phase = MPhase::Held {
                            token: lease.token,
                            holder,
                            deadline: lease.deadline,
                            ttl: ttl(ttl_ms),
                            dirty: None,
                            unsettled: false,
                            writing: 0,
                            asked_back: false,
                        };
                        past_tokens.push((k, lease.token));
                    }
                }
            }
            Op::Done { key, stale } => {
                let token = token_for(&model, key, stale);
                let result = queue.done(KEYS[key], token, now);
                if model.held_token(key) == Some(token) {
                    result.unwrap();
                    model.end_lease(key, None, now);
                } else {
                    assert_eq!(result, Err(QueueError::StaleToken { token }));
                }
            }
            Op::Finish { key, stale, outcome } => {
                let token = token_for(&model, key, stale);
                let queue_outcome = match outcome {
                    Outcome::Success => FinishOutcome::Success,
                    Outcome::Retry => FinishOutcome::Retry { error: "boom".into() },
                    Outcome::RequeueAfter(d) => FinishOutcome::RequeueAfter(d.asked()),
                };
                let result = queue.finish(KEYS[key], token, queue_outcome, now);
                if model.held_token(key) == Some(token) {
                    result.unwrap();
                    let requeue = match outcome {
                        Outcome::Success => {
                            let k = model.key(key);
                            (k.failures, k.last_error) = (0, None);
                            None
                        }
                        Outcome::Retry => Some(now + model.fail(key, "boom")),
                        Outcome::RequeueAfter(d) => {
                            let k = model.key(key);
                            (k.failures, k.last_error) = (0, None);
                            Some(now + d.applied())
                        }
                    };
                    model.end_lease(key, requeue, now);
                } else {
                    assert_eq!(result, Err(QueueError::StaleToken { token }));
                }
            }
            Op::Extend { key, stale, ttl_ms } => {
                let token = token_for(&model, key, stale);
                let result = queue.extend(KEYS[key], token, ttl_ms.map(ms), now);
                if model.held_token(key) == Some(token) {
                    let renewal = result.unwrap();
                    let shutting_down = model.shutting_down;
                    let MPhase::Held { deadline, ttl: held_ttl, asked_back, .. } = &mut model.key(key).phase else {
                        unreachable!("held_token said held")
                    };
                    if *asked_back {
                        // The slot's new owner waits for this deadline.
                        assert_eq!((renewal.deadline, renewal.cancel), (*deadline, true), "a lease asked back");
                    } else {
                        assert_eq!(renewal.cancel, shutting_down);
                        // Without a ttl, the lease is renewed by its own.
                        let renewed_by = ttl_ms.map_or(*held_ttl, |asked| ttl(Some(asked)));
                        assert_eq!(renewal.deadline, now + renewed_by);
                        (*deadline, *held_ttl) = (renewal.deadline, renewed_by);
                    }
                } else {
                    assert_eq!(result, Err(QueueError::StaleToken { token }));
                }
            }
            Op::Forget { key } => {
                queue.forget(KEYS[key]);
                let k = model.key(key);
                (k.failures, k.last_error) = (0, None);
            }
            Op::Release { holder } => {
                let mine: Vec<usize> = model
                    .keys
                    .iter()
                    .filter(|(_, k)| matches!(k.phase, MPhase::Held { holder: h, .. } if h == holder))
                    .map(|(k, _)| *k)
                    .collect();
                assert_eq!(queue.release_holder(&holders[holder], now), mine.len());
                for k in mine {
                    let delay = model.fail(k, "the worker holding the lease went away");
                    model.end_lease(k, Some(now + delay), now);
                }
            }
            Op::BeginWrite { key, stale } => {
                let token = token_for(&model, key, stale);
                let result = queue.begin_write(KEYS[key], token);
                if model.held_token(key) == Some(token) {
                    result.unwrap();
                    if let MPhase::Held { unsettled, writing, .. } = &mut model.key(key).phase {
                        (*unsettled, *writing) = (true, *writing + 1);
                    }
                    in_flight.push((key, token));
                } else {
                    assert_eq!(result, Err(QueueError::StaleToken { token }), "a write under a lost lease");
                }
            }
            Op::EndWrite { pick } => {
                if !in_flight.is_empty() {
                    let (key, token) = in_flight.remove(pick % in_flight.len());
                    let held = queue.end_write(KEYS[key], token, now);
                    assert_eq!(held, model.end_write(key, token, now), "end of a write under {} {token}", KEYS[key]);
                }
            }
            Op::Settled { key } => {
                let released = queue.settled(KEYS[key], now);
                let was_settling = match &mut model.key(key).phase {
                    MPhase::Held { unsettled, .. } => {
                        *unsettled = false;
                        false
                    }
                    // An unanswered write cannot have been seen.
                    MPhase::Settling { until, .. } => until.is_some(),
                    _ => false,
                };
                assert_eq!(released, was_settling, "settled {}", KEYS[key]);
                if was_settling {
                    model.release_settling(key, now);
                }
            }
            Op::Advance { ms: step } => now += ms(step),
            Op::MoveShard { key, shard } => {
                queue.place_in_shard(KEYS[key], shard_slot(shard));
                model.shard[key] = shard;
            }
            Op::SetOwned { owned } => {
                model.owned = owned;
                // No lease is extended past the ownership of its key's slot.
                let asked: Vec<usize> = model
                    .keys
                    .iter()
                    .filter(|(_, key)| matches!(key.phase, MPhase::Held { asked_back: false, .. }))
                    .map(|(k, _)| *k)
                    .filter(|&k| !model.in_owned_shard(k))
                    .collect();
                assert_eq!(
                    queue.set_owned_shards(owned.map(slot_set)).leases_asked_back,
                    asked.len(),
                    "leases asked back"
                );
                for k in asked {
                    // Still held until it ends as leases do.
                    if let MPhase::Held { asked_back, .. } = &mut model.key(k).phase {
                        *asked_back = true;
                    }
                }
            }
            Op::ShutDown => {
                queue.shut_down(true);
                model.shutting_down = true;
            }
        }
        // What `WorkQueue` does under the add's lock: the keys added take
        // the slot `shard_of` names.
        for (k, name) in KEYS.iter().enumerate() {
            queue.place_in_shard(*name, shard_slot(model.shard[k]));
        }
        model.gc();
        check_agreement(&queue, &model);
    }
}

proptest! {
    // 800 sequences of up to 250 operations: about 100,000 operations per run.
    // PROPTEST_CASES raises it for a longer run (docs/testing.md).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(800),
        ..ProptestConfig::default()
    })]

    #[test]
    fn queue_should_agree_with_the_model_after_every_operation(
        mut ops in prop::collection::vec(op(), 150..250),
        // A third of the sequences shut the queue down somewhere.
        shutdown_at in prop::option::weighted(0.33, 0..250usize),
    ) {
        if let Some(at) = shutdown_at {
            ops.insert(at.min(ops.len()), Op::ShutDown);
        }
        run(ops);
    }
}
