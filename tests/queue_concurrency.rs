//! Many producers and workers on a multi-thread runtime: no key is ever held
//! twice, no add is lost, and every token presented after its lease ended is
//! refused.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use workqueue_sidecar::queue::{
    FinishOutcome, Holder, QueueError, QueueSettings, RateLimiterSpec, Reason, ReasonKind, WorkQueue,
};

const KEYS: usize = 64;
const PRODUCERS: usize = 4;
const WORKERS: usize = 8;
const ADDS_PER_PRODUCER: usize = 5_000;

struct Tracker {
    /// Set while some worker believes it holds the key.
    held: Vec<AtomicBool>,
    /// Adds issued per key (incremented before the add).
    adds: Vec<AtomicU64>,
    /// The highest add count a worker saw after being granted the key.
    seen: Vec<AtomicU64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_and_workers_should_keep_every_invariant() {
    let settings = QueueSettings {
        lease_ttl: Duration::from_millis(200),
        rate_limiter: RateLimiterSpec::Exponential { base: Duration::from_micros(100), max: Duration::from_millis(2) },
        ..QueueSettings::default()
    };
    let queue: WorkQueue<usize> = WorkQueue::new("concurrency", settings).unwrap();
    let tracker = Arc::new(Tracker {
        held: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
        adds: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        seen: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
    });

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (queue, tracker) = (queue.clone(), tracker.clone());
            tokio::spawn(async move {
                for i in 0..ADDS_PER_PRODUCER {
                    let key = (i * 7 + p * 13) % KEYS;
                    tracker.adds[key].fetch_add(1, Ordering::SeqCst);
                    let priority = if i % 3 == 0 { -100 } else { 0 };
                    match i % 10 {
                        0 => drop(queue.add_after(
                            key,
                            Duration::from_micros(50),
                            priority,
                            Reason::of(ReasonKind::Resync),
                        )),
                        _ => drop(queue.add(key, priority, Reason::of(ReasonKind::Updated))),
                    }
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (queue, tracker) = (queue.clone(), tracker.clone());
            tokio::spawn(async move {
                let holder: Holder = Arc::from(format!("worker-{w}"));
                let mut stale_rejections = 0u64;
                let mut n = 0usize;
                loop {
                    let lease = match tokio::time::timeout(Duration::from_millis(500), queue.get(&holder, None)).await {
                        Ok(Ok(lease)) => lease,
                        Ok(Err(QueueError::ShuttingDown)) | Err(_) => return stale_rejections,
                        Ok(Err(other)) => panic!("unexpected {other}"),
                    };
                    let key = lease.key;
                    assert!(!tracker.held[key].swap(true, Ordering::SeqCst), "key {key} held by two workers");
                    tracker.seen[key].fetch_max(tracker.adds[key].load(Ordering::SeqCst), Ordering::SeqCst);
                    n += 1;
                    if n.is_multiple_of(5) {
                        tokio::task::yield_now().await;
                    }
                    tracker.held[key].store(false, Ordering::SeqCst);
                    let outcome = match n % 11 {
                        0 => FinishOutcome::Retry { error: "conflict".into() },
                        1 => FinishOutcome::RequeueAfter(Duration::from_micros(200)),
                        _ => FinishOutcome::Success,
                    };
                    if n.is_multiple_of(97) {
                        // This worker "crashes": its leases are released, and its
                        // late Done must be refused.
                        queue.holders().release(&holder);
                        match queue.done(&key, lease.token) {
                            Err(QueueError::StaleToken { .. }) => stale_rejections += 1,
                            other => panic!("a released lease's token must be stale, got {other:?}"),
                        }
                        continue;
                    }
                    queue.finish(&key, lease.token, outcome).unwrap();
                    assert!(queue.done(&key, lease.token).is_err(), "a finished token must be stale");
                }
            })
        })
        .collect();

    for producer in producers {
        producer.await.unwrap();
    }
    let mut stale = 0;
    for worker in workers {
        stale += worker.await.unwrap();
    }
    assert!(stale > 0, "the crash path ran");

    let counts = queue.counts();
    assert_eq!((counts.ready, counts.waiting, counts.held), (0, 0, 0), "everything was processed: {counts:?}");
    let missed: HashMap<usize, (u64, u64)> = (0..KEYS)
        .map(|k| (k, (tracker.adds[k].load(Ordering::SeqCst), tracker.seen[k].load(Ordering::SeqCst))))
        .filter(|(_, (adds, seen))| adds != seen)
        .collect();
    assert!(missed.is_empty(), "keys not handed out after their last add (adds, seen): {missed:?}");
}
