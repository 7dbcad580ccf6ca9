//! Criterion benchmarks of the queue core (issue 2's shapes a-e).
//!
//! `cargo bench --bench queue` runs them all; figures go to docs/benchmarks.md.
//! (d) prints add-to-get wake latency percentiles, which Criterion does not
//! report, after the Criterion groups, for an Add from a task on the runtime
//! and from a thread outside it; with `WQS_BENCH_MACHINE=1` also as
//! machine-readable `wqs-bench` lines (for bench/queue).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant as StdInstant};

use criterion::{BenchmarkId, Criterion, Throughput};
use tokio::runtime::Runtime;
use workqueue_sidecar::queue::{FinishOutcome, Holder, QueueSettings, Reason, ReasonKind, WorkQueue};

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn multi_thread() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn reason() -> Reason {
    Reason::of(ReasonKind::Updated)
}

/// Keys as the sidecar keeps them (`Arc<str>`, see `queue_registry::Queue`).
fn keys(n: usize) -> Vec<Arc<str>> {
    (0..n).map(|i| Arc::from(format!("default/object-{i}"))).collect()
}

/// (a) Add 1,000 keys, then Get and Done each.
fn add_get_done(c: &mut Criterion) {
    let rt = current_thread();
    let keys = keys(1000);
    let holder: Holder = Arc::from("bench");
    let mut group = c.benchmark_group("a_add_get_done");
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function("1000_keys", |b| {
        b.to_async(&rt).iter(|| async {
            let q: WorkQueue<Arc<str>> = WorkQueue::new("bench", QueueSettings::default()).unwrap();
            for key in &keys {
                q.add(key.clone(), 0, reason()).unwrap();
            }
            for _ in 0..keys.len() {
                let lease = q.get(&holder, None).await.unwrap();
                q.done(&lease.key, lease.token).unwrap();
            }
        })
    });
    group.finish();
}

/// (b) 1,000 re-adds of keys that are already queued (dedup path).
fn re_add(c: &mut Criterion) {
    let rt = current_thread();
    let keys = keys(1000);
    let q: WorkQueue<Arc<str>> = rt.block_on(async { WorkQueue::new("bench", QueueSettings::default()).unwrap() });
    for key in &keys {
        q.add(key.clone(), -100, reason()).unwrap();
    }
    let mut group = c.benchmark_group("b_re_add_queued");
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function("1000_keys", |b| {
        b.iter(|| {
            for key in &keys {
                black_box(q.add(key.clone(), -100, reason()).unwrap());
            }
        })
    });
    group.finish();
}

/// (c) One producer, N consumer tasks: time per item, from the first Add
/// until the last Done.
/// How the consumers of (c) end a key and take the next.
#[derive(Clone, Copy)]
enum Consumers {
    /// Get, then Done: client-go's loop, two rounds on the lock per item.
    GetDone,
    /// Finish and take the next key under one lock, as the `Work` stream
    /// does when a worker's Finish leaves room in its window (Get only
    /// when nothing was ready).
    FinishThenTake,
}

/// Where the producer of (c) runs, and on what runtime.
#[derive(Clone, Copy)]
enum Producer {
    /// On Criterion's thread, the consumers on a 2-thread runtime: the shape
    /// of client-go's benchmark (a producer goroutine beside the consumers,
    /// `GOMAXPROCS=2`), which the targets are read from.
    OwnThread,
    /// A task beside the consumers on a current-thread runtime: the
    /// sidecar's own shape at its default of one runtime thread, where
    /// informers and gRPC handlers add and the `Work` stream's sessions take.
    TaskOnOneThread,
}

fn producer_consumers(c: &mut Criterion) {
    for (group, consumers, producer) in [
        ("c_one_producer_n_consumers", Consumers::GetDone, Producer::OwnThread),
        ("c_stream_one_producer_n_consumers", Consumers::FinishThenTake, Producer::OwnThread),
        ("c_one_thread_one_producer_n_consumers", Consumers::GetDone, Producer::TaskOnOneThread),
    ] {
        producer_consumers_as(c, group, consumers, producer);
    }
}

fn producer_consumers_as(c: &mut Criterion, group: &str, shape: Consumers, producer: Producer) {
    let rt = match producer {
        Producer::OwnThread => multi_thread(),
        Producer::TaskOnOneThread => current_thread(),
    };
    const ITEMS: usize = 20_000;
    let keys = Arc::new(keys(ITEMS));
    let mut group = c.benchmark_group(group);
    group.throughput(Throughput::Elements(ITEMS as u64));
    group.sample_size(20);
    for consumers in [1usize, 2, 4, 8] {
        group.bench_with_input(BenchmarkId::from_parameter(consumers), &consumers, |b, &consumers| {
            b.to_async(&rt).iter_custom(|iters| {
                let keys = keys.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += one_producer_run(&keys, consumers, shape, producer).await;
                    }
                    total
                }
            })
        });
    }
    group.finish();
}

async fn one_producer_run(
    keys: &Arc<Vec<Arc<str>>>,
    consumers: usize,
    shape: Consumers,
    producer: Producer,
) -> Duration {
    let q: WorkQueue<Arc<str>> = WorkQueue::new("bench", QueueSettings::default()).unwrap();
    let processed = Arc::new(AtomicUsize::new(0));
    let all_done = Arc::new(tokio::sync::Notify::new());
    let workers: Vec<_> = (0..consumers)
        .map(|w| {
            let (q, processed, all_done, total) = (q.clone(), processed.clone(), all_done.clone(), keys.len());
            tokio::spawn(async move {
                let holder: Holder = Arc::from(format!("w{w}"));
                let count = || {
                    if processed.fetch_add(1, Ordering::Relaxed) + 1 == total {
                        all_done.notify_one();
                    }
                };
                match shape {
                    Consumers::GetDone => {
                        while let Ok(lease) = q.get(&holder, None).await {
                            q.done(&lease.key, lease.token).unwrap();
                            count();
                        }
                    }
                    Consumers::FinishThenTake => {
                        let mut next = q.get(&holder, None).await.ok();
                        while let Some(lease) = next {
                            let (finished, mut taken) = q.finish_then_take(
                                &lease.key,
                                lease.token,
                                FinishOutcome::Success,
                                &holder,
                                None,
                                |_| 1,
                            );
                            finished.unwrap();
                            count();
                            next = match taken.pop() {
                                Some(lease) => Some(lease),
                                None => q.get(&holder, None).await.ok(),
                            };
                        }
                    }
                }
            })
        })
        .collect();
    let start = StdInstant::now();
    let add_all = {
        let (q, keys) = (q.clone(), keys.clone());
        move || {
            for key in keys.iter() {
                q.add(key.clone(), 0, reason()).unwrap();
            }
        }
    };
    match producer {
        Producer::OwnThread => add_all(),
        Producer::TaskOnOneThread => drop(tokio::spawn(async move { add_all() })),
    }
    all_done.notified().await;
    let elapsed = start.elapsed();
    q.shut_down();
    for w in workers {
        w.await.unwrap();
    }
    elapsed
}

/// (e) A fresh high-priority key behind a backlog of low-priority keys:
/// Add, then the next Get must return it; time for the pair (plus its Done).
fn fresh_key_behind_backlog(c: &mut Criterion) {
    let rt = current_thread();
    let holder: Holder = Arc::from("bench");
    let fresh: Arc<str> = Arc::from("fresh/key");
    let mut group = c.benchmark_group("e_fresh_key_behind_backlog");
    for backlog in [100_000usize, 1_000_000] {
        let q: WorkQueue<Arc<str>> = rt.block_on(async { WorkQueue::new("bench", QueueSettings::default()).unwrap() });
        for key in keys(backlog) {
            q.add(key, -100, Reason::of(ReasonKind::Resync)).unwrap();
        }
        group.bench_with_input(BenchmarkId::from_parameter(backlog), &backlog, |b, _| {
            b.to_async(&rt).iter(|| async {
                q.add(fresh.clone(), 0, reason()).unwrap();
                let lease = q.get(&holder, None).await.unwrap();
                assert_eq!(lease.key, fresh);
                q.done(&lease.key, lease.token).unwrap();
            })
        });
    }
    group.finish();
}

/// Where (d)'s Add runs: where the sidecar's adds run (a task on the
/// runtime: a gRPC handler, an informer, the timer task), as Go's benchmark
/// adds from a goroutine; or on a thread outside the runtime, which must wake
/// a worker thread through the kernel.
#[derive(Clone, Copy)]
enum AddFrom {
    Task,
    OutsideRuntime,
}

/// (d) Wake latency: a worker waits in Get; the time from just before Add
/// until the worker has the lease. Percentiles p50/p99/p999.
fn wake_latency(samples: usize, from: AddFrom) -> [Duration; 4] {
    let rt = multi_thread();
    let samples: Vec<Duration> = rt.block_on(async {
        let q: WorkQueue<u64> = WorkQueue::new("latency", QueueSettings::default()).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Duration>(1);
        // One origin for both sides, so the two readings compare.
        let origin = StdInstant::now();
        let worker = {
            let q = q.clone();
            tokio::spawn(async move {
                let holder: Holder = Arc::from("w");
                while let Ok(lease) = q.get(&holder, None).await {
                    let got = origin.elapsed();
                    q.done(&lease.key, lease.token).unwrap();
                    if tx.send(got).await.is_err() {
                        return;
                    }
                }
            })
        };
        let producer = {
            let q = q.clone();
            async move {
                // Give the worker time to park in Get before each add.
                let mut latencies = Vec::with_capacity(samples);
                for i in 0..samples as u64 {
                    tokio::time::sleep(Duration::from_micros(50)).await;
                    let added = origin.elapsed();
                    q.add(i, 0, reason()).unwrap();
                    let got = rx.recv().await.unwrap();
                    latencies.push(got.saturating_sub(added));
                }
                latencies
            }
        };
        let latencies = match from {
            AddFrom::Task => tokio::spawn(producer).await.unwrap(),
            // block_on runs its future on this thread, outside the workers.
            AddFrom::OutsideRuntime => producer.await,
        };
        q.shut_down();
        let _ = worker.await;
        latencies
    });
    let mut sorted = samples;
    sorted.sort();
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)];
    [pct(0.50), pct(0.99), pct(0.999), sorted[sorted.len() - 1]]
}

/// Prints (d) for both places an Add can come from, after the Criterion
/// groups (Criterion does not report percentiles); with `WQS_BENCH_MACHINE=1`
/// also as machine-readable `wqs-bench` lines, which bench/queue reads.
fn report_wake_latency(samples: usize) {
    for (from, name) in [(AddFrom::Task, "task"), (AddFrom::OutsideRuntime, "outside_runtime")] {
        let [p50, p99, p999, max] = wake_latency(samples, from);
        println!("d_wake_latency from={name}: samples={samples} p50={p50:?} p99={p99:?} p999={p999:?} max={max:?}");
        if std::env::var_os("WQS_BENCH_MACHINE").is_some() {
            println!(
                "wqs-bench d_wake_latency from={name} samples={samples} p50_ns={} p99_ns={} p999_ns={}",
                p50.as_nanos(),
                p99.as_nanos(),
                p999.as_nanos()
            );
        }
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    add_get_done(&mut criterion);
    re_add(&mut criterion);
    producer_consumers(&mut criterion);
    fresh_key_behind_backlog(&mut criterion);
    criterion.final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` only checks that it runs.
    let measuring = std::env::args().any(|a| a == "--bench");
    if std::env::args().all(|a| a != "--list") {
        report_wake_latency(if measuring { 20_000 } else { 100 });
    }
}
