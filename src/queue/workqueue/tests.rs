//! Unit tests of `WorkQueue`, one rule each, with paused tokio time.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, advance};
use tokio_test::{assert_pending, assert_ready, task};

use super::*;
use crate::queue::{KeyPhase, LeaseLoss, LostLeases, RateLimiterSpec, ReasonKind, key_cost};
use crate::shard::{Slot as ShardSlot, SlotSet};

fn manual() -> Reason {
    Reason::of(ReasonKind::Manual)
}

fn worker(name: &str) -> Holder {
    Arc::from(name)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Settings whose rate limiter is only the exponential one, for exact delays.
fn settings() -> QueueSettings {
    QueueSettings {
        rate_limiter: RateLimiterSpec::Exponential { base: ms(5), max: Duration::from_secs(1000) },
        ..QueueSettings::default()
    }
}

fn queue() -> WorkQueue<String> {
    WorkQueue::new("test", settings()).unwrap()
}

fn add(q: &WorkQueue<String>, key: &str, priority: i32) {
    q.add(key.to_string(), priority, manual()).unwrap();
}

fn take(q: &WorkQueue<String>) -> Option<Lease<String>> {
    q.try_get_many(&worker("w"), 1, None).unwrap().map(|mut leases| leases.remove(0))
}

fn take_key(q: &WorkQueue<String>) -> Option<String> {
    take(q).map(|lease| lease.key)
}

/// Lets the timer task run after a clock change.
async fn settle() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn add_should_queue_a_key_at_most_once() {
    let q = queue();
    add(&q, "a", 0);
    assert_eq!(q.add("a".into(), 0, manual()), Ok(AddOutcome::Merged));
    assert_eq!(q.len(), 1);
    assert_eq!(take_key(&q).as_deref(), Some("a"));
    assert_eq!(take_key(&q), None);
}

#[tokio::test(start_paused = true)]
async fn key_added_while_held_should_be_dirty_and_return_after_done() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    assert_eq!(q.add("a".into(), 0, manual()), Ok(AddOutcome::MarkedDirty));
    assert_eq!(q.len(), 0, "a held key is never handed to a second holder");
    assert_eq!(take_key(&q), None);
    q.done(&lease.key, lease.token).unwrap();
    assert_eq!(take_key(&q).as_deref(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn get_should_wait_for_a_key_and_wake_on_add() {
    let q = queue();
    let waiter = worker("w");
    let mut get = task::spawn(q.get(&waiter, None));
    assert_pending!(get.poll());
    add(&q, "a", 0);
    assert!(get.is_woken());
    assert_eq!(assert_ready!(get.poll()).unwrap().key, "a");
}

#[tokio::test(start_paused = true)]
async fn add_after_should_keep_the_earliest_ready_time() {
    let q = queue();
    q.add_after("a".into(), ms(100), 0, manual()).unwrap();
    q.add_after("a".into(), ms(50), 0, manual()).unwrap();
    q.add_after("a".into(), ms(200), 0, manual()).unwrap();
    let start = Instant::now();
    let lease = q.get(&worker("w"), None).await.unwrap();
    assert_eq!(lease.key, "a");
    assert_eq!(Instant::now() - start, ms(50));
}

#[tokio::test(start_paused = true)]
async fn add_should_make_a_waiting_key_ready_at_once() {
    let q = queue();
    q.add_after("a".into(), Duration::from_secs(60), 0, manual()).unwrap();
    assert!(matches!(q.key_status("a").phase, KeyPhase::Waiting { .. }));
    add(&q, "a", 0);
    assert_eq!(take_key(&q).as_deref(), Some("a"));
    assert_eq!(q.counts().waiting, 0);
}

#[tokio::test(start_paused = true)]
async fn add_after_on_a_ready_key_should_leave_it_ready() {
    let q = queue();
    add(&q, "a", 0);
    q.add_after("a".into(), Duration::from_secs(60), 0, manual()).unwrap();
    assert_eq!(take_key(&q).as_deref(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn add_rate_limited_should_back_off_exponentially_until_forget() {
    let q = queue();
    let key = "a".to_string();
    assert_eq!(q.add_rate_limited(key.clone(), 0, manual()), Ok((ms(5), 1)));
    assert_eq!(q.add_rate_limited(key.clone(), 0, manual()), Ok((ms(10), 2)));
    assert_eq!(q.num_requeues(&key), 2);
    let start = Instant::now();
    let lease = q.get(&worker("w"), None).await.unwrap();
    assert_eq!(Instant::now() - start, ms(5), "the earliest of the two delays wins");
    assert_eq!(lease.failures, 2);
    q.done(&key, lease.token).unwrap();
    q.forget(&key);
    assert_eq!(q.num_requeues(&key), 0);
    assert_eq!(q.add_rate_limited(key.clone(), 0, manual()), Ok((ms(5), 1)));
}

#[tokio::test(start_paused = true)]
async fn default_rate_limiter_should_equal_client_go_controller_default() {
    let q: WorkQueue<String> = WorkQueue::new("d", QueueSettings::default()).unwrap();
    // Burst of 100 tokens, then the 10 qps bucket dominates the 5 ms exponential step.
    let delays: Vec<Duration> = (0..101).map(|i| q.add_rate_limited(format!("k{i}"), 0, manual()).unwrap().0).collect();
    assert!(delays[..100].iter().all(|d| *d == ms(5)));
    assert_eq!(delays[100], ms(100));
}

#[tokio::test(start_paused = true)]
async fn higher_priority_should_be_served_first_and_fifo_within_a_priority() {
    let q = queue();
    add(&q, "slow-1", -100);
    add(&q, "fast-1", 0);
    add(&q, "slow-2", -100);
    add(&q, "fast-2", 0);
    add(&q, "urgent", 10);
    let order: Vec<_> = std::iter::from_fn(|| take_key(&q)).collect();
    assert_eq!(order, ["urgent", "fast-1", "fast-2", "slow-1", "slow-2"]);
}

#[tokio::test(start_paused = true)]
async fn re_add_should_raise_priority_but_never_lower_it() {
    let q = queue();
    add(&q, "a", -100);
    add(&q, "b", 0);
    add(&q, "a", 5);
    add(&q, "b", -100);
    assert_eq!(q.key_status("a").priority, 5);
    assert_eq!(q.key_status("b").priority, 0);
    assert_eq!(take_key(&q).as_deref(), Some("a"));
    assert_eq!(take_key(&q).as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn delayed_and_rate_limited_adds_should_carry_priority() {
    let q = queue();
    q.add_after("late-high".into(), ms(10), 50, manual()).unwrap();
    q.add_rate_limited("retry-mid".into(), 20, manual()).unwrap();
    add(&q, "now-low", -100);
    advance(ms(20)).await;
    settle().await;
    let order: Vec<_> = std::iter::from_fn(|| take_key(&q)).collect();
    assert_eq!(order, ["late-high", "retry-mid", "now-low"]);
}

#[tokio::test(start_paused = true)]
async fn a_key_that_waited_past_max_wait_should_beat_newer_higher_priority_keys() {
    let q: WorkQueue<String> =
        WorkQueue::new("aging", QueueSettings { max_wait: Duration::from_secs(10), ..settings() }).unwrap();
    add(&q, "old-slow", -100);
    advance(Duration::from_secs(9)).await;
    add(&q, "new-fast", 0);
    assert_eq!(take_key(&q).as_deref(), Some("new-fast"), "not aged yet: priority decides");
    add(&q, "newer-fast", 0);
    advance(Duration::from_secs(1)).await;
    assert_eq!(take_key(&q).as_deref(), Some("old-slow"), "aged: served before newer fast keys");
    assert_eq!(take_key(&q).as_deref(), Some("newer-fast"));
}

#[tokio::test(start_paused = true)]
async fn reasons_should_accumulate_until_the_key_is_granted() {
    let q = queue();
    q.add("a".into(), 0, Reason::new(ReasonKind::Added, "users")).unwrap();
    q.add("a".into(), 0, Reason::new(ReasonKind::Updated, "users")).unwrap();
    q.add("a".into(), 0, Reason::new(ReasonKind::Added, "users")).unwrap();
    let lease = take(&q).unwrap();
    let kinds: Vec<_> = lease.reasons.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [ReasonKind::Added, ReasonKind::Updated]);
    q.add("a".into(), 0, Reason::new(ReasonKind::Resync, "users")).unwrap();
    q.done(&lease.key, lease.token).unwrap();
    let again = take(&q).unwrap();
    let kinds: Vec<_> = again.reasons.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [ReasonKind::Resync], "a new lease carries only the reasons since the last grant");
}

#[tokio::test(start_paused = true)]
async fn lease_should_carry_token_deadline_and_bookkeeping() {
    let q = queue();
    let start = Instant::now();
    add(&q, "a", 7);
    advance(ms(3)).await;
    let first = take(&q).unwrap();
    assert_eq!(first.priority, 7);
    assert_eq!(first.enqueued_at, start);
    assert_eq!(first.granted_at, start + ms(3));
    assert_eq!(first.deadline, start + ms(3) + settings().lease_ttl);
    q.done(&first.key, first.token).unwrap();
    add(&q, "a", 0);
    let second = take(&q).unwrap();
    assert_ne!(first.token, second.token, "every grant gets a new token");
}

#[tokio::test(start_paused = true)]
async fn stale_token_should_be_rejected_and_change_nothing() {
    let q = queue();
    add(&q, "a", 0);
    let first = take(&q).unwrap();
    q.done(&first.key, first.token).unwrap();
    add(&q, "a", 0);
    let second = take(&q).unwrap();
    let before = q.key_status("a");
    let stale = QueueError::StaleToken { token: first.token };
    assert_eq!(q.done("a", first.token), Err(stale.clone()));
    assert_eq!(q.extend("a", first.token, None), Err(stale.clone()));
    assert_eq!(q.finish("a", first.token, FinishOutcome::Success), Err(stale));
    assert_eq!(q.key_status("a"), before);
    assert!(q.done("unknown", second.token).is_err());
    q.done("a", second.token).unwrap();
}

#[tokio::test(start_paused = true)]
async fn extend_should_move_the_deadline() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    advance(Duration::from_secs(20)).await;
    let renewal = q.extend(&lease.key, lease.token, Some(Duration::from_secs(60))).unwrap();
    assert_eq!(renewal.deadline, Instant::now() + Duration::from_secs(60));
    assert!(!renewal.cancel);
    advance(Duration::from_secs(59)).await;
    settle().await;
    q.done(&lease.key, lease.token).unwrap();
}

#[tokio::test(start_paused = true)]
async fn extend_should_cap_at_max_lease_ttl() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    let renewal = q.extend(&lease.key, lease.token, Some(Duration::from_secs(86_400))).unwrap();
    assert_eq!(renewal.deadline, Instant::now() + settings().max_lease_ttl);
}

#[tokio::test(start_paused = true)]
async fn expired_lease_should_requeue_the_key_as_a_failure() {
    let q = queue();
    add(&q, "a", 3);
    let lease = q.get(&worker("w"), Some(Duration::from_secs(1))).await.unwrap();
    advance(Duration::from_secs(1)).await;
    settle().await;
    let status = q.key_status("a");
    assert!(matches!(status.phase, KeyPhase::Waiting { .. }), "backs off by the rate limiter: {status:?}");
    assert_eq!(status.failures, 1);
    assert!(status.reasons.contains_kind(ReasonKind::LeaseExpired));
    assert_eq!(q.done(&lease.key, lease.token), Err(QueueError::StaleToken { token: lease.token }));
    let again = q.get(&worker("w2"), None).await.unwrap();
    assert_eq!((again.key.as_str(), again.priority, again.failures), ("a", 3, 1));
    assert_eq!(Instant::now() - lease.granted_at, Duration::from_secs(1) + ms(5));
}

#[tokio::test(start_paused = true)]
async fn token_used_at_its_deadline_should_be_stale_even_before_the_timer_runs() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    advance(settings().lease_ttl).await;
    assert!(q.done(&lease.key, lease.token).is_err());
}

#[tokio::test(start_paused = true)]
async fn release_holder_should_return_all_its_keys_at_once() {
    let q = queue();
    for key in ["a", "b", "c"] {
        add(&q, key, 0);
    }
    let gone = worker("gone");
    let held = q.try_get_many(&gone, 2, None).unwrap().unwrap();
    let other = take(&q).unwrap();
    assert_eq!(q.holders().release(&gone), 2);
    for lease in &held {
        let status = q.key_status(&lease.key);
        assert_eq!(status.failures, 1);
        assert!(status.reasons.contains_kind(ReasonKind::LeaseReleased));
    }
    assert!(matches!(q.key_status(&other.key).phase, KeyPhase::Held { .. }));
    advance(ms(5)).await;
    let mut back: Vec<_> = std::iter::from_fn(|| take_key(&q)).collect();
    back.sort();
    assert_eq!(back, ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn finish_success_should_forget_and_release() {
    let q = queue();
    q.add_rate_limited("a".into(), 0, manual()).unwrap();
    let lease = q.get(&worker("w"), None).await.unwrap();
    q.finish(&lease.key, lease.token, FinishOutcome::Success).unwrap();
    assert_eq!(q.num_requeues(&lease.key), 0);
    assert_eq!(q.counts().tracked, 0);
}

#[tokio::test(start_paused = true)]
async fn finish_then_take_should_end_the_lease_and_grant_the_next_keys_in_order() {
    let q = queue();
    for (key, priority) in [("a", 0), ("b", 0), ("c", 5), ("d", 0)] {
        add(&q, key, priority);
    }
    let lease = take(&q).unwrap();
    assert_eq!(lease.key, "c");
    let mut asked = None;
    let (finished, next) = q.finish_then_take("c", lease.token, FinishOutcome::Success, &worker("w"), None, |result| {
        asked = Some(result.is_ok());
        2
    });
    assert_eq!((finished, asked), (Ok(()), Some(true)), "the take is sized after the finish, knowing it applied");
    assert_eq!(next.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    for granted in &next {
        let phase = q.key_status(&granted.key).phase;
        assert!(matches!(&phase, KeyPhase::Held { holder, .. } if &**holder == "w"), "held by the finisher: {phase:?}");
    }
    assert_eq!(q.key_status("c").phase, KeyPhase::Absent, "c's lease ended");
    assert_eq!(take_key(&q).as_deref(), Some("d"), "no more than asked");
}

#[tokio::test(start_paused = true)]
async fn finish_then_take_should_size_the_take_by_a_refused_finish_and_take_nothing_at_shutdown() {
    let q = queue();
    add(&q, "a", 0);
    add(&q, "b", 0);
    let lease = take(&q).unwrap();
    let stale = LeaseToken::new(lease.token.get() + 1000).unwrap();
    let (finished, next) = q
        .finish_then_take("a", stale, FinishOutcome::Success, &worker("w"), None, |result| usize::from(result.is_ok()));
    assert!(matches!(finished, Err(QueueError::StaleToken { .. })), "{finished:?}");
    assert!(next.is_empty(), "the refused finish freed no place, and the take was sized so");
    assert!(q.is_current("a", lease.token), "a is still held");

    q.shut_down();
    let (finished, next) = q.finish_then_take("a", lease.token, FinishOutcome::Success, &worker("w"), None, |_| 1);
    assert_eq!(finished, Ok(()), "a lease may still be finished while the queue shuts down");
    assert!(next.is_empty(), "nothing is granted while the queue shuts down");
}

#[tokio::test(start_paused = true)]
async fn finish_retry_should_back_off_and_keep_the_error() {
    let q = queue();
    add(&q, "a", 4);
    let lease = take(&q).unwrap();
    q.finish(&lease.key, lease.token, FinishOutcome::Retry { error: "conflict".into() }).unwrap();
    let status = q.key_status(&lease.key);
    assert!(matches!(status.phase, KeyPhase::Waiting { until } if until == Instant::now() + ms(5)));
    assert_eq!((status.failures, status.last_error.as_deref(), status.priority), (1, Some("conflict"), 4));
    assert!(status.reasons.contains_kind(ReasonKind::Retry));
    let again = q.get(&worker("w"), None).await.unwrap();
    assert_eq!(again.last_error.as_deref(), Some("conflict"));
}

#[tokio::test(start_paused = true)]
async fn finish_requeue_after_should_forget_and_delay() {
    let q = queue();
    q.add_rate_limited("a".into(), 0, manual()).unwrap();
    let lease = q.get(&worker("w"), None).await.unwrap();
    q.finish(&lease.key, lease.token, FinishOutcome::RequeueAfter(Duration::from_secs(30))).unwrap();
    let status = q.key_status(&lease.key);
    assert_eq!(status.failures, 0);
    assert!(matches!(status.phase, KeyPhase::Waiting { until } if until == Instant::now() + Duration::from_secs(30)));
}

#[tokio::test(start_paused = true)]
async fn dirty_add_during_retry_should_make_the_key_ready_at_the_earliest_time() {
    let q = queue();
    add(&q, "a", -100);
    let lease = take(&q).unwrap();
    add(&q, "a", 0);
    q.finish(&lease.key, lease.token, FinishOutcome::Retry { error: "boom".into() }).unwrap();
    let status = q.key_status(&lease.key);
    assert!(matches!(status.phase, KeyPhase::Queued { .. }), "the event while held makes it ready now: {status:?}");
    assert_eq!(status.priority, 0);
    assert!(status.reasons.contains_kind(ReasonKind::Retry) && status.reasons.contains_kind(ReasonKind::Manual));
}

#[tokio::test(start_paused = true)]
async fn key_status_should_describe_every_phase() {
    let q = queue();
    let key = "a".to_string();
    assert_eq!(q.key_status(&key).phase, KeyPhase::Absent);
    q.add_after(key.clone(), ms(10), 0, manual()).unwrap();
    assert_eq!(q.key_status(&key).phase, KeyPhase::Waiting { until: Instant::now() + ms(10) });
    advance(ms(10)).await;
    assert_eq!(q.key_status(&key).phase, KeyPhase::Queued { since: Instant::now() });
    let lease = take(&q).unwrap();
    q.add(key.clone(), 9, Reason::new(ReasonKind::Updated, "users")).unwrap();
    match q.key_status(&key).phase {
        KeyPhase::Held { holder, deadline, dirty: Some(dirty), .. } => {
            assert_eq!(&*holder, "w");
            assert_eq!(deadline, lease.deadline);
            assert_eq!(dirty.priority, 9);
            assert!(dirty.reasons.contains_kind(ReasonKind::Updated));
        }
        other => panic!("expected held and dirty, got {other:?}"),
    }
    let counts = q.counts();
    assert_eq!((counts.held, counts.dirty, counts.ready, counts.waiting), (1, 1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn counts_should_report_ready_per_priority() {
    let q = queue();
    add(&q, "a", 0);
    add(&q, "b", -100);
    add(&q, "c", -100);
    q.add_after("d".into(), ms(10), 0, manual()).unwrap();
    let counts = q.counts();
    assert_eq!(counts.ready_by_priority, vec![(0, 1), (-100, 2)]);
    assert_eq!((counts.ready, counts.waiting, counts.tracked), (3, 1, 4));
}

#[tokio::test(start_paused = true)]
async fn shut_down_should_stop_granting_and_wake_waiters() {
    let q = queue();
    let holder = worker("w");
    add(&q, "held", 0);
    let lease = take(&q).unwrap();
    let mut get = task::spawn(q.get(&holder, None));
    assert_pending!(get.poll());
    q.shut_down();
    assert!(q.is_shutting_down());
    assert_eq!(assert_ready!(get.poll()), Err(QueueError::ShuttingDown));
    assert_eq!(q.add("x".into(), 0, manual()), Err(QueueError::ShuttingDown));
    assert!(q.extend(&lease.key, lease.token, None).unwrap().cancel, "holders are told to stop");
    q.done(&lease.key, lease.token).unwrap();
}

#[tokio::test(start_paused = true)]
async fn drain_should_wait_for_held_leases_to_finish() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain(Duration::from_secs(10)).await }
    });
    advance(Duration::from_secs(2)).await;
    assert!(!q.extend(&lease.key, lease.token, None).unwrap().cancel, "a drain lets holders finish");
    q.finish(&lease.key, lease.token, FinishOutcome::Success).unwrap();
    assert_eq!(drain.await.unwrap(), DrainReport { finished: 1, returned: 0 });
}

#[tokio::test(start_paused = true)]
async fn drain_should_hand_back_what_is_still_held_at_the_deadline() {
    let q = queue();
    add(&q, "a", 0);
    add(&q, "b", 0);
    let a = take(&q).unwrap();
    let b = take(&q).unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain(Duration::from_secs(5)).await }
    });
    settle().await;
    q.done(&a.key, a.token).unwrap();
    assert_eq!(drain.await.unwrap(), DrainReport { finished: 1, returned: 1 });
    assert!(q.done(&b.key, b.token).is_err(), "the returned lease's token is stale");
    let status = q.key_status(&b.key);
    assert!(matches!(status.phase, KeyPhase::Queued { .. }));
    assert!(status.reasons.contains_kind(ReasonKind::ShutdownReturned));
    assert_eq!(status.failures, 0, "a shutdown is not the key's failure");
}

#[tokio::test(start_paused = true)]
async fn full_queue_should_refuse_new_keys_but_merge_known_ones() {
    let q: WorkQueue<String> = WorkQueue::new("small", QueueSettings { max_keys: 2, ..settings() }).unwrap();
    add(&q, "a", 0);
    add(&q, "b", 0);
    assert_eq!(q.add("c".into(), 0, manual()), Err(QueueError::Full { limit: 2 }));
    assert_eq!(q.add("a".into(), 0, manual()), Ok(AddOutcome::Merged));
}

/// `max_memory` counts each key by its text: long keys fill a queue long
/// before `max_keys`, a refused batch changes nothing, known keys still
/// merge, and a key processed and forgotten gives its bytes back.
#[tokio::test(start_paused = true)]
async fn queue_at_its_memory_bound_should_refuse_new_keys_and_lose_none_it_holds() {
    let limit = 64 << 10;
    let q: WorkQueue<String> = WorkQueue::new("small", QueueSettings { max_memory: limit, ..settings() }).unwrap();
    let long = |i: usize| format!("{i:04}{}", "k".repeat(1020));
    let fit = limit / key_cost(long(0).len());
    for i in 0..fit {
        add(&q, &long(i), 0);
    }
    let counts = q.counts();
    assert_eq!(counts.tracked, fit, "{fit} keys of 1 KiB fit in 64 KiB, far below max_keys");
    assert_eq!(counts.key_bytes, fit * key_cost(1024));
    assert_eq!(q.add(long(fit), 0, manual()), Err(QueueError::MemoryFull { limit }));
    let batch = vec!["short".to_string(), long(fit + 1)];
    assert_eq!(q.add_all(batch, Duration::ZERO, 0, manual()), Err(QueueError::MemoryFull { limit }));
    assert_eq!(q.key_status("short").phase, KeyPhase::Absent, "a refused batch adds nothing");
    assert_eq!(q.add(long(0), 0, manual()), Ok(AddOutcome::Merged), "a known key takes no more room");
    assert_eq!(q.counts(), counts, "nothing already queued was lost");
    // Processed and forgotten, a key's room comes back.
    let lease = q.try_get(&worker("w"), None).unwrap().unwrap();
    q.done(&lease.key, lease.token).unwrap();
    q.forget(&lease.key);
    assert_eq!(q.counts().key_bytes, (fit - 1) * key_cost(1024));
    assert_eq!(q.add(long(fit), 0, manual()), Ok(AddOutcome::Queued));
}

#[tokio::test(start_paused = true)]
async fn full_queue_should_still_take_keys_from_an_informer_cache() {
    let q: WorkQueue<String> = WorkQueue::new("small", QueueSettings { max_keys: 1, ..settings() }).unwrap();
    add(&q, "a", 0);
    for kind in
        [ReasonKind::InitialList, ReasonKind::Added, ReasonKind::Updated, ReasonKind::Resync, ReasonKind::Trigger]
    {
        let key = format!("{kind:?}");
        assert_eq!(q.add(key, 0, Reason::new(kind, "informer")), Ok(AddOutcome::Queued), "{kind:?}");
    }
    assert_eq!(q.add("manual".into(), 0, manual()), Err(QueueError::Full { limit: 1 }));
}

#[tokio::test(start_paused = true)]
async fn new_should_reject_bad_settings_naming_the_field() {
    let err =
        WorkQueue::<String>::new("orders", QueueSettings { max_wait: Duration::ZERO, ..settings() }).err().unwrap();
    assert_eq!(err.field, "max_wait");
}

/// Polls a `get` future `polls` times, adding a key after poll number
/// `add_after_poll`, then drops it; the key must be either returned by one of
/// those polls or still queued.
fn drop_get_after<F: Future<Output = Result<Lease<String>, QueueError>>>(
    q: &WorkQueue<String>,
    get: F,
    polls: usize,
    add_after_poll: usize,
) -> Option<Lease<String>> {
    let mut get = task::spawn(get);
    for poll in 0..polls {
        if poll == add_after_poll {
            add(q, "a", 0);
        }
        if let std::task::Poll::Ready(result) = get.poll() {
            return Some(result.unwrap());
        }
    }
    if polls <= add_after_poll {
        add(q, "a", 0);
    }
    None
}

#[tokio::test(start_paused = true)]
async fn dropping_get_at_any_point_should_lose_no_key() {
    for polls in 0..4 {
        for add_after_poll in 0..4 {
            let q = queue();
            let holder = worker("w");
            let taken = drop_get_after(&q, q.get(&holder, None), polls, add_after_poll);
            match taken {
                Some(lease) => {
                    assert_eq!(lease.key, "a");
                    assert_eq!(q.counts().held, 1);
                }
                None => {
                    assert_eq!(q.len(), 1, "polls={polls} add_after_poll={add_after_poll}: the key is still queued");
                    // And a waiter that comes later still gets it.
                    assert_eq!(take_key(&q).as_deref(), Some("a"));
                }
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_should_pass_its_wakeup_to_the_next() {
    let q = queue();
    let holder = worker("w");
    let mut first = task::spawn(q.get(&holder, None));
    let mut second = task::spawn(q.get(&holder, None));
    assert_pending!(first.poll());
    assert_pending!(second.poll());
    add(&q, "a", 0);
    drop(first);
    assert!(second.is_woken(), "the notification of the dropped waiter is forwarded");
    assert_eq!(assert_ready!(second.poll()).unwrap().key, "a");
}

#[tokio::test(start_paused = true)]
async fn timer_should_end_when_the_last_handle_is_dropped() {
    let q = queue();
    q.add_after("a".into(), Duration::from_secs(3600), 0, manual()).unwrap();
    let weak = Arc::downgrade(&q.shared);
    drop(q);
    settle().await;
    assert!(weak.upgrade().is_none());
}

#[tokio::test(start_paused = true)]
async fn drain_should_count_a_lease_that_expired_meanwhile_as_finished_not_returned() {
    let q = queue();
    add(&q, "a", 0);
    let _lease = q.get(&worker("w"), Some(Duration::from_secs(1))).await.unwrap();
    let report = q.shut_down_with_drain(Duration::from_secs(10)).await;
    // The proto's rule: `returned` counts only leases still held at the
    // deadline; an expiry ended the lease during the drain.
    assert_eq!(report, DrainReport { finished: 1, returned: 0 });
}

#[tokio::test(start_paused = true)]
async fn drain_should_not_overflow_on_a_huge_grace_period() {
    let q = queue();
    add(&q, "a", 0);
    let lease = q.get(&worker("w"), None).await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain(Duration::MAX).await }
    });
    settle().await;
    q.done(&lease.key, lease.token).unwrap();
    assert_eq!(drain.await.unwrap(), DrainReport { finished: 1, returned: 0 });
}

#[tokio::test(start_paused = true)]
async fn a_refused_batch_should_change_nothing() {
    let q: WorkQueue<String> = WorkQueue::new("small", QueueSettings { max_keys: 3, ..settings() }).unwrap();
    add(&q, "a", 0);
    let batch = vec!["a".to_string(), "b".into(), "c".into(), "d".into()];
    assert_eq!(q.add_all(batch.clone(), Duration::ZERO, 0, manual()), Err(QueueError::Full { limit: 3 }));
    assert_eq!(q.add_rate_limited_all(batch, 0, manual()), Err(QueueError::Full { limit: 3 }));
    assert_eq!(q.counts().tracked, 1, "no key of the refused batches was added");
    assert_eq!(q.num_requeues("a"), 0, "no failure was counted");
    // Named twice, a new key takes room once.
    assert_eq!(q.add_all(vec!["b".into(), "b".into(), "c".into()], Duration::ZERO, 0, manual()), Ok(()));
    assert_eq!(q.counts().tracked, 3);
}

#[tokio::test(start_paused = true)]
async fn holds_should_stop_granting_until_the_last_is_lifted() {
    let q = queue();
    q.term().set_hold("caches syncing", true);
    q.term().set_hold("not the leader", true);
    add(&q, "a", 0);
    let holder = worker("w");
    let mut get = task::spawn(q.get(&holder, None));
    assert_pending!(get.poll());
    assert_eq!(q.len(), 1, "the key is queued, just not handed out");
    q.term().set_hold("caches syncing", false);
    assert_pending!(get.poll());
    assert_eq!(q.term().holds(), ["not the leader"]);
    q.term().set_hold("not the leader", false);
    assert!(get.is_woken());
    assert_eq!(assert_ready!(get.poll()).unwrap().key, "a");
    assert!(q.term().holds().is_empty());
}

#[tokio::test(start_paused = true)]
async fn grant_until_should_bound_grants_and_lease_deadlines() {
    let q = queue();
    let term_end = Instant::now() + Duration::from_secs(10);
    q.term().set_grant_until(term_end);
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    assert_eq!(lease.deadline, term_end, "no lease outlives the term");
    advance(Duration::from_secs(9)).await;
    let renewal = q.extend(&lease.key, lease.token, None).unwrap();
    assert_eq!((renewal.deadline, renewal.cancel), (term_end, false));
    add(&q, "b", 0);
    advance(Duration::from_secs(1)).await;
    assert_eq!(take(&q), None, "nothing is granted once the term ended");
    q.term().set_grant_until(Instant::now() + Duration::from_secs(10));
    assert_eq!(take_key(&q).as_deref(), Some("b"), "a renewed term grants again");
}

#[tokio::test(start_paused = true)]
async fn closing_a_term_should_hold_cut_the_bound_and_hand_back_in_one_step() {
    let q = queue();
    let term_end = Instant::now() + Duration::from_secs(10);
    q.term().open("not the leader", term_end);
    add(&q, "a", 0);
    add(&q, "b", 0);
    let a = take(&q).unwrap();
    assert_eq!(q.term().close("not the leader"), 1);
    assert_eq!(q.term().holds(), ["not the leader"]);
    assert!(q.extend("a", a.token, None).is_err(), "the handed-back lease's token is stale");
    // Even with the hold lifted by hand, the bound stays at the step-down:
    // only a new term grants again.
    q.term().set_hold("not the leader", false);
    assert_eq!(take(&q), None, "nothing is granted after the term was closed");
    q.term().open("not the leader", Instant::now() + Duration::from_secs(10));
    assert!(take(&q).is_some());
}

#[tokio::test(start_paused = true)]
async fn lost_leases_should_back_off_per_key_without_spending_the_queue_wide_bucket() {
    let limiter = RateLimiterSpec::MaxOf(vec![
        RateLimiterSpec::Exponential { base: ms(5), max: Duration::from_secs(1000) },
        RateLimiterSpec::Bucket { qps: 1.0, burst: 1 },
    ]);
    let q: WorkQueue<String> =
        WorkQueue::new("hung", QueueSettings { rate_limiter: limiter, ..QueueSettings::default() }).unwrap();
    // A hung worker lets 50 leases expire and its stream break: each counts
    // a failure of its own key only.
    for i in 0..50 {
        add(&q, &format!("k{i}"), 0);
    }
    let leases = q.try_get_many(&worker("hung"), 25, Some(ms(100))).unwrap().unwrap();
    advance(ms(100)).await;
    settle().await;
    assert_eq!(q.holders().release(&worker("hung")), 0, "the first 25 expired by themselves");
    let more = q.try_get_many(&worker("hung"), 25, None).unwrap().unwrap();
    assert_eq!(q.holders().release(&worker("hung")), 25);
    for lease in leases.iter().chain(&more) {
        let status = q.key_status(&lease.key);
        assert_eq!(status.failures, 1, "{}", lease.key);
        assert!(
            matches!(status.phase, KeyPhase::Waiting { until } if until <= Instant::now() + ms(5)),
            "{} waits its own first backoff (5 ms), not the bucket's: {:?}",
            lease.key,
            status.phase
        );
    }
    // The bucket's one token is still unspent: a worker's own retry gets it.
    let limited = q.add_rate_limited_all(vec!["other".into()], 0, manual()).unwrap();
    assert_eq!(limited[0].1, ms(5), "the retry's delay is its own backoff");
    let limited = q.add_rate_limited_all(vec!["another".into()], 0, manual()).unwrap();
    assert_eq!(limited[0].1, Duration::from_secs(1), "the second charged retry waits for the bucket");
}

#[tokio::test(start_paused = true)]
async fn key_written_under_its_lease_should_not_be_handed_out_until_the_writes_settle() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    q.writes().begin("a", lease.token).unwrap();
    assert!(q.writes().end("a", lease.token), "held throughout");
    add(&q, "a", 0); // the watch event of the worker's own write, say
    q.finish("a", lease.token, FinishOutcome::Success).unwrap();
    assert!(matches!(q.key_status("a").phase, KeyPhase::Settling { dirty: Some(_), .. }));
    assert_eq!(take_key(&q), None, "settling: the caches have not seen the write");
    add(&q, "a", 5);
    assert_eq!(take_key(&q), None, "adds merge into the settling key");
    assert!(q.writes().settled("a"));
    let next = take(&q).unwrap();
    assert_eq!((next.key.as_str(), next.priority), ("a", 5));
}

#[tokio::test(start_paused = true)]
async fn settling_key_should_be_queued_at_its_settle_timeout_when_the_caches_never_catch_up() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    q.writes().begin("a", lease.token).unwrap();
    assert!(q.writes().end("a", lease.token), "held throughout");
    q.finish("a", lease.token, FinishOutcome::RequeueAfter(Duration::ZERO)).unwrap();
    assert_eq!(take_key(&q), None);
    tokio::time::advance(settings().settle_timeout).await;
    settle().await;
    assert_eq!(take_key(&q).as_deref(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn writes_seen_before_the_lease_ends_should_not_hold_the_key_back() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    q.writes().begin("a", lease.token).unwrap();
    assert!(q.writes().end("a", lease.token), "held throughout");
    assert!(!q.writes().settled("a"), "still held: nothing to let go");
    add(&q, "a", 0);
    q.done("a", lease.token).unwrap();
    assert_eq!(take_key(&q).as_deref(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn a_write_under_a_lost_lease_should_be_refused() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    q.done("a", lease.token).unwrap();
    assert_eq!(q.writes().begin("a", lease.token), Err(QueueError::StaleToken { token: lease.token }));
}

#[tokio::test(start_paused = true)]
async fn a_lease_should_not_expire_while_a_write_under_it_is_unanswered() {
    let q = queue();
    let mut lost = q.holders().watch_lost(&worker("w"));
    add(&q, "a", 0);
    let lease = q.get(&worker("w"), Some(ms(100))).await.unwrap();
    q.writes().begin("a", lease.token).unwrap();
    tokio::time::advance(ms(500)).await;
    settle().await;
    add(&q, "a", 0);
    assert_eq!(take_key(&q), None, "the key is not handed out while the write may still land");
    assert!(matches!(q.key_status("a").phase, KeyPhase::Held { .. }), "{:?}", q.key_status("a"));
    assert_eq!(told(&mut lost), [], "nobody told of an end that did not happen");
    // Its holder may still renew it: the lease never ended.
    let renewal = q.extend("a", lease.token, Some(ms(100))).unwrap();
    assert!(!renewal.cancel);
    tokio::time::advance(ms(500)).await;
    settle().await;
    // Answered past the renewed deadline: the lease ends now, as expired.
    assert!(q.writes().end("a", lease.token), "held from the write's start to its answer");
    assert_eq!(told(&mut lost), [("a".to_owned(), lease.token, LeaseLoss::Ended(crate::queue::LeaseEndKind::Expired))]);
    assert!(matches!(q.key_status("a").phase, KeyPhase::Settling { until: Some(_), .. }));
    assert_eq!(q.done("a", lease.token), Err(QueueError::StaleToken { token: lease.token }));
}

#[tokio::test(start_paused = true)]
async fn a_write_answered_before_the_deadline_should_leave_the_lease_to_run_its_course() {
    let q = queue();
    add(&q, "a", 0);
    let lease = q.get(&worker("w"), Some(ms(100))).await.unwrap();
    q.writes().begin("a", lease.token).unwrap();
    q.writes().begin("a", lease.token).unwrap();
    assert!(q.writes().end("a", lease.token));
    tokio::time::advance(ms(200)).await;
    settle().await;
    assert!(matches!(q.key_status("a").phase, KeyPhase::Held { .. }), "one write still out");
    assert!(q.writes().end("a", lease.token));
    assert!(matches!(q.key_status("a").phase, KeyPhase::Settling { .. }), "the last answer ended it");
}

#[tokio::test(start_paused = true)]
async fn a_key_should_settle_only_from_the_answer_of_the_last_write_under_its_ended_lease() {
    let q = queue();
    add(&q, "a", 0);
    let lease = take(&q).unwrap();
    q.writes().begin("a", lease.token).unwrap();
    // Its holder ends it while its own write is still out.
    q.done("a", lease.token).unwrap();
    add(&q, "a", 0);
    tokio::time::advance(settings().settle_timeout * 3).await;
    settle().await;
    assert_eq!(take_key(&q), None, "not let go at the settle timeout while the write is out");
    assert!(matches!(q.key_status("a").phase, KeyPhase::Settling { until: None, .. }));
    assert!(!q.writes().settled("a"), "an unanswered write cannot have been seen");
    assert!(!q.writes().end("a", lease.token), "the lease ended while the write was out");
    assert!(matches!(q.key_status("a").phase, KeyPhase::Settling { until: Some(_), .. }));
    tokio::time::advance(settings().settle_timeout).await;
    settle().await;
    assert_eq!(take_key(&q).as_deref(), Some("a"), "the bound runs from the answer");
}

#[tokio::test(start_paused = true)]
async fn a_write_should_not_keep_its_lease_past_the_end_of_the_term() {
    let q = queue();
    let term_end = Instant::now() + ms(300);
    q.term().set_grant_until(term_end);
    add(&q, "a", 0);
    let lease = q.get(&worker("w"), Some(ms(100))).await.unwrap();
    q.writes().begin("a", lease.token).unwrap();
    tokio::time::advance(ms(200)).await;
    settle().await;
    assert!(matches!(q.key_status("a").phase, KeyPhase::Held { .. }), "kept within the term");
    tokio::time::advance(ms(200)).await;
    settle().await;
    assert!(matches!(q.key_status("a").phase, KeyPhase::Settling { until: None, .. }), "ended with the term");
    assert!(!q.writes().end("a", lease.token), "answered after the term ended: the lease was not held throughout");
}

/// The leases `lost` has been told of so far, without waiting.
fn told(lost: &mut LostLeases<String>) -> Vec<(String, LeaseToken, LeaseLoss)> {
    std::iter::from_fn(|| lost.try_recv()).map(|lease| (lease.key, lease.token, lease.how)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_holder_should_be_told_at_once_of_each_lease_that_expires() {
    use crate::queue::LeaseEndKind::Expired;
    let q = queue();
    let mut lost = q.holders().watch_lost(&worker("w"));
    add(&q, "a", 0);
    add(&q, "b", 0);
    let a = take(&q).unwrap();
    let b = take(&q).unwrap();
    advance(settings().lease_ttl.checked_sub(ms(1)).unwrap()).await;
    q.extend("b", b.token, None).unwrap();
    settle().await;
    assert_eq!(told(&mut lost), vec![]);
    advance(ms(1)).await;
    settle().await;
    assert_eq!(
        told(&mut lost),
        vec![("a".to_string(), a.token, LeaseLoss::Ended(Expired))],
        "at its deadline, by the timer"
    );
    assert_eq!(told(&mut lost), vec![], "once");
}

#[tokio::test(start_paused = true)]
async fn a_holder_should_be_told_of_leases_handed_back_but_not_of_those_it_ended() {
    use crate::queue::LeaseEndKind::Returned;
    let q = queue();
    let mut lost = q.holders().watch_lost(&worker("w"));
    let mut other = q.holders().watch_lost(&worker("other"));
    for key in ["a", "b", "c", "d"] {
        add(&q, key, 0);
    }
    let (a, b, c) = (take(&q).unwrap(), take(&q).unwrap(), take(&q).unwrap());
    let d = q.try_get_many(&worker("other"), 1, None).unwrap().unwrap().remove(0);
    q.done("a", a.token).unwrap();
    q.finish("b", b.token, FinishOutcome::Retry { error: "x".into() }).unwrap();
    assert_eq!(q.term().close("not the leader"), 2);
    assert_eq!(told(&mut lost), vec![("c".to_string(), c.token, LeaseLoss::Ended(Returned))]);
    assert_eq!(told(&mut other), vec![("d".to_string(), d.token, LeaseLoss::Ended(Returned))]);
}

#[tokio::test(start_paused = true)]
async fn queue_time_should_start_when_a_delayed_key_becomes_ready() {
    let q = queue();
    let start = Instant::now();
    q.add_after("late".to_string(), ms(100), 0, manual()).unwrap();
    advance(ms(100)).await;
    settle().await;
    advance(ms(10)).await;
    let lease = take(&q).unwrap();
    assert_eq!(lease.enqueued_at, start + ms(100), "the delay's end, not the add");
    // Added again while held, with a delay: the same once it is due.
    q.add_after("late".to_string(), ms(50), 0, manual()).unwrap();
    q.done("late", lease.token).unwrap();
    let due = Instant::now() + ms(50);
    advance(ms(50)).await;
    settle().await;
    advance(ms(10)).await;
    assert_eq!(take(&q).unwrap().enqueued_at, due);
}

#[tokio::test(start_paused = true)]
async fn a_lease_handed_back_unsent_should_queue_its_key_as_it_was_and_tell_nobody() {
    let q = queue();
    let mut lost = q.holders().watch_lost(&worker("w"));
    q.add("a".to_string(), 7, manual()).unwrap();
    q.add("b".to_string(), 0, manual()).unwrap();
    advance(ms(10)).await;
    let a = take(&q).unwrap();
    let (token, enqueued_at, reasons) = (a.token, a.enqueued_at, a.reasons.clone());
    advance(ms(10)).await;
    q.holders().hand_back_unsent(a).unwrap();
    let again = take(&q).unwrap();
    assert_eq!(again.key, "a", "first again: it kept its priority");
    assert_eq!((again.priority, again.failures, again.enqueued_at), (7, 0, enqueued_at));
    assert_eq!(again.reasons, reasons);
    assert_ne!(again.token, token);
    assert_eq!(q.done("a", token), Err(QueueError::StaleToken { token }), "the unsent token is dead");
    assert_eq!(told(&mut lost), vec![], "its holder never had it");
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_stopped_watching_should_be_forgotten() {
    let q = queue();
    drop(q.holders().watch_lost(&worker("w")));
    add(&q, "a", 0);
    take(&q).unwrap();
    assert_eq!(q.term().close("not the leader"), 1);
    assert_eq!(q.shared.lost_lease_watchers.watching(), 0);
}

// ----- sharding -----

/// Shards by the key's first letter: "a…" in slot 0, "b…" in slot 1; other
/// keys have no known slot.
fn sharded_queue() -> WorkQueue<String> {
    let q = queue();
    let shard_of: ShardOf<String> = Arc::new(|key: &String| match key.as_bytes().first() {
        Some(b'a') => ShardSlot::new(0),
        Some(b'b') => ShardSlot::new(1),
        _ => None,
    });
    assert!(q.shards().keys_by(shard_of.clone()));
    assert!(!q.shards().keys_by(shard_of), "sharded once");
    q
}

fn slots(indexes: &[usize]) -> SlotSet {
    indexes.iter().filter_map(|&i| ShardSlot::new(i)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_sharded_queue_should_grant_only_keys_of_owned_slots_and_keep_the_others() {
    let q = sharded_queue();
    for key in ["a1", "b1", "a2", "x1", "b2"] {
        add(&q, key, 0);
    }
    assert_eq!(take_key(&q), None, "no slot owned yet");
    q.shards().set_owned(slots(&[0]));
    assert_eq!((take_key(&q), take_key(&q), take_key(&q)), (Some("a1".into()), Some("a2".into()), None));
    assert_eq!(q.counts().parked, 3, "b1, x1 and b2 set aside, not dropped");
    assert!(matches!(q.key_status("b1").phase, KeyPhase::Queued { .. }));

    let mut waiting = task::spawn(async { q.get(&worker("w"), None).await.unwrap().key });
    assert_pending!(waiting.poll());
    assert_eq!(q.shards().set_owned(slots(&[0, 1])).keys_unparked, 2, "b1 and b2 back in their lane");
    assert!(waiting.is_woken(), "gaining a slot wakes a waiting worker");
    assert_eq!(assert_ready!(waiting.poll()), "b1", "in arrival order");
    drop(waiting);
    assert_eq!((take_key(&q), take_key(&q)), (Some("b2".into()), None), "x1 has no known slot");
    assert_eq!(q.counts().parked, 1);
}

#[tokio::test(start_paused = true)]
async fn a_slot_given_up_should_ask_its_leases_back_and_keep_them_valid_until_they_end() {
    use crate::queue::LeaseEndKind::Expired;
    let q = sharded_queue();
    let mut lost = q.holders().watch_lost(&worker("w"));
    q.shards().set_owned(slots(&[0, 1]));
    for key in ["a1", "b1", "b2"] {
        add(&q, key, 0);
    }
    let (a1, b1, b2) = (take(&q).unwrap(), take(&q).unwrap(), take(&q).unwrap());
    assert_eq!(q.shards().set_owned(slots(&[0])).leases_asked_back, 2);
    let mut heard = told(&mut lost);
    heard.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        heard,
        vec![("b1".to_string(), b1.token, LeaseLoss::AskedBack), ("b2".to_string(), b2.token, LeaseLoss::AskedBack)]
    );
    assert_eq!(q.shards().set_owned(slots(&[0])).leases_asked_back, 0, "asked back once");

    // Still valid, but no Extend moves the deadline the new owner waits for.
    advance(Duration::from_secs(1)).await;
    let renewal = q.extend("b1", b1.token, Some(Duration::from_secs(600))).unwrap();
    assert_eq!((renewal.deadline, renewal.cancel), (b1.deadline, true), "b1: stop, and no later deadline");
    let renewal = q.extend("a1", a1.token, None).unwrap();
    assert!(!renewal.cancel && renewal.deadline > a1.deadline, "a1's slot is still owned");
    assert!(q.is_current("b2", b2.token));

    let mut ended = task::spawn(q.shards().asked_back_ended());
    assert_pending!(ended.poll());
    q.done("b1", b1.token).unwrap();
    assert_pending!(ended.poll(), "b2 is still held");
    advance(b2.deadline.saturating_duration_since(Instant::now())).await;
    settle().await;
    assert!(ended.is_woken(), "the last lease asked back ended: whoever waits is woken");
    assert_ready!(ended.poll());
    drop(ended);
    assert_eq!(told(&mut lost), vec![("b2".to_string(), b2.token, LeaseLoss::Ended(Expired))]);
    add(&q, "b1", 0);
    assert_eq!(take_key(&q), None, "keys of the slot given up are not granted here");
    q.done("a1", a1.token).unwrap();
    q.shards().set_owned(slots(&[1]));
    assert_eq!(take_key(&q), Some("b1".into()), "granted again once owned again");
    q.shards().asked_back_ended().await;
}

#[tokio::test(start_paused = true)]
async fn a_key_should_follow_the_slot_of_its_latest_add() {
    let q = queue();
    let to_b = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let moved = to_b.clone();
    let shard_of: ShardOf<String> =
        Arc::new(move |_: &String| ShardSlot::new(usize::from(moved.load(std::sync::atomic::Ordering::Relaxed))));
    assert!(q.shards().keys_by(shard_of));
    q.shards().set_owned(slots(&[1]));
    add(&q, "k", 0);
    assert_eq!(take_key(&q), None, "slot 0 is not owned");
    to_b.store(true, std::sync::atomic::Ordering::Relaxed);
    add(&q, "k", 0);
    assert_eq!(take_key(&q), Some("k".into()), "the add moved it to slot 1, owned");
}

#[tokio::test(start_paused = true)]
async fn a_drain_should_remember_the_latest_deadline_of_the_leases_it_handed_back() {
    let q = queue();
    add(&q, "finished", 0);
    add(&q, "slow", 0);
    let (finished, slow) = (take(&q).unwrap(), take(&q).unwrap());
    assert_eq!(q.holders().handed_back_until(), None);
    q.done("finished", finished.token).unwrap();
    let report = q.shut_down_with_drain(Duration::from_secs(1)).await;
    assert_eq!(report.returned, 1, "slow was still held at the end of the grace period");
    assert_eq!(q.holders().handed_back_until(), Some(slow.deadline), "its worker may work on until then");
}

#[tokio::test(start_paused = true)]
async fn drains_side_by_side_should_each_report_what_became_of_the_leases_held_at_their_start() {
    let q = Arc::new(queue());
    add(&q, "a", 0);
    add(&q, "b", 0);
    let a = take(&q).unwrap();
    let _b = take(&q).unwrap();
    let (short, long) = (q.clone(), q.clone());
    let short = tokio::spawn(async move { short.shut_down_with_drain(ms(100)).await });
    let long = tokio::spawn(async move { long.shut_down_with_drain(Duration::from_secs(10)).await });
    settle().await;
    q.done("a", a.token).unwrap();
    // The short drain hands `b` back; the long one then sees nothing held.
    let (short, long) = (short.await.unwrap(), long.await.unwrap());
    assert_eq!((short.finished, short.returned), (1, 1), "the short drain");
    assert_eq!((long.finished, long.returned), (1, 1), "the long drain: `b` was handed back, not finished");
}
